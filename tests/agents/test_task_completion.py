"""``task_completion`` (issue 30, item 4): off by default, one judge call per agent run with the
tool calls and their results in the prompt, referenceless; the local judge skips it with a
clear reason instead of guessing; no agent run, no task."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.openai_server import OpenAIServer, Reply, Request

from nexagauge.graph.executor import CaseResult, evaluate
from nexagauge.graph.runtime import Runtime
from nexagauge.graph.skips import SkipReason
from nexagauge.judge.base import NEEDS_LLM
from nexagauge.settings import Settings

ORDER = {"order_id": "A-1042", "status": "shipped"}


def record(
    answer: str, *, enabled: bool | None = True, fail: bool = False, **kw: Any
) -> dict[str, Any]:
    call: dict[str, Any] = {
        "name": "lookup_order",
        "id": "call_1",
        "arguments": {"order_id": "A-1042"},
    }
    call.update({"error": "TimeoutError: order service"} if fail else {"result": ORDER})
    rec: dict[str, Any] = {
        "input": "Where is order A-1042?",
        "output": answer,
        "tool_calls": [call],
        **kw,
    }
    if enabled is not None:
        rec["task_completion"] = {"enabled": enabled, "include_reasoning": True}
    return rec


def completion_judge(req: Request) -> Reply | None:
    """Completed when the answer repeats the status the tool returned (and no tool failed)."""
    system = str(req.messages[0].get("content")) if req.messages else ""
    if "accomplished the user's request" not in system:
        return None
    user = str(req.messages[-1].get("content"))
    done = (
        "status: shipped" in user and "Order A-1042 has shipped" in user.split("Final answer:")[-1]
    )
    ans = {"verdict": "yes" if done else "no"}
    if "reason" in ((req.schema or {}).get("properties") or {}):
        ans["reason"] = "checked"
    return Reply(content=json.dumps(ans))


@pytest.fixture(scope="module")
def judge() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        srv.handler = completion_judge
        yield srv


async def run(records: list[dict[str, Any]], judge: dict[str, Any]) -> list[CaseResult]:
    s = Settings(judge=judge, cache={"enabled": False})
    rt = Runtime.create(s, use_cache=False)
    try:
        return list(await evaluate(records, "eval", runtime=rt, only=["task_completion"]))
    finally:
        await rt.aclose()


def llm(srv: OpenAIServer) -> dict[str, Any]:
    return {
        "mode": "llm",
        "base_url": srv.base_url,
        "api_key": "sk-test-not-real-0001",
        "model": "gpt-4o-mini",
        "max_retries": 0,
    }


async def test_one_call_per_run_with_the_tool_results(judge: OpenAIServer) -> None:
    before = judge.stats.chat_requests
    done, wrong, failed = await run(
        [
            record("Order A-1042 has shipped."),
            record("Order A-1042 was cancelled.", id="b"),
            record("Order A-1042 has shipped.", id="c", fail=True),
        ],
        llm(judge),
    )
    assert judge.stats.chat_requests - before == 3
    scores = [r.outcomes["task_completion"].output.metrics[0].score for r in (done, wrong, failed)]
    assert scores == [1.0, 0.0, 0.0]
    prompts = [r.text for r in judge.chat_requests()[before:]]
    assert all("lookup_order (call call_1)" in p for p in prompts)
    assert any("Failure of tool lookup_order" in p and "TimeoutError" in p for p in prompts)
    [m] = done.outcomes["task_completion"].output.metrics
    assert m.result[0]["verdict"] == "ACCEPTED" and m.result[-1] == {"reasoning": "checked"}


async def test_off_by_default_and_only_for_agent_runs(judge: OpenAIServer) -> None:
    before = judge.stats.chat_requests
    off, no_agent = await run(
        [
            record("Order A-1042 has shipped.", enabled=None),
            {"input": "Hi", "output": "Hello", "task_completion": {"enabled": True}},
        ],
        llm(judge),
    )
    assert off.outcomes["task_completion"].skip is SkipReason.DISABLED
    assert no_agent.outcomes["task_completion"].skip is SkipReason.NOT_ELIGIBLE
    assert judge.stats.chat_requests == before


async def test_online_nodes_naming_it_turns_it_on_unless_the_block_says_no(
    judge: OpenAIServer,
) -> None:
    s = Settings(
        judge=llm(judge),
        cache={"enabled": False},
        online={"nodes": ["grounding", "task_completion"]},
    )
    rt = Runtime.create(s, use_cache=False)
    try:
        on, off = await evaluate(
            [
                record("Order A-1042 has shipped.", enabled=None),
                record("Order A-1042 has shipped.", enabled=False, id="off"),
            ],
            "eval",
            runtime=rt,
            only=["task_completion"],
        )
    finally:
        await rt.aclose()
    assert on.outcomes["task_completion"].output.metrics[0].score == 1.0
    assert off.outcomes["task_completion"].skip is SkipReason.DISABLED


async def test_local_judge_says_it_cannot_judge_a_task() -> None:
    [res] = await run([record("Order A-1042 has shipped.")], {"mode": "local"})
    o = res.outcomes["task_completion"]
    assert o.skip is SkipReason.JUDGE_UNSUPPORTED and o.reason == NEEDS_LLM


def test_estimate_counts_one_call() -> None:
    from nexagauge.graph.node import NodeContext
    from nexagauge.nodes.task_completion import TaskCompletionNode
    from nexagauge.schema.case import parse_record

    case = parse_record(record("Order A-1042 has shipped."), 0)
    rt = Runtime.create(Settings(judge={"mode": "none"}, cache={"enabled": False}), use_cache=False)
    [est] = TaskCompletionNode().estimate(NodeContext(case=case, runtime=rt, upstream={}))
    assert est.calls == 1 and est.input_tokens > 50
