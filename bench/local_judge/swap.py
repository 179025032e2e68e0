"""Swapped answers: does the local judge read the question (the context), or only the answer?
(issue 17)

A sentence that answers one question is off topic for another, however much it looks like an
answer. This builds such sentences from the labelled sets themselves, with no new labels: for
every case, the first on-topic sentence of each of its ``k`` nearest other cases (by the e5
similarity of the questions, so mostly the same domain: the shape of a tangent), put to this
case's question (:func:`swapped`). Questions that share many content words are skipped
(:data:`OVERLAP`): one's answer may answer the other.

The same construction serves twice:

- ``bench/local_judge/train_ce.py --swaps K`` trains the relevance cross-encoder on K swaps
  of each **calibration** case as extra negatives (measured, not shipped: it rejects most swaps
  then, and loses accuracy on the labelled sets; ``bench/local_judge/RECORD.md``, "Swapped answers");
- this script measures the judge on the swaps of the **held-out** cases of v2, v3 and the
  test-only v4, v6, v7 and v10, which nothing trains on. Each swapped sentence is judged
  appended to the end of its new case's own answer (where a tangent usually sits; one judge
  call per swap, so the answer's other sentences are as written) and alone (a one-sentence
  answer). The judge should reject every one.

Grounding gets the same check (``--task grounding``): a supported sentence of one case against
the context of its nearest other case (e5 similarity of the contexts) should not be supported.
Neighbouring contexts of one writer sometimes state the same fact (two data-protection notices
both give "one month"), so a few grounding swaps are supported after all; the rate is a lower
bound on what the judge gets right::

    HF_HUB_OFFLINE=1 python bench/local_judge/swap.py --json bench/local_judge/results/swap.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from local_judge import accuracy as lja  # noqa: E402
from local_judge import eval as lje  # noqa: E402

#: swapped sentences per case: from this many nearest other cases
NEIGHBOURS = 4
#: the text a sentence is judged against, per task
TARGET = {"relevance": "question", "grounding": "context"}
#: questions whose content stems overlap this much (Jaccard) are not swapped with each other
OVERLAP = 0.2
#: with ``shared``: how many nearest other cases are looked at for swaps that share a word
SHARED_POOL = 12


@dataclass(frozen=True)
class Swap:
    """The first on-topic sentence of case ``cases[1]`` put to the question of ``cases[0]``
    (each case named by the index of its first row). Off topic by construction."""

    question: str
    claim: str
    cases: tuple[int, int]


def _alike(a: frozenset[str], b: frozenset[str]) -> bool:
    inter = len(a & b)
    return bool(inter) and inter / len(a | b) >= OVERLAP


def swapped(
    rows: Sequence[dict[str, Any]],
    split: str,
    k: int = NEIGHBOURS,
    task: str = "relevance",
    shared: bool = False,
) -> list[Swap]:
    """For every case of ``split`` among ``rows``, the first on-topic (``task`` grounding:
    supported) sentence of each of its ``k`` nearest other cases of that split, put to this
    case's question (context). Deterministic. ``Swap.question`` holds the context for grounding.

    ``shared``: instead, the first on-topic sentence that shares a content stem with the
    question, from the ``k`` nearest cases that have one (looking no further than the
    :data:`SHARED_POOL` nearest). Most plain swaps share no word with their new question (13% of
    the calibration swaps, against 57% of the on-topic sentences), so training on them alone
    teaches "no shared word: off topic"; a tangent usually does share one.

    Example (needs the packaged e5 model):
        >>> rows = [{"set": "x", "item": str(i), "question": q, "claim": c, "position": 0,
        ...          "label": "on_topic", "split": "heldout"} for i, (q, c) in enumerate([
        ...     ("How long is the warranty?", "Two years from delivery."),
        ...     ("Can I return a sale item?", "Yes, within 30 days.")])]
        >>> [(s.question, s.claim) for s in swapped(rows, "heldout", k=1)]  # doctest: +SKIP
        [('How long is the warranty?', 'Yes, within 30 days.'), ...]
    """
    from nexagauge.judge.local.e5 import E5Embedder

    target = TARGET[task]
    first: dict[tuple[str, str, str], int] = {}
    answers: dict[tuple[str, str, str], list[int]] = {}
    for i, r in enumerate(rows):
        if r["split"] != split:
            continue
        key = (r["set"], r["item"], r[target])
        first.setdefault(key, i)
        if r["label"] == lje.POSITIVE[task]:
            answers.setdefault(key, []).append(i)
    for idx in answers.values():
        idx.sort(key=lambda i: rows[i]["position"])
    keys = list(first)
    if not keys:
        return []
    prefix = "query: " if task == "relevance" else "passage: "
    vecs = E5Embedder().encode_sync([prefix + q for _, _, q in keys])
    sims = vecs @ vecs.T
    stems = [lja.question_stems(q) for _, _, q in keys]
    out: list[Swap] = []
    for a, key in enumerate(keys):
        taken = 0
        for rank, b in enumerate(int(x) for x in np.argsort(-sims[a], kind="stable")):
            if taken == k or (shared and rank > SHARED_POOL):
                break
            other = keys[b]
            if b == a or other not in answers or _alike(stems[a], stems[b]):
                continue
            pick = answers[other][:1]
            if shared:
                pick = [i for i in answers[other]
                        if stems[a] & lja.question_stems(rows[i]["claim"])][:1]  # fmt: skip
            if pick:
                out.append(Swap(key[2], rows[pick[0]]["claim"], (first[key], first[other])))
                taken += 1
    return out


async def judge_swaps(
    judge: Any, rows: Sequence[dict[str, Any]], swaps: Sequence[Swap], task: str = "relevance"
) -> dict[str, list[bool]]:
    """The judge's verdict (True = accepted, wrongly) on every swap, appended to its new
    case's answer (``appended``) and alone (``alone``)."""
    from nexagauge.judge.base import LABEL_SUPPORTED, LABEL_YES
    from nexagauge.schema.case import GroundingConfig, RelevanceConfig
    from nexagauge.schema.results import Claim, Item

    target = TARGET[task]
    by_case: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by_case.setdefault((r["set"], r["item"], r[target]), []).append(r)
    answers: dict[int, list[str]] = {}  # a case's own answer, in order, by its first row
    for s in swaps:
        r0 = rows[s.cases[0]]
        own = sorted(by_case[(r0["set"], r0["item"], r0[target])], key=lambda r: r["position"])
        answers[s.cases[0]] = [r["claim"] for r in own]
    knobs = RelevanceConfig() if task == "relevance" else GroundingConfig()
    accept = LABEL_YES if task == "relevance" else LABEL_SUPPORTED
    out: dict[str, list[bool]] = {"appended": [], "alone": []}
    for s in swaps:
        for mode, texts in (("appended", [*answers[s.cases[0]], s.claim]), ("alone", [s.claim])):
            claims = [Claim(item=Item(id=str(j), text=t, tokens=1.0), source_chunk_index=0)
                      for j, t in enumerate(texts)]  # fmt: skip
            res = await judge.judge_claims(task, claims, s.question, knobs, node=task)
            if not res.ok or len(res.verdicts) != len(texts):
                raise RuntimeError(f"swap {s.question!r} / {s.claim!r}: judge failed: {res.error}")
            out[mode].append(res.verdicts[-1].label == accept)
    return out


