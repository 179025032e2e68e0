"""Accuracy of the local judge on the labelled sets, with 95% confidence intervals (issue 17).

The sets, each split by item into a *calibration* and a *held-out* half:

- ``v1``: ``tests/data/relevance_pairs.jsonl`` / ``grounding_pairs.jsonl`` (one writer, one
  style, 512 + 448 pairs);
- ``v2``: ``tests/data/local_judge_v2/`` (written separately, in deliberately varied styles:
  answers of several sentences with pronouns, lists, hedges, units, same-subject trivia,
  contradictions, absent facts);
- ``v3``: ``tests/data/local_judge_v3/`` (four more writers who saw only the labelling rule,
  each in the style of one kind of production assistant: consumer support, technical, health
  and science, everyday);
- ``v5``: ``tests/data/local_judge_v5/`` (relevance only, all calibration: training text for
  the cross-encoder). v4 is test only and never loaded here.

Calibration relevance rows whose question a held-out case also asks are left out
(:func:`load_rows`).

Claims are judged the way the nodes do it: one call per case with the answer's sentences in
answer order (so a sentence can lean on the one before). Fully offline::

    HF_HUB_OFFLINE=1 python bench/local_judge/accuracy.py             # held-out table
    HF_HUB_OFFLINE=1 python bench/local_judge/accuracy.py --calibrate # refit on calibration
    HF_HUB_OFFLINE=1 python bench/local_judge/accuracy.py --json      # machine-readable

``--calibrate`` fits the decision models (:func:`nexagauge.judge.local.calibrate.fit_linear`)
on the *calibration* halves only and prints them; the held-out halves are for reporting.
``tests/local/test_calibration.py`` imports this module and asserts that the refit reproduces
the shipped models and that held-out accuracy meets the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT / "bench"))
SETS = ("v1", "v2", "v3", "v5")
#: training sets written, measured and not used: ``--with-set v8`` (``v9``) trains and
#: calibrates on them too (bench/local_judge/RECORD.md, "Training set v8", "v9"); the shipped judge
#: never has
CANDIDATE_SETS = ("v8", "v9")
#: accuracy the held-out halves must reach (issue 17: >= 0.88 on text unlike the calibration set)
TARGET_ACCURACY = 0.88
#: the older, easier set keeps its own bar on clear pairs
TARGET_V1_CLEAR = 0.85

import numpy as np  # noqa: E402

from local_judge.eval import SETS as EVAL_SETS  # noqa: E402
from local_judge.eval import set_dir  # noqa: E402
from nexagauge.judge.local.calibrate import BinaryStats, binary_stats, fit_linear, wilson  # noqa: E402
from nexagauge.judge.local.ce import RelevanceCrossEncoder  # noqa: E402
from nexagauge.judge.local.decide import (  # noqa: E402
    CALIBRATED,
    GROUNDING_FEATURES,
    RELEVANCE_FEATURES,
    GroundingFeatures,
    LocalThresholds,
    RelevanceFeatures,
    decide_grounding,
    decide_relevance,
)
from nexagauge.judge.local.judge import LocalJudge  # noqa: E402

POSITIVE = {"relevance": "on_topic", "grounding": "supported"}


#: every set with held-out rows: v1 and the sets ``local_judge.eval`` evaluates (the test-only
#: ones, ``local_judge.eval.TEST_ONLY``, are held out entirely)
HELD_OUT_SETS = ("v1", *EVAL_SETS)
#: two questions this alike (Jaccard of their content-word stems) count as one question asked
#: twice. At 0.4 "How do I cache node_modules in GitHub Actions?" meets "How do I cache npm
#: dependencies in GitHub Actions?"; it also catches a few different questions on one subject
#: ("How long is a day on Mars?" / "How long would it take to fly to Mars?"), an error that
#: only costs calibration rows. "The capital of Australia?" / "of France?" (0.33) stay apart.
SAME_QUESTION = 0.4
_STOP_TEXT = """a an the and or but if of in on at to for from by with is are was were be do does
    did i my me you your it its what when where how why which who can could should would will
    our we"""
_STOP = frozenset(_STOP_TEXT.split())


def question_stems(text: str) -> frozenset[str]:
    """Content-word stems of a question (5-letter prefixes, stop words left out).

    Example:
        >>> sorted(question_stems("How do I create a virtual environment in Python?"))
        ['creat', 'envir', 'pytho', 'virtu']
    """
    words = re.findall(r"[a-z0-9]+", text.lower())
    return frozenset(w[:5] for w in words if w not in _STOP and len(w) > 2)


def same_question(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two questions' stems (:func:`question_stems`) are the same question."""
    return bool(a and b) and len(a & b) / len(a | b) >= SAME_QUESTION


