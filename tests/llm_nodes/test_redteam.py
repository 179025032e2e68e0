from __future__ import annotations

import pytest

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.nodes.redteam import (
    check_spans,
    default_rubrics,
    resolve_rubrics,
    response_model,
    severity_score,
)
from nexagauge.schema.case import RedteamConfig, parse_record

from .fakes import ScriptedJudge

OUTPUT = "Women are bad at math, you idiot. Anyway, the answer is 42."


def _answer_all(verdict="no_violation", severity=None, spans=(), reasoning=False):
    def answer(call):
        n = len(call.schema["properties"])
        item = {"verdict": verdict, "violations": [], "evidence_spans": list(spans)}
        if severity is not None:
            item["severity"] = severity
        if reasoning:
            item["reasoning"] = "short"
        return {f"r{i + 1}": dict(item) for i in range(n)}, None, None

    return answer


def test_default_rubrics_are_bias_and_toxicity():
    assert [r.name for r in default_rubrics()] == ["bias", "toxicity"]
    for r in default_rubrics():
        assert r.rubric.goal and r.rubric.violations and r.rubric.non_violations


def test_custom_rubrics_add_and_replace_by_name():
    rub = {"goal": "g", "violations": ["v"], "non_violations": []}
    cfg = RedteamConfig.model_validate(
        {"metrics": [{"name": "toxicity", "rubric": rub}, {"name": "medical", "rubric": rub}]}
    )
    specs = resolve_rubrics(cfg)
    assert [s.name for s in specs] == ["bias", "toxicity", "medical"]
    assert specs[1].default is False and specs[1].rubric.goal == "g"
    cfg2 = RedteamConfig.model_validate(
        {"replace_defaults": True, "metrics": [{"name": "medical", "rubric": rub}]}
    )
    assert [s.name for s in resolve_rubrics(cfg2)] == ["medical"]


def test_severity_lookup_table():
    assert [severity_score(s) for s in (1, 2, 3, 4, 5)] == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_binary_schema_has_no_severity_and_scale_requires_it():
    binary = response_model(2, False, False).model_json_schema()
    scale = response_model(2, True, True).model_json_schema()
    item_b = binary["$defs"]["RubricVerdictBinary"]
    assert "severity" not in str(binary) and "reasoning" not in str(binary)
    assert set(binary["required"]) == {"r1", "r2"}
    assert "severity" in str(scale) and "reasoning" in str(scale)
    assert "verdict" in item_b["properties"]


def test_evidence_spans_must_be_exact_substrings():
    texts = {"output": OUTPUT, "input": "What is 6*7?"}
    valid, invalid = check_spans(
        [
            {"field": "output", "text": "you idiot"},
            {"field": "output", "text": "you stupid idiot"},  # paraphrase: not in the text
            {"field": "input", "text": "6*7"},  # field not judged by this rubric
        ],
        texts,
        ["output"],
    )
    assert valid == [{"field": "output", "text": "you idiot", "start": 23, "end": 32}]
    assert OUTPUT[23:32] == "you idiot"
    assert [i["reason"] for i in invalid] == ["not an exact substring", "field not judged"]


async def _run(record, judge, make_runtime):
    ex = Executor(make_runtime(judge), plan("redteam"))
    return await ex.run_case(parse_record(record, 0))


async def test_all_rubrics_in_one_call_binary(make_runtime):
    judge = ScriptedJudge(
        _answer_all("violation", spans=[{"field": "output", "text": "you idiot"}])
    )
    rub = {"goal": "g", "violations": ["v"]}
    res = await _run(
        {"output": OUTPUT, "redteam": {"metrics": [{"name": "custom", "rubric": rub}]}},
        judge,
        make_runtime,
    )
    out = res.outcomes["redteam"].output
    assert len(judge.calls) == 1
    assert [m.name for m in out.metrics] == ["bias", "toxicity", "custom"]
    for m in out.metrics:
        assert m.score == 0.0 and m.category == "safety"
        assert "severity" not in m.result[0] and "reasoning" not in m.result[0]
        assert m.result[0]["evidence_spans"][0]["start"] == 23


async def test_scale_mode_maps_severity(make_runtime):
    severities = iter([1, 2, 3, 4, 5])

    def answer(call):
        n = len(call.schema["properties"])
        return (
            {
                f"r{i + 1}": {
                    "verdict": "violation",
                    "violations": [],
                    "evidence_spans": [],
                    "severity": next(severities),
                    "reasoning": "r",
                }
                for i in range(n)
            },
            None,
            None,
        )

    rub = {"goal": "g"}
    record = {
        "output": OUTPUT,
        "redteam": {
            "scoring_mode": "scale_1_5",
            "include_reasoning": True,
            "metrics": [{"name": f"c{i}", "rubric": rub} for i in range(3)],
        },
    }
    res = await _run(record, ScriptedJudge(answer), make_runtime)
    out = res.outcomes["redteam"].output
    assert [m.score for m in out.metrics] == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert [m.result[0]["severity"] for m in out.metrics] == [1, 2, 3, 4, 5]
    assert out.metrics[0].result[0]["note"].startswith("verdict 'violation' with severity 1")
    assert all(m.result[0]["reasoning"] == "r" for m in out.metrics)


async def test_invalid_spans_are_dropped_and_flagged(make_runtime):
    judge = ScriptedJudge(
        _answer_all("violation", spans=[{"field": "output", "text": "not in the output"}])
    )
    res = await _run({"output": OUTPUT}, judge, make_runtime)
    m = res.outcomes["redteam"].output.metrics[0]
    assert m.result[0]["evidence_spans"] == []
    assert m.result[0]["invalid_evidence_spans"][0]["reason"] == "not an exact substring"


async def test_missing_item_field_fails_only_that_rubric(make_runtime):
    judge = ScriptedJudge(_answer_all())
    rub = {"goal": "g"}
    record = {
        "output": OUTPUT,
        "redteam": {
            "metrics": [{"name": "needs_ref", "item_fields": ["reference"], "rubric": rub}]
        },
    }
    res = await _run(record, judge, make_runtime)
    ms = {m.name: m for m in res.outcomes["redteam"].output.metrics}
    assert ms["needs_ref"].score is None and "reference" in ms["needs_ref"].error
    assert ms["bias"].score == 1.0 and ms["toxicity"].score == 1.0
    assert len(judge.calls) == 1 and len(judge.calls[0].schema["properties"]) == 2


async def test_judge_error_is_an_error_result_not_a_score(make_runtime):
    judge = ScriptedJudge(lambda call: (None, "HTTP 500 after 4 attempts", None))
    res = await _run({"output": OUTPUT}, judge, make_runtime)
    for m in res.outcomes["redteam"].output.metrics:
        assert m.score is None and "500" in m.error


@pytest.mark.parametrize(
    ("kind", "supports", "reason"),
    [("local", False, "needs an LLM judge")],
)
async def test_local_judge_skips_with_reason(make_runtime, kind, supports, reason):
    judge = ScriptedJudge(_answer_all(), kind=kind, supports_llm_tasks=supports)
    res = await _run({"output": OUTPUT}, judge, make_runtime)
    assert res.outcomes["redteam"].status == "skipped"
    assert reason in res.outcomes["redteam"].reason


async def test_no_judge_skips(make_runtime):
    res = await _run({"output": OUTPUT}, None, make_runtime)
    assert res.outcomes["redteam"].reason == "no judge configured"
