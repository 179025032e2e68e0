"""The comparison of a run with a baseline run: which cases regressed, which improved.

Cases are matched by case id (and occurrence, for a repeated id: :attr:`CaseView.key`). For each
matched case and each metric both runs scored, the change is ``new - old``; a change smaller
than :data:`TOLERANCE` is no change (float noise of a re-run). A case **regressed** when any of
its metrics went down, **improved** when at least one went up and none went down. A metric scored
in one run and not the other is listed with no delta and counts as neither. The per-metric means
come from each run's ``summary.json``.

Example:
    >>> from nexagauge.report.model import CaseView, ScoreView
    >>> old = [CaseView("a#0", "a", 0, 1, scores=(ScoreView("g", 0.9, True, None),))]
    >>> new = [CaseView("a#0", "a", 0, 1, scores=(ScoreView("g", 0.4, False, None),))]
    >>> c = compare_cases(old, new)
    >>> c.regressed, c.changes[0].delta
    (1, -0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from nexagauge.report.model import CaseView, MetricRow, RunView

#: score changes smaller than this are no change
TOLERANCE = 1e-9


def difference(old: float | None, new: float | None) -> float | None:
    """``new - old``, or ``None`` when either side has no value.

    Example:
        >>> difference(0.5, 0.75), difference(None, 0.75)
        (0.25, None)
    """
    return None if old is None or new is None else new - old


@dataclass(frozen=True)
class Change:
    """One metric of one case whose score differs between the runs (``None``: not scored)."""

    key: str
    case_id: str
    metric: str
    old: float | None
    new: float | None

    @property
    def delta(self) -> float | None:
        d = difference(self.old, self.new)
        return None if d is None else round(d, 12)


@dataclass(frozen=True)
class MetricDelta:
    """A metric's mean and pass rate in the baseline and in this run."""

    metric: str
    old_mean: float | None
    new_mean: float | None
    old_pass_rate: float | None
    new_pass_rate: float | None

    @property
    def delta(self) -> float | None:
        return difference(self.old_mean, self.new_mean)


@dataclass(frozen=True)
class Comparison:
    """What changed from the baseline to this run (see the module docstring)."""

    baseline_name: str
    matched: int
    regressed: int
    improved: int
    regressed_keys: frozenset[str]
    improved_keys: frozenset[str]
    new_cases: tuple[str, ...]
    missing_cases: tuple[str, ...]
    changes: tuple[Change, ...]
    metrics: tuple[MetricDelta, ...] = ()


def compare_cases(
    old: Sequence[CaseView], new: Sequence[CaseView], baseline_name: str = "baseline"
) -> Comparison:
    """Match the cases of two runs and list every changed score (worst regression first)."""
    before = {c.key: c for c in old}
    after = {c.key: c for c in new}
    changes: list[Change] = []
    regressed: set[str] = set()
    improved: set[str] = set()
    for key, case in after.items():
        prev = before.get(key)
        if prev is None:
            continue
        old_scores = {s.name: s.score for s in prev.scores}
        new_scores = {s.name: s.score for s in case.scores}
        down = up = False
        for metric in [*new_scores, *(m for m in old_scores if m not in new_scores)]:
            o, n = old_scores.get(metric), new_scores.get(metric)
            if o is None and n is None:
                continue
            if o is not None and n is not None and abs(n - o) < TOLERANCE:
                continue
            change = Change(key, case.case_id, metric, o, n)
            changes.append(change)
            if change.delta is not None:
                down |= change.delta < 0
                up |= change.delta > 0
        if down:
            regressed.add(key)
        elif up:
            improved.add(key)
    changes.sort(key=lambda c: (c.delta is None, c.delta if c.delta is not None else 0.0, c.key))
    return Comparison(
        baseline_name=baseline_name,
        matched=sum(k in before for k in after),
        regressed=len(regressed),
        improved=len(improved),
        regressed_keys=frozenset(regressed),
        improved_keys=frozenset(improved),
        new_cases=tuple(after[k].case_id for k in after if k not in before),
        missing_cases=tuple(before[k].case_id for k in before if k not in after),
        changes=tuple(changes),
    )


def metric_deltas(old: Sequence[MetricRow], new: Sequence[MetricRow]) -> tuple[MetricDelta, ...]:
    """Each metric of either run with its mean and pass rate before and after.

    Example:
        >>> a = MetricRow("g", "grounding", 2, 0.5, 0.5, 0.5, 0, 0)
        >>> b = MetricRow("g", "grounding", 2, 0.75, 0.75, 1.0, 0, 0)
        >>> metric_deltas([a], [b])[0].delta
        0.25
    """
    before = {m.metric: m for m in old}
    after = {m.metric: m for m in new}
    out = []
    for name in [*after, *(n for n in before if n not in after)]:
        o, n = before.get(name), after.get(name)
        out.append(
            MetricDelta(
                metric=name,
                old_mean=o.mean if o else None,
                new_mean=n.mean if n else None,
                old_pass_rate=o.pass_rate if o else None,
                new_pass_rate=n.pass_rate if n else None,
            )
        )
    return tuple(out)


def compare_runs(baseline: RunView, run: RunView) -> Comparison:
    """:func:`compare_cases` of two loaded runs, with their per-metric means."""
    c = compare_cases(baseline.cases, run.cases, baseline.name)
    return replace(c, metrics=metric_deltas(baseline.metrics, run.metrics))
