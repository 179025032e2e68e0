"""Calibration of the local judge: accuracy, Cohen's kappa and threshold search on labelled pairs.

Used by ``bench/local_judge_accuracy.py`` and ``tests/local/test_calibration.py`` to (re)pick the
shipped thresholds on the *calibration* split only and to report held-out accuracy.

Example:
    >>> binary_stats([True, False], [True, True]).accuracy
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from nexagauge.judge.local_decide import (
    LocalThresholds,
    decide_grounding,
    decide_relevance,
    grounding_features,
)


@dataclass(frozen=True)
class BinaryStats:
    """Accuracy and Cohen's kappa of binary predictions against labels."""

    n: int
    accuracy: float
    kappa: float
    tp: int
    tn: int
    fp: int
    fn: int


def binary_stats(pred: Sequence[bool], gold: Sequence[bool]) -> BinaryStats:
    """Accuracy and Cohen's kappa (chance agreement from both marginals).

    Example:
        >>> s = binary_stats([True, False, True, True], [True, False, False, True])
        >>> (s.accuracy, round(s.kappa, 3))
        (0.75, 0.5)
    """
    if len(pred) != len(gold):
        raise ValueError("pred and gold differ in length")
    n = len(pred)
    if n == 0:
        return BinaryStats(0, math.nan, math.nan, 0, 0, 0, 0)
    tp = sum(1 for p, g in zip(pred, gold, strict=True) if p and g)
    tn = sum(1 for p, g in zip(pred, gold, strict=True) if not p and not g)
    fp = sum(1 for p, g in zip(pred, gold, strict=True) if p and not g)
    fn = n - tp - tn - fp
    po = (tp + tn) / n
    pe = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / (n * n)
    kappa = (po - pe) / (1 - pe) if pe < 1 else (1.0 if po == 1 else 0.0)
    return BinaryStats(n, po, kappa, tp, tn, fp, fn)


def _grid(lo: float, hi: float, step: float) -> list[float]:
    k = round((hi - lo) / step)
    return [round(lo + i * step, 4) for i in range(k + 1)]


def calibrate(
    relevance_sims: Sequence[float],
    relevance_gold: Sequence[bool],
    grounding_inputs: Sequence[tuple[str, Sequence[str], Sequence[float]]],
    grounding_gold: Sequence[bool],
    evidence_sentences: int = 2,
) -> LocalThresholds:
    """Pick thresholds that maximize accuracy on labelled pairs (use the calibration half only).

    Ties are broken towards the middle of the best plateau (robust to small shifts).
    ``grounding_inputs`` are ``(claim, context_sentences, similarities)``.
    """
    grid = _grid(0.10, 0.90, 0.01)
    accs = [
        binary_stats([decide_relevance(s, LocalThresholds(t, 0, 0)) for s in relevance_sims],
                     relevance_gold).accuracy
        for t in grid
    ]
    t_rel = _middle_of_best(grid, accs)

    feats = [
        grounding_features(c, ss, sims, evidence_sentences)
        for c, ss, sims in grounding_inputs
    ]
    best: tuple[float, float, float] | None = None
    results: dict[tuple[float, float], float] = {}
    cov_grid = _grid(0.30, 1.00, 0.05)
    for ts in _grid(0.30, 0.90, 0.01):
        for tc in cov_grid:
            thr = LocalThresholds(t_rel, ts, tc, evidence_sentences)
            acc = binary_stats([decide_grounding(f, thr)[0] for f in feats], grounding_gold).accuracy
            results[(ts, tc)] = acc
            if best is None or acc > best[0] + 1e-12:
                best = (acc, ts, tc)
    assert best is not None
    top = best[0]
    # choose the coverage with the widest similarity plateau at the top accuracy, then its middle
    best_tc, best_ts, best_width = best[2], best[1], -1
    for tc in cov_grid:
        ts_ok = [ts for (ts, c), a in results.items() if c == tc and abs(a - top) < 1e-12]
        if ts_ok and len(ts_ok) > best_width:
            best_width, best_tc, best_ts = len(ts_ok), tc, ts_ok[len(ts_ok) // 2]
    return LocalThresholds(t_rel, best_ts, best_tc, evidence_sentences)


def _middle_of_best(grid: list[float], accs: list[float]) -> float:
    top = max(accs)
    # longest run of consecutive grid points at the top accuracy, then its middle
    runs: list[list[float]] = []
    cur: list[float] = []
    for t, a in zip(grid, accs, strict=True):
        if abs(a - top) < 1e-12:
            cur.append(t)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    run = max(runs, key=len)
    return run[len(run) // 2]
