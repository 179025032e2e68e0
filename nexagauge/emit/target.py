"""What was evaluated: the application span a case was extracted from (the emitter's input key).

The online consumer builds one :class:`EvaluationTarget` per evaluated span and hands it, with the
:class:`~nexagauge.graph.executor.CaseResult` of that span's case, to
:meth:`nexagauge.emit.emitter.Emitter.emit`. Everything the emitter needs to (1) parent the
evaluation span under the evaluated span, (2) label the Prometheus series and (3) deduplicate a
redelivered evaluation lives here, so the emitter never looks at raw OTLP.

Idempotency key: ``(trace_id, span_id, metric, config_fingerprint)``. The fingerprint changes when
the node set, the scoring knobs or the judge model change, so a re-evaluation under a *different*
configuration is a new evaluation, while a redelivery under the same configuration is not.

Example:
    >>> t = EvaluationTarget(
    ...     trace_id="0af7651916cd43dd8448eb211c80319c",
    ...     span_id="b7ad6b7169203331",
    ...     service="checkout-bot",
    ...     span_name="chat gpt-4o",
    ...     end_time_unix_nano=1_700_000_000_000_000_000,
    ...     model="gpt-4o",
    ...     config_fingerprint=config_fingerprint(["relevance"], {"threshold": 0.5}, "gpt-4o-mini"),
    ... )
    >>> t.case_id
    '0af7651916cd43dd8448eb211c80319c:b7ad6b7169203331'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_TRACE_ID_RE = re.compile(r"^[0-9a-f]{32}$")
_SPAN_ID_RE = re.compile(r"^[0-9a-f]{16}$")

#: W3C trace flag "sampled" (the evaluation span is exported, so its parent context says sampled).
TRACE_FLAG_SAMPLED = 0x01


@dataclass(frozen=True, slots=True)
class EvaluationTarget:
    """The evaluated application span (immutable; safe to share across tasks).

    Attributes:
        trace_id: 32 lowercase hex chars (OTLP bytes ``.hex()``); never all zeros.
        span_id: 16 lowercase hex chars; never all zeros.
        service: ``service.name`` resource attribute of the evaluated span (``"unknown"`` if absent).
        span_name: name of the evaluated span.
        end_time_unix_nano: end time of the evaluated span (evaluation latency = now - this).
        model: model that answered (``gen_ai.response.model`` or request model), if known.
        conversation_id: ``gen_ai.conversation.id`` / ``session.id``, if any. Never a metric label.
        sampling_rule: name of the sampling rule that selected the span (``"default"`` otherwise).
        config_fingerprint: :func:`config_fingerprint` of the evaluator configuration.
        trace_flags: W3C trace flags of the evaluated span (only the sampled bit is used).
    """

    trace_id: str
    span_id: str
    service: str
    span_name: str
    end_time_unix_nano: int
    model: str | None = None
    conversation_id: str | None = None
    sampling_rule: str = "default"
    config_fingerprint: str = ""
    trace_flags: int = TRACE_FLAG_SAMPLED

    def __post_init__(self) -> None:
        # Accept upper-case hex from callers but store the canonical lower-case form.
        tid, sid = str(self.trace_id).lower(), str(self.span_id).lower()
        if not _TRACE_ID_RE.match(tid) or tid == "0" * 32:
            raise ValueError(
                f"EvaluationTarget.trace_id: expected 32 non-zero hex chars, got {self.trace_id!r}"
            )
        if not _SPAN_ID_RE.match(sid) or sid == "0" * 16:
            raise ValueError(
                f"EvaluationTarget.span_id: expected 16 non-zero hex chars, got {self.span_id!r}"
            )
        if not isinstance(self.end_time_unix_nano, int) or self.end_time_unix_nano < 0:
            raise ValueError(
                f"EvaluationTarget.end_time_unix_nano: expected a non-negative int, got {self.end_time_unix_nano!r}"
            )
        if not 0 <= int(self.trace_flags) <= 0xFF:
            raise ValueError(
                f"EvaluationTarget.trace_flags: expected 0..255, got {self.trace_flags!r}"
            )
        object.__setattr__(self, "trace_id", tid)
        object.__setattr__(self, "span_id", sid)

    @property
    def trace_id_int(self) -> int:
        """The trace id as the 128-bit int OpenTelemetry's Python API uses."""
        return int(self.trace_id, 16)

    @property
    def span_id_int(self) -> int:
        """The span id as the 64-bit int OpenTelemetry's Python API uses."""
        return int(self.span_id, 16)

    @property
    def case_id(self) -> str:
        """Case id of the evaluated span: ``<trace_id>:<span_id>``."""
        return f"{self.trace_id}:{self.span_id}"

    @property
    def end_time_s(self) -> float:
        """End time of the evaluated span in unix seconds."""
        return self.end_time_unix_nano / 1e9

    def dedupe_key(self, metric: str) -> str:
        """Idempotency key of one metric of this evaluation (what the emitter deduplicates on)."""
        return f"{self.trace_id}/{self.span_id}/{metric}/{self.config_fingerprint}"


def config_fingerprint(
    nodes: Iterable[str], knobs: Mapping[str, Any] | None = None, judge_model: str | None = None
) -> str:
    """Stable 16-hex hash of the evaluator configuration that produces scores.

    Order-independent in ``nodes`` and in the keys of ``knobs`` (canonical JSON, sorted). Values
    of ``knobs`` must be JSON-serializable (anything else is rendered with ``str``).

    Example:
        >>> config_fingerprint(["grounding", "relevance"], {"t": 0.5}, "gpt-4o-mini") == \\
        ...     config_fingerprint(["relevance", "grounding"], {"t": 0.5}, "gpt-4o-mini")
        True
    """
    payload = {
        "nodes": sorted(set(nodes)),
        "knobs": dict(knobs or {}),
        "judge_model": judge_model,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
