"""The conversation stage: per-conversation state (ordering, dedupe, bounds, incremental windows
equal to the whole conversation's), the stage in process (reorder delay, offsets, local judge,
turn publication by the evaluator stage), and on real parts: the Tansu broker, the real ``openai``
client against the loopback OpenAI-compatible server, the real emitter (Prometheus registry +
evaluation spans in memory) and, end to end, ``OnlineService`` from OTLP spans to running scores."""

from __future__ import annotations

import asyncio
import json
import re
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, TopicPartition
from pydantic import BaseModel

from nexagauge.emit.emitter import Emitter
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.graph.runtime import Runtime
from nexagauge.judge.base import NEEDS_LLM
from nexagauge.nodes.conversation_relevance import Window, build_windows
from nexagauge.online.conversations.stage import (
    DUPLICATE,
    INVALID,
    LATE,
    Added,
    BadTurn,
    ConversationStage,
    ConversationState,
    TurnPublisher,
    TurnRecord,
    conversation_fingerprint,
    conversations_possible,
)
from nexagauge.online.stage import EvaluatorStage
from nexagauge.schema.case import ConversationRelevanceConfig
from nexagauge.schema.results import CostEstimate
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

from .otlp import rand_tid, sdk_turn, sid, traces_request

TOPIC = "turns"


def trace_hex(n: int) -> str:
    return f"{n + 1:032x}"


def turn(
    conv: str, i: int, *, off_topic: bool = False, window: int = 2, time_ns: int | None = None
) -> TurnRecord:
    cfg = ConversationRelevanceConfig(window_size=window)
    return TurnRecord(
        conversation_id=conv,
        time_ns=time_ns if time_ns is not None else 1_000 * (i + 1),
        trace_id=f"{abs(hash(conv)) % 10**6:06x}{i + 1:026x}",
        span_id=f"{i + 1:016x}",
        input=f"{conv} question {i + 1}?",
        output=f"The capital of France is Paris ({conv} {i + 1})."
        if off_topic
        else f"{conv} answer {i + 1}.",
        service="chat-svc",
        span_name="answer",
        model="gpt-4o",
        config=cfg.model_dump(mode="json"),
        fingerprint=conversation_fingerprint(cfg, "judge-m"),
    )


# --------------------------------------------------------------------------------------------
# state
# --------------------------------------------------------------------------------------------
def added(x: Added | str) -> Added:
    assert isinstance(x, Added), x
    return x


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_incremental_windows_equal_build_windows_over_whole_conversation(size: int) -> None:
    st = ConversationState(size)
    seen: list[Window] = []
    for i in range(12):
        a = added(st.add(turn("c", i, window=size)))
        assert a.index == i and not a.late
        seen += a.windows
        # the judge gets exactly the turns of the window, numbered in the whole conversation
        for w in a.windows:
            assert [a.tail[k].input for k in range(w.start, w.end + 1)] == [
                f"c question {k + 1}?" for k in range(w.start, w.end + 1)
            ]
        assert len(st.turns) <= size  # bounded: only what the next window needs
    assert seen == build_windows(12, size)
    assert st.n_turns == 12


def test_out_of_order_turn_inserted_in_time_order_and_later_windows_use_it() -> None:
    st = ConversationState(3)
    added(st.add(turn("c", 0)))
    added(st.add(turn("c", 2)))  # turn 3 arrives before turn 2
    late = added(st.add(turn("c", 1)))
    assert late.late and late.index == 1 and late.windows == [Window(0, 1)]
    assert [late.tail[k].input for k in range(2)] == ["c question 1?", "c question 2?"]
    nxt = added(st.add(turn("c", 3)))
    assert nxt.windows == [Window(1, 3)] and not nxt.late
    assert [nxt.tail[k].input for k in range(1, 4)] == [
        "c question 2?",
        "c question 3?",
        "c question 4?",
    ]
    assert st.late == 1


