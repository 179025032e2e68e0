"""Accuracy of the local judge on the v2 / v3 / v4 / v6 / v7 labelled sets (issue 17), with
confidence intervals.

Runs the judge exactly as the ``relevance`` / ``grounding`` nodes do (``judge_claims`` through
the judge protocol, one call per case with all of the answer's sentences in answer order, so a
judge may use earlier sentences) on one split of ``tests/data/local_judge_v2/`` (or ``_v3/``,
``_v4/``, ``_v6/``, ``_v7/`` with ``--set v3``, ...) and reports,
per task: accuracy with a 95% Wilson interval, Cohen's kappa, precision/recall of the positive
label, and accuracy with its interval per ``kind`` and per shape of the answer
(:func:`answer_shapes`). Fully offline::

    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py                      # held-out split
    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py --split calibration  # the other half
    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py --errors --json out.json
    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py --set v3             # the third set
    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py --set v4             # test only
    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py --set v6             # test only too
    HF_HUB_OFFLINE=1 python bench/local_judge/eval.py --set v7             # and v7

The held-out split is for reporting only: calibrate on ``--split calibration`` (see
:func:`load`). The numbers in ``bench/local_judge/RECORD.md`` ("Evaluation set v2") come from this script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "local_judge_v2"
SETS = ("v2", "v3", "v4", "v6", "v7", "v10")
#: sets written only to test the shipped judge: every case is in the held-out half, and nothing
#: calibrates or trains on them (``local_judge.accuracy.SETS`` leaves them out)
TEST_ONLY = frozenset({"v4", "v6", "v7", "v10"})
#: sets written only to train on: every case is in the calibration half, so there is nothing
#: to evaluate (v5: relevance only, the cross-encoder's extra training text)
TRAIN_ONLY = frozenset({"v5"})
#: training sets measured and not used (``local_judge.accuracy.CANDIDATE_SETS``: v8, v9)
CANDIDATE = frozenset({"v8", "v9"})
#: every labelled set with a directory of its own (v1 is ``tests/data/*_pairs.jsonl``)
LABELLED = (*SETS, *sorted(TRAIN_ONLY | CANDIDATE))
TASKS = ("relevance", "grounding")
POSITIVE = {"relevance": "on_topic", "grounding": "supported"}
Z95 = 1.959963984540054


def set_dir(dataset: str) -> Path:
    """The directory of a labelled set (``v2``: ``tests/data/local_judge_v2``)."""
    if dataset not in LABELLED:
        raise ValueError(f"set must be one of {LABELLED}, got {dataset!r}")
    return DATA.parent / f"local_judge_{dataset}"


def tasks_of(dataset: str) -> tuple[str, ...]:
    """The tasks a set has labels for (a training-only set may have one)."""
    return tuple(t for t in TASKS if (set_dir(dataset) / f"{t}.jsonl").is_file())


def load(task: str, split: str | None = None, dataset: str = "v2") -> list[dict[str, Any]]:
    """Rows of ``task`` (one per sentence), only those of ``split`` when given.

    Example:
        >>> rows = load("relevance", "calibration")
        >>> {r["split"] for r in rows}
        {'calibration'}
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    path = set_dir(dataset) / f"{task}.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [r for r in rows if split is None or r["split"] == split]


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (95% by default); ``(0, 1)`` when n = 0.

    Unlike the normal approximation it stays inside [0, 1] and is usable at 0 or n successes.

    Example:
        >>> lo, hi = wilson(90, 100)
        >>> round(lo, 3), round(hi, 3)
        (0.826, 0.945)
    """
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def cohen_kappa(pred: Sequence[bool], gold: Sequence[bool]) -> float:
    """Cohen's kappa of two binary raters (0 when chance agreement is 1, e.g. one class only).

    Example:
        >>> cohen_kappa([True, False, True, False], [True, False, False, False])
        0.5
    """
    n = len(gold)
    if n == 0 or len(pred) != n:
        raise ValueError("pred and gold must be non-empty and of equal length")
    po = sum(p == g for p, g in zip(pred, gold, strict=True)) / n
    pp, pg = sum(pred) / n, sum(gold) / n
    pe = pp * pg + (1 - pp) * (1 - pg)
    return 0.0 if pe >= 1 else (po - pe) / (1 - pe)


@dataclass
class Score:
    """Accuracy of one subset, with its 95% Wilson interval."""

    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float

    @classmethod
    def of(cls, pred: Sequence[bool], gold: Sequence[bool]) -> Score:
        k = sum(p == g for p, g in zip(pred, gold, strict=True))
        n = len(gold)
        lo, hi = wilson(k, n)
        return cls(n, k, k / n if n else 0.0, lo, hi)


@dataclass
class TaskReport:
    task: str
    split: str
    overall: Score
    kappa: float
    precision: float
    recall: float
    per_kind: dict[str, Score]
    per_label: dict[str, Score]
    errors: list[dict[str, Any]]
    #: accuracy by the shape of the sentence's answer (:func:`answer_shapes`)
    per_shape: dict[str, Score] = field(default_factory=dict)


def answer_shapes(task: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The shape of each row's answer: ``all_positive`` (every sentence on topic / supported),
    ``all_negative``, ``negatives_last`` (every negative after every positive) or
    ``negatives_before`` (a negative first or between positives).

    The sets before v6 have almost only ``negatives_last`` answers, so a judge could score well
    by position alone; v6 was written to have the others too.

    Example:
        >>> rows = [{"item": "a", "position": i, "label": l} for i, l in
        ...         enumerate(["on_topic", "off_topic", "on_topic"])]
        >>> answer_shapes("relevance", rows)
        ['negatives_before', 'negatives_before', 'negatives_before']
    """
    by_case: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for r in rows:
        by_case[r["item"]].append((r["position"], r["label"] == POSITIVE[task]))
    shape = {}
    for case, marks in by_case.items():
        labels = [g for _, g in sorted(marks)]
        if all(labels):
            shape[case] = "all_positive"
        elif not any(labels):
            shape[case] = "all_negative"
        else:
            last_pos = max(i for i, g in enumerate(labels) if g)
            first_neg = min(i for i, g in enumerate(labels) if not g)
            shape[case] = "negatives_last" if first_neg > last_pos else "negatives_before"
    return [shape[r["item"]] for r in rows]


