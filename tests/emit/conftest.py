"""Fixtures of the emit tests: a fresh Prometheus registry per test, in-memory span writers,
settings with a temp cache dir, and case results (real executor runs and hand-built ones)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.emit.target import EvaluationTarget, config_fingerprint
from nexagauge.graph.executor import CaseResult, NodeOutcome, evaluate
from nexagauge.nodes.eval import EvalMetric, EvalSummary, NodeStatus
from nexagauge.schema.case import parse_record
from nexagauge.schema.results import (
    ClaimVerdict,
    CostEstimate,
    GroundingMetrics,
    Item,
    MetricResult,
    RelevanceMetrics,
)
from nexagauge.settings import Settings

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SPAN_ID = "b7ad6b7169203331"
FINGERPRINT = config_fingerprint(["relevance", "grounding"], {"threshold": 0.5}, "gpt-4o-mini")
END_NS = 1_700_000_000_000_000_000  # the evaluated span ended at t = 1.7e9 s


def target(**kw: Any) -> EvaluationTarget:
    """An evaluation target with sensible defaults (override any field)."""
    base: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "service": "checkout-bot",
        "span_name": "chat gpt-4o",
        "end_time_unix_nano": END_NS,
        "model": "gpt-4o",
        "conversation_id": "session-42",
        "sampling_rule": "default",
        "config_fingerprint": FINGERPRINT,
    }
    base.update(kw)
    return EvaluationTarget(**base)


def verdict(text: str, v: str, reason: str | None = None) -> ClaimVerdict:
    return ClaimVerdict(
        item=Item(id=text[:8], text=text, tokens=3.0),
        source_chunk_index=0,
        verdict=v,
        raw_score=1 if v == "ACCEPTED" else 0,
        reason=reason,
    )


def judged_result(
    *,
    relevance: float | None = 0.75,
    grounding: float | None = 0.5,
    grounding_error: str | None = None,
    with_summary: bool = True,
    reasoning: str | None = "3 of 4 claims answer the question.",
    cost: CostEstimate | None = None,
) -> CaseResult:
    """A hand-built result of the judge branch: relevance (ClaimVerdict models, reasoning) and
    grounding (plain verdict dicts), optionally failed, with or without the eval summary."""
    case = parse_record({"input": "What is the capital?", "output": "Paris.", "context": "Paris."})
    rel_items: list[Any] = [
        verdict("Paris is the capital", "ACCEPTED"),
        verdict("It is in France", "ACCEPTED"),
        verdict("It has a tower", "ACCEPTED"),
        verdict("Cheese is good", "REJECTED", "off topic"),
    ]
    if reasoning is not None:
        rel_items.append({"reasoning": reasoning})
    rel = RelevanceMetrics(
        metrics=[
            MetricResult(
                name="answer_relevancy", category="answer", score=relevance, result=rel_items
            )
            if relevance is not None
            else MetricResult.failed("answer_relevancy", "answer", "no verdicts")
        ],
        cost=cost or CostEstimate(cost=0.0021, input_tokens=900.0, output_tokens=120.0),
    )
    if grounding_error is not None:
        gm = MetricResult.failed("grounding", "grounding", grounding_error)
    else:
        gm = MetricResult(
            name="grounding",
            category="grounding",
            score=grounding,
            result=[{"verdict": "ACCEPTED", "text": "a"}, {"verdict": "REJECTED", "text": "b"}],
        )
    gr = GroundingMetrics(
        metrics=[gm], cost=CostEstimate(cost=0.001, input_tokens=400.0, output_tokens=50.0)
    )
    res = CaseResult(index=0, case_id=case.case_id, case=case)
    res.outcomes["relevance"] = NodeOutcome("relevance", "ok", None, rel, elapsed_s=1.5)
    res.outcomes["grounding"] = NodeOutcome("grounding", "ok", None, gr, elapsed_s=0.7)
    if with_summary:
        summary = EvalSummary(judge="llm")
        for node, out in (("relevance", rel), ("grounding", gr)):
            summary.nodes[node] = NodeStatus(status="ok", cost=out.cost)
            for m in out.metrics:
                summary.metrics.append(
                    EvalMetric(
                        node=node,
                        name=m.name,
                        category=m.category,
                        score=m.score,
                        error=m.error,
                        threshold=0.6,
                        passed=None if m.score is None else m.score >= 0.6,
                    )
                )
        res.outcomes["eval"] = NodeOutcome("eval", "ok", None, summary)
    return res


_REFMATCH: list[CaseResult] = []


async def refmatch_result() -> CaseResult:
    """A real executor run (deterministic refmatch metrics, eval + report nodes); memoized."""
    if not _REFMATCH:
        rs = await evaluate(
            [{"output": "Paris is the capital.", "reference": "Paris is the capital of France."}],
            "eval",
            only=["refmatch"],
        )
        _REFMATCH.append(rs[0])
    return _REFMATCH[0]


@pytest.fixture
def registry() -> CollectorRegistry:
    """A fresh registry per test (never the global default)."""
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> EvaluatorMetrics:
    return EvaluatorMetrics(registry)


@pytest.fixture
def writer() -> Iterator[EvaluationSpanWriter]:
    w = EvaluationSpanWriter.in_memory()
    try:
        yield w
    finally:
        w.shutdown()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with the cache (and so the dedupe journal) in a temp dir."""
    return Settings(cache={"dir": tmp_path / "cache"}, run={"default_threshold": 0.6})


def sample(m: EvaluatorMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)
