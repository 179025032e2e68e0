"""The LLM judge against a loopback OpenAI-compatible server: real `openai` client, real HTTP."""

from __future__ import annotations

import json
import time

import pytest
from support.openai_server import Reply, Request

from nexagauge.schema.case import GroundingConfig, RelevanceConfig
from nexagauge.schema.results import Chunk, Claim, Item

pytestmark = pytest.mark.integration


def claims(*texts: str) -> list[Claim]:
    return [
        Claim(item=Item(id=f"{i:016x}", text=t, tokens=3.0), source_chunk_index=0)
        for i, t in enumerate(texts)
    ]


C3 = claims("The tower is in Paris.", "It opened in 1889.", "Cats purr.")


async def test_binary_happy_path_and_request_shape(server, make_judge):
    server.enqueue(Reply(content='{"verdicts":["yes","no","idk"]}'))
    j = await make_judge().judge_claims(
        "relevance", C3, "Where is the tower?", RelevanceConfig(), node="relevance"
    )
    assert j.ok and [v.label for v in j.verdicts] == ["yes", "no", "idk"]
    assert j.cost.input_tokens > 0 and j.cost.output_tokens > 0 and j.cost.cost > 0
    body = server.requests[0].body
    assert body["temperature"] == 0 and body["seed"] == 7 and body["model"] == "gpt-4o-mini"
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["schema"]["properties"]["verdicts"]["maxItems"] == 3
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


async def test_scale_with_reasoning(server, make_judge):
    server.enqueue(Reply(content='{"verdicts":[5,2,0],"reasoning":"Mostly on topic."}'))
    knobs = GroundingConfig(scoring_mode="scale_1_5", include_reasoning=True)
    j = await make_judge().judge_claims("grounding", C3, "ctx", knobs, node="grounding")
    assert [(v.raw, v.label) for v in j.verdicts] == [
        (5, "supported"),
        (2, "not_supported"),
        (1, "contradicted"),
    ]
    assert j.reasoning == "Mostly on topic."


async def test_malformed_json_then_recovery(server, make_judge):
    server.enqueue(
        Reply(content='{"verdicts": ["yes", "no"'), Reply(content='{"verdicts":["yes","no","no"]}')
    )
    judge = make_judge()
    j = await judge.judge_claims("relevance", C3, "q", RelevanceConfig(), node="relevance")
    assert j.ok and j.info.calls == 2
    reask = server.requests[1].messages
    assert reask[-2]["role"] == "assistant" and "invalid" in reask[-1]["content"]
    assert j.cost.input_tokens == sum(
        server.prompt_tokens(r) for r in server.requests
    )  # both calls are paid for


async def test_wrong_verdict_count_is_an_error(server, make_judge):
    server.enqueue(
        Reply(content='{"verdicts":["yes","no"]}'), Reply(content='{"verdicts":["yes"]}')
    )
    j = await make_judge().judge_claims("relevance", C3, "q", RelevanceConfig(), node="relevance")
    assert not j.ok and j.verdicts == []
    assert "verdicts for 3 claims" in (j.error or "")
    assert j.cost.input_tokens > 0  # the failed calls still cost


async def test_429_with_retry_after_then_success(server, make_judge):
    server.enqueue(Reply(status=429, headers={"Retry-After": "0.3"}))
    judge = make_judge()
    t = time.perf_counter()
    j = await judge.judge_claims("relevance", C3[:1], "q", RelevanceConfig(), node="relevance")
    assert j.ok and time.perf_counter() - t >= 0.3  # honoured Retry-After (backoff max is 0.05)
    assert judge.stats.retries == 1 and len(server.requests) == 2


async def test_timeout_retries_then_gives_up(server, make_judge):
    judge = make_judge(timeout_s=0.2, max_retries=1)
    server.enqueue(Reply(delay=0.6), Reply(content='{"verdicts":["yes"]}'))
    ok = await judge.judge_claims("relevance", C3[:1], "q", RelevanceConfig(), node="relevance")
    assert ok.ok and judge.stats.retries == 1
    server.enqueue(Reply(delay=0.6), Reply(delay=0.6))
    bad = await judge.judge_claims("relevance", C3[1:2], "q", RelevanceConfig(), node="relevance")
    assert not bad.ok and "timeout" in (bad.error or "")


