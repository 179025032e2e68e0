"""evaluation_view: what the emitter reads from real and hand-built case results."""

from __future__ import annotations

from nexagauge.emit.view import SkippedMetric, error_type, evaluation_view, verdict_counts
from nexagauge.graph.executor import CaseResult, NodeOutcome
from nexagauge.graph.skips import SkipReason
from nexagauge.schema.results import CostEstimate, RelevanceMetrics
from nexagauge.settings import RunSettings

from .conftest import judged_result, verdict


def test_claim_verdicts_from_models_and_dicts() -> None:
    v = evaluation_view(judged_result())
    rel, gr = v.metrics
    assert (rel.name, rel.accepted, rel.rejected) == ("answer_relevancy", 3, 1)
    assert rel.explanation == "3 of 4 claims answer the question."
    assert (gr.name, gr.accepted, gr.rejected) == ("grounding", 1, 1)
    assert rel.label == "pass" and gr.label == "fail"  # threshold 0.6
    assert v.judge == "llm"
    assert v.cost.cost == 0.0031
    assert set(v.node_costs) == {"relevance", "grounding"}


def test_failed_metric_is_failed_evaluation() -> None:
    v = evaluation_view(judged_result(grounding_error="TimeoutError: judge timed out after 60s"))
    gr = v.metrics[1]
    assert gr.failed and gr.score is None and gr.label is None
    assert gr.error_type == "TimeoutError"
    assert v.status == "failed" and v.error_type == "TimeoutError"


def test_without_eval_summary_uses_node_outputs_and_run_thresholds() -> None:
    res = judged_result(with_summary=False)
    v = evaluation_view(res, RunSettings(thresholds={"answer_relevancy": 0.8}))
    rel, gr = v.metrics
    assert rel.threshold == 0.8 and rel.passed is False  # 0.75 < 0.8
    assert gr.threshold == 0.5 and gr.passed is True
    nothr = evaluation_view(res).metrics[0]
    assert nothr.threshold is None and nothr.label == "3/4 ACCEPTED"


def test_errored_and_skipped_nodes_without_summary() -> None:
    res = judged_result(with_summary=False)
    res.outcomes["grounding"] = NodeOutcome(
        "grounding", "error", "ValueError: bad json", RelevanceMetrics()
    )
    res.outcomes["redteam"] = NodeOutcome(
        "redteam", "skipped", "no judge configured", RelevanceMetrics()
    )
    v = evaluation_view(res)
    assert [m.name for m in v.metrics] == ["answer_relevancy", "grounding"]
    assert v.metrics[1].error == "ValueError: bad json" and v.metrics[1].error_type == "ValueError"
    assert v.skipped == {"redteam": SkippedMetric(SkipReason.NO_JUDGE, "no judge configured")}


def test_case_error() -> None:
    v = evaluation_view(CaseResult(index=3, case_id="c", error="record 3: output: missing"))
    assert v.metrics == [] and v.status == "failed" and v.error_type == "RecordError"


def test_cache_hits_cost_nothing_but_are_reported() -> None:
    res = judged_result()
    o = res.outcomes["relevance"]
    assert isinstance(o.output, RelevanceMetrics)
    res.outcomes["relevance"] = NodeOutcome(
        "relevance",
        "ok",
        None,
        o.output.model_copy(update={"cost": CostEstimate()}),
        cached=True,
        original_cost=o.output.cost,
    )
    v = evaluation_view(res)
    assert v.cached_judge_nodes == ["relevance"]
    assert set(v.node_costs) == {"grounding"}


def test_error_type_parsing() -> None:
    assert error_type("openai.APITimeoutError: timed out") == "openai.APITimeoutError"
    assert error_type("JudgeError") == "JudgeError"
    assert error_type("no verdicts") == "_OTHER"
    assert error_type("") == "_OTHER"
    assert error_type(None) == "_OTHER"


def test_verdict_counts_ignores_other_entries() -> None:
    items = [verdict("a", "ACCEPTED"), {"verdict": "REJECTED"}, {"reasoning": "r"}, "junk", 3]
    assert verdict_counts(items) == (1, 1)
