"""Score distributions as inline SVG: the geometry is computed here, the template draws it.

One histogram per metric with at least one score: :data:`BINS` equal bins over [0, 1] (widened
to the scores' range when a metric scores outside it), a bar per bin with its count, the mean
marked, axis labels. Only numbers and the metric name leave this module, and the template
escapes the name: a chart cannot carry markup.

Example:
    >>> h = histogram("grounding", [0.0, 0.05, 0.5, 1.0])
    >>> [b.count for b in h.bars]
    [2, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    >>> h.total, round(h.mean, 4)
    (4, 0.3875)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nexagauge.report.model import CaseView

BINS = 10
#: drawing size of one chart (SVG user units)
WIDTH, HEIGHT = 260, 130
#: plot area inside the chart: left, top, right, bottom margins
LEFT, TOP, RIGHT, BOTTOM = 30, 8, 8, 22


@dataclass(frozen=True)
class Bar:
    """One bin: [lo, hi) (the last bin includes hi), its count and its rectangle."""

    lo: float
    hi: float
    count: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Histogram:
    metric: str
    lo: float
    hi: float
    total: int
    mean: float
    peak: int
    bars: tuple[Bar, ...]
    #: x of the mean marker; the plot area (for the axes)
    mean_x: float
    plot_left: float = LEFT
    plot_right: float = WIDTH - RIGHT
    plot_top: float = TOP
    plot_bottom: float = HEIGHT - BOTTOM
    width: int = WIDTH
    height: int = HEIGHT


def histogram(metric: str, scores: Sequence[float]) -> Histogram:
    """The histogram of ``scores`` (at least one; see the module docstring)."""
    if not scores:
        raise ValueError(f"histogram of {metric!r}: no scores")
    lo, hi = min(0.0, min(scores)), max(1.0, max(scores))
    span = hi - lo
    counts = [0] * BINS
    for s in scores:
        i = min(BINS - 1, math.floor((s - lo) / span * BINS))
        counts[i] += 1
    peak = max(counts)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    bw = plot_w / BINS
    bars = tuple(
        Bar(
            lo=lo + span * i / BINS,
            hi=lo + span * (i + 1) / BINS,
            count=c,
            x=round(LEFT + i * bw + 1, 2),
            y=round(TOP + plot_h * (1 - c / peak), 2),
            width=round(bw - 2, 2),
            height=round(plot_h * c / peak, 2),
        )
        for i, c in enumerate(counts)
    )
    mean = math.fsum(scores) / len(scores)
    return Histogram(
        metric=metric,
        lo=lo,
        hi=hi,
        total=len(scores),
        mean=mean,
        peak=peak,
        bars=bars,
        mean_x=round(LEFT + plot_w * (mean - lo) / span, 2),
    )


def histograms(metrics: Iterable[str], cases: Sequence[CaseView]) -> list[Histogram]:
    """One histogram per metric (in the given order) that has a score in ``cases``."""
    out = []
    for name in metrics:
        scores = [
            s.score for c in cases for s in c.scores if s.name == name and s.score is not None
        ]
        if scores:
            out.append(histogram(name, scores))
    return out
