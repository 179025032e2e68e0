"""Conversation state that survives restarts (changelog topic), the conversation stage inside the
service's budget, and one owner of ``conversation_relevance`` online.

In process with fakes for the budget; on the real Tansu broker for the changelog: a member that
stops (gracefully, or "crashes" without committing) hands its conversations to the next member,
which continues the running score with the earlier turns as context and never re-judges a turn
whose state was saved."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from nexagauge.nodes.conversation_relevance import METRIC
from nexagauge.online.conversations.stage import DUPLICATE, ConversationStage, state_key
from nexagauge.online.conversations.state import ConversationState
from nexagauge.online.conversations.turns import TurnPublisher
from nexagauge.online.ingest.sampling import Limiter
from nexagauge.online.stage import EvaluatorStage
from nexagauge.schema.results import CostEstimate
from nexagauge.settings import SamplingSettings, Settings

from .test_conversations import (
    Clock,
    FakeJudge,
    FakeRuntime,
    Recorder,
    rec,
    settle,
    stage_for,
    turn,
)


class CostlyJudge(FakeJudge):
    """FakeJudge whose every call costs ``usd`` (and 100 + 10 tokens)."""

    def __init__(self, usd: float) -> None:
        super().__init__()
        self.usd = usd

    async def structured(self, *a: Any, **kw: Any) -> Any:
        out = await super().structured(*a, **kw)
        cost = CostEstimate(cost=self.usd, input_tokens=100, output_tokens=10)
        return SimpleNamespace(ok=out.ok, value=out.value, cost=cost, error=None)


# --------------------------------------------------------------------------------------------
# state in its changelog form
# --------------------------------------------------------------------------------------------
def test_state_round_trips_and_continues_like_the_original() -> None:
    a, b = ConversationState(size=2), ConversationState(size=2)
    turns = [turn("c", i) for i in range(5)]
    for t in turns[:3]:
        a.add(t)
    a.record([1.0, 0.0, 1.0])
    b = ConversationState.from_dict(a.to_dict())
    assert b.to_dict() == a.to_dict()
    assert b.add(turns[1]) == DUPLICATE  # seen ids survive
    x, y = a.add(turns[3]), b.add(turns[3])
    assert not isinstance(x, str) and not isinstance(y, str)
    assert (x.index, x.windows) == (y.index, y.windows)
    inputs = [[t.tail[i].input for i in range(t.tail.base, len(t.tail))] for t in (x, y)]
    assert inputs[0] == inputs[1] == ["c question 2?", "c question 3?", "c question 4?"]


@pytest.mark.parametrize(
    "bad",
    [None, {}, {"v": 99}, {"v": 1, "size": 2}, {"v": 1, "size": 2, "memory": 8, "turns": [{}]}],
)
def test_invalid_state_is_a_value_error_naming_the_problem(bad: Any) -> None:
    with pytest.raises(ValueError, match="conversation state"):
        ConversationState.from_dict(bad)


# --------------------------------------------------------------------------------------------
# budget: conversation judge calls are inside the service's limiter
# --------------------------------------------------------------------------------------------
async def test_conversation_judge_calls_spend_and_respect_the_services_budget() -> None:
    judge = CostlyJudge(usd=0.01)
    limiter = Limiter(SamplingSettings(budget_usd_per_hour=0.025))
    em, clock = Recorder(), Clock()
    stage = stage_for(FakeRuntime(judge), em, clock)
    stage.limiter = limiter
    for i in range(4):
        await stage.handle(
            SimpleNamespace(topic="turns", partition=0), [rec(i, turn("c", i).to_bytes())]
        )
    clock.t += 5
    await settle(stage)
    # two windows judged (0.02 USD), then the hour budget (0.025) has no room for a third call
    assert len(judge.calls) == 2 == len(em.emitted)
    assert stage.stats.skipped == {"budget_hour": 2}
    assert limiter.spent("hour") == pytest.approx(0.02)
    spent = sum(
        r.outcomes[METRIC].output.cost.cost for _, r in em.emitted
    )  # what the spans/metrics report
    assert spent == pytest.approx(limiter.spent("hour"))
    assert limiter.in_flight == 0
    # the unjudged turns stay as context: the next window after the budget is back includes them
    assert stage.states[("c", turn("c", 0).fingerprint)].state.n_turns == 4


# --------------------------------------------------------------------------------------------
# one owner of conversation_relevance online
# --------------------------------------------------------------------------------------------
def test_trace_evaluation_never_judges_conversation_relevance_when_the_stage_owns_it() -> None:
    s = Settings(judge={"mode": "none"}, cache={"enabled": False})
    from nexagauge.graph.runtime import Runtime

    stage = EvaluatorStage(s, runtime=Runtime.create(s, use_cache=False), emitter=Recorder())
    with_metric = stage._executor(None)
    assert with_metric is not None and METRIC in with_metric[0].plan.metric_nodes
    stage.turns = TurnPublisher(None, "turns", "m")
    planned = stage._executor(None)
    assert planned is not None
    assert METRIC not in planned[0].plan.metric_nodes
    assert "relevance" in planned[0].plan.metric_nodes
    assert stage._executor((METRIC,)) is None  # only the stage's metric: nothing per trace


# --------------------------------------------------------------------------------------------
# the changelog on the real broker
# --------------------------------------------------------------------------------------------
async def wait_for(pred: Any, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())


class Member:
    """One conversation-stage member: consumer loop + stage + changelog, like serve wires it."""

    def __init__(self, s: Settings, producer: Any) -> None:
        from nexagauge.online.delivery.changelog import Changelog
        from nexagauge.online.delivery.consumer import ConsumerLoop

        self.judge = FakeJudge()
        self.em = Recorder()
        self.changelog = Changelog(s.kafka, producer, s.kafka.conversation_changelog_topic)
        self.stage = ConversationStage(
            s, FakeRuntime(self.judge), self.em, changelog=self.changelog
        )
        self.loop = ConsumerLoop(
            s.kafka,
            [s.kafka.turns_topic],
            f"{s.kafka.group_id}-conversations",
            self.stage,
            commit_interval_s=0.1,
        )
        self.runner: asyncio.Future[None] | None = None

    async def start(self) -> None:
        await self.loop.start()
        self.runner = asyncio.ensure_future(self.loop.run())

    async def stop(self, *, crash: bool = False) -> None:
        if crash:  # like kill -9: nothing more is committed, the group just loses the member

            async def no_commit(only: Any = None) -> None:
                return None

            self.loop.commit = no_commit  # type: ignore[method-assign]
            assert self.runner is not None
            self.runner.cancel()
            await asyncio.gather(self.runner, return_exceptions=True)
            assert self.loop.consumer is not None
            await self.loop.consumer.stop()
            return
        await self.loop.stop(5.0)
        assert self.runner is not None
        await asyncio.gather(self.runner, return_exceptions=True)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.xdist_group("online-delivery")  # members stopped mid-stream (tests/conftest.py)
@pytest.mark.parametrize("crash", [False, True], ids=["graceful", "crash-before-commit"])
async def test_running_score_continues_on_the_next_member(broker: Any, crash: bool) -> None:
    from .kafka_helpers import topics

    names = topics("convlog")
    turns_topic = names["traces_topic"] + "-turns"
    await broker.create_topics({turns_topic: 2})
    s = Settings(
        kafka={
            "bootstrap_servers": broker.bootstrap,
            "turns_topic": turns_topic,
            "conversation_changelog_topic": turns_topic + "-changelog",
            "group_id": names["group_id"],
            "fetch_max_wait_ms": 20,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
        },
        online={"conversation_reorder_s": 0.2, "commit_interval_s": 0.1},
    )
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    first = second = None
    try:
        a = [turn("alpha", i, off_topic=(i == 1)) for i in range(4)]

        async def send(*ts: Any) -> None:
            for t in ts:
                await producer.send_and_wait(
                    turns_topic, t.to_bytes(), key=t.conversation_id.encode()
                )

        first = Member(s, producer)
        await first.changelog.ensure(2)
        await first.start()
        await send(a[0], a[1])
        assert await wait_for(lambda: len(first.em.emitted) == 2, 20), first.stage.stats
        assert first.em.scores("alpha") == pytest.approx([1.0, 0.5])
        # a turn's score is emitted first, then its state written (changelog.py): the second
        # write may still be in flight when the second score is seen
        assert await wait_for(lambda: first.changelog.writes == 2, 10), first.changelog.writes
        await first.stop(crash=crash)

        second = Member(s, producer)
        await second.start()
        await send(a[2], a[3])
        assert await wait_for(lambda: len(second.em.emitted) == 2, 30), second.stage.stats
        assert second.stage.stats.restored == 1, (
            f"restored {second.changelog.restored} values, {second.changelog.bad} bad; "
            f"assignment {sorted(tp.partition for tp in second.loop.assignment)}"
        )
        # the running score continues (3 and 4 windows), not a fresh start (1.0, 1.0)
        assert second.em.scores("alpha") == pytest.approx([2 / 3, 0.75])
        # ... and the first window it judged has turn 2 (judged by the first member) as context
        assert "alpha question 2?" in second.judge.calls[0]["turns"][0]
        assert len(second.judge.calls) == 2
        if crash:  # turns 1-2 re-delivered (never committed) but their state was saved: skipped
            assert await wait_for(lambda: second.stage.stats.skipped.get(DUPLICATE) == 2, 10)
        # the fourth turn's state is written after its score is emitted (see above)
        assert await wait_for(lambda: second.changelog.writes == 2, 10), second.changelog.writes
        key = state_key("alpha", a[0].fingerprint)
        restored = await second.changelog.restore([0, 1])
        assert sum(key in v for v in restored.values()) == 1, (
            {p: sorted(v) for p, v in restored.items()},
            second.changelog.writes,
            first.changelog.writes,
        )
        state = next(v[key] for v in restored.values() if key in v)["state"]
        assert (state["n_turns"], state["windows"]) == (4, 4)
    finally:
        for m in (second, first):
            if m is not None and m.loop.consumer is not None:
                await m.stop()
        await producer.stop()


async def test_a_failing_restore_is_retried_before_consuming() -> None:
    """A broker hiccup during the restore must not start the partition's conversations from
    nothing: the assignment retries (its partitions stay paused) until the state is read."""
    from aiokafka.structs import TopicPartition

    a = [turn("alpha", i) for i in range(2)]
    state = ConversationState(size=2)
    for t in a:
        state.add(t)
    state.record([1.0, 1.0])
    cfg = a[0].config

    class FlakyChangelog:
        calls = 0

        async def restore(self, parts: list[int]) -> dict[int, dict[str, Any]]:
            self.calls += 1
            if self.calls < 3:
                raise ConnectionError("broker hiccup")
            return {
                0: {state_key("alpha", a[0].fingerprint): {"config": cfg, "state": state.to_dict()}}
            }

    log = FlakyChangelog()
    stage = stage_for(FakeRuntime(FakeJudge()), Recorder(), Clock())
    stage.changelog = log  # type: ignore[assignment]
    await stage.assigned([TopicPartition(stage.settings.kafka.turns_topic, 0)])
    assert log.calls == 3 and stage.stats.restored == 1
    restored = stage.states[("alpha", a[0].fingerprint)].state
    assert (restored.n_turns, restored.windows) == (2, 2)


@pytest.mark.integration
async def test_every_restore_reads_every_state_written_before_it(broker: Any) -> None:
    """Write, restore, repeat: each restore returns every key written so far. (A lazy
    seek_to_beginning() lost to the fresh assignment's "latest" reset in ~1 of 15 restores on
    Tansu, which then returned nothing at all.)"""
    from nexagauge.online.delivery.changelog import Changelog

    from .kafka_helpers import topics

    topic = topics("restore")["traces_topic"] + "-changelog"
    s = Settings(kafka={"bootstrap_servers": broker.bootstrap, "fetch_max_wait_ms": 20})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        log = Changelog(s.kafka, producer, topic)
        await log.ensure(2)
        short = []
        for i in range(30):
            await log.write(i % 2, f"k{i}", {"i": i})
            got = await log.restore([0, 1])
            if sum(len(v) for v in got.values()) != i + 1:
                short.append(i)
        assert short == [], f"restores that missed states: {short}"
    finally:
        await producer.stop()