def measure(judge: Any, dataset: str, task: str = "relevance") -> dict[str, Any]:
    """Rejection rate (the right verdict) of the swaps of ``dataset``'s held-out cases, with
    95% Wilson intervals, appended and alone, and the indices of the swaps accepted."""
    rows = lje.load(task, "heldout", dataset)
    for r in rows:
        r["set"] = dataset
    swaps = swapped(rows, "heldout", task=task)
    verdicts = asyncio.run(judge_swaps(judge, rows, swaps, task))
    result: dict[str, Any] = {"set": dataset, "task": task, "swaps": len(swaps)}
    for mode, accepted in verdicts.items():
        k = sum(not a for a in accepted)
        lo, hi = lje.wilson(k, len(accepted))
        result[mode] = {"rejected": k, "rate": round(k / len(accepted), 4),
                        "ci": [round(lo, 4), round(hi, 4)],
                        "accepted": [i for i, a in enumerate(accepted) if a]}  # fmt: skip
    result["accepted_examples"] = [
        {TARGET[task]: s.question, "claim": s.claim}
        for s, a in zip(swaps, verdicts["appended"], strict=True)
        if a
    ][:10]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--set", nargs="+", choices=lje.SETS, default=list(lje.SETS))
    ap.add_argument("--task", nargs="+", choices=lje.TASKS, default=list(lje.TASKS))
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    judge = lje.make_judge()
    results = [measure(judge, s, t) for t in args.task for s in args.set]
    for r in results:
        print(f"{r['task']} {r['set']}: {r['swaps']} swaps; rejected appended {r['appended']['rate']:.3f} "
              f"{r['appended']['ci']}, alone {r['alone']['rate']:.3f} {r['alone']['ci']}")  # fmt: skip
    if args.json:
        out = {"judge": judge.result_meta(), "neighbours": NEIGHBOURS, "sets": results}
        args.json.write_text(json.dumps(out, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
