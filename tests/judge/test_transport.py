"""The judge's HTTP layer over real loopback HTTP: both openai transports, event-loop affinity,
raw-answer parsing (malformed bodies, missing usage, refusals)."""

from __future__ import annotations

import asyncio

import pytest
from support.openai_server import OpenAIServer, Reply

from nexagauge.judge.llm.client import LLMJudge
from nexagauge.judge.llm.http import ClientPool
from nexagauge.schema.case import RelevanceConfig
from nexagauge.schema.results import Claim, Item
from nexagauge.settings import JudgeSettings

pytestmark = pytest.mark.integration

CLAIMS = [
    Claim(item=Item(id=f"{i:016x}", text=t, tokens=3.0), source_chunk_index=0)
    for i, t in enumerate(["The tower is in Paris.", "Cats purr."])
]


def _judge(server: OpenAIServer, **kw: object) -> LLMJudge:
    fast = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_retries": 3, "timeout_s": 5.0}
    return LLMJudge(JudgeSettings(base_url=server.base_url, api_key="k", **{**fast, **kw}))


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_both_transports_send_the_same_request_and_read_the_same_answer(server, transport):
    server.enqueue(
        Reply(content='{"verdicts":["yes","no"]}', prompt_tokens=120, completion_tokens=9)
    )
    judge = _judge(server, http_client=transport)
    try:
        j = await judge.judge_claims(
            "relevance", CLAIMS, "Where?", RelevanceConfig(), node="relevance"
        )
    finally:
        await judge.aclose()
    assert j.ok and [v.label for v in j.verdicts] == ["yes", "no"]
    assert (j.cost.input_tokens, j.cost.output_tokens) == (120, 9)
    req = server.requests[0]
    assert req.path.endswith("/chat/completions")
    assert req.headers["authorization"] == "Bearer k"
    assert req.headers["content-type"].startswith("application/json")
    assert req.body["response_format"]["json_schema"]["strict"] is True
    assert req.body["messages"][0]["role"] == "system"


def test_one_judge_serves_successive_event_loops(server):
    """The CLI and tests run a loop per command: a client made on a closed loop is not reused."""
    judge = _judge(server)

    async def one() -> bool:
        j = await judge.judge_claims("relevance", CLAIMS, "q", RelevanceConfig(), node="relevance")
        return j.ok

    assert asyncio.run(one()) and asyncio.run(one())
    assert server.stats.chat_requests == 2
    asyncio.run(judge.aclose())


async def test_pool_keeps_one_client_per_loop_and_key():
    pool = ClientPool("aiohttp")
    kw = {"base_url": "http://127.0.0.1:9/v1", "api_key": "k", "timeout_s": 1.0, "max_retries": 0}
    a, b, c = pool.get("a", **kw), pool.get("a", **kw), pool.get("b", **kw)
    assert a is b and a is not c
    await pool.aclose()
    assert pool.get("a", **kw) is not a  # closed clients are forgotten
    await pool.aclose()


async def test_malformed_2xx_body_is_retried_then_reported(server):
    server.enqueue(Reply(body="<html>gateway hiccup</html>"), Reply(body=b""), Reply(body="[1, 2]"))
    judge = _judge(server, max_retries=2)
    try:
        j = await judge.judge_claims("relevance", CLAIMS, "q", RelevanceConfig(), node="relevance")
    finally:
        await judge.aclose()
    assert not j.ok and j.info.calls == 3
    assert "malformed response from endpoint: [1, 2]" in (j.error or "")
    assert "gave up after 3 attempts" in (j.error or "")


async def test_malformed_body_then_a_good_answer_recovers(server):
    server.enqueue(Reply(body="not json"), Reply(content='{"verdicts":["yes","yes"]}'))
    judge = _judge(server)
    try:
        j = await judge.judge_claims("relevance", CLAIMS, "q", RelevanceConfig(), node="relevance")
    finally:
        await judge.aclose()
    assert j.ok and j.info.calls == 2 and judge.stats.retries == 1


async def test_answer_without_usage_is_counted_offline(server):
    server.enqueue(
        Reply(
            body={
                "id": "x",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": '{"verdicts":["no","no"]}'},
                    }
                ],
            }
        )
    )
    judge = _judge(server)
    try:
        j = await judge.judge_claims("relevance", CLAIMS, "q", RelevanceConfig(), node="relevance")
    finally:
        await judge.aclose()
    assert j.ok and j.cost.input_tokens > 50 and j.cost.output_tokens > 3 and j.cost.cost > 0


async def test_refusal_is_an_invalid_answer_not_a_crash(server):
    refusal = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None, "refusal": "I can't."}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }
    server.enqueue(Reply(body=refusal), Reply(body=refusal))
    judge = _judge(server)
    try:
        j = await judge.judge_claims("relevance", CLAIMS, "q", RelevanceConfig(), node="relevance")
    finally:
        await judge.aclose()
    assert not j.ok and "empty answer" in (j.error or "") and j.info.calls == 2


def test_strict_schema_is_built_once_per_model():
    from nexagauge.judge.jsonschema import strict_schema
    from nexagauge.judge.tasks import verdicts_model

    m = verdicts_model("grounding", "binary_yes_no", False, 4)
    assert strict_schema(m) is strict_schema(m)
    assert strict_schema(m)["properties"]["verdicts"]["minItems"] == 4
