"""Calibration of the local judge: accuracy, Cohen's kappa, confidence intervals, model fitting.

Used by ``bench/local_judge/accuracy.py`` and ``tests/local/test_calibration.py`` to (re)pick the
shipped decision models on the *calibration* split only and to report held-out accuracy.

Example:
    >>> binary_stats([True, False], [True, True]).accuracy
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nexagauge.judge.local.decide import LinearModel


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


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion ``correct / n``.

    Example:
        >>> [round(x, 3) for x in wilson(45, 50)]
        [0.786, 0.957]
    """
    if n == 0:
        return (math.nan, math.nan)
    p = correct / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def fit_linear(
    rows: Sequence[Mapping[str, float]],
    gold: Sequence[bool],
    names: Sequence[str],
    l2: float = 1.0,
    iterations: int = 50,
) -> LinearModel:
    """Logistic regression (Newton's method, L2 penalty on standardized features) -> a
    :class:`LinearModel` in raw feature units, weights rounded to 3 decimals.

    Use the calibration split only. Deterministic: same rows, same weights.

    Example:
        >>> m = fit_linear([{"x": 0.0}, {"x": 1.0}, {"x": 0.1}, {"x": 0.9}], [False, True, False, True], ["x"])
        >>> m.score({"x": 1.0}) > 0 > m.score({"x": 0.0})
        True
    """
    if len(rows) != len(gold) or not rows:
        raise ValueError("fit_linear needs as many labels as rows, and at least one")
    x = np.array([[float(r[n]) for n in names] for r in rows], dtype=np.float64)
    y = np.array([1.0 if g else 0.0 for g in gold])
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mu) / sd])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0  # the intercept is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    raw = w[1:] / sd
    bias = w[0] - float((w[1:] * mu / sd).sum())
    return LinearModel(
        bias=round(float(bias), 3),
        weights=tuple((n, round(float(v), 3)) for n, v in zip(names, raw, strict=True)),
    )
