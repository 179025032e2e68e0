"""Decode-time discard: spans and log records of traces that no sampling rule can ever pick.

Most traces are not sampled. The evaluation stage asks :class:`EarlyDiscard` while it decodes a
message whether each span (or GenAI log record) is worth buffering at all: a span is kept when
its trace is already being assembled or when the sampler *could* pick it (trace-id ratio, rules
on service/span name/marks, errors); otherwise it is dropped before assembly, and its trace is
counted once as not sampled. This is what lets the evaluator ingest at the collector's rate
while sampling 1% (docs/online.md, "Decoding (fast path)").

Example:
    >>> from types import SimpleNamespace
    >>> from nexagauge.online.ingest.assembly import TraceBuffer
    >>> from nexagauge.online.ingest.sampling import Sampler
    >>> from nexagauge.settings import SamplingSettings
    >>> stats = SimpleNamespace(not_sampled=0, discarded_traces=0)
    >>> early = EarlyDiscard(Sampler(SamplingSettings(default_rate=0.0)), TraceBuffer(), stats)
    >>> early.keep(b"\\x01" * 16, "svc", "answer", {}, False), stats.not_sampled
    (False, 1)
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from nexagauge.online.ingest.assembly import TraceBuffer
from nexagauge.online.ingest.sampling import Sampler


@dataclass(eq=False)
class EarlyDiscard:
    """The stage's decode-time filter (see module docstring).

    ``stats`` is the stage's counters (``not_sampled``, ``discarded_traces``); ``memory`` bounds
    the ids of discarded traces remembered so a trace is counted once (the set is reset when
    full, so a very long trace may be counted twice).
    """

    sampler: Sampler
    buffer: TraceBuffer
    stats: Any
    metrics: Any = None
    _: KW_ONLY
    memory: int = 10_000
    _seen: dict[bytes, None] = field(init=False, default_factory=dict)

    def keep(
        self, trace_id: bytes, service: str, name: str, marks: dict[str, Any], error: bool
    ) -> bool:
        """Buffer a span unless its trace can never be sampled."""
        if self.buffer.has_trace(trace_id) or self.sampler.could_sample_span(
            trace_id, service, name, marks, error
        ):
            return True
        self._discard(trace_id)
        return False

    def discard_log(self, trace_id: bytes) -> bool:
        """Whether a GenAI log record can be dropped. Log records carry no conversation id, so
        with conversation sampling they are always kept (their trace's spans decide); otherwise
        the trace-id test of the spans applies."""
        sm = self.sampler
        if self.buffer.has_trace(trace_id) or sm.settings.by_conversation or sm.has_always_rules:
            return False
        if sm.could_sample_span(trace_id, "", "", {}, False):
            return False
        self._discard(trace_id)
        return True

    def _discard(self, trace_id: bytes) -> None:
        seen = self._seen
        if trace_id in seen:
            return
        if len(seen) >= self.memory:
            seen.clear()
        seen[trace_id] = None
        self.stats.not_sampled += 1
        self.stats.discarded_traces += 1
        if self.metrics is not None:
            self.metrics.trace_not_sampled()