async def test_json_schema_rejected_falls_back_to_json_mode_and_remembers(server, make_judge):
    def no_schema(req: Request):
        if (req.response_format or {}).get("type") == "json_schema":
            return Reply(status=400, error_message="response_format json_schema is not supported")
        return None

    server.handler = no_schema
    judge = make_judge()
    j1 = await judge.judge_claims("relevance", C3, "tower", RelevanceConfig(), node="relevance")
    j2 = await judge.judge_claims("grounding", C3, "tower", GroundingConfig(), node="grounding")
    assert j1.ok and j2.ok and len(j2.verdicts) == 3
    kinds = [r.response_format["type"] for r in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert "JSON schema:" in server.requests[1].messages[0]["content"]


async def test_non_retryable_4xx_fails_fast(server, make_judge):
    server.enqueue(Reply(status=401, error_message="bad key"))
    judge = make_judge()
    j = await judge.judge_claims("relevance", C3, "q", RelevanceConfig(), node="relevance")
    assert not j.ok and "HTTP 401" in (j.error or "") and len(server.requests) == 1


async def test_cache_hit_costs_nothing(server, make_judge):
    judge = make_judge(cache=True)
    first = await judge.judge_claims("relevance", C3, "tower", RelevanceConfig(), node="relevance")
    again = await make_judge(cache=True).judge_claims(
        "relevance", C3, "tower", RelevanceConfig(), node="relevance"
    )
    assert first.ok and first.cost.cost > 0 and not first.info.cached
    assert again.verdicts == first.verdicts and again.info.cached and again.info.calls == 0
    assert again.cost.cost == 0 and again.cost.input_tokens == 0 and len(server.requests) == 1
    # a different knob is a different prompt -> a new call
    await judge.judge_claims(
        "relevance", C3, "tower", RelevanceConfig(relevancy_mode="strict"), node="relevance"
    )
    assert len(server.requests) == 2


async def test_extract_claims_from_every_chunk_in_one_call(server, make_judge):
    chunks = [
        Chunk(
            item=Item(id="a" * 16, text="Paris is in France. It is big.", tokens=8),
            index=0,
            char_start=0,
            char_end=30,
        ),
        Chunk(
            item=Item(id="b" * 16, text="Rome is in Italy.", tokens=5),
            index=3,
            char_start=31,
            char_end=48,
        ),
    ]
    ex = await make_judge().extract_claims(chunks)
    assert ex.ok and len(server.requests) == 1
    assert [(c.text, c.source_chunk_index) for c in ex.claims] == [
        ("Paris is in France.", 0),
        ("It is big.", 0),
        ("Rome is in Italy.", 3),
    ]
    assert all(0 <= c.confidence <= 1 for c in ex.claims)


async def test_per_node_override_model_and_endpoint(server, make_judge):
    judge = make_judge(nodes={"grounding": {"model": "gpt-4o", "seed": 1}})
    await judge.judge_claims("grounding", C3[:1], "ctx", GroundingConfig(), node="grounding")
    await judge.judge_claims("relevance", C3[:1], "q", RelevanceConfig(), node="relevance")
    assert [(r.body["model"], r.body["seed"]) for r in server.requests] == [
        ("gpt-4o", 1),
        ("gpt-4o-mini", 7),
    ]


async def test_structured_generic_call(server, make_judge):
    from pydantic import BaseModel

    class Score(BaseModel):
        score: int
        reasons: list[str]

    server.enqueue(Reply(content=json.dumps({"score": 4, "reasons": ["ok"]})))
    reply = await make_judge().structured("reask", {"error": "demo"}, Score, node="geval")
    assert reply.ok and reply.value == Score(score=4, reasons=["ok"])


async def test_global_concurrency_limit(server, make_judge):
    import asyncio

    server.handler = lambda req: Reply(content='{"verdicts":["yes"]}', delay=0.15)
    judge = make_judge(max_concurrency=2)
    results = await asyncio.gather(
        *(
            judge.judge_claims(
                "relevance", claims(f"claim {i}"), "q", RelevanceConfig(), node="relevance"
            )
            for i in range(6)
        )
    )
    assert all(r.ok for r in results)
    assert server.stats.max_in_flight == 2 and server.stats.chat_requests == 6


async def test_env_configuration_reaches_the_endpoint(server, monkeypatch, tmp_path):
    from nexagauge.graph.runtime import Runtime
    from nexagauge.settings import Settings

    monkeypatch.setenv("NEXAGAUGE_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("NEXAGAUGE_JUDGE_API_KEY", "env-key")
    monkeypatch.setenv("NEXAGAUGE_JUDGE_MODEL", "gpt-4.1-mini")
    rt = Runtime.create(Settings(cache={"dir": str(tmp_path / "c")}))
    try:
        assert rt.judge_kind == "llm"
        j = await rt.judge.judge_claims(
            "relevance", C3[:1], "q", RelevanceConfig(), node="relevance"
        )
        assert j.ok
    finally:
        await rt.aclose()
    req = server.requests[0]
    assert req.body["model"] == "gpt-4.1-mini" and req.headers["authorization"] == "Bearer env-key"


def test_openai_env_fallback(monkeypatch):
    from nexagauge.settings import Settings

    for k in ("NEXAGAUGE_JUDGE_BASE_URL", "NEXAGAUGE_JUDGE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    s = Settings()
    assert s.judge.base_url == "http://127.0.0.1:1/v1"
    assert s.judge.api_key is not None and s.judge.api_key.get_secret_value() == "sk-fallback"


async def test_structured_top_logprobs_and_json_mode(server, make_judge):
    from pydantic import BaseModel

    from nexagauge.judge.base import Judge

    class Score(BaseModel):
        score: int

    judge = make_judge(structured_output="json_object")
    assert isinstance(judge, Judge)
    server.auto_logprobs = True
    server.enqueue(Reply(content='{"score": 4}'))
    reply = await judge.structured("reask", {"error": "x"}, Score, node="geval", top_logprobs=3)
    assert reply.ok and reply.value == Score(score=4)
    body = server.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert body["response_format"] == {"type": "json_object"}
    assert "JSON schema:" in body["messages"][0]["content"]
    assert reply.logprobs is not None
    assert "".join(t["token"] for t in reply.logprobs) == '{"score": 4}'
    assert len(reply.logprobs[0]["top_logprobs"]) == 3
