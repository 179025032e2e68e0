"""How often two people agree on the held-out labels, and the local judge against each (issue 17).

The held-out halves of the v2 and v3 sets, and the whole test-only v4, v6 and v7 sets, were labelled
by the people who wrote them. A second
labeller, who saw only the labelling rule and the cases (question or context, and the answer's
sentences in order; never the first labels, the kinds, the judge or its code), labelled every
held-out sentence again: ``tests/data/local_judge_v2/second_labels.tsv`` and ``_v3/``, one line
``<id> TAB <+|-> TAB <reason>`` per sentence.

Their agreement bounds what any judge can be measured to reach on these sets: where the two
people disagree, the sentence is ambiguous under the rule, and the judge is "wrong" against one of
them whatever it says. This script reports, per set and task:

- ``agree``: the two labellers' raw agreement (95% Wilson interval) and Cohen's kappa;
- the judge's accuracy against the first labels (the numbers in the main table), against the
  second labels, and on the sentences both labellers agree on (the unambiguous ones).

Fully offline::

    HF_HUB_OFFLINE=1 python bench/local_judge/agreement.py            # markdown table
    HF_HUB_OFFLINE=1 python bench/local_judge/agreement.py --json out.json

``tests/local/test_calibration.py`` recomputes the table and checks that ``bench/local_judge/RECORD.md``
shows the same numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from local_judge import accuracy as lja  # noqa: E402
from local_judge.eval import SETS, cohen_kappa  # noqa: E402
from nexagauge.judge.local.calibrate import wilson  # noqa: E402
from nexagauge.judge.local.decide import CALIBRATED, LocalThresholds  # noqa: E402

# SETS: the sets that have a second labelling of their held-out half, which are the sets
# ``local_judge.eval`` evaluates (the test-only ones are held out whole)
TASKS = ("relevance", "grounding")


def second_path(dataset: str) -> Path:
    """``tests/data/local_judge_<set>/second_labels.tsv``."""
    return lja.DATA / f"local_judge_{dataset}" / "second_labels.tsv"


def load_second(dataset: str) -> dict[str, bool]:
    """Second labels of one set: sentence id -> positive (``+``).

    Raises ``ValueError`` naming the file and line of a malformed or repeated entry.

    Example:
        >>> labels = load_second("v3")
        >>> labels["rel3-ana-card-lost-0"]
        False
    """
    path = second_path(dataset)
    out: dict[str, bool] = {}
    for no, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in ("+", "-") or not parts[0]:
            raise ValueError(f"{path}:{no}: expected '<id>\\t<+|->\\t<reason>', got {line!r}")
        if parts[0] in out:
            raise ValueError(f"{path}:{no}: {parts[0]} labelled twice")
        out[parts[0]] = parts[1] == "+"
    return out


@dataclass
class Share:
    """``k`` of ``n`` with its 95% Wilson interval."""

    k: int
    n: int

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else 0.0

    @property
    def ci(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    def fmt(self) -> str:
        lo, hi = self.ci
        return f"{self.value:.3f} [{lo:.3f}, {hi:.3f}]"


@dataclass
class Agreement:
    """One set and task: the two labellers, and the judge against each."""

    set: str
    task: str
    agree: Share
    kappa: float
    judge_first: Share
    judge_second: Share
    judge_agreed: Share

    def markdown(self) -> str:
        return (
            f"| {self.set} | {self.task} | {self.agree.n} | {self.agree.fmt()} | "
            f"{self.kappa:.3f} | {self.judge_first.fmt()} | {self.judge_second.fmt()} | "
            f"{self.judge_agreed.n} | {self.judge_agreed.fmt()} |"
        )


HEADER = (
    "| set | task | n | labellers agree [95% CI] | kappa | judge vs first labels | "
    "judge vs second labels | n agreed | judge on agreed |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|"
)


def compare(
    rows: Sequence[dict[str, Any]], judge: Sequence[bool], second: dict[str, bool], task: str
) -> tuple[Share, float, Share, Share, Share]:
    """Agreement of the first labels (``rows``) with ``second``, and of ``judge`` with each.

    Every row must have a second label (``KeyError`` names the first that has none).

    Example:
        >>> rows = [{"id": "a", "label": "on_topic"}, {"id": "b", "label": "off_topic"}]
        >>> agree, kappa, first, sec, agreed = compare(
        ...     rows, [True, True], {"a": True, "b": True}, "relevance")
        >>> agree.k, first.k, sec.k, agreed.n
        (1, 1, 2, 1)
    """
    first = [r["label"] == lja.POSITIVE[task] for r in rows]
    try:
        sec = [second[r["id"]] for r in rows]
    except KeyError as e:
        raise KeyError(f"no second label for {e.args[0]}") from None
    n = len(rows)
    both = [i for i in range(n) if first[i] == sec[i]]
    return (
        Share(len(both), n),
        cohen_kappa(first, sec),
        Share(sum(judge[i] == first[i] for i in range(n)), n),
        Share(sum(judge[i] == sec[i] for i in range(n)), n),
        Share(sum(judge[i] == first[i] for i in both), len(both)),
    )


def agreement(prep: lja.Prepared, thr: LocalThresholds = CALIBRATED) -> list[Agreement]:
    """The table, from features computed by :func:`local_judge.accuracy.prepare` (the sets
    ``prep`` holds)."""
    out = []
    for dataset in [d for d in SETS if any(r["set"] == d for r in prep.rows["relevance"])]:
        second = load_second(dataset)
        for task in TASKS:
            pairs = [(r, lja.predict(task, f, thr))
                     for r, f in zip(prep.rows[task], prep.features[task], strict=True)
                     if r["set"] == dataset and r["split"] == "heldout"]  # fmt: skip
            rows = [r for r, _ in pairs]
            out.append(
                Agreement(dataset, task, *compare(rows, [p for _, p in pairs], second, task))
            )
    return out


def check_coverage(dataset: str) -> None:
    """The second labels cover exactly the held-out sentences of ``dataset``, once each."""
    held = {r["id"] for t in TASKS for r in lja.load_rows(dataset, t) if r["split"] == "heldout"}
    got = set(load_second(dataset))
    if held != got:
        missing, extra = sorted(held - got), sorted(got - held)
        raise ValueError(f"{second_path(dataset)}: missing {missing[:5]}, not held-out {extra[:5]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the table as JSON here")
    args = ap.parse_args(argv)
    for dataset in SETS:
        check_coverage(dataset)
    prep = asyncio.run(lja.prepare(sets=SETS))
    table = agreement(prep)
    print(HEADER)
    print("\n".join(a.markdown() for a in table))
    if args.json:
        args.json.write_text(json.dumps([asdict(a) for a in table], indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