def test_duplicates_and_late_turns_without_context_are_skipped() -> None:
    st = ConversationState(2, memory=4)
    for i in range(10):
        added(st.add(turn("c", i)))
    assert st.add(turn("c", 9)) == DUPLICATE  # redelivery of a kept turn
    assert st.add(turn("c", 8)) == DUPLICATE
    # an old redelivered turn whose id was forgotten is older than every kept turn: late, dropped
    assert st.add(turn("c", 1)) == LATE
    assert st.n_turns == 10 and len(st.turns) == 2 and len(st._seen) <= 4
    with pytest.raises(IndexError):
        added(st.add(turn("c", 10))).tail[5]  # earlier turns are not kept


def test_running_score_counts_windows() -> None:
    st = ConversationState(2)
    assert st.score is None
    assert st.record([1.0]) == 1.0
    assert st.record([0.0]) == 0.5
    assert st.record([1.0, 1.0]) == pytest.approx(0.75)


def test_turn_record_round_trip_and_errors_name_the_field() -> None:
    t = turn("c", 0)
    assert TurnRecord.from_bytes(t.to_bytes()) == t
    d = json.loads(t.to_bytes())
    for field_, bad, msg in [
        ("time_ns", "soon", "time_ns"),
        ("trace_id", "", "trace_id"),
        ("input", 3, "input"),
        ("config", {"window_size": 0}, "config"),
    ]:
        with pytest.raises(BadTurn, match=msg):
            TurnRecord.from_bytes(json.dumps({**d, field_: bad}).encode())
    with pytest.raises(BadTurn, match="not JSON"):
        TurnRecord.from_bytes(b"\xff{")


def test_stage_needed_only_when_a_decision_can_include_conversation_relevance() -> None:
    assert conversations_possible(Settings())  # default: every metric node
    assert not conversations_possible(Settings(online={"nodes": ["relevance"]}))
    rule = {"name": "chat", "nodes": ["conversation_relevance"]}
    assert conversations_possible(
        Settings(online={"nodes": ["relevance"]}, sampling={"rules": [rule]})
    )
    assert not conversations_possible(Settings(online={"conversations": False}))


# --------------------------------------------------------------------------------------------
# the stage in process (fake judge and emitter)
# --------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class FakeJudge:
    """Answers window schemas: "no" for a judged reply mentioning Paris; records each call."""

    kind = "llm"
    model = "judge-m"
    supports_llm_tasks = True

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def structured(
        self, prompt: str, variables: Any, model: type[BaseModel], **kw: Any
    ) -> Any:
        self.calls.append(dict(variables))
        turns = {
            int(m.group(1)): m.group(2)
            for b in variables["turns"]
            if (m := re.match(r"turn (\d+)\n.*\nassistant: (.*)", b, re.S))
        }
        out = {}
        for k, line in enumerate(variables["windows"].splitlines()):
            n = int(line.rsplit(" ", 1)[1])
            out[f"w{k + 1}"] = {"verdict": "no" if "Paris" in turns[n] else "yes"}
        value = model.model_validate(out)
        return SimpleNamespace(ok=True, value=value, cost=CostEstimate(), error=None)


class FakeRuntime:
    def __init__(self, judge: Any) -> None:
        self.judge = judge

    def llm_unavailable(self) -> str | None:
        return None


class Recorder:
    def __init__(self) -> None:
        self.emitted: list[tuple[Any, Any]] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        self.emitted.append((target, case_result))

    def scores(self, conv: str) -> list[float]:
        return [
            r.outcomes["conversation_relevance"].output.metrics[0].score
            for t, r in self.emitted
            if t.conversation_id == conv
        ]


def rec(offset: int, value: bytes, partition: int = 0) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(TOPIC, partition, offset, 0, 0, b"k", value, None, 0, len(value), [])


def stage_for(runtime: Any, em: Any, clock: Clock, **online: Any) -> ConversationStage:
    s = Settings(online={"conversation_reorder_s": 1.0, **online})
    return ConversationStage(s, runtime, em, clock=clock)


