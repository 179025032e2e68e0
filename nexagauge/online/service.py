"""The online evaluator process: :class:`OnlineService` wires the Kafka clients, the re-key stage,
the evaluation stage (:class:`~nexagauge.online.stage.EvaluatorStage`), the conversation stage,
metrics, broker health and the HTTP endpoints, and implements the SIGTERM path (drain, commit,
leave the group, all within one deadline).

Example (not run: needs a broker)::

    svc = OnlineService(load_settings())
    await svc.start()
    await svc.run_until(stop_event)   # returns after a graceful drain
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from nexagauge.graph.runtime import Runtime
from nexagauge.judge.destination import scrub_notice
from nexagauge.nodes.conversation_relevance import METRIC as CONVERSATION_METRIC
from nexagauge.online.cases import EmitterLike
from nexagauge.online.conversations.stage import ConversationStage
from nexagauge.online.conversations.turns import TurnPublisher, conversations_possible
from nexagauge.online.delivery.dlq import DeadLetters, dlq_value_limit
from nexagauge.online.delivery.redact import (
    configure_redaction,
    install_log_redaction,
    register_secret,
)
from nexagauge.online.stage import EvaluatorStage
from nexagauge.settings import Settings

log = logging.getLogger(__name__)

__all__ = ["EvaluatorStage", "OnlineService"]

#: how long the service's producer holds a batch for more records (re-keyed traces, emitted-key
#: markers, dead letters, turns). 0: a batch leaves in the event-loop round that filled it.
#: Every write already comes in a group (a fetched batch re-keyed in one round, the markers of
#: one export confirmation), and while a produce request is in flight the next records queue
#: anyway; a 5 ms linger added one more loop wakeup per batch (~3 a second at a steady 8
#: traces/s), a separate burst of work for the process, and 5 ms to each hop.
PRODUCER_LINGER_MS = 0


# --------------------------------------------------------------------------------------------
# the service
# --------------------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class OnlineService:
    """Both stages, the Kafka clients, the emitter and the HTTP endpoints of one process.

    Example::

        service = OnlineService(nexagauge.load_settings())
        await service.start()                 # topics, consumer groups, /metrics, /readyz
        healthy = await service.run_until(stop_event)   # then drains, commits, closes
    """

    settings: Settings
    _: KW_ONLY
    runtime: Runtime | None = None
    emitter: EmitterLike | None = None
    metrics: Any = None
    serve_http: bool = True
    loops: list[Any] = field(init=False, default_factory=list)
    stage: EvaluatorStage | None = field(init=False, default=None)
    rekey_stage: Any = field(init=False, default=None)
    _producer: Any = field(init=False, default=None)
    _tasks: list[asyncio.Task[None]] = field(init=False, default_factory=list)
    _http: Any = field(init=False, default=None)
    ready: bool = field(init=False, default=False)
    #: nexagauge.emit.health.HealthMetrics (of EvaluatorMetrics)
    health: Any = field(init=False, default=None)
    #: nexagauge.online.delivery.broker.BrokerMonitor
    monitor: Any = field(init=False, default=None)
    #: the judge's circuit breaker (nexagauge.judge.llm.breaker)
    breaker: Any = field(init=False, default=None)

    def _own_topics(self) -> list[Any]:
        """The topics this service owns (created at start, re-created when they vanish)."""
        from nexagauge.online.delivery.broker import TopicSpec

        k = self.settings.kafka
        names = [k.dlq_topic] + ([k.rekeyed_topic] if self.settings.online.rekey else [])
        return [TopicSpec(t, k.topic_partitions) for t in names]

    async def _ensure_topics(self) -> None:
        from nexagauge.online.delivery.broker import create_topics

        await create_topics(self.settings.kafka, self._own_topics())

    async def start(self) -> None:
        from nexagauge.online.delivery.consumer import ConsumerLoop
        from nexagauge.online.rekey import RekeyStage

        s = self.settings
        k, o = s.kafka, s.online
        if self.metrics is None:
            from nexagauge.emit.prometheus import EvaluatorMetrics

            self.metrics = EvaluatorMetrics.from_settings(s.emit)
        if self.runtime is None:
            self.runtime = Runtime.create(s, service=True)  # bounded in-memory caches
        judge = self.runtime.judge
        if judge is not None and hasattr(judge, "observer") and judge.observer is None:
            judge.observer = self.metrics.judge_call  # judge calls, errors and latency
        from nexagauge.online.delivery.health import attach_breaker

        self.health = getattr(self.metrics, "health", None)  # EvaluatorMetrics.health
        self.breaker = attach_breaker(judge, o, self.health)
        from nexagauge.emit.zero import start_for_service

        start_for_service(self.metrics, s, self.runtime.judge_kind)  # no "No data" panels
        if k.create_topics:
            await self._ensure_topics()
        self._producer = service_producer(k)
        await self._producer.start()
        keys = None
        if self.emitter is None:  # group-wide dedupe of the real emitter (markers.py)
            from nexagauge.online.delivery.markers import emitted_keys

            keys = await emitted_keys(s, self._producer)
            self.emitter = _default_emitter(s, self.metrics, keys)
        secrets = [x.get_secret_value() for x in (s.judge.api_key, k.sasl_password) if x]
        register_secret(*secrets)  # never in a log line or a dead-letter header
        configure_redaction(pii=o.scrub_pii)  # log lines lose what cases lose
        install_log_redaction()
        notice = scrub_notice(s, self.runtime.judge_kind, secrets=o.scrub, pii=o.scrub_pii)
        log.warning("nexagauge serve: %s", notice)  # shown at the default level, as the start line
        from nexagauge.online.delivery.lograte import install_log_rate_limit

        install_log_rate_limit(o.log_repeat_interval_s)  # no ERROR flood while the broker is away
        dlq = DeadLetters(
            self._producer,
            k.dlq_topic,
            secrets,
            payload=k.dlq_payload,
            max_value_bytes=dlq_value_limit(k.max_message_bytes),
        )
        self.stage = EvaluatorStage(s, self.runtime, self.emitter, metrics=self.metrics, dlq=dlq)
        self.stage.breaker = self.breaker
        self.stage.keys = keys
        self.conversation_stage = await attach_conversations(self, dlq)
        if o.rekey:
            self.rekey_stage = RekeyStage(s, self._producer, dlq, self.metrics)
            src = [k.traces_topic] + ([k.logs_topic] if o.consume_logs else [])
            self.loops.append(
                ConsumerLoop(
                    k,
                    src,
                    f"{k.group_id}-rekey",
                    self.rekey_stage,
                    commit_interval_s=o.commit_interval_s,
                )
            )
            eval_topics = [k.rekeyed_topic]
        else:
            eval_topics = [k.traces_topic] + ([k.logs_topic] if o.consume_logs else [])
        self.loops.append(
            ConsumerLoop(
                k, eval_topics, k.group_id, self.stage, commit_interval_s=o.commit_interval_s
            )
        )
        from nexagauge.online.delivery.broker import BrokerMonitor, TopicSpec

        self.monitor = BrokerMonitor(
            k, self._own_topics(), health=self.health, on_topics_recreated=self._broker_reset
        )
        compact = {"cleanup.policy": "compact"}
        if self.conversation_stage is not None:
            self.monitor.add_topics(
                [
                    TopicSpec(k.turns_topic, k.topic_partitions),
                    TopicSpec(k.conversation_changelog_topic, k.topic_partitions, compact),
                ]
            )
        if keys is not None:  # the emitted-key topic, co-partitioned with the input
            source = k.rekeyed_topic if o.rekey else k.traces_topic
            n = len(await self._producer.partitions_for(source) or ()) or k.topic_partitions
            self.monitor.add_topics([TopicSpec(k.emitted_topic, n, compact)])
        await self.monitor.start()
        for lp in self.loops:  # a commit after a failed one waits for a fresh broker check
            lp.verify_broker = self.monitor.check
        for lp in self.loops:
            await lp.start()
        self._tasks = [asyncio.ensure_future(lp.run()) for lp in self.loops]
        if self.serve_http:
            self._http = await _start_http(s, self.metrics, self)
        self.ready = True

    async def _broker_reset(self, topics: list[str]) -> None:
        """Own topics vanished: the broker lost its data (and the group's commits). Every
        consumer re-reads from its committed offset or the beginning of the new logs."""
        from nexagauge.online.delivery.broker import rewind

        log.warning("broker lost its data (%s re-created); rewinding the consumers", topics)
        for lp in self.loops:
            if lp.consumer is None:
                continue
            tps = list(lp.consumer.assignment())
            # what was fetched and tracked belongs to the old logs: never commit it to the new one
            lp.handler.revoked(tps)
            lp.handler.tracker.drop((tp.topic, tp.partition) for tp in tps)
            await rewind(lp.consumer)

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: started, and every consumer loop still running."""
        if not self.ready:
            return False, "starting or stopping"
        dead = [t for t in self._tasks if t.done()]
        if dead:
            return False, f"{len(dead)} consumer loop(s) stopped"
        if self.monitor is not None:
            ok, why = self.monitor.readiness()
            if not ok:
                return False, why
        if self.breaker is not None and not self.breaker.is_closed:
            return True, self.breaker.describe()  # alive and waiting; nothing is lost
        return True, "consuming"

    @property
    def metrics_port(self) -> int | None:
        return getattr(self._http, "port", None)

    async def run_until(self, stop: asyncio.Event) -> bool:
        """Run until ``stop`` is set (or a loop dies), then shut down gracefully.

        Returns False when a consumer loop died (the process should exit non-zero)."""
        waiter = asyncio.ensure_future(stop.wait())
        healthy = True
        try:
            done, _ = await asyncio.wait(
                [waiter, *self._tasks], return_when=asyncio.FIRST_COMPLETED
            )
            for t in done:
                if t is not waiter:
                    healthy = False
                    exc = None if t.cancelled() else t.exception()
                    log.error("consumer loop stopped unexpectedly: %r", exc)
        finally:
            waiter.cancel()
            await self.stop()
        return healthy

    async def stop(self) -> None:
        """SIGTERM path: stop fetching, drain in flight, commit, leave the groups, flush - all
        within ``online.drain_timeout_s`` (:class:`~nexagauge.online.delivery.shutdown.Deadline`): a step
        that cannot finish in time (a dead broker, a dead collector) is abandoned, and what was
        not committed is re-delivered."""
        from nexagauge.online.delivery.shutdown import Deadline

        self.ready = False
        drain = self.settings.online.drain_timeout_s
        deadline = Deadline(drain)
        reserve = min(2.0, drain * 0.25)  # kept for flushing and closing after the loops
        if self.monitor is not None:
            await deadline.run(self.monitor.stop(), "broker monitor", reserve_s=reserve)
        for lp in reversed(self.loops):  # the evaluator first: it may still need the producer
            await deadline.run(
                lp.stop(deadline.left(reserve)), f"consumer loop {lp.group_id}", reserve_s=reserve
            )
        for t in self._tasks:
            if not t.done():
                t.cancel()
        if self._tasks:
            gather = asyncio.gather(*self._tasks, return_exceptions=True)
            await deadline.run(gather, "consumer tasks")
        self.loops, self._tasks = [], []
        close = getattr(self.emitter, "aclose", None)
        if close is not None:
            await deadline.run(close(), "flushing evaluation spans")
        if self._producer is not None:
            await deadline.run(self._producer.stop(), "producer flush")
            self._producer = None
        if self._http is not None:
            await deadline.run(_stop_http(self._http), "metrics endpoint")
            self._http = None
        if self.breaker is not None:
            await deadline.run(self.breaker.aclose(), "judge breaker")
        if self.runtime is not None:
            await deadline.run(self.runtime.aclose(), "runtime")


def service_producer(k: Any) -> Any:
    """The service's ``acks=all`` producer (not started): re-keyed traces, emitted-key markers,
    dead letters, conversation turns and changelogs. ``k``: ``KafkaSettings``.

    Example (not run: inside a running event loop, then needs a broker)::

        producer = service_producer(settings.kafka)
        await producer.start()
    """
    from aiokafka import AIOKafkaProducer

    from nexagauge.online.delivery.consumer import client_kwargs

    return AIOKafkaProducer(
        max_request_size=k.max_message_bytes,
        # re-keyed messages are ~10-30 KB each: aiokafka's 16 KB default batch would send one
        # produce request per message (measured 4.8x slower re-keying, bench/ingest.py --rekey)
        max_batch_size=min(k.max_message_bytes, 1024 * 1024),
        acks="all",
        linger_ms=PRODUCER_LINGER_MS,
        **client_kwargs(k),
    )


def _default_emitter(settings: Settings, metrics: Any, store: Any = None) -> EmitterLike:
    from nexagauge.emit.emitter import Emitter

    return Emitter.from_settings(settings, metrics=metrics, store=store)


async def _start_http(settings: Settings, metrics: Any, service: OnlineService) -> Any:
    from nexagauge.emit.http import start_server

    return await start_server(settings.emit, metrics, ready=service.readiness)


async def _stop_http(server: Any) -> None:
    stop = getattr(server, "aclose", None) or getattr(server, "stop", None)
    if stop is not None:
        res = stop()
        if asyncio.iscoroutine(res):
            await res


async def attach_conversations(service: OnlineService, dlq: Any = None) -> ConversationStage | None:
    """Wire the conversation stage into a starting ``OnlineService``: the evaluator stage gets a
    :class:`TurnPublisher` (and stops judging ``conversation_relevance`` per trace: this stage
    owns it), and a consumer loop of ``kafka.turns_topic`` (group ``<group_id>-conversations``)
    drives a :class:`ConversationStage` that shares the evaluator's budget limiter and keeps its
    state in ``kafka.conversation_changelog_topic``. ``None`` when no sampling decision can
    include conversation relevance (or ``online.conversations`` is off)."""
    from nexagauge.online.delivery.broker import TopicSpec, create_topics
    from nexagauge.online.delivery.changelog import Changelog
    from nexagauge.online.delivery.consumer import ConsumerLoop

    s = service.settings
    k, o = s.kafka, s.online
    if not conversations_possible(s):
        return None
    assert service.stage is not None, "the evaluation stage is created first"
    if k.create_topics:
        await create_topics(k, [TopicSpec(k.turns_topic, k.topic_partitions)])
    changelog = Changelog(k, service._producer, k.conversation_changelog_topic)
    if k.create_topics:
        # co-partitioned: as many partitions as the turns topic really has
        n = len(await service._producer.partitions_for(k.turns_topic) or ())
        await changelog.ensure(n or k.topic_partitions)
    judge = service.runtime.judge if service.runtime is not None else None
    judge_model = s.judge.for_node(CONVERSATION_METRIC).model if judge is not None else None
    service.stage.turns = TurnPublisher(service._producer, k.turns_topic, judge_model, o.nodes)
    stage = ConversationStage(
        s,
        service.runtime,
        service.emitter,
        metrics=service.metrics,
        dlq=dlq,
        limiter=service.stage.limiter,
        changelog=changelog,
    )
    service.loops.append(
        ConsumerLoop(
            k,
            [k.turns_topic],
            f"{k.group_id}-conversations",
            stage,
            commit_interval_s=o.commit_interval_s,
        )
    )
    return stage