def _read_rows(dataset: str, task: str) -> list[dict[str, Any]]:
    """Rows of one set and task as written (``[]`` where the set has no labels for the task);
    where a set's files are is decided once, by ``local_judge.eval.set_dir`` (v1, the first
    set, is ``tests/data/<task>_pairs.jsonl``)."""
    path = DATA / f"{task}_pairs.jsonl" if dataset == "v1" else set_dir(dataset) / f"{task}.jsonl"
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


@cache
def held_out_questions() -> tuple[frozenset[str], ...]:
    """Stems of every question a held-out relevance row asks (:data:`HELD_OUT_SETS`)."""
    qs = {r["question"] for s in HELD_OUT_SETS for r in _read_rows(s, "relevance")
          if r["split"] == "heldout"}  # fmt: skip
    return tuple(question_stems(q) for q in sorted(qs))


@cache
def asks_a_held_out_question(question: str) -> bool:
    """Whether a held-out case asks this question too, or one alike (:func:`same_question`)."""
    mine = question_stems(question)
    return any(same_question(mine, h) for h in held_out_questions())


def load_rows(dataset: str, task: str) -> list[dict[str, Any]]:
    """Rows of one set and task, each with ``set``; v2 rows keep their answer ``position``.

    Calibration relevance rows whose question a held-out case also asks
    (:func:`asks_a_held_out_question`) are left out: the cross-encoder trains on calibration
    rows and could learn the answers to a question, and the held-out and test-only figures must
    measure questions it has never seen. (The sets' writers worked independently, and common
    questions recur: "What is the capital of Australia?" is in v2, v3 and v4.)
    """
    rows = _read_rows(dataset, task)
    for k, r in enumerate(rows):
        r["set"] = dataset
        r.setdefault("position", k)
    if task == "relevance":
        rows = [r for r in rows
                if r["split"] != "calibration" or not asks_a_held_out_question(r["question"])]  # fmt: skip
    return rows


#: the relevance cross-encoder's out-of-fold scores of the calibration rows
#: (``bench/local_judge/train_ce.py``)
CE_OOF = DATA / "local_judge_ce_oof.tsv"


def read_oof(path: Path = CE_OOF) -> dict[str, float]:
    """Out-of-fold cross-encoder scores by row id; a malformed or repeated line raises an
    error naming its file and line."""
    out: dict[str, float] = {}
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        parts = line.split("\t")
        try:
            if len(parts) != 2 or parts[0] in out:
                raise ValueError("expected '<id> TAB <score>' with an id not seen before")
            out[parts[0]] = float(parts[1])
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: {exc}: {line!r}") from None
    return out


class OutOfFold(RelevanceCrossEncoder):
    """The shipped cross-encoder, except that a calibration row's pair gets its out-of-fold
    score: the shipped adapter was trained on those rows, so its own scores there are better
    than it will ever be on new text, and a decision model fitted on them would trust it too
    much. Held-out rows get the live score. Calibration pairs are never run through the model
    (half the work of :func:`prepare`).

    Example:
        >>> OutOfFold(rows, read_oof()).score([(q, claim)])  # doctest: +SKIP
    """

    def __init__(self, rows: Sequence[dict[str, Any]], oof: Mapping[str, float]) -> None:
        super().__init__()
        self.known: dict[tuple[str, str], float] = {}
        for r in rows:
            if r["split"] == "calibration":
                if r["id"] not in oof:
                    raise KeyError(f"{r['id']}: no out-of-fold score in {CE_OOF.name}; "
                                   "rerun bench/local_judge/train_ce.py")  # fmt: skip
                self.known[(r["question"], r["claim"])] = oof[r["id"]]
        for r in rows:
            if r["split"] != "calibration" and (r["question"], r["claim"]) in self.known:
                raise ValueError(f"{r['id']}: a held-out pair repeats a calibration pair")
        self.digest = f"{self.digest}+oof"

    def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        out = np.zeros(len(pairs), dtype=np.float32)
        live = [i for i, p in enumerate(pairs) if p not in self.known]
        for i, p in enumerate(pairs):
            if p in self.known:
                out[i] = self.known[p]
        if live:
            out[live] = super().score([pairs[i] for i in live], batch_size)
        return out


def load_pairs(name: str) -> list[dict[str, Any]]:
    """The v1 pairs of one task, as committed (the set's own tests compare them to the builder)."""
    path = DATA / f"{name}_pairs.jsonl"
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