async def settle(stage: ConversationStage) -> None:
    await stage.tick()
    for _ in range(100):
        if stage.queued == 0 and all(c.task is None for c in stage.states.values()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("stage did not settle")


async def test_reorder_delay_judges_in_turn_time_order_and_releases_offsets() -> None:
    clock, em, judge = Clock(), Recorder(), FakeJudge()
    stage = stage_for(FakeRuntime(judge), em, clock)
    tp = TopicPartition(TOPIC, 0)
    a = [turn("a", i, off_topic=(i == 1)) for i in range(3)]
    await stage.handle(tp, [rec(0, a[1].to_bytes()), rec(1, a[0].to_bytes())])  # swapped
    await stage.tick()
    assert judge.calls == [] and stage.tracker.committable((TOPIC, 0)) is None  # waiting
    clock.t += 1.0
    await settle(stage)
    assert [c["windows"] for c in judge.calls] == [
        "w1: turns 1-1, judge the reply of turn 1",
        "w1: turns 1-2, judge the reply of turn 2",
    ]
    assert stage.tracker.committable((TOPIC, 0)) == 2
    # a redelivered turn, an invalid record and the next turn
    await stage.handle(tp, [rec(2, a[0].to_bytes()), rec(3, b"not json"), rec(4, a[2].to_bytes())])
    clock.t += 1.0
    await settle(stage)
    assert len(judge.calls) == 3 and "turns 2-3" in judge.calls[2]["windows"]
    assert em.scores("a") == [1.0, 0.5, pytest.approx(2 / 3)]
    assert stage.stats.skipped == {DUPLICATE: 1, INVALID: 1}
    assert stage.tracker.committable((TOPIC, 0)) == 5
    target, result = em.emitted[-1]
    assert (target.trace_id, target.span_id) == (a[2].trace_id, a[2].span_id)
    assert target.config_fingerprint == a[2].fingerprint
    m = result.outcomes["conversation_relevance"].output.metrics[0]
    assert m.meta["windows"] == 3 and m.result[0]["window"] == [1, 2]
    assert "turn 3 (window turns 2-3): ACCEPTED" in m.result[-1]["reasoning"]


class FlakyJudge(FakeJudge):
    """Fails the calls whose number is in ``fail`` (1-based)."""

    def __init__(self, fail: set[int]) -> None:
        super().__init__()
        self.fail = fail

    async def structured(
        self, prompt: str, variables: Any, model: type[BaseModel], **kw: Any
    ) -> Any:
        if len(self.calls) + 1 in self.fail:
            self.calls.append(dict(variables))
            return SimpleNamespace(ok=False, value=None, cost=CostEstimate(), error="HTTP 500")
        return await super().structured(prompt, variables, model, **kw)


async def test_judge_failure_emits_a_failed_metric_and_keeps_the_running_score() -> None:
    clock, em, judge = Clock(), Recorder(), FlakyJudge({2})
    stage = stage_for(FakeRuntime(judge), em, clock, conversation_reorder_s=0)
    recs = [rec(i, turn("a", i).to_bytes()) for i in range(3)]
    await stage.handle(TopicPartition(TOPIC, 0), recs)
    await settle(stage)
    metrics = [r.outcomes["conversation_relevance"].output.metrics[0] for _, r in em.emitted]
    assert [m.score for m in metrics] == [1.0, None, 1.0]
    assert metrics[1].error == "HTTP 500" and metrics[2].meta["windows"] == 2
    # the failed turn is still context of the next window
    assert "turns 2-3" in judge.calls[2]["windows"]
    assert stage.stats.failed == 1 and stage.tracker.committable((TOPIC, 0)) == 3


async def test_local_judge_counts_needs_llm_and_emits_nothing() -> None:
    s = Settings(judge={"mode": "local"}, cache={"enabled": False})
    rt = Runtime.create(s, use_cache=False)
    clock, em = Clock(), Recorder()
    stage = ConversationStage(Settings(online={"conversation_reorder_s": 0}), rt, em, clock=clock)
    recs = [rec(i, turn("a", i).to_bytes()) for i in range(3)]
    await stage.handle(TopicPartition(TOPIC, 0), recs)
    await settle(stage)
    await rt.aclose()
    assert stage.stats.skipped == {NEEDS_LLM: 3} and em.emitted == []
    assert stage.tracker.committable((TOPIC, 0)) == 3


async def test_revoked_partition_drops_its_conversations() -> None:
    clock, em = Clock(), Recorder()
    stage = stage_for(FakeRuntime(FakeJudge()), em, clock)
    await stage.handle(TopicPartition(TOPIC, 1), [rec(0, turn("a", 0).to_bytes(), 1)])
    await stage.handle(TopicPartition(TOPIC, 2), [rec(0, turn("b", 0).to_bytes(), 2)])
    stage.revoked([TopicPartition(TOPIC, 1)])
    assert [k[0] for k in stage.states] == ["b"] and stage.queued == 1


async def test_conversation_lru_is_bounded() -> None:
    clock, em = Clock(), Recorder()
    stage = stage_for(FakeRuntime(FakeJudge()), em, clock, conversation_states=3)
    for n in range(6):
        await stage.handle(TopicPartition(TOPIC, 0), [rec(n, turn(f"c{n}", 0).to_bytes())])
        clock.t += 1.0
        await settle(stage)
    assert len(stage.states) == 3 and stage.stats.evicted == 3


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []

    async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None) -> None:
        assert key is not None
        self.sent.append((topic, key, value))


