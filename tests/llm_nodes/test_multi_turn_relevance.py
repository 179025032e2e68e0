"""Claim-level relevance over conversations (multi_turn_strategy), over real HTTP."""

from __future__ import annotations

import pytest

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.schema.case import parse_record
from nexagauge.settings import Settings
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.integration

CONVERSATION = [
    {"role": "user", "content": "What is Python?"},
    {"role": "assistant", "content": "Python is a programming language known for readability."},
    {"role": "user", "content": "What are its main uses?"},
    {
        "role": "assistant",
        "content": "Python is used for web development and data science. Bananas are yellow fruit.",
    },
    {"role": "user", "content": "Is it fast?"},
    {"role": "assistant", "content": "Python is slower than C for raw loops."},
]


async def _run(strategy: str | None):
    rec = {"messages": CONVERSATION}
    if strategy:
        rec["relevance"] = {"multi_turn_strategy": strategy}
    with OpenAIServer() as srv:
        rt = Runtime.create(
            Settings(judge={"base_url": srv.base_url, "api_key": "k"}, cache={"enabled": False}),
            use_cache=False,
        )
        res = await Executor(rt, plan("relevance")).run_case(parse_record(rec, 0))
        await rt.aclose()
        return res, srv.stats.chat_requests


async def test_last_turn_is_the_default():
    res, calls = await _run(None)
    m = res.outcomes["relevance"].output.metrics[0]
    assert calls == 2  # claims + one relevance call
    assert all(r["item"]["text"] for r in m.result)
    assert "turn_index" not in m.result[0]


async def test_all_turns_micro_averages_every_turn():
    res, calls = await _run("all_turns")
    m = res.outcomes["relevance"].output.metrics[0]
    # shared claims of the last turn + one extraction for earlier turns + one judge call per turn
    assert calls == 2 + 3
    assert m.meta["multi_turn_strategy"] == "all_turns" and m.meta["evaluated_turns"] == 3
    turns = {r["turn_index"] for r in m.result}
    assert turns == {0, 1, 2}
    accepted = [r["verdict"] == "ACCEPTED" for r in m.result]
    assert m.score == pytest.approx(sum(accepted) / len(accepted))  # binary: micro-average
    assert len(m.result) >= 4  # every turn's claims, not only the last turn's
