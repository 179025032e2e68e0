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

A trace whose content comes in log records (``awaits_content``, e.g.
:func:`~nexagauge.online.ingest.logwait.awaits_log_content`) and has not come when its root/turn
deadline passes waits up to ``content_wait_s`` longer, once, timed on the inactivity clock (the
records may sit unread behind paused partitions); it is handed on as soon as the records arrive,
or at the end of the wait (or evicted, or inactive while waiting) marked ``content_missing``
(counted). Log records travel in other batches than spans (other collector pipelines, topics,
partitions) and may reach the evaluator after the grace.

Late spans of a trace already handed out are counted (``late``) and ignored, late log records by
reason (``late_logs``: ``content_missing`` when the trace was handed on without the content they
bring, else ``trace_done``): a trace is never scored twice by one process. Remembered trace ids
are bounded (an LRU).

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
from collections.abc import Callable
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
#: reasons of ``late_logs``: the trace was handed on without the content the record brings, or
#: handed on otherwise (its content was there, or the record is a re-delivery)
LATE_LOG_REASONS = ("content_missing", "trace_done")


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
    #: the content wait was applied (once per trace)
    waited: bool = False
    #: handed on while waiting for the content its log records bring
    content_missing: bool = False

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
        content_wait_s: float = 0.0,
        awaits_content: Callable[[Trace], bool] | None = None,
    ) -> None:
        self.grace_s = grace_s
        self.content_wait_s = content_wait_s
        self._awaits = awaits_content if content_wait_s > 0 else None
        self.inactivity_s = inactivity_s
        self.max_traces = max(1, max_traces)
        self.max_spans = max(1, max_spans)
        self._traces: OrderedDict[bytes, Trace] = OrderedDict()  # by last activity
        self._created: OrderedDict[bytes, None] = OrderedDict()  # by creation (eviction order)
        self._marked: dict[bytes, float] = {}
        #: traces waiting for log content -> end of the wait (inactivity clock)
        self._waiting: dict[bytes, float] = {}
        #: handed-out trace ids -> whether handed on without their log content
        self._done: OrderedDict[bytes, bool] = OrderedDict()
        self._remember = remember_done or max(1000, self.max_traces * 10)
        self._ready: list[tuple[Trace, Trigger]] = []
        self.n_spans = 0
        self.late = 0
        self.late_logs: Counter[str] = Counter({r: 0 for r in LATE_LOG_REASONS})
        #: traces that waited for log content; of them, handed on without it
        self.content_waits = 0
        self.content_missing = 0
        self.evicted: Counter[str] = Counter()
        self.assembled: Counter[str] = Counter()

    # -- input ------------------------------------------------------------------------------
    def _trace_for(
        self, trace_id: bytes, source: Source | None, now: float, log: bool = False
    ) -> tuple[Trace | None, Added]:
        # ``now`` here is the idle clock: it times inactivity (see poll)
        missing = self._done.get(trace_id)
        if missing is not None:
            if log:
                self.late_logs["content_missing" if missing else "trace_done"] += 1
            else:
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
        t, added = self._trace_for(
            log.trace_id, source, now if idle_now is None else idle_now, log=True
        )
        if t is None:
            return added
        t.logs.append(log)
        self.n_spans += 1
        tid = t.trace_id
        if tid in self._waiting and self._awaits is not None and not self._awaits(t):
            del self._waiting[tid]  # its content came: hand it on now
            self._marked[tid] = t.deadline = now
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
                if t is None:
                    continue
                if not t.waited and self._awaits is not None and self._awaits(t):
                    t.waited = True  # its log records may still be on their way: wait, once
                    self.content_waits += 1
                    del self._marked[tid]
                    self._waiting[tid] = idle + self.content_wait_s
                    continue
                out.append((self._take(t), t.mark or "root_end"))
        for tid, until in list(self._waiting.items()):
            if until <= idle:  # the wait is over: on without its content (counted in _take)
                t = self._traces[tid]
                out.append((self._take(t), t.mark or "root_end"))
        while self._traces:
            tid, t = next(iter(self._traces.items()))
            if idle - t.last_seen < self.inactivity_s:
                break
            out.append((self._take(t), "inactivity"))
        for _, trig in out:
            self.assembled[trig] += 1
        return out

    def next_due(self, now: float, idle_now: float | None = None) -> float | None:
        """Seconds until :meth:`poll` has something to hand out (0: now; None: nothing buffered),
        clocks as in :meth:`poll`: the stage sleeps until then instead of polling ten times a
        second (new records wake it anyway)."""
        if self._ready:
            return 0.0
        if not self._traces:
            return None
        idle = now if idle_now is None else idle_now
        oldest = next(iter(self._traces.values()))  # by last activity: the first to go idle
        due = oldest.last_seen + self.inactivity_s - idle
        if self._marked:
            due = min(due, min(self._marked.values()) - now)
        if self._waiting:
            due = min(due, min(self._waiting.values()) - idle)
        return max(0.0, due)

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
        if self._waiting.pop(tid, None) is not None:
            t.content_missing = True
            self.content_missing += 1
        self.n_spans -= t.size
        self._done[tid] = t.content_missing
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
                self._waiting.pop(tid, None)
                self.n_spans -= t.size
                removed.append(t)
        return removed

    def __len__(self) -> int:
        return len(self._traces)
