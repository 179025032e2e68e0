"""The online evaluator: consumer -> assembly -> extraction -> sampling -> graph -> emit -> commit.

:class:`EvaluatorStage` is the consumer-loop handler of the evaluation stage:

1. ``handle``: decode each message lazily (spans, or GenAI log records), poison -> DLQ; add spans
   and records to the :class:`~nexagauge.online.ingest.assembly.TraceBuffer`; every trace a message
   feeds holds a reference on its offset (:class:`~nexagauge.online.delivery.offsets.OffsetTracker`).
2. ``tick``: hand completed traces on; a trace no rule can sample is done at once (cheap
   pre-check on eagerly decoded fields); otherwise its cases are extracted and scrubbed
   (:class:`~nexagauge.schema.scrub.CaseScrubber`, ``online.scrub``), each case is sampled
   (:class:`~nexagauge.online.ingest.sampling.Sampler`) and checked against the hard limits
   (:class:`~nexagauge.online.ingest.sampling.Limiter`); every skip is counted by reason.
3. Sampled cases run through the same node graph as the CLI (``Executor.run_case``), at most
   the concurrency limit at once (:class:`~nexagauge.online.concurrency.AdaptiveLimit`, between
   ``min_in_flight`` and ``max_in_flight``); above it the loop pauses the partitions.
4. Each result goes to the emitter (evaluation span + Prometheus, idempotent per
   ``(trace, span, metric, config fingerprint)``), retried with backoff; failed evaluations also
   get a DLQ record. Only then is the trace done and its offsets released.

Steps 3 and 4 (the life of one case) are :class:`~nexagauge.online.cases.CaseLifecycle`;
:class:`~nexagauge.online.service.OnlineService` wires this stage to Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from nexagauge.graph.runtime import Runtime
from nexagauge.online.cases import CaseLifecycle, EmitterLike, StageStats, _Active
from nexagauge.online.concurrency import AdaptiveLimit
from nexagauge.online.delivery.consumer import LagHooks
from nexagauge.online.delivery.dlq import DeadLetters
from nexagauge.online.delivery.offsets import OffsetTracker
from nexagauge.online.ingest.assembly import Trace, TraceBuffer, Trigger
from nexagauge.online.ingest.decode import (
    BASE_WANTED,
    DecodedBatch,
    PoisonMessage,
    decode_logs,
    decode_traces,
)
from nexagauge.online.ingest.discard import EarlyDiscard
from nexagauge.online.ingest.extract import (
    TRACELOOP_SESSION_ID,
    ExtractedCase,
    SpanError,
    extract_cases_with_errors,
)
from nexagauge.online.ingest.logwait import LOG_CONTENT_MARK_KEYS, awaits_log_content
from nexagauge.online.ingest.sampling import Decision, Limiter, Sampler
from nexagauge.online.partitions import PartitionLifecycle
from nexagauge.online.plans import Executors
from nexagauge.online.rekey import SIGNAL_HEADER, SIGNAL_LOGS
from nexagauge.online.signals import AGENT_MARK_KEYS, SignalLifecycle, looks_agent
from nexagauge.schema.scrub import CaseScrubber
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

log = logging.getLogger(__name__)

_CONVERSATION_KEYS = (C.GEN_AI_CONVERSATION_ID, C.OI_SESSION_ID, TRACELOOP_SESSION_ID)
#: traces of more spans + log records, or more serialized bytes, than these are extracted in a
#: worker thread (below them the thread hop costs more than the work; measured bound in
#: docs/online.md, bench/hostile.py)
INLINE_EXTRACT_MAX = 200
INLINE_EXTRACT_MAX_BYTES = 256 * 1024
#: the longest one tick starts completed traces before it yields the event loop
TICK_SLICE_S = 0.05


class EvaluatorStage(CaseLifecycle, SignalLifecycle, PartitionLifecycle, LagHooks):
    """The evaluation stage handler (see module docstring)."""

    #: publishes evaluated turns to the conversation stage (nexagauge.online.conversations.stage)
    turns: Any = None
    #: the judge's circuit breaker (nexagauge.judge.llm.breaker): consumption pauses while it is open
    breaker: Any = None
    #: group-wide emitted keys (nexagauge.online.delivery.markers.EmittedKeys), with the default emitter
    keys: Any = None

    def __init__(
        self,
        settings: Settings,
        runtime: Runtime,
        emitter: EmitterLike,
        *,
        metrics: Any = None,
        dlq: DeadLetters | None = None,
        clock: Callable[[], float] = time.monotonic,
        signal_for: Callable[[ConsumerRecord[Any, Any]], str] | None = None,
    ) -> None:
        self.settings = settings
        self.o = settings.online
        self.k = settings.kafka
        self.runtime = runtime
        self.emitter = emitter
        self.metrics = metrics
        self.dlq = dlq
        self.clock = clock
        self.tracker = OffsetTracker()
        # content in log records can only come when the logs topic is read (online/ingest/logwait)
        content_wait = self.o.log_content_wait_s if self.o.consume_logs else 0.0
        self.buffer = TraceBuffer(
            grace_s=self.o.trace_grace_s,
            inactivity_s=self.o.trace_inactivity_s,
            max_traces=self.o.max_buffered_traces,
            max_spans=self.o.max_buffered_spans,
            content_wait_s=content_wait,
            awaits_content=self._awaits_content,
        )
        self.sampler = Sampler(settings.sampling)
        self.limiter = Limiter(settings.sampling, clock=clock)
        self.wanted = BASE_WANTED | self.sampler.attribute_keys | {TRACELOOP_SESSION_ID}
        if self.o.agent_signals:  # agent traces are read for signals even when not sampled
            self.wanted |= AGENT_MARK_KEYS
        if content_wait:
            self.wanted |= LOG_CONTENT_MARK_KEYS
        self.stats = StageStats()
        self._signal_for = signal_for or self._default_signal
        self._active: dict[bytes, _Active] = {}
        #: completed traces of running ticks not started yet (see tick)
        self._starting: list[deque[tuple[Trace, Trigger]]] = []
        self._side: set[asyncio.Task[Any]] = set()
        self._in_flight = 0
        #: how many may run now: adapts between online.min_in_flight and max_in_flight (AIMD)
        self.limit = AdaptiveLimit.for_online(self.o)
        #: sampled cases waiting for a slot: at most limit.value run at once (a real bound)
        self._ready: deque[tuple[_Active, ExtractedCase, Decision]] = deque()
        #: the inactivity clock of the assembly buffer stops while partitions are paused (_idle_now)
        self._paused_since: float | None = None
        self._paused_total = 0.0
        self._executors = Executors(settings, runtime)
        self._evicted_seen: dict[str, int] = {}
        self._early = EarlyDiscard(
            self.sampler,
            self.buffer,
            self.stats,
            metrics,
            memory=max(10_000, self.o.max_buffered_traces * 10),
        )
        self._late_seen = 0
        self._late_logs_seen: dict[str, int] = {}
        #: every case is scrubbed as it is extracted: nothing downstream sees the raw text
        self.scrubber = CaseScrubber(secrets=self.o.scrub, pii=self.o.scrub_pii)

    # -- decoding ---------------------------------------------------------------------------
    def _default_signal(self, rec: ConsumerRecord[Any, Any]) -> str:
        for k, v in rec.headers or ():
            if k == SIGNAL_HEADER:
                return "logs" if v == SIGNAL_LOGS else "traces"
        return "logs" if rec.topic == self.k.logs_topic else "traces"

    async def handle(self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        key = (tp.topic, tp.partition)
        now, idle = self.clock(), self._idle_now()
        n_spans = 0
        buf, tracker = self.buffer, self.tracker
        # agent signals need every agent trace whole: no decode-time discard (online/signals.py)
        keep = self._early.keep if self.o.early_discard and not self.o.agent_signals else None
        for rec in records:
            off = rec.offset
            tracker.begin(key, off)
            self.stats.messages += 1
            # re-keyed messages are always protobuf (the re-key stage serializes them)
            enc = "otlp_proto" if self.o.rekey else self.k.encoding
            try:
                if self._signal_for(rec) == "logs":
                    batch = decode_logs(rec.value, enc, max_bytes=self.k.max_message_bytes)
                    self._dropped(rec, batch)
                    src = (tp.topic, tp.partition, off)
                    for lg in batch.logs:
                        if keep is not None and self._early.discard_log(lg.trace_id):
                            continue
                        if buf.add_log(lg, src, now, idle) == "new":
                            tracker.acquire(key, off)
                    self.stats.logs += len(batch.logs)
                else:
                    batch = decode_traces(
                        rec.value,
                        enc,
                        wanted=self.wanted,
                        max_bytes=self.k.max_message_bytes,
                        keep=keep,
                    )
                    self._dropped(rec, batch)
                    src = (tp.topic, tp.partition, off)
                    for sp in batch.spans:
                        if buf.add_span(sp, src, now, idle) == "new":
                            tracker.acquire(key, off)
                    n_spans += len(batch.spans) + batch.skipped
            except PoisonMessage as p:
                self._poison(rec, key, p)
            except Exception as e:  # a decoder bug must not stop the consumer: dead-letter it
                log.exception("unexpected error handling %s@%d", key, off)
                self._poison(rec, key, PoisonMessage("decode_error", f"{type(e).__name__}: {e}"))
            tracker.release(key, off)
        self.stats.spans += n_spans
        if self.metrics is not None:
            self.metrics.messages_consumed(tp.topic, len(records))
            if n_spans:
                self.metrics.spans_consumed(tp.topic, n_spans)

    def _dropped(self, rec: ConsumerRecord[Any, Any], batch: DecodedBatch) -> None:
        """Count the spans a message lost on their own (invalid ids, unreadable bytes): the rest
        of the message goes on, each lost span is a counted reason."""
        if batch.invalid:
            self._skip("invalid_ids", batch.invalid)
        for r in batch.rejected:
            self._skip(r.reason)
        if batch.rejected:  # one line per message, however many spans it lost
            r = batch.rejected[0]
            n = len(batch.rejected)
            log.warning("%s/%d@%d: %d span(s) dropped, first: %s", *_at(rec), n, r.detail)

    def _poison(
        self, rec: ConsumerRecord[Any, Any], key: tuple[str, int], p: PoisonMessage
    ) -> None:
        self.stats.poison += 1
        log.warning("poison message %s/%d@%d: %s", rec.topic, rec.partition, rec.offset, p)
        if self.metrics is not None:
            self.metrics.dead_lettered(p.reason)
        if self.dlq is None:
            return  # no DLQ configured (unit tests): the message is simply done
        self.tracker.acquire(key, rec.offset)
        epoch = self.tracker.epoch(key)
        coro = self.dlq.poison_record(rec, p)

        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                self.tracker.release(key, rec.offset, epoch)
            elif not f.cancelled():
                log.error("dead-lettering %s@%d failed: %s", key, rec.offset, f.exception())

        self._spawn(coro, done)

    def _spawn(self, coro: Any, done: Callable[[asyncio.Future[Any]], None] | None = None) -> None:
        t = asyncio.ensure_future(coro)
        self._side.add(t)
        t.add_done_callback(self._side.discard)
        if done is not None:
            t.add_done_callback(done)

    # -- completion -------------------------------------------------------------------------
    def _idle_now(self) -> float:
        """The assembly buffer's inactivity clock: real time minus the time partitions were
        paused, so the inactivity timer never runs against traces whose partitions we paused (a
        root still unread behind the pause is not a late span). Root/turn grace deadlines keep
        real time: a trace whose root arrived is handed on as before (holding it through a pause
        only pinned its messages' offsets, and more was re-evaluated after a restart)."""
        now = self.clock()
        frozen = self._paused_total + (
            now - self._paused_since if self._paused_since is not None else 0.0
        )
        return now - frozen

    def on_paused(self, n: int) -> None:
        """Consumer-loop hook: ``n`` partitions are paused for backpressure now."""
        if n and self._paused_since is None:
            self._paused_since = self.clock()
        elif not n and self._paused_since is not None:
            self._paused_total += self.clock() - self._paused_since
            self._paused_since = None
        if self.metrics is not None:
            self.metrics.set_paused_partitions(n)

    async def tick(self) -> None:
        now, idle = self.clock(), self._idle_now()
        # many small traces complete at once after a big message: start them in slices of
        # TICK_SLICE_S, yielding the loop in between (heartbeats, fetches); traces not started
        # yet stay visible to revoked() through self._starting
        pending = deque(self.buffer.poll(now, idle))
        self._starting.append(pending)
        try:
            t0 = time.perf_counter()
            while pending:
                trace, trigger = pending.popleft()
                if self.metrics is not None:
                    self.metrics.trace_assembled(trigger)
                self._start(trace)
                if pending and time.perf_counter() - t0 > TICK_SLICE_S:
                    await asyncio.sleep(0)
                    t0 = time.perf_counter()
        finally:
            self._starting.remove(pending)
        m = self.metrics
        if m is not None:
            m.set_buffer(len(self.buffer), self.buffer.n_spans)
            if self.buffer.late != self._late_seen:
                m.late_spans(self.buffer.late - self._late_seen)
                self._late_seen = self.buffer.late
            for reason, n in self.buffer.late_logs.items():
                if n != self._late_logs_seen.get(reason, 0):
                    m.late_log_records(reason, n - self._late_logs_seen.get(reason, 0))
                    self._late_logs_seen[reason] = n
            for reason, n in self.buffer.evicted.items():
                seen = self._evicted_seen.get(reason, 0)
                if n != seen:
                    m.trace_evicted(reason, n - seen)
                    self._evicted_seen[reason] = n
            m.set_in_flight(self._in_flight)
            m.set_concurrency_limit(self.limit.value)
            for window in ("hour", "day"):
                rem = self.limiter.remaining(window)
                if rem is not None:
                    m.set_budget(window, rem, rem <= 0)

    def _finish(self, trace: Trace) -> None:
        self.stats.traces_done += 1
        for topic, part, off in trace.sources:
            self.tracker.release((topic, part), off)
        trace.sources = set()

    def _skip(self, reason: str, n: int = 1) -> None:
        self.stats.skip(reason, n)
        if self.metrics is not None:
            self.metrics.skip(reason, n)

    def _may_sample(self, trace: Trace) -> bool:
        """The sampler's cheap pre-check on the trace's eagerly decoded fields."""
        spans = trace.spans.values()
        convs = [
            v for s in spans for k in _CONVERSATION_KEYS if isinstance(v := s.marks.get(k), str)
        ]
        return self.sampler.may_sample(
            trace.trace_id,
            ((s.service, s.name, s.marks) for s in spans),
            error=trace.error,
            conversation_ids=convs,
        )

    def _awaits_content(self, trace: Trace) -> bool:
        """The assembly buffer's test: hold ``trace`` for its log records (online/ingest/logwait)
        only when it may be evaluated or read for agent signals."""
        return awaits_log_content(trace) and (
            self._may_sample(trace) or (self.o.agent_signals and looks_agent(trace.spans.values()))
        )

    def _start(self, trace: Trace) -> None:
        spans = trace.spans.values()
        sample = self._may_sample(trace)
        if not sample and not (self.o.agent_signals and looks_agent(spans)):
            self._signals_only(trace, [])  # not sampled, no agent: done
            return
        if _large(trace):  # a large trace is extracted off the event loop
            self._active[trace.trace_id] = _Active(trace)  # a revocation strips its sources
            self._spawn(self._extract_off_loop(trace, sample))
            return
        self._start_cases(trace, *self._extract(trace), sample=sample)

    def _extract(self, trace: Trace) -> tuple[list[ExtractedCase], list[SpanError], bool]:
        """``(cases, rejected spans, crashed)``; touches no stage state (may run in a thread)."""
        try:
            found = extract_cases_with_errors(
                trace,
                self.o.evaluate_spans,
                rubrics=self.settings.rubrics,
                inline_rubrics=self.o.span_rubrics == "trust",
            )
            for ec in found[0]:  # before sampling, judge, cache key, DLQ, turns, changelog
                ec.case = self.scrubber.scrub(ec.case)
            return (*found, False)
        except Exception:  # a bug in a reader must not stop the consumer
            log.exception("case extraction failed for trace %s", trace.trace_id.hex())
            return [], [], True

    async def _extract_off_loop(self, trace: Trace, sample: bool = True) -> None:
        """Extraction of a large trace in a worker thread: linear, but a 3,000-span trace still
        takes ~1 s of CPU, which must not stop heartbeats and fetches (bench/hostile.py)."""
        try:
            result = await asyncio.to_thread(self._extract, trace)
        finally:
            self._active.pop(trace.trace_id, None)
        self._start_cases(trace, *result, sample=sample)

    def _start_cases(
        self,
        trace: Trace,
        cases: list[ExtractedCase],
        errors: list[SpanError],
        crashed: bool,
        *,
        sample: bool = True,
    ) -> None:
        """Start the agent signals of every agent case (online/signals.py), then sample the
        cases and queue the sampled ones (``sample=False``: only the signals)."""
        if not sample:
            self._signals_only(trace, cases)
            return
        if crashed:
            self._skip("extract_error")
        for err in errors:  # one bad span costs only itself (its reason is counted)
            log.info("no case for %s", err.detail)
            self._skip(err.reason)
        if not cases:
            if not errors and not crashed:  # content_missing: its log records never came
                self._skip("content_missing" if trace.content_missing else "no_case")
            self._finish(trace)
            return
        active = self._new_active(trace)
        self._start_signals(active, cases)
        any_sampled = False
        for ec in cases:
            d = self.sampler.decide(
                trace.trace_id,
                service=ec.span.service,
                span_name=ec.span.name,
                attrs=ec.attrs,
                error=trace.error,
                conversation_id=ec.conversation_id,
            )
            if not d.sampled:
                continue
            any_sampled = True
            why = self.limiter.try_acquire()
            if why is not None:
                self._skip(why)
                continue
            self.stats.sampled += 1
            if self.metrics is not None:
                self.metrics.trace_sampled(d.rule)
            active.remaining += 1
            self._ready.append((active, ec, d))
        if not any_sampled:
            self.stats.not_sampled += 1
            if self.metrics is not None:
                self.metrics.trace_not_sampled()
        if active.remaining == 0:
            self._finish(trace)
        else:
            self._active[trace.trace_id] = active
            self._pump()

    def _pump(self) -> None:
        """Start queued cases while fewer than the concurrency limit run."""
        while self._ready and self._in_flight < self.limit.value:
            active, ec, d = self._ready.popleft()
            self._in_flight += 1
            task = asyncio.ensure_future(self._evaluate(active, ec, d))
            active.tasks.add(task)
            task.add_done_callback(active.tasks.discard)

    # -- consumer-loop hooks ----------------------------------------------------------------
    def wakeup_s(self) -> float:
        """When :meth:`tick` is due: soon while cases wait for a slot, else when the next
        buffered trace completes (grace, log-content wait or inactivity; at most 1 s away)."""
        if self._ready or self._starting:
            return 0.1
        due = self.buffer.next_due(self.clock(), self._idle_now())
        return 1.0 if due is None else min(1.0, due)

    def saturated(self) -> bool:
        if self.breaker is not None and not self.breaker.is_closed:
            return True  # judge outage: pause consumption until the breaker closes
        return bool(self._ready) or self._in_flight >= self.limit.value

    @property
    def in_flight(self) -> int:
        return self._in_flight


def _large(trace: Trace) -> bool:
    """Whether ``trace`` is extracted in a worker thread (many spans, or a few huge ones)."""
    if trace.size > INLINE_EXTRACT_MAX:
        return True
    raw = sum(len(s.raw or b"") for s in trace.spans.values())
    return raw + sum(len(g.raw or b"") for g in trace.logs) > INLINE_EXTRACT_MAX_BYTES


def _at(rec: ConsumerRecord[Any, Any]) -> tuple[str, int, int]:
    return rec.topic, rec.partition, rec.offset
