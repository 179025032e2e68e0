"""Throughput of the local judge: cases per second on one CPU core (issue 17).

Each case of ``bench/data/rag_cases.jsonl`` (52 RAG answers: question, retrieved passages, a
multi-sentence answer) is judged the way the ``claims``, ``relevance`` and ``grounding`` nodes
do it: claims extracted from the answer, one relevance call against the question, one grounding
call against the context. The process is pinned to one core (``sched_setaffinity``, one torch /
OpenMP thread) and each round starts with empty embedding and cross-encoder caches: the figure
is what a fresh stream of distinct cases costs. The same run also times the bare encoding of the
cases' texts (question, answer, context) with the judge's embedder and the relevance
cross-encoder's bare scoring of the (question, claim) pairs - the floor the judge cannot beat -
and the encoding with all-MiniLM-L6-v2, the model of the judge before issue 17. ``--baseline DIR`` also
runs this same script, right after, on the package of another source tree (e.g. a ``git worktree``
of the commit before issue 17, ``820af0b``) and reports both judges from one run of the bench::

    HF_HUB_OFFLINE=1 python bench/local_judge/throughput.py [--rounds 3] [--json FILE] [--quick]
    git worktree add /tmp/before 820af0b
    HF_HUB_OFFLINE=1 python bench/local_judge/throughput.py --baseline /tmp/before
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# bench/ for _machine; not the repository root: --baseline imports nexagauge from PYTHONPATH
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import pin_one_core

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "bench" / "data" / "rag_cases.jsonl"


def load_cases(limit: int | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in CASES.read_text("utf-8").splitlines() if x.strip()]
    return rows[:limit] if limit else rows


def _threads_one() -> None:
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # an embedder without torch
        pass


async def judge_all(judge: Any, cases: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Judge every case (claims, relevance, grounding); returns the (question, claim) pairs
    judged for relevance."""
    from nexagauge.schema.case import GroundingConfig, RelevanceConfig
    from nexagauge.schema.results import Chunk, Claim, Item

    pairs: list[tuple[str, str]] = []
    for c in cases:
        text = c["output"]
        chunk = Chunk(item=Item(id="o", text=text, tokens=1.0), index=0, char_start=0,
                      char_end=len(text))  # fmt: skip
        ex = await judge.extract_claims([chunk])
        claims = [
            Claim(item=Item(id=str(i), text=e.text, tokens=1.0), source_chunk_index=0)
            for i, e in enumerate(ex.claims)
        ]
        context = " ".join(c["context"]) if isinstance(c["context"], list) else c["context"]
        rel = await judge.judge_claims("relevance", claims, c["input"], RelevanceConfig(),
                                       node="relevance")  # fmt: skip
        grd = await judge.judge_claims("grounding", claims, context, GroundingConfig(),
                                       node="grounding")  # fmt: skip
        if rel.error or grd.error:
            raise RuntimeError(rel.error or grd.error)
        pairs += [(c["input"], cl.item.text) for cl in claims]
    return pairs


#: the relevance cross-encoder, loaded once (as the runtime's judge holds it); each round
#: empties its cache. None for a judge without one (--baseline of an older tree)
_CROSS: Any = None


def make_judge() -> Any:
    """The local judge as the runtime builds it, with its own embedder and fresh LRUs (every
    round starts cold; within a case, texts shared by the relevance and grounding calls are
    encoded once, as in a real run)."""
    global _CROSS
    from nexagauge.graph.runtime import Runtime
    from nexagauge.judge.local.judge import LocalJudge
    from nexagauge.settings import Settings

    rt = Runtime.create(Settings(judge={"mode": "local"}), use_cache=False)
    if rt.judge_kind != "local":
        raise SystemExit("the local judge is not available")
    embedder: Any
    try:
        from nexagauge.judge.local.e5 import E5Embedder

        embedder = E5Embedder(rt.settings.embeddings)
    except ImportError:  # a judge from before issue 17 (--baseline): its MiniLM service
        from nexagauge.judge.embeddings import LocalEmbedder

        embedder = LocalEmbedder(rt.settings.embeddings)
    try:
        from nexagauge.judge.local.ce import RelevanceCrossEncoder
    except ImportError:  # a judge from before the cross-encoder (--baseline)
        return LocalJudge(rt.settings, embedder=embedder, offload=rt.to_thread)
    _CROSS = _CROSS or RelevanceCrossEncoder()
    _CROSS.cache_clear()
    return LocalJudge(rt.settings, embedder=embedder, offload=rt.to_thread, cross_encoder=_CROSS)


