"""Label values of the evaluator's Prometheus series: the enums, the known reasons and the
:class:`LabelLimiter` that bounds free-form values (see :mod:`nexagauge.emit.prometheus`).

Example:
    >>> lim = LabelLimiter(["service"], max_values=1)
    >>> lim("service", "a"), lim("service", "b")
    ('a', 'other')
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Final

from nexagauge.graph.skips import EVALUATION_SKIPS, METRIC_SKIPS
from nexagauge.sdk.scrubbing import Scrubber

log = logging.getLogger(__name__)

#: Value of a bounded label once its cap is reached (or not on its allow-list).
OTHER: Final = "other"
#: Value of ``service``/``span_name``/``model`` when unknown (e.g. no model attribute).
UNKNOWN: Final = "unknown"
#: Value of a dimension switched off in ``EmitSettings.label_allowlist``.
DISABLED: Final = ""
#: Bounded dimensions of the score/evaluation/claims series, in label order.
DIMENSIONS: Final = ("service", "span_name", "model")
#: Longest label value kept (longer values are truncated; Prometheus has no hard limit, we do).
MAX_LABEL_CHARS: Final = 128

TRIGGERS: Final = frozenset({"root_end", "turn_end", "inactivity", "evicted"})
EVAL_STATUSES: Final = frozenset({"ok", "failed"})
JUDGE_OUTCOMES: Final = frozenset({"ok", "error", "cached"})
DIRECTIONS: Final = frozenset({"input", "output"})
WINDOWS: Final = frozenset({"hour", "day"})
VERDICTS: Final = frozenset({"ACCEPTED", "REJECTED"})
SPAN_EXPORT_OUTCOMES: Final = frozenset({"exported", "failed"})

#: Reasons of ``nexagauge_dlq_messages_total`` (the online service's poison-message tokens and
#: its failed evaluation / emission records).
DLQ_REASONS: Final = (
    "undecodable",
    "too_large",
    "invalid_ids",
    "not_otlp",
    "decode_error",
    "evaluation_failed",
    "emit_failed",
)
#: Reasons of ``nexagauge_evicted_traces_total``.
EVICTION_REASONS: Final = ("max_traces", "max_spans")
#: Reasons of ``nexagauge_late_log_records_total`` (the assembly buffer's, nexagauge.online.ingest)
LATE_LOG_REASONS: Final = ("content_missing", "trace_done")
#: Known values of the capped ``reason`` label (skip codes, DLQ and eviction reasons): bounded
#: already, they never count against its cap.
KNOWN_REASONS: Final = frozenset(
    {*DLQ_REASONS, *EVICTION_REASONS, *(r.value for r in (*EVALUATION_SKIPS, *METRIC_SKIPS))}
)


_LABEL_SCRUBBER = Scrubber(secrets=True)


@functools.lru_cache(maxsize=4096)
def clean_label(value: str) -> str:
    """A label value from app data (service, span name, model): secrets the SDK recognises are
    replaced (scrubbed a little beyond the cut so a secret is never half kept), then cut to
    ``MAX_LABEL_CHARS``.

    Example:
        >>> clean_label("answer sk-abcdefghijklmnop1234")
        'answer [scrubbed:api_key]'
    """
    head = value[: MAX_LABEL_CHARS + 256]
    if not _LABEL_SCRUBBER.is_clean(head):
        head = _LABEL_SCRUBBER.scrub("label", head)[0]
    return head[:MAX_LABEL_CHARS]


class LabelLimiter:
    """Bounds the values of free-form labels (service, span name, model, reasons).

    For each label: a value not on the label's allow-list (when one is configured) becomes
    ``"other"``; otherwise the first ``max_values`` distinct values are kept and every later new
    value becomes ``"other"``. A label missing from ``enabled`` always yields ``""`` (the
    dimension is switched off). Thread-safe.

    Example:
        >>> lim = LabelLimiter(["service"], max_values=1)
        >>> lim("service", "a"), lim("service", "b"), lim("service", "a"), lim("model", "x")
        ('a', 'other', 'a', '')
    """

    def __init__(
        self,
        enabled: Iterable[str] | None = None,
        max_values: int = 200,
        allowed_values: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        if max_values < 1:
            raise ValueError(f"max_label_values must be >= 1, got {max_values}")
        self.enabled: frozenset[str] | None = None if enabled is None else frozenset(enabled)
        self.max_values = max_values
        self.allowed = {k: frozenset(v) for k, v in (allowed_values or {}).items()}
        self._seen: dict[str, set[str]] = {}
        self._overflowed: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, label: str, value: str | None) -> str:
        if self.enabled is not None and label not in self.enabled:
            return DISABLED
        v = UNKNOWN if value is None or value == "" else clean_label(str(value))
        allowed = self.allowed.get(label)
        if allowed is not None and v not in allowed and v != UNKNOWN:
            return OTHER
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if v in seen:
                return v
            if len(seen) < self.max_values:
                seen.add(v)
                return v
            if label not in self._overflowed:
                self._overflowed.add(label)
                log.warning(
                    "label %r reached its cap of %d distinct values; new values are reported as %r",
                    label,
                    self.max_values,
                    OTHER,
                )
        return OTHER

    def distinct(self, label: str) -> int:
        """How many distinct values of ``label`` are currently kept (``"other"`` excluded)."""
        with self._lock:
            return len(self._seen.get(label, ()))
