from __future__ import annotations

import pytest

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.nodes.conversation_relevance import Window, build_windows, new_windows
from nexagauge.schema.case import parse_record

from .fakes import ScriptedJudge

MATH = [
    {"input": "What is 2+2?", "output": "2+2 equals 4."},
    {"input": "What about 3+3?", "output": "The capital of France is Paris."},
    {"input": "Can you solve 5+5?", "output": "5+5 equals 10."},
]


def test_per_turn_windows_short_and_long():
    assert build_windows(0, 5) == []
    assert build_windows(3, 5) == [Window(0, 0), Window(0, 1), Window(0, 2)]
    assert build_windows(6, 3) == [
        Window(0, 0),
        Window(0, 1),
        Window(0, 2),
        Window(1, 3),
        Window(2, 4),
        Window(3, 5),
    ]
    assert all(w.end - w.start + 1 <= 3 for w in build_windows(40, 3))
    assert len(build_windows(40, 3)) == 40


def test_sliding_windows_match_promptfoo_legacy():
    assert build_windows(3, 5, "sliding") == [Window(0, 2)]  # shorter than W: one window
    assert build_windows(3, 2, "sliding") == [Window(0, 1), Window(1, 2)]
    with pytest.raises(ValueError):
        build_windows(3, 0)


def test_incremental_windows_as_turns_arrive():
    seen = []
    for n in range(1, 8):
        seen += new_windows(n - 1, n, 3)
    assert seen == build_windows(7, 3)


def _judge(verdicts_by_turn):
    def answer(call):
        lines = call.variables["windows"].splitlines()
        out = {}
        for k, line in enumerate(lines):
            turn = int(line.rsplit(" ", 1)[1]) - 1
            v = verdicts_by_turn[turn]
            out[f"w{k + 1}"] = {"score": v} if isinstance(v, int) else {"verdict": v}
            if "reason" in str(call.schema):
                out[f"w{k + 1}"]["reason"] = "r"
        return out, None, None

    return ScriptedJudge(answer)


async def test_off_topic_reply_lowers_score_all_windows_in_one_call(make_runtime):
    judge = _judge(["yes", "no", "yes"])
    rec = {"_conversation": MATH, "conversation_relevance": {"window_size": 2, "threshold": 0.8}}
    res = await Executor(make_runtime(judge), plan("conversation_relevance")).run_case(
        parse_record(rec, 0)
    )
    m = res.outcomes["conversation_relevance"].output.metrics[0]
    assert len(judge.calls) == 1
    assert m.score == pytest.approx(2 / 3)
    assert [r["verdict"] for r in m.result] == ["ACCEPTED", "REJECTED", "ACCEPTED"]
    assert m.result[1]["output"] == "The capital of France is Paris."
    report = res.outcomes["report"].output
    assert report.passed["conversation_relevance"] is False  # 0.67 < threshold 0.8
    # the conversation is sent once: each turn appears once in the prompt
    assert len(judge.calls[0].variables["turns"]) == 3


async def test_scale_mode_and_custom_rubric(make_runtime):
    judge = _judge([5, 1, 4])
    rec = {
        "conversation": MATH,
        "conversation_relevance": {
            "scoring_mode": "scale_1_5",
            "include_reasoning": True,
            "rubric_prompt": "Only math answers are relevant.",
        },
    }
    res = await Executor(make_runtime(judge), plan("conversation_relevance")).run_case(
        parse_record(rec, 0)
    )
    m = res.outcomes["conversation_relevance"].output.metrics[0]
    assert m.score == pytest.approx((1.0 + 0.0 + 0.75) / 3)
    assert judge.calls[0].variables["rubric"] == "Only math answers are relevant."
    assert all(r["reason"] == "r" for r in m.result)


async def test_chat_messages_alias_and_judge_error(make_runtime):
    msgs = [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "Hi there!"},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
    ]
    judge = ScriptedJudge(lambda call: (None, "wrong number of verdicts", None))
    res = await Executor(make_runtime(judge), plan("conversation_relevance")).run_case(
        parse_record({"messages": msgs}, 0)
    )
    m = res.outcomes["conversation_relevance"].output.metrics[0]
    assert m.score is None and "verdicts" in m.error


async def test_record_without_conversation_is_ineligible(make_runtime):
    judge = _judge(["yes"])
    res = await Executor(make_runtime(judge), plan("conversation_relevance")).run_case(
        parse_record({"input": "q", "output": "a"}, 0)
    )
    assert res.outcomes["conversation_relevance"].status == "skipped"
    assert "conversation" in res.outcomes["conversation_relevance"].reason