async def test_evaluator_stage_publishes_turns_keyed_by_conversation() -> None:
    s = Settings(
        kafka={"traces_topic": "spans"},
        online={"nodes": ["conversation_relevance"], "trace_grace_s": 0.0},
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    em = Recorder()
    stage = EvaluatorStage(s, Runtime.create(s, use_cache=False), em)
    stage.turns = pub = TurnPublisher(Producer(), "turns", None, s.online.nodes)
    t1, t2 = rand_tid(), rand_tid()
    spans = sdk_turn(t1, "Hi?", "Hello.", conversation="conv-9", end=7_000)
    spans += sdk_turn(t2, "Other?", "No conversation.")
    v = traces_request(spans)
    await stage.handle(
        TopicPartition("spans", 0),
        [ConsumerRecord("spans", 0, 0, 0, 0, None, v, None, 0, len(v), [])],
    )
    for _ in range(100):
        await stage.tick()
        if stage.stats.traces_done == 2:
            break
        await asyncio.sleep(0.02)
    sent = pub.producer.sent
    assert len(sent) == 1 and sent[0][:2] == ("turns", b"conv-9")
    tr = TurnRecord.from_bytes(sent[0][2])
    assert (tr.trace_id, tr.span_id, tr.time_ns) == (t1.hex(), sid(1).hex(), 7_000)
    assert (tr.input, tr.output, tr.service) == ("Hi?", "Hello.", "shop-bot")
    assert stage.tracker.committable(("spans", 0)) == 1
    # a decision without conversation relevance publishes nothing
    assert not await pub.publish(SimpleNamespace(conversation_id="x"), ("relevance",))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# real broker + real openai client over HTTP + real emitter
# --------------------------------------------------------------------------------------------
class WindowServer:
    """Loopback OpenAI server answering conversation windows ("no" for replies about Paris)."""

    def __init__(self) -> None:
        from support.openai_server import OpenAIServer

        self.windows: list[list[tuple[int, int, list[str]]]] = []
        self.srv = OpenAIServer(self.handle)

    def handle(self, req: Any) -> Any:
        from support.openai_server import Reply

        text = req.text
        turns = dict(
            (int(n), (u, a))
            for n, u, a in re.findall(r"turn (\d+)\nuser: (.*)\nassistant: (.*)", text)
        )
        wins = re.findall(r"w(\d+): turns (\d+)-(\d+), judge the reply of turn (\d+)", text)
        if not wins:
            return None
        seen, out = [], {}
        for k, s, e, _ in wins:
            seen.append((int(s), int(e), [turns[j][0] for j in range(int(s), int(e) + 1)]))
            out[f"w{k}"] = {"verdict": "no" if "Paris" in turns[int(e)][1] else "yes"}
        self.windows.append(seen)
        return Reply(content=json.dumps(out))


def llm_settings(srv: Any, **extra: Any) -> dict[str, Any]:
    return {
        "judge": {
            "base_url": srv.base_url,
            "api_key": "k",
            "model": "judge-m",
            "max_retries": 1,
            "timeout_s": 5,
        },
        "cache": {"enabled": False},
        **extra,
    }


async def wait_for(pred: Any, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())


@pytest.mark.integration
async def test_turns_of_two_conversations_out_of_order_scored_incrementally(broker: Any) -> None:
    from nexagauge.online.delivery.consumer import ConsumerLoop

    from .kafka_helpers import committed, end_offsets, topics

    names = topics("conv")
    turns_topic = names["traces_topic"] + "-turns"
    await broker.create_topics({turns_topic: 3})
    ws = WindowServer()
    with ws.srv:
        s = Settings(
            **llm_settings(ws.srv),
            kafka={
                "bootstrap_servers": broker.bootstrap,
                "turns_topic": turns_topic,
                "group_id": names["group_id"],
                "fetch_max_wait_ms": 20,
                "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 500,
            },
            online={"conversation_reorder_s": 0.4, "commit_interval_s": 0.1},
            emit={"span_exporter": "memory", "dedupe_journal": False},
        )
        rt = Runtime.create(s, use_cache=False)
        metrics = EvaluatorMetrics()
        spans = EvaluationSpanWriter.in_memory()
        emitter = Emitter(metrics, spans, s)
        stage = ConversationStage(s, rt, emitter, metrics=metrics)
        loop = ConsumerLoop(
            s.kafka,
            [turns_topic],
            f"{names['group_id']}-conversations",
            stage,
            commit_interval_s=0.1,
        )
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await loop.start()
        await producer.start()
        runner = asyncio.ensure_future(loop.run())
        try:
            a = [turn("alpha", i, off_topic=(i == 1)) for i in range(4)]
            b = [turn("beta", i, off_topic=(i == 2)) for i in range(3)]

            async def send(*ts: TurnRecord) -> None:
                for t in ts:
                    await producer.send_and_wait(
                        turns_topic, t.to_bytes(), key=t.conversation_id.encode()
                    )

            # turns of a conversation come from different evaluator consumers, out of order
            await send(a[1], b[0], a[0])
            assert await wait_for(lambda: stage.stats.emitted == 3, 20), stage.stats
            await send(b[2], b[1], a[2])
            assert await wait_for(lambda: stage.stats.emitted == 6, 20), stage.stats
            await send(a[3], a[1])  # a[1] again: a redelivery
            assert await wait_for(lambda: stage.stats.emitted == 7, 20), stage.stats
            assert await wait_for(lambda: stage.stats.skipped.get(DUPLICATE) == 1, 5)
            # one judge call per new turn, each with only the new window (W=2)
            assert ws.srv.stats.chat_requests == 7 == stage.stats.judge_calls
            by_conv: dict[str, list[tuple[int, int, list[str]]]] = {"alpha": [], "beta": []}
            for call in ws.windows:
                assert len(call) == 1
                by_conv[call[0][2][0].split()[0]].append(call[0])
            assert by_conv["alpha"] == [
                (1, 1, ["alpha question 1?"]),
                (1, 2, ["alpha question 1?", "alpha question 2?"]),
                (2, 3, ["alpha question 2?", "alpha question 3?"]),
                (3, 4, ["alpha question 3?", "alpha question 4?"]),
            ]
            assert [w[:2] for w in by_conv["beta"]] == [(1, 1), (1, 2), (2, 3)]
            # running scores on evaluation spans, each a child of its turn's span
            expect = {t.trace_id: v for t, v in zip(a, [1.0, 0.5, 2 / 3, 0.75], strict=True)}
            expect |= {t.trace_id: v for t, v in zip(b, [1.0, 1.0, 2 / 3], strict=True)}
            turn_span = {t.trace_id: int(t.span_id, 16) for t in a + b}
            got = {}
            for sp in spans.memory.get_finished_spans():
                tid = f"{sp.context.trace_id:032x}"
                assert sp.parent is not None and sp.parent.span_id == turn_span[tid]
                attrs = dict(sp.attributes or {})
                assert attrs[C.GEN_AI_CONVERSATION_ID] in ("alpha", "beta")
                got[tid] = attrs[C.NG_EVALUATION_SCORE_PREFIX + "conversation_relevance"]
            assert got == pytest.approx(expect)
            # ... and in Prometheus (one observation per turn, none for the redelivery)
            labels = {"service": "chat-svc", "span_name": "answer", "model": "gpt-4o"}
            n = metrics.registry.get_sample_value(
                "nexagauge_score_count", {"metric": "conversation_relevance", **labels}
            )
            total = metrics.registry.get_sample_value(
                "nexagauge_score_sum", {"metric": "conversation_relevance", **labels}
            )
            assert n == 7 and total == pytest.approx(sum(expect.values()))

            async def all_committed() -> bool:
                ends = await end_offsets(broker.bootstrap, turns_topic, 3)
                done = await committed(
                    broker.bootstrap, f"{names['group_id']}-conversations", turns_topic, 3
                )
                return done == ends

            deadline = time.monotonic() + 10
            while not await all_committed():
                assert time.monotonic() < deadline, "turn offsets never fully committed"
                await asyncio.sleep(0.2)
        finally:
            await loop.stop(5.0)
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await producer.stop()
            await rt.aclose()
            spans.shutdown()


class Captured:
    """Emitter of the end-to-end test: keeps every emission (trace evaluations and turns)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, Any]] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        self.items.append((target, case_result))

    def conversation(self) -> dict[str, list[tuple[str, float]]]:
        out: dict[str, list[tuple[str, float]]] = {}
        for t, r in self.items:
            if t.sampling_rule == "conversation":
                m = r.outcomes["conversation_relevance"].output.metrics[0]
                out.setdefault(t.conversation_id, []).append((t.trace_id, m.score))
        return out


@pytest.mark.integration
async def test_online_service_spans_to_incremental_conversation_scores(broker: Any) -> None:
    """OTLP spans of two conversations, unkeyed on random partitions, through re-key, the
    evaluator (which publishes the turns) and the conversation stage of one OnlineService."""
    from nexagauge.online.service import OnlineService

    from .kafka_helpers import make_settings, produce, topics

    names = topics("e2econv")
    await broker.create_topics({names["traces_topic"]: 3, names["logs_topic"]: 1})
    ws = WindowServer()
    with ws.srv:
        base = make_settings(
            broker.bootstrap,
            {**names, "turns_topic": names["traces_topic"] + "-turns"},
            nodes=["conversation_relevance"],
            conversation_reorder_s=1.0,
        )
        s = base.model_copy(update={"judge": Settings(**llm_settings(ws.srv)).judge})
        em = Captured()
        svc = OnlineService(
            s, runtime=Runtime.create(s, use_cache=False), emitter=em, serve_http=False
        )
        await svc.start()
        stop = asyncio.Event()
        runner = asyncio.ensure_future(svc.run_until(stop))
        try:
            convs = {"red": 1, "blue": 2}  # index of the off-topic reply
            tids: dict[str, list[str]] = {}
            msgs = []
            for c, bad in convs.items():
                for i in range(3):
                    t = rand_tid()
                    tids.setdefault(c, []).append(t.hex())
                    reply = "The capital of France is Paris." if i == bad else f"{c} answer {i}."
                    spans = sdk_turn(
                        t, f"{c} question {i}?", reply, conversation=c, end=10_000 * (i + 1)
                    )
                    msgs.append(traces_request(spans))
            await produce(broker.bootstrap, names["traces_topic"], msgs[::-1], 3, seed=7)
            assert await wait_for(lambda: sum(map(len, em.conversation().values())) == 6, 40), (
                em.conversation(),
                svc.conversation_stage and svc.conversation_stage.stats,
            )
            got = em.conversation()
            # judged in turn order whatever the arrival order, one call per turn
            assert [tid for tid, _ in got["red"]] == tids["red"]
            assert [tid for tid, _ in got["blue"]] == tids["blue"]
            assert [x for _, x in got["red"]] == pytest.approx([1.0, 0.5, 2 / 3])
            assert [x for _, x in got["blue"]] == pytest.approx([1.0, 1.0, 2 / 3])
            assert ws.srv.stats.chat_requests == 6
        finally:
            stop.set()
            await runner
