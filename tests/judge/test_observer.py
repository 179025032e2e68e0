"""The judge client reports every HTTP attempt (ok/error, latency) to its observer: the online
evaluator's judge-call metrics and the judge-error-rate alert depend on it."""

from __future__ import annotations

from nexagauge.judge.llm.client import LLMJudge
from nexagauge.nodes.geval import score_model
from nexagauge.settings import Settings
from tests.support.openai_server import OpenAIServer, Reply


async def test_observer_sees_every_attempt_with_outcome_and_latency():
    seen: list[tuple[str, str, str, float]] = []
    with OpenAIServer() as srv:
        srv.enqueue(Reply(status=503), Reply(content='{"score": 1}'))
        judge = LLMJudge(
            Settings(judge={"base_url": srv.base_url, "api_key": "k", "backoff_base_s": 0.01}).judge
        )
        judge.observer = lambda *a: seen.append(a)
        reply = await judge.structured(
            "geval",
            {
                "criteria": "c",
                "steps": "1. s",
                "fields": ["output:\nx"],
                "format": "",
                "reasoning": "",
            },
            score_model(False, False),
            node="geval",
            untrusted=("fields",),
        )
        await judge.aclose()
    assert reply.ok
    assert [(n, m, o) for n, m, o, _ in seen] == [
        ("geval", "gpt-4o-mini", "error"),
        ("geval", "gpt-4o-mini", "ok"),
    ]
    assert all(lat >= 0 for *_, lat in seen)


async def test_a_failing_observer_never_fails_the_call():
    with OpenAIServer() as srv:
        srv.enqueue(Reply(content='{"score": 0}'))
        judge = LLMJudge(Settings(judge={"base_url": srv.base_url, "api_key": "k"}).judge)

        def boom(*_):
            raise RuntimeError("metrics down")

        judge.observer = boom
        reply = await judge.structured(
            "geval",
            {
                "criteria": "c",
                "steps": "1. s",
                "fields": ["output:\nx"],
                "format": "",
                "reasoning": "",
            },
            score_model(False, False),
            node="geval",
            untrusted=("fields",),
        )
        await judge.aclose()
    assert reply.ok and reply.value.score == 0