def report(
    task: str, split: str, rows: Sequence[dict[str, Any]], pred: Sequence[bool]
) -> TaskReport:
    """Scores of predictions ``pred`` (True = positive label) for ``rows``."""
    gold = [r["label"] == POSITIVE[task] for r in rows]
    tp = sum(p and g for p, g in zip(pred, gold, strict=True))
    groups: dict[str, dict[str, list[int]]] = {
        "kind": defaultdict(list),
        "label": defaultdict(list),
    }
    groups["shape"] = defaultdict(list)
    for i, (r, shape) in enumerate(zip(rows, answer_shapes(task, rows), strict=True)):
        groups["kind"][r["kind"]].append(i)
        groups["label"][r["label"]].append(i)
        groups["shape"][f"{shape}:{r['label']}"].append(i)

    def sub(idx: list[int]) -> Score:
        return Score.of([pred[i] for i in idx], [gold[i] for i in idx])

    errs = [
        {"id": r["id"], "kind": r["kind"], "label": r["label"], "claim": r["claim"]}
        for r, p, g in zip(rows, pred, gold, strict=True)
        if p != g
    ]
    return TaskReport(
        task,
        split,
        Score.of(pred, gold),
        cohen_kappa(pred, gold),
        tp / max(1, sum(pred)),
        tp / max(1, sum(gold)),
        {k: sub(v) for k, v in sorted(groups["kind"].items())},
        {k: sub(v) for k, v in sorted(groups["label"].items())},
        errs,
        {k: sub(v) for k, v in sorted(groups["shape"].items())},
    )


