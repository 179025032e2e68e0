"""Question-generation answer relevancy (Ragas) against the loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.openai_server import OpenAIServer, Reply, Request

from nexagauge.graph.executor import Executor
from nexagauge.graph.node import NodeContext
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.judge import qg_relevance
from nexagauge.judge.base import NEEDS_LLM
from nexagauge.judge.embeddings import LocalEmbedder, OpenAIEmbedder
from nexagauge.judge.qg_relevance import qg_score
from nexagauge.schema.case import parse_record
from nexagauge.schema.results import MetricResult
from nexagauge.settings import EmbeddingSettings

INPUT = "When was the first Super Bowl played?"
OUTPUT = "The first Super Bowl was played on January 15, 1967, in Los Angeles."
QUESTIONS = [
    "When was the first Super Bowl played?",
    "Where was the first Super Bowl held?",
    "What date did the first Super Bowl take place?",
]


def _qg_handler(questions: list[str], noncommittal: bool = False) -> Callable[[Request], Any]:
    """Answer only question-generation calls; claim extraction etc. fall through to smart mode."""

    def handle(req: Request) -> Reply | None:
        if "write the questions it answers" not in req.text:
            return None
        body: dict[str, Any] = {
            "questions": [{"question": q, "noncommittal": noncommittal} for q in questions]
        }
        if '"reasoning"' in req.text:  # include_reasoning asks for it
            body["reasoning"] = "The answer states the date and place of the first Super Bowl."
        return Reply(content=json.dumps(body))

    return handle


def _record(**relevance: Any) -> dict[str, Any]:
    return {
        "case_id": "sb",
        "input": INPUT,
        "output": OUTPUT,
        "relevance": {"method": "question_generation", **relevance},
    }


async def _run(rt: Runtime, rec: dict[str, Any]) -> MetricResult:
    res = await Executor(rt, plan("relevance")).run_case(parse_record(rec))
    out = res.outcomes["relevance"]
    assert out.status == "ok", out.reason
    metrics = out.output.metrics  # type: ignore[union-attr]
    assert len(metrics) == 1
    return metrics[0]


def _llm(server: OpenAIServer) -> dict[str, Any]:
    return {"base_url": server.base_url, "api_key": "k", "max_retries": 0}


def test_score_rule() -> None:
    assert qg_score([0.5, 0.7], [False, True]) == pytest.approx(0.6)  # not ALL noncommittal
    assert qg_score([0.5, 0.7], [True, True]) == 0.0
    assert qg_score([1.0, 1.0], [False, False]) == 1.0
    assert qg_score([-0.4, 0.1], [False, False]) == 0.0  # negative mean clipped to 0
    with pytest.raises(ValueError):
        qg_score([], [])


@pytest.mark.integration
async def test_qg_relevancy_with_local_embeddings(
    make_runtime: Callable[..., Runtime], server: OpenAIServer, embedder: LocalEmbedder
) -> None:
    server.handler = _qg_handler(QUESTIONS)
    rt = make_runtime(judge=_llm(server))
    m = await _run(rt, _record(include_reasoning=False))
    v = await embedder.embed([INPUT, *QUESTIONS])
    sims = v[1:] @ v[0]
    assert m.name == "answer_relevancy" and m.category == "answer"
    assert m.score == pytest.approx(float(np.clip(sims.mean(), 0, 1)), abs=1e-5)
    assert m.score is not None and m.score > 0.8
    assert [r["question"] for r in m.result] == QUESTIONS
    assert [r["similarity"] for r in m.result] == pytest.approx(sims.tolist(), abs=1e-5)
    assert m.meta is not None
    assert (m.meta["judge"], m.meta["method"], m.meta["strictness"]) == (
        "llm",
        "question_generation",
        3,
    )
    assert m.meta["embeddings"].startswith("local:")

    qg_calls = [r for r in server.requests if "write the questions it answers" in r.text]
    assert len(qg_calls) == 1  # N questions in ONE call
    prompt = qg_calls[0].text
    assert OUTPUT in prompt and INPUT not in prompt  # the answer alone, never the input
    assert "exactly 3" in prompt


@pytest.mark.integration
async def test_qg_relevancy_with_remote_embeddings(
    make_runtime: Callable[..., Runtime], server: OpenAIServer
) -> None:
    qs = [*QUESTIONS[:2], "Who won the first Super Bowl?", "Which teams played?", "How many fans?"]
    server.handler = _qg_handler(qs)
    emb = {"provider": "openai", "base_url": server.base_url, "api_key": "k", "model": "emb-remote"}
    rt = make_runtime(judge=_llm(server), embeddings=emb)
    m = await _run(rt, _record(strictness=5, include_reasoning=True))
    ref = OpenAIEmbedder(EmbeddingSettings(**emb))
    v = await ref.embed([INPUT, *qs])
    await ref.aclose()
    expected = float(np.clip((v[1:] @ v[0]).mean(), 0.0, 1.0))
    assert m.score == pytest.approx(expected, abs=1e-5)
    assert m.meta is not None and m.meta["embeddings"].startswith("openai:emb-remote")
    assert len(m.result) == 6 and "reasoning" in m.result[-1]
    assert any(r.path.endswith("/embeddings") for r in server.requests)


@pytest.mark.integration
async def test_all_noncommittal_scores_zero(
    make_runtime: Callable[..., Runtime], server: OpenAIServer
) -> None:
    server.handler = _qg_handler(["What is unknown?", "What is unclear?", "What is vague?"], True)
    rt = make_runtime(judge=_llm(server))
    m = await _run(rt, {**_record(), "output": "I'm not sure, it depends."})
    assert m.score == 0.0 and m.meta and m.meta["all_noncommittal"] is True


@pytest.mark.integration
async def test_wrong_number_of_questions_is_an_error(
    make_runtime: Callable[..., Runtime], server: OpenAIServer
) -> None:
    server.handler = _qg_handler(QUESTIONS[:2])  # 2 instead of 3, also after the re-ask
    rt = make_runtime(judge=_llm(server))
    m = await _run(rt, _record())
    assert m.score is None and m.error and "question" in m.error


@pytest.mark.integration
async def test_local_judge_cannot_generate_questions(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime()
    res = await Executor(rt, plan("relevance")).run_case(parse_record(_record()))
    out = res.outcomes["relevance"]
    if out.status == "skipped":
        assert out.reason == NEEDS_LLM
    else:
        m = out.output.metrics[0]  # type: ignore[union-attr]
        assert m.score is None and m.error == NEEDS_LLM
    ctx = NodeContext(case=parse_record(_record()), upstream={}, runtime=rt)
    assert qg_relevance.skip_reason(ctx) == NEEDS_LLM
    assert qg_relevance.estimate(ctx) == []


async def test_estimate_is_one_call(
    make_runtime: Callable[..., Runtime], server: OpenAIServer
) -> None:
    rt = make_runtime(judge=_llm(server))
    ctx = NodeContext(case=parse_record(_record(strictness=4)), upstream={}, runtime=rt)
    (est,) = qg_relevance.estimate(ctx)
    assert est.calls == 1 and est.input_tokens > 20
    assert est.output_tokens >= 4 * qg_relevance.TOKENS_PER_QUESTION
    assert server.requests == []  # estimating never calls the judge
