"""Alert thresholds (the single source for ``dashboards/generate.py``) and a pure-Python check of
the score alerts for data the evaluator holds in memory (``nexagauge demo``'s summary).

The Prometheus rules compare the last hour against the trailing seven days. :func:`check_score_alerts`
applies the same conditions, guards and thresholds to any two windows of scores: a *baseline*
(the 7-day role) and a *recent* window (the 1-hour role). It is what the demo prints as "what the
alert rules would have fired"; production alerting stays in Prometheus.

Example:
    >>> outs = check_score_alerts({"grounding": [0.9] * 300}, {"grounding": [0.3] * 60})
    >>> [(o.alert, o.fires) for o in outs if o.metric == "grounding"]
    [('NexagaugeGroundingBelowFloor', True), ('NexagaugeGroundingDropped', True)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nexagauge.emit.metric_names import SCORE_BUCKETS

RELEVANCE = "answer_relevancy"
GROUNDING = "grounding"

GROUNDING_FLOOR = 0.6  # mean grounding over the last hour (claims are ACCEPTED at >= 0.6)
GROUNDING_FLOOR_MIN_SAMPLES = 20  # evaluations in the last hour, per route
GROUNDING_DROP = 0.15  # absolute drop of the 1 h mean below the trailing 7 d mean
DROP_MIN_SAMPLES_1H = 20
DROP_MIN_SAMPLES_7D = 200
PSI_ALERT = 0.25  # PSI > 0.25: "significant shift" in the usual PSI reading (0.1 .. 0.25 moderate)
PSI_WARN = 0.1
PSI_MIN_SAMPLES_1H = 50
PSI_MIN_SAMPLES_7D = 200
PSI_EPSILON = 0.001  # added to every bin share so an empty bin does not give ln(0)
LAG_MAX = 1000  # messages behind, summed over the partitions of a topic
STALL_MIN_SAMPLED = 5  # sampled traces in 15 m that should have produced evaluations
JUDGE_ERROR_RATE = 0.1
JUDGE_MIN_CALLS = 20
BUDGET_MIN_SKIPPED = 10
TOOL_FAILURE_RATE = 0.2  # share of an agent's calls to one tool that failed over 15 minutes
TOOL_MIN_CALLS = 20  # calls of that tool in the 15 minutes
LOOP_RATE = 0.05  # loops per agent run over 30 minutes
LOOP_MIN_RUNS = 20  # agent runs in the 30 minutes


def histogram_shares(
    scores: Sequence[float], bounds: Sequence[float] = SCORE_BUCKETS
) -> list[float]:
    """Share of scores per bucket ``(prev, bound]`` (the first bucket includes 0)."""
    counts = [0] * len(bounds)
    for s in scores:
        for i, b in enumerate(bounds):
            if s <= b:
                counts[i] += 1
                break
        else:
            counts[-1] += 1
    n = max(1, len(scores))
    return [c / n for c in counts]


def psi(baseline: Sequence[float], recent: Sequence[float], eps: float = PSI_EPSILON) -> float:
    """Population stability index of the recent score histogram against the baseline's,
    ``sum (p - q) * ln(p / q)`` with ``eps`` added to every share (as the recording rules do)."""
    q = [x + eps for x in histogram_shares(baseline)]
    p = [x + eps for x in histogram_shares(recent)]
    return sum((pi - qi) * math.log(pi / qi) for pi, qi in zip(p, q, strict=True))


@dataclass(frozen=True)
class AlertCheck:
    """One alert's verdict on two windows: ``fires`` only when the guards are met too."""

    alert: str
    metric: str
    value: float | None
    threshold: float
    condition: bool
    guard_met: bool
    detail: str

    @property
    def fires(self) -> bool:
        return self.condition and self.guard_met


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _above(
    what: tuple[str, str, str],
    value: float | None,
    threshold: float,
    baseline: tuple[Sequence[float], int],
    recent: tuple[Sequence[float], int],
) -> AlertCheck:
    """The check of a two-window alert that fires above ``threshold`` when both windows hold
    their guard's number of samples; ``what`` is (alert, metric, what the value is)."""
    (alert, metric, meaning), (base, min_base), (rec, min_rec) = what, baseline, recent
    return AlertCheck(
        alert,
        metric,
        value,
        threshold,
        value is not None and value > threshold,
        len(rec) >= min_rec and len(base) >= min_base,
        f"{meaning}; {len(base)} baseline / {len(rec)} recent (guards {min_base} / {min_rec})",
    )


def check_score_alerts(
    baseline: Mapping[str, Sequence[float]], recent: Mapping[str, Sequence[float]]
) -> list[AlertCheck]:
    """Apply the score alert rules to a baseline window and a recent window per metric."""
    out: list[AlertCheck] = []
    g_base, g_rec = list(baseline.get(GROUNDING, ())), list(recent.get(GROUNDING, ()))
    m_rec, m_base = _mean(g_rec), _mean(g_base)
    if g_rec or g_base:
        out.append(
            AlertCheck(
                "NexagaugeGroundingBelowFloor",
                GROUNDING,
                m_rec,
                GROUNDING_FLOOR,
                m_rec is not None and m_rec < GROUNDING_FLOOR,
                len(g_rec) >= GROUNDING_FLOOR_MIN_SAMPLES,
                f"recent mean over {len(g_rec)} evaluations (guard {GROUNDING_FLOOR_MIN_SAMPLES})",
            )
        )
        drop = (m_base - m_rec) if m_base is not None and m_rec is not None else None
        out.append(
            _above(
                ("NexagaugeGroundingDropped", GROUNDING, "baseline mean - recent mean"),
                drop,
                GROUNDING_DROP,
                (g_base, DROP_MIN_SAMPLES_7D),
                (g_rec, DROP_MIN_SAMPLES_1H),
            )
        )
    r_base, r_rec = list(baseline.get(RELEVANCE, ())), list(recent.get(RELEVANCE, ()))
    if r_base or r_rec:
        value = psi(r_base, r_rec) if r_base and r_rec else None
        out.append(
            _above(
                ("NexagaugeRelevanceDrift", RELEVANCE, "PSI of the score histogram"),
                value,
                PSI_ALERT,
                (r_base, PSI_MIN_SAMPLES_7D),
                (r_rec, PSI_MIN_SAMPLES_1H),
            )
        )
    return out