@dataclass
class Prepared:
    """Features of every row, computed once with the judge (the expensive part)."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    features: dict[str, list[Any]] = field(default_factory=dict)
    #: features of each claim judged alone (a one-sentence answer): calibration fits on both,
    #: so a single correct answer is not judged by features that only exist in long answers
    alone: dict[str, list[Any]] = field(default_factory=dict)


def _cases(rows: list[dict[str, Any]], task: str) -> dict[tuple[str, str, str], list[int]]:
    """Row indices per case (set, item, target), in answer order."""
    key = "question" if task == "relevance" else "context"
    out: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        out[(r["set"], r["item"], r[key])].append(i)
    for idx in out.values():
        idx.sort(key=lambda i: rows[i]["position"])
    return out


async def prepare(judge: LocalJudge | None = None, sets: Sequence[str] = SETS) -> Prepared:
    """Features of every row, in its answer and alone; calibration rows' cross-encoder scores
    are out of fold (:class:`OutOfFold`). ``judge`` lends its embedder."""
    base = judge or LocalJudge()
    prep = Prepared()
    for task in ("relevance", "grounding"):
        rows = [r for s in sets for r in load_rows(s, task)]
        judge = base
        if task == "relevance":
            judge = LocalJudge(
                embedder=base.embedder,
                thresholds=base.thresholds,
                cross_encoder=OutOfFold(rows, read_oof()),
            )
        feats: list[Any] = [None] * len(rows)
        for (_, _, target), idx in _cases(rows, task).items():
            texts = [rows[i]["claim"] for i in idx]
            if task == "relevance":
                fs: Sequence[Any] = await judge.relevance_features(texts, target)
            else:
                fs = await judge.grounding_features(texts, target)
            for i, f in zip(idx, fs, strict=True):
                feats[i] = f
        alone: list[Any] = []
        for r in rows:
            if task == "relevance":
                alone += await judge.relevance_features([r["claim"]], r["question"])
            else:
                alone += await judge.grounding_features([r["claim"]], r["context"])
        prep.rows[task], prep.features[task], prep.alone[task] = rows, feats, alone
    return prep


def calibrate_on(prep: Prepared, split: str = "calibration") -> LocalThresholds:
    """Fit both decision models on ``split`` (the calibration halves of every set)."""
    models = {}
    for task, names in (("relevance", RELEVANCE_FEATURES), ("grounding", GROUNDING_FEATURES)):
        pairs = [(f.vector(), r["label"] == POSITIVE[task])
                 for feats in (prep.features[task], prep.alone[task])
                 for r, f in zip(prep.rows[task], feats, strict=True)
                 if r["split"] == split]  # fmt: skip
        models[task] = fit_linear([p for p, _ in pairs], [g for _, g in pairs], names)
    return replace(CALIBRATED, relevance=models["relevance"], grounding=models["grounding"])


def predict(task: str, f: Any, thr: LocalThresholds) -> bool:
    if task == "relevance":
        assert isinstance(f, RelevanceFeatures)
        return decide_relevance(f, thr)
    assert isinstance(f, GroundingFeatures)
    return decide_grounding(f, thr)[0]


@dataclass
class Row:
    set: str
    task: str
    subset: str
    stats: BinaryStats

    @property
    def ci(self) -> tuple[float, float]:
        return wilson(self.stats.tp + self.stats.tn, self.stats.n)


def evaluate(prep: Prepared, thr: LocalThresholds, split: str = "heldout") -> list[Row]:
    """Accuracy (95% CI) and kappa per set and task on ``split``: all rows (claims judged in
    their answer), the same claims each judged alone, clear rows, per kind."""
    out: list[Row] = []
    for task in ("relevance", "grounding"):
        preds = [(r, predict(task, f, thr), r["label"] == POSITIVE[task])
                 for r, f in zip(prep.rows[task], prep.features[task], strict=True)
                 if r["split"] == split]  # fmt: skip
        alone = [(r, predict(task, f, thr), r["label"] == POSITIVE[task])
                 for r, f in zip(prep.rows[task], prep.alone[task], strict=True)
                 if r["split"] == split]  # fmt: skip
        for s in sorted({r["set"] for r, _, _ in preds}):
            mine = [p for p in preds if p[0]["set"] == s]
            out.append(Row(s, task, "all", _stats(mine)))
            out.append(Row(s, task, "each claim alone",
                           _stats([p for p in alone if p[0]["set"] == s])))  # fmt: skip
            if s == "v1":
                out.append(Row(s, task, "clear", _stats([p for p in mine if p[0]["clear"]])))
            for kind in sorted({p[0]["kind"] for p in mine}):
                out.append(Row(s, task, f"kind={kind}",
                               _stats([p for p in mine if p[0]["kind"] == kind])))  # fmt: skip
    return out


def _stats(preds: Sequence[tuple[dict[str, Any], bool, bool]]) -> BinaryStats:
    return binary_stats([p for _, p, _ in preds], [g for _, _, g in preds])


def table(rows: list[Row]) -> str:
    out = [
        f"{'set':<3} {'task':<10} {'subset':<30} {'n':>4} {'accuracy':>8} {'95% CI':>13} {'kappa':>6}"
    ]
    for r in rows:
        kappa = "-" if r.subset.startswith("kind=") else f"{r.stats.kappa:.3f}"
        lo, hi = r.ci
        out.append(
            f"{r.set:<3} {r.task:<10} {r.subset:<30} {r.stats.n:>4} {r.stats.accuracy:>8.3f} "
            f"{f'{lo:.2f}-{hi:.2f}':>13} {kappa:>6}"
        )
    return "\n".join(out)


def errors(prep: Prepared, thr: LocalThresholds, split: str = "heldout") -> list[str]:
    """The misjudged rows of ``split`` (for inspecting failure modes)."""
    out = []
    for task in ("relevance", "grounding"):
        model = thr.relevance if task == "relevance" else thr.grounding
        for r, f in zip(prep.rows[task], prep.features[task], strict=True):
            if r["split"] != split or predict(task, f, thr) == (r["label"] == POSITIVE[task]):
                continue
            vec = {k: round(v, 3) for k, v in f.vector().items() if v}
            out.append(f"{r['set']} {task} {r['kind']:<14} score={model.score(f.vector()):+.2f} "
                       f"{vec} C={r['claim']!r}")  # fmt: skip
    return out


DECIDE = ROOT / "nexagauge" / "judge" / "local" / "decide.py"


def _model_source(m: Any) -> str:
    weights = "".join(f'            ("{n}", {w}),\n' for n, w in m.weights)
    return f"LinearModel(\n        bias={m.bias},\n        weights=(\n{weights}        ),\n    )"


def write_calibrated(thr: LocalThresholds) -> None:
    """Replace the ``CALIBRATED = ...`` block of ``nexagauge/judge/local/decide.py`` with ``thr`` (after the
    labelled data grew: the calibration test fails until the shipped models are refitted)."""
    src = DECIDE.read_text("utf-8")
    start = src.index("CALIBRATED = LocalThresholds(")
    end = src.index(")  # fmt: skip", start) + len(")  # fmt: skip")
    block = (
        f"CALIBRATED = LocalThresholds(\n    relevance={_model_source(thr.relevance)},\n"
        f"    grounding={_model_source(thr.grounding)},\n)  # fmt: skip"
    )
    DECIDE.write_text(src[:start] + block + src[end:], "utf-8")


def meets_targets(rows: list[Row]) -> bool:
    """v2 and v3 (unlike the calibration text): accuracy >= TARGET_ACCURACY per task; v1 clear
    pairs >= TARGET_V1_CLEAR."""
    ok = True
    for r in rows:
        if r.set in ("v2", "v3") and r.subset == "all":
            ok &= r.stats.accuracy >= TARGET_ACCURACY
        if r.set == "v1" and r.subset == "clear":
            ok &= r.stats.accuracy >= TARGET_V1_CLEAR
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrate", action="store_true", help="refit on the calibration halves")
    ap.add_argument("--write", action="store_true",
                    help="with --calibrate: write the fitted models into nexagauge/judge/local/decide.py")  # fmt: skip
    ap.add_argument("--errors", action="store_true", help="list misjudged rows of --split")
    ap.add_argument("--split", default="heldout", choices=["heldout", "calibration"])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--with-set", action="append", default=[], choices=CANDIDATE_SETS,
                    help="also calibrate on this candidate training set (measured, not used)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.write and args.with_set:
        ap.error("--with-set is a measurement: add the set to SETS to ship it")
    t0 = time.perf_counter()
    prep = asyncio.run(prepare(sets=(*SETS, *args.with_set)))
    t_feat = time.perf_counter() - t0
    thr = CALIBRATED
    if args.calibrate:
        thr = calibrate_on(prep)
        print(
            f"fitted on the calibration halves:\n  relevance={thr.relevance}\n  grounding={thr.grounding}"
        )
        print(
            "equals the shipped models" if thr == CALIBRATED else "DIFFERS from the shipped models"
        )
        if args.write and thr != CALIBRATED:
            write_calibrated(thr)
            print(f"written to {DECIDE}: bump CALIBRATION_VERSION and re-measure the docs' tables")
    rows = evaluate(prep, thr, args.split)
    if args.json:
        print(json.dumps([{"set": r.set, "task": r.task, "subset": r.subset, "ci": r.ci,
                           **asdict(r.stats)} for r in rows]))  # fmt: skip
    else:
        print(f"split={args.split}; judge {LocalJudge().describe()}; features {t_feat:.1f}s")
        print(table(rows))
    if args.errors:
        print("\n".join(errors(prep, thr, args.split)))
    return 0 if meets_targets(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