def run(rounds: int, limit: int | None) -> dict[str, Any]:
    _threads_one()
    cases = load_cases(limit)
    judge = make_judge()

    async def main() -> dict[str, Any]:
        await judge_all(judge, cases[:2])  # load the model
        best = float("inf")
        pairs: list[tuple[str, str]] = []
        for _ in range(rounds):
            fresh = make_judge()
            t0 = time.perf_counter()
            pairs = await judge_all(fresh, cases)
            best = min(best, time.perf_counter() - t0)
        return {"seconds": best, "pairs": pairs}

    res = asyncio.run(main())
    texts = []
    for c in cases:
        ctx = c["context"] if isinstance(c["context"], list) else [c["context"]]
        texts += [c["input"], c["output"], *ctx]
    floor_s = min(_timed(judge.embedder.encode_sync, texts) for _ in range(rounds))
    ce_s = 0.0
    if _CROSS is not None:  # the cross-encoder's bare scoring of the relevance pairs

        def score(pairs: list[tuple[str, str]]) -> None:
            _CROSS.cache_clear()
            _CROSS.score(pairs)

        ce_s = min(_timed(score, res["pairs"]) for _ in range(rounds))
    minilm_s = None
    try:  # the pre-issue-17 judge's model on the same texts, same run (the baseline's floor)
        from nexagauge.judge.embeddings import create_embedder
        from nexagauge.settings import EmbeddingSettings

        minilm = create_embedder(EmbeddingSettings(cache_size=0))
        minilm.encode_sync(texts[:4])  # type: ignore[attr-defined]
        minilm_s = min(_timed(minilm.encode_sync, texts) for _ in range(rounds))  # type: ignore[attr-defined]
    except Exception as e:  # sentence-transformers/torch not installed: no baseline floor
        print(f"(no MiniLM baseline: {type(e).__name__}: {e})")
    return {
        "judge": judge.describe(),
        "cases": len(cases),
        "claims": len(res["pairs"]),
        "seconds": round(res["seconds"], 3),
        "cases_per_s": round(len(cases) / res["seconds"], 2),
        "ms_per_case": round(1000 * res["seconds"] / len(cases), 1),
        "texts_encoded_for_floor": len(texts),
        "encode_floor_s": round(floor_s, 3),
        "cross_encoder_pairs": len(res["pairs"]) if _CROSS is not None else 0,
        "cross_encoder_floor_s": round(ce_s, 3),
        "judge_vs_floor": round(res["seconds"] / (floor_s + ce_s), 2),
        "minilm_encode_same_texts_s": round(minilm_s, 3) if minilm_s else None,
        "cpu": "1 core (sched_setaffinity), 1 thread",
    }


def _timed(fn: Any, texts: list[Any]) -> float:
    t0 = time.perf_counter()
    fn(texts)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="4 cases, 1 round (a smoke run)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--baseline", type=Path, help="also measure the judge of this source tree")
    args = ap.parse_args(argv)
    pin_one_core()
    out = run(1 if args.quick else args.rounds, 4 if args.quick else None)
    _print(out)
    if args.baseline:
        out["baseline"] = baseline(args.baseline, args.rounds, args.quick)
        _print(out["baseline"])
        out["speed_vs_baseline"] = round(out["cases_per_s"] / out["baseline"]["cases_per_s"], 3)
        print(f"this judge runs at {out['speed_vs_baseline']}x the baseline's cases/s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def baseline(tree: Path, rounds: int, quick: bool) -> dict[str, Any]:
    """This script, same cases, in a subprocess that imports ``nexagauge`` from ``tree``."""
    if not (tree / "nexagauge" / "__init__.py").is_file():
        raise SystemExit(f"--baseline {tree}: no nexagauge package there")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "baseline.json"
        argv = [sys.executable, __file__, "--rounds", str(rounds), "--json", str(out)]
        env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
        subprocess.run([*argv, *(["--quick"] if quick else [])], env=env, check=True,
                       capture_output=True)  # fmt: skip
        res: dict[str, Any] = json.loads(out.read_text())
    res["source"] = str(tree)
    return res


def _print(out: dict[str, Any]) -> None:
    print(
        f"local judge ({out['judge']}): {out['cases']} cases, {out['claims']} claims in "
        f"{out['seconds']} s on one core -> {out['cases_per_s']} cases/s "
        f"({out['ms_per_case']} ms/case); bare encoding of the cases' texts with the judge's "
        f"embedder {out['encode_floor_s']} s"
        + (
            f", the cross-encoder's bare scoring of the {out['cross_encoder_pairs']} relevance "
            f"pairs {out['cross_encoder_floor_s']} s"
            if out.get("cross_encoder_pairs")
            else ""
        )
        + f" (judge = {out['judge_vs_floor']}x that)"
        + (
            f"; all-MiniLM-L6-v2 on the same texts {out['minilm_encode_same_texts_s']} s"
            if out["minilm_encode_same_texts_s"]
            else ""
        )
    )


if __name__ == "__main__":
    sys.exit(main())
