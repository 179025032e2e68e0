"""The evaluator stage in process (fake records and emitter, real decoder/assembly/sampling/graph):
backpressure, late spans, skips by reason, failed evaluations to the DLQ, revocation, drain."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiokafka.structs import ConsumerRecord, TopicPartition

from nexagauge.graph.executor import CaseResult, NodeOutcome
from nexagauge.graph.runtime import Runtime
from nexagauge.online.delivery.dlq import HEADER_REASON, DeadLetters
from nexagauge.online.stage import EvaluatorStage
from nexagauge.settings import Settings

from .otlp import rand_tid, sdk_turn, sid, traces_request

TOPIC = "spans"
TP = TopicPartition(TOPIC, 0)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Emitter:
    def __init__(self, delay: float = 0.0, fail: int = 0) -> None:
        self.cases: list[str] = []
        self.delay = delay
        self.fail = fail
        self.gate: asyncio.Event | None = None

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise ConnectionError("collector down")
        self.cases.append(target.case_id)


class Producer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_and_wait(
        self, topic: str, value: bytes | None = None, key: bytes | None = None, headers: Any = None
    ) -> None:
        self.sent.append(
            {"topic": topic, "value": value, "key": key, "headers": dict(headers or [])}
        )


def record(offset: int, value: bytes) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(TOPIC, 0, offset, 0, 0, None, value, None, 0, len(value), [])


def make_stage(
    emitter: Any, clock: Clock, producer: Producer | None = None, **online: Any
) -> EvaluatorStage:
    s = Settings(
        kafka={"traces_topic": TOPIC},
        online={
            "nodes": ["relevance"],
            "trace_grace_s": 1.0,
            "trace_inactivity_s": 10.0,
            "emit_attempts": 2,
            **online,
        },
        sampling={"default_rate": 1.0},
        judge={"mode": "none", "api_key": "sk-secret-judge-key-0001"},
        cache={"enabled": False},
    )
    dlq = (
        DeadLetters(producer, "dlq", ["sk-secret-judge-key-0001"]) if producer is not None else None
    )
    return EvaluatorStage(s, Runtime.create(s, use_cache=False), emitter, dlq=dlq, clock=clock)


async def settle(stage: EvaluatorStage, clock: Clock, advance: float = 2.0) -> None:
    clock.t += advance
    await stage.tick()
    for _ in range(50):
        await asyncio.sleep(0.01)
        if stage.in_flight == 0:
            break


def pos(stage: EvaluatorStage) -> int | None:
    return stage.tracker.committable((TOPIC, 0))


async def test_trace_split_over_messages_is_evaluated_once_then_committed() -> None:
    clock, em = Clock(), Emitter()
    stage = make_stage(em, clock)
    t = rand_tid()
    root, child = sdk_turn(t, "Q?", "A.", docs=["D."])
    await stage.handle(TP, [record(0, traces_request([child])), record(1, traces_request([root]))])
    assert pos(stage) is None  # both messages feed an unfinished trace
    await settle(stage, clock)
    assert em.cases == [f"{t.hex()}:{sid(1).hex()}"]
    assert pos(stage) == 2
    # a late span of the evaluated trace: counted, not re-scored, its offset done at once
    late = sdk_turn(t, "Q?", "A.", root_span=9)[0]
    await stage.handle(TP, [record(2, traces_request([late]))])
    await settle(stage, clock)
    assert em.cases == [f"{t.hex()}:{sid(1).hex()}"] and stage.buffer.late == 1
    assert pos(stage) == 3


async def test_max_in_flight_is_a_real_bound() -> None:
    """Issue 14 item 3: completed traces beyond ``max_in_flight`` wait in a ready queue (it was
    only a semaphore around run_case: every completed trace became a task at once, 739 in flight
    with a bound of 32); the stage is saturated while any wait."""
    clock, em = Clock(), Emitter()
    em.gate = asyncio.Event()
    stage = make_stage(em, clock, max_in_flight=2)
    running = 0
    peak = 0
    real = stage._evaluate

    async def counted(*a: Any) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await real(*a)
        finally:
            running -= 1

    stage._evaluate = counted  # type: ignore[method-assign,assignment]
    msgs = [record(i, traces_request(sdk_turn(rand_tid(), f"q{i}", f"a{i}"))) for i in range(7)]
    await stage.handle(TP, msgs)
    clock.t += 2
    await stage.tick()
    await asyncio.sleep(0.05)
    assert stage.in_flight == 2 and running == 2 and stage.saturated()
    em.gate.set()
    await settle(stage, clock, 0)
    for _ in range(100):
        if len(em.cases) == 7:
            break
        await asyncio.sleep(0.01)
    assert peak == 2
    assert not stage.saturated() and len(em.cases) == 7 and pos(stage) == 7
    assert stage.limiter.in_flight == 0


async def test_queued_cases_of_revoked_partitions_are_dropped_and_release_the_limiter() -> None:
    clock, em = Clock(), Emitter()
    em.gate = asyncio.Event()
    stage = make_stage(em, clock, max_in_flight=1)
    msgs = [record(i, traces_request(sdk_turn(rand_tid(), f"q{i}", f"a{i}"))) for i in range(4)]
    await stage.handle(TP, msgs)
    clock.t += 2
    await stage.tick()
    await asyncio.sleep(0.05)
    assert stage.in_flight == 1 and stage.limiter.in_flight == 4
    stage.revoked([TP])  # the new owner re-reads all four
    assert stage.limiter.in_flight == 1 and not stage._ready and stage.in_flight == 1
    em.gate.set()
    await settle(stage, clock, 0)
    assert stage.limiter.in_flight == 0 and len(em.cases) == 1


async def test_completeness_timers_stop_while_partitions_are_paused() -> None:
    """Issue 14 item 3: while the loop has partitions paused, the assembly clock stands still, so
    a trace whose root is still unread behind the pause is not handed on without it (and the
    root then dropped as late). The paused gauge follows the loop."""
    from prometheus_client import CollectorRegistry

    from nexagauge.emit.prometheus import EvaluatorMetrics

    clock, em = Clock(), Emitter()
    stage = make_stage(em, clock)
    stage.metrics = EvaluatorMetrics(CollectorRegistry())
    t = rand_tid()
    root, child = sdk_turn(t, "Q?", "A.", docs=["D."])
    await stage.handle(TP, [record(0, traces_request([child]))])
    stage.on_paused(4)  # saturated: the loop paused every partition
    assert stage.metrics.registry.get_sample_value("nexagauge_paused_partitions") == 4
    clock.t += 60  # far beyond trace_inactivity_s = 10
    await stage.tick()
    assert len(stage.buffer) == 1 and em.cases == []  # not handed on without its root
    stage.on_paused(0)
    assert stage.metrics.registry.get_sample_value("nexagauge_paused_partitions") == 0
    await stage.handle(TP, [record(1, traces_request([root]))])
    await settle(stage, clock)
    assert em.cases == [f"{t.hex()}:{sid(1).hex()}"] and stage.buffer.late == 0
    clock.t += 11  # running again: inactivity applies to a trace that never completes
    await stage.handle(TP, [record(2, traces_request([sdk_turn(rand_tid(), "q", "a")[0]]))])
    await settle(stage, clock, 11)
    assert len(stage.buffer) == 0


async def test_not_sampled_and_limits_are_counted_by_reason() -> None:
    clock, em = Clock(), Emitter()
    stage = make_stage(em, clock)
    stage.sampler = type(stage.sampler)(
        stage.settings.sampling.model_copy(update={"default_rate": 0.0, "always_on_error": False})
    )
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q", "a")))])
    await settle(stage, clock)
    assert em.cases == [] and stage.stats.not_sampled == 1 and pos(stage) == 1

    stage2 = make_stage(Emitter(), clock)
    stage2.limiter.rate = 1.0
    stage2.limiter._tokens = 1.0
    stage2.limiter._last = clock.t
    await stage2.handle(
        TP, [record(i, traces_request(sdk_turn(rand_tid(), f"q{i}", f"a{i}"))) for i in range(3)]
    )
    clock.t += 1.5  # all three complete at once; the bucket holds one token (1/s)
    await stage2.tick()
    await asyncio.sleep(0.05)
    assert stage2.stats.skipped.get("rate_limit", 0) == 2 and stage2.stats.sampled == 1
    await settle(stage2, clock, 0)
    assert pos(stage2) == 3  # skipped traces are done, never stuck


async def test_permanent_failure_is_parked_in_the_dlq_with_its_case_not_emitted() -> None:
    """A failed evaluation is dead-lettered with what `nexagauge dlq replay` needs (the case, the
    span's identity, node set, sources) - never the judge key - and not emitted: the replay
    emits it once under the same evaluation ids."""
    clock, em, prod = Clock(), Emitter(), Producer()
    stage = make_stage(em, clock, prod)
    t = rand_tid()

    class FailingExecutor:
        async def run_case(self, case: Any, index: int) -> CaseResult:
            return CaseResult(
                index,
                case.case_id,
                case=case,
                outcomes={
                    "relevance": NodeOutcome(
                        "relevance",
                        "error",
                        "AuthenticationError: bad key sk-secret-judge-key-0001",
                    )
                },
            )

    stage._executor = lambda nodes: (FailingExecutor(), "fp1")  # type: ignore[method-assign, assignment, return-value]
    await stage.handle(
        TP, [record(0, traces_request(sdk_turn(t, "secret question", "secret answer")))]
    )
    await settle(stage, clock)
    assert em.cases == []  # parked, not counted as an evaluation
    [d] = prod.sent
    assert d["headers"][HEADER_REASON] == b"evaluation_failed"
    assert d["headers"]["nexagauge.dlq.replayable"] == b"1"
    body = json.loads(d["value"])
    assert body["version"] == 2 and body["config_fingerprint"] == "fp1"
    assert body["trace_id"] == t.hex() and "relevance" in body["errors"]
    assert body["case"]["output"] == "secret answer"  # what a replay evaluates
    assert body["target"]["service"] == "shop-bot" and body["target"]["span_name"] == "answer"
    assert body["sources"] == [[TOPIC, 0, 0]] and body["nodes"] == ["relevance"]
    assert "sk-secret-judge-key" not in json.dumps(d, default=str)
    assert pos(stage) == 1 and stage.stats.failed == 1


async def test_a_case_over_the_bound_is_dead_lettered_without_it() -> None:
    clock, em, prod = Clock(), Emitter(), Producer()
    stage = make_stage(em, clock, prod, dlq_max_case_bytes=10)

    class FailingExecutor:
        async def run_case(self, case: Any, index: int) -> CaseResult:
            return CaseResult(index, case.case_id, case=case, error="boom")

    stage._executor = lambda nodes: (FailingExecutor(), "fp1")  # type: ignore[method-assign, assignment, return-value]
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q?", "a.")))])
    await settle(stage, clock)
    [d] = prod.sent
    body = json.loads(d["value"])
    assert body["case"] is None and "dlq_max_case_bytes (10)" in body["case_omitted"]
    assert d["headers"]["nexagauge.dlq.replayable"] == b"0"
    assert pos(stage) == 1


async def test_emit_retries_then_dead_letters() -> None:
    clock, prod = Clock(), Producer()
    em = Emitter(fail=1)
    stage = make_stage(em, clock, prod)
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q", "a")))])
    await settle(stage, clock)
    assert len(em.cases) == 1 and prod.sent == []  # one failure, retried with backoff
    await asyncio.sleep(0.3)

    em2 = Emitter(fail=5)
    stage2 = make_stage(em2, clock, prod)
    await stage2.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q", "a")))])
    clock.t += 2
    await stage2.tick()
    for _ in range(100):
        await asyncio.sleep(0.02)
        if stage2.in_flight == 0:
            break
    assert [d["headers"][HEADER_REASON] for d in prod.sent] == [b"emit_failed"]
    assert pos(stage2) == 1


async def test_poison_is_dead_lettered_and_done() -> None:
    clock, prod = Clock(), Producer()
    stage = make_stage(Emitter(), clock, prod)
    await stage.handle(TP, [record(0, b"\xff\x00garbage")])
    await settle(stage, clock)
    assert prod.sent[0]["value"] == b"\xff\x00garbage" and pos(stage) == 1


async def test_revocation_drops_buffered_work_and_stale_releases() -> None:
    clock, em = Clock(), Emitter()
    em.gate = asyncio.Event()
    stage = make_stage(em, clock)
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q", "a")))])
    clock.t += 2
    await stage.tick()  # evaluation in flight, blocked in the emitter
    await stage.handle(
        TP, [record(1, traces_request([sdk_turn(rand_tid(), "q", "a")[0] | {"end": 0}]))]
    )
    stage.revoked([TP])
    stage.tracker.drop([(TOPIC, 0)])
    assert len(stage.buffer) == 0
    # re-assigned: the same offsets are delivered again
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q2", "a2")))])
    em.gate.set()
    await asyncio.sleep(0.1)  # the old evaluation finishes: it must not complete offset 0 again
    assert pos(stage) is None


async def test_drain_deadline_cancels_and_keeps_offsets() -> None:
    clock, em = Clock(), Emitter()
    em.gate = asyncio.Event()  # never opens
    stage = make_stage(em, clock)
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q", "a")))])
    clock.t += 2
    await stage.tick()
    await stage.drain(0.2)
    assert stage.in_flight == 0 and pos(stage) is None  # re-delivered after restart


async def test_json_source_topics_with_rekey_decode_rekeyed_protobuf() -> None:
    """With ``encoding = otlp_json`` the collector's topics are JSON, but the re-keyed topic the
    evaluator reads holds protobuf written by the re-key stage."""
    clock, em = Clock(), Emitter()
    s = Settings(
        kafka={"traces_topic": TOPIC, "encoding": "otlp_json"},
        online={"nodes": ["relevance"], "trace_grace_s": 0.0, "rekey": True},
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    stage = EvaluatorStage(s, Runtime.create(s, use_cache=False), em, clock=clock)
    t = rand_tid()
    await stage.handle(TP, [record(0, traces_request(sdk_turn(t, "q", "a")))])
    await settle(stage, clock)
    assert em.cases == [f"{t.hex()}:{sid(1).hex()}"] and stage.stats.poison == 0


async def test_unexpected_decoder_error_dead_letters_instead_of_stopping(monkeypatch: Any) -> None:
    import nexagauge.online.stage as service

    clock, prod = Clock(), Producer()
    stage = make_stage(Emitter(), clock, prod)

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("decoder bug")

    monkeypatch.setattr(service, "decode_traces", boom)
    await stage.handle(TP, [record(0, b"anything")])
    await settle(stage, clock)
    assert prod.sent[0]["headers"][HEADER_REASON] == b"decode_error" and pos(stage) == 1
