from __future__ import annotations

import asyncio
import math

import pytest

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.nodes.geval import score_token_logprobs, weighted_score
from nexagauge.nodes.geval_steps import clear_memo
from nexagauge.schema.case import parse_record

from .fakes import ScriptedJudge

CRITERIA = "Check whether the output directly answers the input."


def _lp(p: float) -> float:
    return math.log(p)


def _tokens(score_tops: dict[str, float], prefix: str = '{"score":') -> list[dict]:
    """A JSON answer's token stream with the given top log-probs at the score position."""
    best = max(score_tops, key=score_tops.__getitem__)
    toks = [{"token": t, "logprob": -0.01, "top_logprobs": []} for t in ['{"', "score", '":']]
    if prefix != '{"score":':
        toks = [{"token": prefix, "logprob": -0.01, "top_logprobs": []}]
    toks.append(
        {
            "token": best,
            "logprob": score_tops[best],
            "top_logprobs": [{"token": k, "logprob": v} for k, v in score_tops.items()],
        }
    )
    toks.append({"token": "}", "logprob": -0.01, "top_logprobs": []})
    return toks


def test_weighted_score_known_distributions():
    # p(3)=.2 p(4)=.5 p(5)=.3 -> E = .6 + 2 + 1.5 = 4.1
    e, probs = weighted_score({"3": _lp(0.2), "4": _lp(0.5), "5": _lp(0.3)}, scale=True)
    assert e == pytest.approx(4.1)
    assert probs == pytest.approx({"3": 0.2, "4": 0.5, "5": 0.3})
    # invalid tokens are ignored and the rest renormalized: p(1)=.25, p(2)=.25 of valid mass
    e, probs = weighted_score({"1": _lp(0.1), "2": _lp(0.1), "x": _lp(0.8)}, scale=True)
    assert e == pytest.approx(1.5) and probs == pytest.approx({"1": 0.5, "2": 0.5})
    # binary: P(1)
    e, _ = weighted_score({"1": _lp(0.7), "0": _lp(0.3)}, scale=False)
    assert e == pytest.approx(0.7)
    assert weighted_score({"maybe": -0.1}, scale=True) is None


def test_score_position_found_in_token_stream():
    tops = {"4": _lp(0.6), "5": _lp(0.4)}
    assert score_token_logprobs(_tokens(tops), scale=True) == pytest.approx(tops)
    # reasoning first, then score: the digit after the "score" key is used, not digits in reasoning
    stream = [
        {"token": '{"reasoning":"', "logprob": 0, "top_logprobs": []},
        {"token": "5", "logprob": 0, "top_logprobs": [{"token": "5", "logprob": 0.0}]},
        {"token": ' stars","score":', "logprob": 0, "top_logprobs": []},
        {"token": "2", "logprob": _lp(0.9), "top_logprobs": [{"token": "2", "logprob": _lp(0.9)}]},
    ]
    assert score_token_logprobs(stream, scale=True) == pytest.approx({"2": _lp(0.9)})


def _judge(steps_delay=0.0, score=4, logprobs=None, fail_steps=False):
    def answer(call):
        if call.prompt == "geval_steps":
            if fail_steps:
                return None, "judge down", None
            return {"steps": ["Read the input.", "Check the output answers it."]}, None, None
        data = {"score": score}
        if "reasoning" in call.schema["properties"]:
            data = {"reasoning": "because", "score": score}
        return data, None, logprobs

    return ScriptedJudge(answer, delay_s=steps_delay)


def _record(i=0, **geval):
    block = {
        "scoring_mode": "scale_1_5",
        "metrics": [
            {"name": "answer_alignment", "item_fields": ["input", "output"], "criteria": CRITERIA},
            {
                "name": "reference_consistency",
                "item_fields": ["output", "reference"],
                "evaluation_steps": ["Check contradictions.", "Check missing facts."],
            },
        ],
    }
    block.update(geval)
    return {"case_id": f"c{i}", "input": f"Q{i}?", "output": f"A{i}.", "geval": block}


