"""An aiokafka consumer-group loop with manual commits, backpressure and graceful shutdown.

The loop is generic: a :class:`Handler` (the evaluator stage in :mod:`nexagauge.online.service`
or the re-key stage in :mod:`nexagauge.online.rekey`) processes fetched messages and owns an
:class:`~nexagauge.online.delivery.offsets.OffsetTracker`; the loop

- commits, about every ``commit_interval_s``, the highest contiguous finished offset of each
  partition (never auto-commit: at-least-once),
- pauses every assigned partition while the handler is saturated and resumes it below the
  limit, *while continuing to call* ``getmany`` so the member keeps heart-beating and never
  falls out of the group,
- on revocation (rebalance listener) commits finished work of the revoked partitions and tells
  the handler to drop the rest (the new owner re-reads it),
- on :meth:`ConsumerLoop.stop` (SIGTERM) stops fetching, lets in-flight work drain within the
  deadline, commits, then stops the consumer, which leaves the group.

Consumer lag per partition (high watermark - position) is reported to the metrics.

Example (not run: needs a broker)::

    loop = ConsumerLoop(kafka_settings, ["nexagauge_spans_by_trace"], "evaluator", handler)
    await loop.start(); task = asyncio.create_task(loop.run()); ...; await loop.stop(20.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from nexagauge.online.delivery.offsets import OffsetTracker
from nexagauge.settings import KafkaSettings

log = logging.getLogger(__name__)

#: the loop's round while the handler has timers running (trace completion, reordering)
POLL_MS = 100
#: the longest round of an idle loop (records end a round at once)
IDLE_POLL_S = 0.5
#: how long a committed position read from the broker serves lag reports (partitions this
#: member has committed nothing for; an OffsetFetch per partition per second was a fifth of an
#: idle serve's CPU)
BROKER_POSITION_TTL_S = 10.0
#: aiokafka's fetcher task wakes at least this often (``consumer_timeout_ms``, default 200 ms)
#: to look again at partitions that need nothing: every event it acts on (a fetch answered,
#: records consumed, a seek, a resume, a rebalance) wakes it at once anyway. Five rounds a
#: second per consumer were half of an idle serve's loop wakeups.
FETCHER_WAKE_MS = 1000
#: ``kafka.assignors`` names -> aiokafka's assignors. Range (the default) gives a member partition
#: *p* of every topic it reads, so a trace's spans and its GenAI log records, keyed alike by the
#: collector, meet in one member even without the re-key stage; round-robin (aiokafka's default,
#: and this evaluator's before) spread them: 3 members x 4 partitions shared none.
ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


class Handler(Protocol):
    """What a stage implements to be driven by :class:`ConsumerLoop`."""

    tracker: OffsetTracker

    async def handle(self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        """Process fetched records of one partition (register offsets with the tracker)."""

    async def tick(self) -> None:
        """Periodic work (completed traces, timers); called after every fetch."""

    def saturated(self) -> bool:
        """True while the stage cannot take more work (partitions get paused)."""

    def revoked(self, tps: Sequence[TopicPartition]) -> None:
        """Drop the state of revoked partitions."""

    async def drain(self, timeout_s: float) -> None:
        """Finish in-flight work within ``timeout_s`` (shutdown)."""

    def report_lag(self, tp: TopicPartition, lag: int) -> None:
        """Export the lag of one partition."""

    def forget_lag(self, tp: TopicPartition) -> None:
        """Stop exporting the lag of a partition this member no longer owns."""


class LagHooks:
    """:class:`Handler`'s lag hooks for a stage whose ``metrics`` (``EvaluatorMetrics``, or
    ``None`` without metrics) exports the lag: the stages inherit them (one definition)."""

    metrics: Any

    def report_lag(self, tp: TopicPartition, lag: int) -> None:
        if self.metrics is not None:
            self.metrics.set_consumer_lag(tp.topic, tp.partition, lag)

    def forget_lag(self, tp: TopicPartition) -> None:
        if self.metrics is not None:
            self.metrics.forget_partition(tp.topic, tp.partition)


class Restoring(Protocol):
    """Optional handler hook: restore per-partition state before consuming new partitions.

    ``assigned`` is awaited inside the rebalance callback, i.e. before the first fetch of the
    assigned partitions (the Kafka Streams restore step: read a changelog to its end first).
    """

    async def assigned(self, tps: Sequence[TopicPartition]) -> None:
        """Load the state of ``tps`` (newly assigned to this member)."""


def client_kwargs(k: KafkaSettings) -> dict[str, Any]:
    """aiokafka connection arguments (bootstrap servers, TLS, SASL) from settings.

    Example:
        >>> client_kwargs(KafkaSettings(bootstrap_servers="b:9092"))["security_protocol"]
        'PLAINTEXT'
    """
    kw: dict[str, Any] = {
        "bootstrap_servers": k.bootstrap_servers,
        "security_protocol": k.security_protocol,
    }
    if k.security_protocol in ("SSL", "SASL_SSL"):
        ctx = ssl.create_default_context(cafile=str(k.ssl_cafile) if k.ssl_cafile else None)
        if k.ssl_certfile:
            ctx.load_cert_chain(str(k.ssl_certfile), str(k.ssl_keyfile) if k.ssl_keyfile else None)
        kw["ssl_context"] = ctx
    if k.security_protocol.startswith("SASL"):
        kw["sasl_mechanism"] = k.sasl_mechanism or "PLAIN"
        if k.sasl_username is not None:
            kw["sasl_plain_username"] = k.sasl_username
        if k.sasl_password is not None:
            kw["sasl_plain_password"] = k.sasl_password.get_secret_value()
    return kw


class _Listener(ConsumerRebalanceListener):
    def __init__(self, loop: ConsumerLoop) -> None:
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.loop._on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("assigned %s", sorted((tp.topic, tp.partition) for tp in assigned))
        await self.loop._on_assigned(list(assigned))


class ConsumerLoop:
    """Drives one :class:`Handler` from a consumer group (see module docstring)."""

    def __init__(
        self,
        kafka: KafkaSettings,
        topics: Sequence[str],
        group_id: str,
        handler: Handler,
        *,
        commit_interval_s: float = 0.5,
        max_records: int = 500,
        client_id: str | None = None,
        commit_timeout_s: float = 5.0,
    ) -> None:
        self.kafka = kafka
        self.topics = list(topics)
        self.group_id = group_id
        self.handler = handler
        self.commit_interval_s = commit_interval_s
        self.max_records = max_records
        self.consumer: AIOKafkaConsumer | None = None
        self._stopping = asyncio.Event()
        self._stopped = asyncio.Event()
        self._paused: set[TopicPartition] = set()
        #: partitions whose state the handler is restoring (paused until it is done)
        self._restoring: set[TopicPartition] = set()
        self._last_commit = 0.0
        self._last_lag = 0.0
        #: committed positions read from the broker for lag reports: partition -> (when, pos)
        self._broker_positions: dict[TopicPartition, tuple[float, int | None]] = {}
        self.client_id = client_id
        self.commits = 0
        self.commit_timeout_s = commit_timeout_s
        #: ``async () -> bool``: is the broker reachable (and, if it lost its data, are we reset)?
        #: Awaited before the commit that follows a failed one (see :meth:`commit`)
        self.verify_broker: Callable[[], Awaitable[bool]] | None = None
        self._commit_failed = False

    async def start(self) -> None:
        k = self.kafka
        self.consumer = AIOKafkaConsumer(
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=k.fetch_max_wait_ms,
            fetch_min_bytes=k.fetch_min_bytes,
            max_partition_fetch_bytes=max(k.max_message_bytes, 1024 * 1024),
            fetch_max_bytes=max(k.max_message_bytes * 2, 52428800),
            session_timeout_ms=k.session_timeout_ms,
            heartbeat_interval_ms=k.heartbeat_interval_ms,
            max_poll_interval_ms=k.max_poll_interval_ms,
            consumer_timeout_ms=FETCHER_WAKE_MS,
            partition_assignment_strategy=tuple(ASSIGNORS[a] for a in k.assignors),
            client_id=self.client_id or f"nexagauge-{self.group_id}",
            **client_kwargs(k),
        )
        self.consumer.subscribe(self.topics, listener=_Listener(self))
        await self.consumer.start()

    @property
    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment()) if self.consumer else set()

    async def run(self) -> None:
        """Fetch, hand to the handler, commit and apply backpressure until :meth:`stop`."""
        assert self.consumer is not None, "start() first"
        c = self.consumer
        try:
            while not self._stopping.is_set():
                try:
                    batches = await c.getmany(
                        timeout_ms=self._wait_ms(), max_records=self.max_records
                    )
                except KafkaError as e:  # broker restart, leader change: the client reconnects
                    log.warning("fetch failed (%s); retrying", type(e).__name__)
                    await asyncio.sleep(0.2)
                    batches = {}
                for tp, records in batches.items():
                    if records and tp in self._restoring:  # fetched before the pause took
                        c.seek(tp, records[0].offset)  # effect: read again once restored
                    elif records and tp in self.assignment:  # not revoked meanwhile
                        await self.handler.handle(tp, records)
                await self.handler.tick()
                self._backpressure()
                now = time.monotonic()
                if now - self._last_commit >= self.commit_interval_s:
                    await self.commit()
                if now - self._last_lag >= 1.0:
                    await self._report_lag()
                    self._last_lag = now
        finally:
            self._stopped.set()

    def _wait_ms(self) -> int:
        """How long ``getmany`` may wait for records before the loop goes round (tick,
        backpressure, commit): 100 ms while the handler has timers running or partitions are
        paused, up to ``commit_interval_s`` (at most 0.5 s) when the handler says it is idle
        (``wakeup_s``); records end the wait at once either way. Ten rounds a second of every
        idle loop were most of an idle serve's CPU."""
        hint = getattr(self.handler, "wakeup_s", None)
        if hint is None or self._paused:
            return POLL_MS
        s = min(float(hint()), self.commit_interval_s, IDLE_POLL_S)
        return max(POLL_MS, int(s * 1000))

    def _backpressure(self) -> None:
        assert self.consumer is not None
        before = len(self._paused)
        if self.handler.saturated():
            tps = self.assignment - self._paused
            if tps:
                self.consumer.pause(*tps)
                self._paused |= tps
        elif self._paused:
            alive = (self._paused & self.assignment) - self._restoring
            if alive:
                self.consumer.resume(*alive)
            self._paused.clear()
        if len(self._paused) != before:
            self._paused_changed()

    def _paused_changed(self) -> None:
        """Tell the handler how many partitions are paused (gauge, assembly clock)."""
        hook = getattr(self.handler, "on_paused", None)
        if hook is not None:
            hook(len(self._paused))

    @property
    def paused(self) -> int:
        return len(self._paused)

    async def _report_lag(self) -> None:
        """Lag = high watermark - committed position (what a crash would re-read)."""
        assert self.consumer is not None
        for tp in self.assignment:
            if tp not in self.assignment:  # revoked by a rebalance during an await below
                continue
            hw = self.consumer.highwater(tp)
            if hw is None:
                continue
            pos = self.handler.tracker.committed_position((tp.topic, tp.partition))
            if pos is None:
                # nothing committed by this member yet (a partition that had no records): ask
                # the broker at most every BROKER_POSITION_TTL_S, not on every report
                asked = self._broker_positions.get(tp)
                if asked is not None and time.monotonic() - asked[0] < BROKER_POSITION_TTL_S:
                    pos = asked[1]
                else:
                    try:  # bounded: aiokafka retries through a broker outage (the loop stalls)
                        pos = await asyncio.wait_for(self.consumer.committed(tp), timeout=2.0)
                    except (IllegalStateError, KafkaError, TimeoutError):
                        continue
                    self._broker_positions[tp] = (time.monotonic(), pos)
            self.handler.report_lag(tp, max(0, hw - (pos or 0)))

    async def commit(self, only: Sequence[TopicPartition] | None = None) -> None:
        """Commit the finished prefix of every (or the given) partition.

        A commit is bounded by ``commit_timeout_s`` (aiokafka retries a commit through a broker
        outage and would send it, stale, to a broker that came back empty); after a failed one
        the next waits for :attr:`verify_broker` (the service's broker check, which resets the
        tracked offsets when the broker lost its data) before committing anything."""
        if self.consumer is None:
            return
        self._last_commit = time.monotonic()
        verify = self.verify_broker if self._commit_failed else None
        if verify is not None:
            if not await verify():
                return  # broker still away: keep the positions, commit later
            self._commit_failed = False
        owned = {(tp.topic, tp.partition) for tp in self.assignment}
        # never for a partition this member no longer owns: it would move the new owner's
        # committed position (Kafka checks the generation of a commit, not who owns what)
        todo = {k: v for k, v in self.handler.tracker.all_committable().items() if k in owned}
        if only is not None:
            keep = {(tp.topic, tp.partition) for tp in only}
            todo = {k: v for k, v in todo.items() if k in keep}
        if not todo:
            return
        offsets = {TopicPartition(t, p): pos for (t, p), pos in todo.items()}
        try:
            await asyncio.wait_for(self.consumer.commit(offsets), timeout=self.commit_timeout_s)
        except (CommitFailedError, IllegalStateError, KafkaError, TimeoutError) as e:
            self._commit_failed = True
            why = str(e) or f"no answer within {self.commit_timeout_s:g}s"
            log.warning("commit of %s failed (%s); it will be retried", offsets, why)
            return
        self._commit_failed = False
        self.commits += 1
        for key, pos in todo.items():
            self.handler.tracker.mark_committed(key, pos)

    async def _on_assigned(self, assigned: list[TopicPartition]) -> None:
        """Run the handler's restore hook with the new partitions paused (no record of a
        partition reaches the handler before its state is restored)."""
        hook = getattr(self.handler, "assigned", None)
        if not assigned or hook is None or self.consumer is None:
            return
        new = set(assigned)
        self._restoring |= new
        self.consumer.pause(*new)
        try:
            await hook(assigned)
        finally:
            self._restoring -= new
            if self.consumer is not None:
                live = (new & self.assignment) - self._paused
                if live:
                    self.consumer.resume(*live)

    async def _on_revoked(self, revoked: list[TopicPartition]) -> None:
        if not revoked:
            return
        # a rebalance may follow a broker that came back empty (our member id unknown there):
        # check it first, so offsets of the old logs are dropped instead of committed into it
        self._commit_failed = True
        fence = getattr(self.handler, "fence", None)
        if fence is not None:  # no more outputs recorded for these partitions (markers.py)
            await fence(revoked)
        await self.commit(revoked)
        self.handler.revoked(revoked)
        self.handler.tracker.drop((tp.topic, tp.partition) for tp in revoked)
        for tp in revoked:
            self.handler.forget_lag(tp)
        if self._paused & set(revoked):
            self._paused -= set(revoked)
            self._paused_changed()
        log.info("revoked %s", sorted((tp.topic, tp.partition) for tp in revoked))

    async def stop(self, drain_timeout_s: float) -> None:
        """Graceful shutdown: stop fetching, drain in flight, commit, leave the group."""
        self._stopping.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), timeout=5.0)
        try:
            await self.handler.drain(drain_timeout_s)
            await self.handler.tick()
            await self.commit()
        finally:
            if self.consumer is not None:
                await self.consumer.stop()  # sends LeaveGroup
                self.consumer = None