async def predict(judge: Any, task: str, rows: Sequence[dict[str, Any]]) -> list[bool]:
    """The judge's verdict (True = on-topic / supported) for every row, one call per case.

    Each call gets the case's whole answer in order, as the claims node would produce it.
    """
    from nexagauge.judge.base import LABEL_SUPPORTED, LABEL_YES
    from nexagauge.schema.case import GroundingConfig, RelevanceConfig
    from nexagauge.schema.results import Claim, Item

    by_case: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_case[r["item"]].append(i)
    out: list[bool | None] = [None] * len(rows)
    knobs = RelevanceConfig() if task == "relevance" else GroundingConfig()
    accept = LABEL_YES if task == "relevance" else LABEL_SUPPORTED
    for case, idx in by_case.items():
        idx.sort(key=lambda i: rows[i]["position"])
        claims = [
            Claim(item=Item(id=str(k), text=rows[i]["claim"], tokens=1.0), source_chunk_index=0)
            for k, i in enumerate(idx)
        ]
        target = rows[idx[0]]["question" if task == "relevance" else "context"]
        res = await judge.judge_claims(task, claims, target, knobs, node=task)
        if not res.ok or len(res.verdicts) != len(idx):
            raise RuntimeError(f"{task} case {case}: judge failed: {res.error}")
        for i, v in zip(idx, res.verdicts, strict=True):
            out[i] = v.label == accept
    return [bool(p) for p in out]


def make_judge(config: Path | None = None) -> Any:
    """The local judge exactly as a run gets it: built by the runtime from the settings.

    ``judge.mode`` is forced to ``local``; everything else follows the usual precedence
    (``NEXAGAUGE_*`` environment, then ``config``), so e.g. ``NEXAGAUGE_EMBEDDINGS_MODEL_PATH``
    evaluates another embedder.
    """
    from nexagauge.graph.runtime import Runtime
    from nexagauge.settings import load_settings

    settings = load_settings(config, judge={"mode": "local"})
    judge = Runtime.create(settings, use_cache=False).judge
    if getattr(judge, "kind", None) != "local":
        raise SystemExit(f"expected the local judge, the runtime built {judge!r}")
    return judge


def _fmt(s: Score) -> str:
    return f"{s.accuracy:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"


def table(reports: Sequence[TaskReport]) -> str:
    lines = []
    for r in reports:
        lines.append(
            f"{r.task} ({r.split}): n={r.overall.n} accuracy {_fmt(r.overall)} kappa {r.kappa:.3f} "
            f"precision {r.precision:.3f} recall {r.recall:.3f}"
        )
        for name, s in [*r.per_label.items(), *r.per_shape.items(), *r.per_kind.items()]:
            lines.append(f"  {name:<28} n={s.n:>4} {_fmt(s)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--split", choices=["heldout", "calibration", "all"], default="heldout")
    ap.add_argument("--task", choices=[*TASKS, "both"], default="both")
    ap.add_argument("--set", choices=SETS, default="v2", help="which labelled set")
    ap.add_argument("--json", type=Path, help="write the full report (with errors) here")
    ap.add_argument("--errors", action="store_true", help="print every misjudged sentence")
    ap.add_argument("--config", type=Path, help="nexa-gauge TOML config (embeddings, ...)")
    args = ap.parse_args(argv)
    split = None if args.split == "all" else args.split
    judge = make_judge(args.config)
    tasks = TASKS if args.task == "both" else (args.task,)
    t0 = time.perf_counter()
    reports = []
    for task in tasks:
        rows = load(task, split, args.set)
        pred = asyncio.run(predict(judge, task, rows))
        reports.append(report(task, args.split, rows, pred))
    elapsed = time.perf_counter() - t0
    meta = judge.result_meta()
    print(f"set {args.set}; judge {json.dumps(meta)}; {elapsed:.1f}s")
    print(table(reports))
    if args.errors:
        for r in reports:
            for e in r.errors:
                print(f"{r.task} {e['kind']:<26} gold={e['label']:<11} {e['claim']}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"judge": meta, "seconds": elapsed, "reports": [asdict(r) for r in reports]},
                indent=1,
            ),
            "utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