async def test_given_steps_used_as_is_and_generated_once_across_concurrent_cases(make_runtime):
    judge = _judge(steps_delay=0.05)
    ex = Executor(make_runtime(judge), plan("geval"), max_in_flight=10)
    results = [r async for r in ex.run_records(enumerate(_record(i) for i in range(10)))]
    assert len(judge.prompts("geval_steps")) == 1  # never once per case
    sources = [r.outcomes["geval_steps"].output.source["answer_alignment"] for r in results]
    assert sorted(sources) == ["cached"] * 9 + ["generated"]
    for r in results:
        st = r.outcomes["geval_steps"].output
        assert st.steps["reference_consistency"] == [
            "Check contradictions.",
            "Check missing facts.",
        ]
        assert st.source["reference_consistency"] == "given"
        ms = {m.name: m for m in r.outcomes["geval"].output.metrics}
        # item field "reference" missing: error for that metric only
        assert ms["reference_consistency"].score is None
        assert "reference" in ms["reference_consistency"].error
        assert ms["answer_alignment"].score == pytest.approx(0.75)  # raw 4 -> (4-1)/4
        assert ms["answer_alignment"].result[0]["score_method"] == "raw"
    # one scoring call per metric that could run, per case
    assert len(judge.prompts("geval")) == 10


async def test_steps_cached_across_runs_on_disk(make_runtime):
    judge = _judge()
    rt = make_runtime(judge, cache=True)
    await Executor(rt, plan("geval")).run_case(parse_record(_record(0), 0))
    assert len(judge.prompts("geval_steps")) == 1
    clear_memo()  # a new process: only the on-disk store remains
    judge2 = _judge()
    rt2 = make_runtime(judge2, cache=True)
    res = await Executor(rt2, plan("geval")).run_case(parse_record(_record(1), 1))
    assert judge2.prompts("geval_steps") == []
    assert res.outcomes["geval_steps"].output.source["answer_alignment"] == "cached"


async def test_logprob_weighted_score(make_runtime):
    tops = {"3": _lp(0.2), "4": _lp(0.5), "5": _lp(0.3)}
    judge = _judge(logprobs=_tokens(tops))
    res = await Executor(make_runtime(judge), plan("geval")).run_case(parse_record(_record(), 0))
    m = res.outcomes["geval"].output.metrics[0]
    assert m.result[0]["score_method"] == "logprob_weighted"
    assert m.result[0]["expected_raw"] == pytest.approx(4.1)
    assert m.score == pytest.approx((4.1 - 1) / 4)
    assert all(c.top_logprobs for c in judge.prompts("geval"))


async def test_binary_mode_and_reasoning(make_runtime):
    judge = _judge(score=1, logprobs=_tokens({"1": _lp(0.8), "0": _lp(0.2)}))
    rec = _record(scoring_mode="binary_yes_no", include_reasoning=True)
    res = await Executor(make_runtime(judge), plan("geval")).run_case(parse_record(rec, 0))
    m = res.outcomes["geval"].output.metrics[0]
    assert m.score == pytest.approx(0.8)
    assert m.result[0]["reasoning"] == "because"
    schema = judge.prompts("geval")[0].schema
    assert list(schema["properties"]) == ["reasoning", "score"]


async def test_step_generation_failure_is_an_error_for_that_metric(make_runtime):
    judge = _judge(fail_steps=True)
    rec = _record(0)
    rec["reference"] = "R."
    res = await Executor(make_runtime(judge), plan("geval")).run_case(parse_record(rec, 0))
    ms = {m.name: m for m in res.outcomes["geval"].output.metrics}
    assert ms["answer_alignment"].score is None
    assert "step generation failed" in ms["answer_alignment"].error
    assert ms["reference_consistency"].score == pytest.approx(0.75)


async def test_concurrent_generation_failure_propagates_to_waiters(make_runtime):
    judge = _judge(steps_delay=0.05, fail_steps=True)
    ex = Executor(make_runtime(judge), plan("geval"), max_in_flight=4)
    results = await asyncio.gather(*(ex.run_case(parse_record(_record(i), i), i) for i in range(4)))
    for r in results:
        assert "answer_alignment" in r.outcomes["geval_steps"].output.errors
