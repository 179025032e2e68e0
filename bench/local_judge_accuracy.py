"""Accuracy and Cohen's kappa of the local judge on the held-out half of the labelled sets.

Recomputes the numbers of ``docs/local-judge.md`` from ``tests/data/relevance_pairs.jsonl`` and
``tests/data/grounding_pairs.jsonl`` with the packaged embedding model, fully offline::

    HF_HUB_OFFLINE=1 python bench/local_judge_accuracy.py             # held-out table
    HF_HUB_OFFLINE=1 python bench/local_judge_accuracy.py --calibrate # re-pick thresholds
    HF_HUB_OFFLINE=1 python bench/local_judge_accuracy.py --json      # machine-readable

The judge uses only its built-in word lists (no host lexicon), so every machine gets the same
numbers. ``--calibrate`` runs :func:`nexagauge.judge.local_calibrate.calibrate` on the
*calibration* half only and
reports whether the result equals the shipped thresholds. The
test ``tests/local/test_calibration.py`` imports this module and asserts the same thing plus
held-out accuracy >= 0.85 on clear pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TARGET_ACCURACY = 0.85

from nexagauge.judge.embeddings import create_embedder  # noqa: E402
from nexagauge.judge.local_calibrate import BinaryStats, binary_stats, calibrate  # noqa: E402
from nexagauge.judge.local_decide import (  # noqa: E402
    CALIBRATED,
    LocalThresholds,
    decide_grounding,
    decide_relevance,
    grounding_features,
)
from nexagauge.judge.segment import sentences  # noqa: E402
from nexagauge.settings import EmbeddingSettings  # noqa: E402


def load_pairs(name: str) -> list[dict[str, Any]]:
    path = DATA / f"{name}_pairs.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@dataclass
class Prepared:
    """Similarities computed once for every pair (the expensive part)."""

    relevance: list[dict[str, Any]]
    relevance_sims: list[float]
    grounding: list[dict[str, Any]]
    grounding_inputs: list[tuple[str, list[str], list[float]]]


async def prepare(embedder: Any = None) -> Prepared:
    emb = embedder or create_embedder(EmbeddingSettings())
    rel = load_pairs("relevance")
    grd = load_pairs("grounding")
    texts = [r["question"] for r in rel] + [r["claim"] for r in rel]
    ctx_sents = {r["context"]: sentences(r["context"]) for r in grd}
    texts += [s for ss in ctx_sents.values() for s in ss] + [r["claim"] for r in grd]
    await emb.embed(texts)  # one batched pass; everything below hits the LRU
    q = await emb.embed([r["question"] for r in rel])
    c = await emb.embed([r["claim"] for r in rel])
    rel_sims = [float(x) for x in (q * c).sum(axis=1)]
    inputs: list[tuple[str, list[str], list[float]]] = []
    for r in grd:
        ss = ctx_sents[r["context"]]
        v = await emb.embed([*ss, r["claim"]])
        inputs.append((r["claim"], ss, [float(x) for x in v[:-1] @ v[-1]]))
    return Prepared(rel, rel_sims, grd, inputs)


def calibrate_on(prep: Prepared, split: str = "calibration") -> LocalThresholds:
    ri = [i for i, r in enumerate(prep.relevance) if r["split"] == split]
    gi = [i for i, r in enumerate(prep.grounding) if r["split"] == split]
    return calibrate(
        [prep.relevance_sims[i] for i in ri],
        [prep.relevance[i]["label"] == "on_topic" for i in ri],
        [prep.grounding_inputs[i] for i in gi],
        [prep.grounding[i]["label"] == "supported" for i in gi],
        evidence_sentences=CALIBRATED.evidence_sentences,
    )


@dataclass
class Row:
    task: str
    subset: str
    stats: BinaryStats


def evaluate(prep: Prepared, thr: LocalThresholds, split: str = "heldout") -> list[Row]:
    """Accuracy/kappa per task on ``split``: all pairs, clear pairs, and per kind (accuracy)."""
    rows: list[Row] = []
    rel = [
        (r, s)
        for r, s in zip(prep.relevance, prep.relevance_sims, strict=True)
        if r["split"] == split
    ]
    grd = [
        (r, x)
        for r, x in zip(prep.grounding, prep.grounding_inputs, strict=True)
        if r["split"] == split
    ]
    rel_pred = [(r, decide_relevance(s, thr), r["label"] == "on_topic") for r, s in rel]
    grd_pred = [
        (
            r,
            decide_grounding(grounding_features(c, ss, sims, thr.evidence_sentences), thr)[0],
            r["label"] == "supported",
        )
        for r, (c, ss, sims) in grd
    ]
    for task, preds in (("relevance", rel_pred), ("grounding", grd_pred)):
        rows.append(Row(task, "all", _stats(preds)))
        rows.append(Row(task, "clear", _stats([p for p in preds if p[0]["clear"]])))
        for kind in sorted({p[0]["kind"] for p in preds}):
            rows.append(
                Row(task, f"kind={kind}", _stats([p for p in preds if p[0]["kind"] == kind]))
            )
    return rows


def _stats(preds: Sequence[tuple[dict[str, Any], bool, bool]]) -> BinaryStats:
    return binary_stats([p for _, p, _ in preds], [g for _, _, g in preds])


def table(rows: list[Row]) -> str:
    out = [f"{'task':<10} {'subset':<18} {'n':>4} {'accuracy':>8} {'kappa':>6}"]
    for r in rows:
        kappa = "-" if r.subset.startswith("kind=") else f"{r.stats.kappa:.3f}"
        out.append(
            f"{r.task:<10} {r.subset:<18} {r.stats.n:>4} {r.stats.accuracy:>8.3f} {kappa:>6}"
        )
    return "\n".join(out)


def errors(prep: Prepared, thr: LocalThresholds, split: str = "heldout") -> list[str]:
    """The misjudged pairs of ``split`` (for inspecting failure modes)."""
    out = []
    for r, s in zip(prep.relevance, prep.relevance_sims, strict=True):
        if r["split"] == split and decide_relevance(s, thr) != (r["label"] == "on_topic"):
            out.append(
                f"relevance {r['kind']:<11} sim={s:.3f} Q={r['question']!r} C={r['claim']!r}"
            )
    for r, (c, ss, sims) in zip(prep.grounding, prep.grounding_inputs, strict=True):
        f = grounding_features(c, ss, sims, thr.evidence_sentences)
        if r["split"] == split and decide_grounding(f, thr)[0] != (r["label"] == "supported"):
            out.append(f"grounding {r['kind']:<11} {f.as_dict()} C={c!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--calibrate", action="store_true", help="re-pick thresholds on the calibration half"
    )
    ap.add_argument("--errors", action="store_true", help="list misjudged held-out pairs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    prep = asyncio.run(prepare())
    t_embed = time.perf_counter() - t0
    thr = CALIBRATED
    if args.calibrate:
        thr = calibrate_on(prep)
        same = thr == CALIBRATED
        print(f"calibrated on the calibration half: {thr}")
        print("equals the shipped thresholds" if same else f"DIFFERS from {CALIBRATED}")
    rows = evaluate(prep, thr)
    if args.json:
        print(json.dumps([{"task": r.task, "subset": r.subset, **asdict(r.stats)} for r in rows]))
    else:
        n_rel = sum(1 for r in prep.relevance if r["split"] == "heldout")
        n_grd = sum(1 for r in prep.grounding if r["split"] == "heldout")
        print(
            f"held-out half: {n_rel} claim/question pairs, {n_grd} claim/context pairs; "
            f"thresholds {thr}; embedding+load {t_embed:.1f}s"
        )
        print(table(rows))
    if args.errors:
        print("\n".join(errors(prep, thr)))
    clear = [r for r in rows if r.subset == "clear"]
    return 0 if all(r.stats.accuracy >= TARGET_ACCURACY for r in clear) else 1


if __name__ == "__main__":
    sys.exit(main())
