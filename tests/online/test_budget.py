"""Cost control with the real LLM judge path (``openai`` client -> loopback OpenAI-compatible
server): the USD budget stops evaluations before it is exceeded, and every refusal is counted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from nexagauge.graph.runtime import Runtime
from nexagauge.online.stage import EvaluatorStage
from nexagauge.settings import Settings

from .otlp import rand_tid, sdk_turn, traces_request
from .test_stage import TP, Clock, Emitter, record

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def judge() -> Iterator[Any]:
    from support.openai_server import OpenAIServer

    with OpenAIServer() as srv:
        yield srv


async def run(stage: EvaluatorStage, clock: Clock, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        q, a = f"Where is tower {i}?", f"Tower {i} is in Paris. It is tall."
        await stage.handle(TP, [record(i, traces_request(sdk_turn(rand_tid(), q, a, docs=[a])))])
        clock.t += 1.0
        await stage.tick()
        for _ in range(500):  # one at a time: spend is recorded before the next decision
            if stage.in_flight == 0:
                break
            await asyncio.sleep(0.01)


async def test_hourly_budget_is_never_exceeded(judge: Any) -> None:
    def make(budget: float | None) -> tuple[EvaluatorStage, Clock, Emitter]:
        s = Settings(
            online={"nodes": ["relevance", "grounding"], "trace_grace_s": 0.0},
            sampling={"default_rate": 1.0, "budget_usd_per_hour": budget},
            judge={
                "base_url": judge.base_url,
                "api_key": "sk-loopback",
                "mode": "llm",
                "model": "gpt-4o-mini",
            },
            cache={"enabled": False},
        )
        clock, em = Clock(), Emitter()
        return EvaluatorStage(s, Runtime.create(s, use_cache=False), em, clock=clock), clock, em

    probe, pclock, _ = make(None)
    await run(probe, pclock, 1)
    per_eval = probe.limiter.expected_cost
    assert per_eval > 0, "the judge path reported no cost"
    await probe.runtime.aclose()

    budget = per_eval * 3.5
    stage, clock, em = make(budget)
    await run(stage, clock, 8)
    assert 1 <= len(em.cases) <= 3
    assert stage.limiter.spent("hour") <= budget
    assert stage.stats.skipped.get("budget_hour", 0) == 8 - len(em.cases)
    assert stage.tracker.committable(("spans", 0)) == 8  # skipped traces are done, not stuck
    clock.t += 3601  # the rolling hour moves on: evaluations resume
    await run(stage, clock, 1, start=8)
    assert len(em.cases) >= 2
    await stage.runtime.aclose()
