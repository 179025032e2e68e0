"""Bounded trace assembly: group spans (and their GenAI log records) by trace until complete.

A trace is complete when
- its root span (no parent) has ended, plus ``grace_s`` for stragglers (trigger ``root_end``), or
- a span the SDK marked as the end of a turn (``nexagauge.turn.end``) has ended, plus ``grace_s``
  (trigger ``turn_end``), or
- nothing arrived for ``inactivity_s`` (trigger ``inactivity``: a root that never came, a span
  lost by a producer).
Memory is bounded: when the buffer holds more than ``max_traces`` traces or ``max_spans`` spans +
log records, the oldest traces are handed out early (trigger ``evicted``, counted by reason) so
they are still evaluated on what arrived rather than silently dropped.

Late spans of a trace already handed out are counted (``late_spans``) and ignored: a trace is
never scored twice by one process. Remembered trace ids are bounded (an LRU).

Each trace remembers which Kafka messages fed it (``sources``) so the offset tracker can commit
only what is finished.

Example:
    >>> buf = TraceBuffer(grace_s=0.0, inactivity_s=30.0)
    >>> from nexagauge.online.ingest.decode import SpanRecord
    >>> root = SpanRecord(b"\\x01" * 16, b"\\x02" * 8, b"", "turn", 1, 2, False, "svc", {})
    >>> buf.add_span(root, ("t", 0, 5), now=100.0)
    'new'
    >>> [(t.trace_id[:1], trig) for t, trig in buf.poll(now=100.0)]
    [(b'\\x01', 'root_end')]
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from nexagauge.online.ingest.decode import LogRef, SpanRecord
from nexagauge.sdk import conventions as C

#: what :meth:`TraceBuffer.add_span` did: ``new`` = the trace gained this message as a source,
#: ``seen`` = the message already fed this trace, ``late`` = the trace was already handed out
Added = Literal["new", "seen", "late"]

Trigger = Literal["root_end", "turn_end", "inactivity", "evicted"]
#: (topic, partition, offset) of the Kafka message that delivered a span or log record
Source = tuple[str, int, int]


@dataclass(slots=True)
class Trace:
    """Spans and log records of one trace collected so far."""

    trace_id: bytes
    first_seen: float
    last_seen: float
    spans: dict[bytes, SpanRecord] = field(default_factory=dict)
    logs: list[LogRef] = field(default_factory=list)
    sources: set[Source] = field(default_factory=set)
    #: monotonic deadline after which the trace is complete (root/turn end + grace)
    deadline: float | None = None
    mark: Trigger | None = None

    @property
    def size(self) -> int:
        return len(self.spans) + len(self.logs)

    @property
    def error(self) -> bool:
        return any(s.error for s in self.spans.values())


class TraceBuffer:
    """The bounded assembly buffer (see module docstring). Not thread-safe: one event loop."""

    def __init__(
        self,
        *,
        grace_s: float = 2.0,
        inactivity_s: float = 30.0,
        max_traces: int = 10_000,
        max_spans: int = 200_000,
        remember_done: int | None = None,
    ) -> None:
        self.grace_s = grace_s
        self.inactivity_s = inactivity_s
        self.max_traces = max(1, max_traces)
        self.max_spans = max(1, max_spans)
        self._traces: OrderedDict[bytes, Trace] = OrderedDict()  # by last activity
        self._created: OrderedDict[bytes, None] = OrderedDict()  # by creation (eviction order)
        self._marked: dict[bytes, float] = {}
        self._done: OrderedDict[bytes, None] = OrderedDict()
        self._remember = remember_done or max(1000, self.max_traces * 10)
        self._ready: list[tuple[Trace, Trigger]] = []
        self.n_spans = 0
        self.late = 0
        self.evicted: Counter[str] = Counter()
        self.assembled: Counter[str] = Counter()

    # -- input ------------------------------------------------------------------------------
    def _trace_for(
        self, trace_id: bytes, source: Source | None, now: float
    ) -> tuple[Trace | None, Added]:
        # ``now`` here is the idle clock: it times inactivity (see poll)
        if trace_id in self._done:
            self.late += 1
            return None, "late"
        t = self._traces.get(trace_id)
        if t is None:
            t = Trace(trace_id, now, now)
            self._traces[trace_id] = t
            self._created[trace_id] = None
        else:
            t.last_seen = now
            self._traces.move_to_end(trace_id)
        if source is None or source in t.sources:
            return t, "seen"
        t.sources.add(source)
        return t, "new"

    def add_span(
        self, span: SpanRecord, source: Source | None, now: float, idle_now: float | None = None
    ) -> Added:
        """Add a span. ``new``: the caller must take an offset reference for ``source``.

        ``idle_now``: the inactivity clock (default ``now``); the online stage stops it while its
        partitions are paused, so a trace whose remaining spans sit unread behind the pause is
        not handed on as inactive (its root then dropped as late). Grace deadlines run on ``now``.
        """
        t, added = self._trace_for(span.trace_id, source, now if idle_now is None else idle_now)
        if t is None:
            return added
        if span.span_id not in t.spans:
            self.n_spans += 1
        t.spans[span.span_id] = span  # a re-delivered span replaces its earlier copy
        if span.end_ns and t.mark is None:
            trig: Trigger | None = None
            if span.marks.get(C.NG_TURN_END) is True:
                trig = "turn_end"
            elif span.is_root:
                trig = "root_end"
            if trig is not None:
                t.mark = trig
                t.deadline = now + self.grace_s
                self._marked[t.trace_id] = t.deadline
        self._enforce_limits()
        return added

    def add_log(
        self, log: LogRef, source: Source | None, now: float, idle_now: float | None = None
    ) -> Added:
        """Add a GenAI log record (joined to its span at extraction); see :meth:`add_span`."""
        t, added = self._trace_for(log.trace_id, source, now if idle_now is None else idle_now)
        if t is None:
            return added
        t.logs.append(log)
        self.n_spans += 1
        self._enforce_limits()
        return added

    def has_trace(self, trace_id: bytes) -> bool:
        return trace_id in self._traces

    def is_done(self, trace_id: bytes) -> bool:
        return trace_id in self._done

    def forget_done(self, trace_id: bytes) -> None:
        """Forget that ``trace_id`` was handed out: its spans, read again, assemble it anew (a
        trace whose partition was revoked mid-evaluation may come back to this member)."""
        self._done.pop(trace_id, None)

    # -- output -----------------------------------------------------------------------------
    def poll(self, now: float, idle_now: float | None = None) -> list[tuple[Trace, Trigger]]:
        """Hand out every trace that is complete at ``now`` (plus any evicted since last poll);
        inactivity is timed on ``idle_now`` (default ``now``, see :meth:`add_span`)."""
        idle = now if idle_now is None else idle_now
        out, self._ready = self._ready, []
        for tid, deadline in list(self._marked.items()):
            if deadline <= now:
                t = self._traces.get(tid)
                if t is not None:
                    out.append((self._take(t), t.mark or "root_end"))
        while self._traces:
            tid, t = next(iter(self._traces.items()))
            if idle - t.last_seen < self.inactivity_s:
                break
            out.append((self._take(t), "inactivity"))
        for _, trig in out:
            self.assembled[trig] += 1
        return out

    def flush(self) -> list[tuple[Trace, Trigger]]:
        """Hand out everything buffered (used only by tests and benchmarks)."""
        out, self._ready = self._ready, []
        for t in list(self._traces.values()):
            out.append((self._take(t), "inactivity"))
        return out

    def _take(self, t: Trace) -> Trace:
        tid = t.trace_id
        self._traces.pop(tid, None)
        self._created.pop(tid, None)
        self._marked.pop(tid, None)
        self.n_spans -= t.size
        self._done[tid] = None
        while len(self._done) > self._remember:
            self._done.popitem(last=False)
        return t

    def _enforce_limits(self) -> None:
        while len(self._traces) > self.max_traces or (
            self.n_spans > self.max_spans and len(self._traces) > 1
        ):
            reason = "max_traces" if len(self._traces) > self.max_traces else "max_spans"
            tid = next(iter(self._created))
            t = self._traces[tid]
            self.evicted[reason] += 1
            self._ready.append((self._take(t), "evicted"))

    def drop_sources(self, topic: str, partitions: set[int]) -> list[Trace]:
        """Forget messages of revoked partitions.

        Traces fed only by those partitions are removed (the new owner re-reads them; they are not
        remembered as done). Traces also fed by kept partitions stay, minus the revoked sources.
        Returns the removed traces.
        """
        removed: list[Trace] = []
        for t in list(self._traces.values()):
            keep = {s for s in t.sources if not (s[0] == topic and s[1] in partitions)}
            if keep == t.sources:
                continue
            t.sources = keep
            if not keep:
                tid = t.trace_id
                self._traces.pop(tid, None)
                self._created.pop(tid, None)
                self._marked.pop(tid, None)
                self.n_spans -= t.size
                removed.append(t)
        return removed

    def __len__(self) -> int:
        return len(self._traces)
