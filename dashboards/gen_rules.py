"""Prometheus rules: recording rules over the score histograms, and every alert.

Part of ``dashboards/generate.py``. ``rules/scores.yml`` holds the recording rules (per-route
1 h / 7 d score aggregates, per-bin shares of the score histogram, the PSI drift statistic)
followed, in the same group, by the score alerts that read them; ``rules/evaluator.yml`` holds
the alerts on the evaluator's own health. Every alert has a minimum sample count, a ``for``
duration and a runbook link into ``docs/runbooks.md``; thresholds come from
``nexagauge.emit.alerts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gen_common import EVALUATOR_JOB, ROUTE_LABELS, RUNBOOK_BASE, SCORE_LABELS, mn

from nexagauge.emit.alerts import (
    BUDGET_MIN_SKIPPED,
    DROP_MIN_SAMPLES_1H,
    DROP_MIN_SAMPLES_7D,
    GROUNDING,
    GROUNDING_DROP,
    GROUNDING_FLOOR,
    GROUNDING_FLOOR_MIN_SAMPLES,
    JUDGE_ERROR_RATE,
    JUDGE_MIN_CALLS,
    LAG_MAX,
    PSI_ALERT,
    PSI_EPSILON,
    PSI_MIN_SAMPLES_1H,
    PSI_MIN_SAMPLES_7D,
    RELEVANCE,
    STALL_MIN_SAMPLED,
)


def _le(bound: float) -> str:
    """The ``le`` label value the Python client writes for a bucket bound (``1.0`` not ``1``)."""
    return repr(float(bound))


def score_bins() -> list[tuple[str, str | None, str]]:
    """The histogram bins as ``(upper le, lower le or None, bin label)``, lowest first.

    Example: ``("0.2", "0.1", "0.1-0.2")``. Scores live in [0, 1], so the ``+Inf`` bucket adds
    no bin (any score above 1.0 would be an evaluator bug, not drift).
    """
    out: list[tuple[str, str | None, str]] = []
    prev: float | None = None
    for b in mn.SCORE_BUCKETS:
        label = f"{0.0 if prev is None else prev:g}-{b:g}"
        out.append((_le(b), None if prev is None else _le(prev), label))
        prev = b
    return out


def recording_rules() -> list[dict[str, Any]]:
    """Recording rules: windowed score aggregates, bin shares and the PSI drift statistic.

    Cost: the 1 h rules read the raw histograms once per evaluation; the 7 d baseline is built
    from the recorded 1 h series, not the raw ones. ``sum_over_time(x[7d])`` over a series
    recorded every evaluation counts each observation once per evaluation inside an hour;
    dividing by ``count_over_time(x[1h])`` (evaluations per hour, measured on the series itself)
    gives back a 7-day total whatever ``evaluation_interval`` is, and is exact from the first
    evaluation on a fresh server.
    """
    score, claims = mn.SCORE, mn.CLAIMS
    r: list[dict[str, Any]] = []

    def rec(name: str, expr: str, labels: dict[str, str] | None = None) -> None:
        rule: dict[str, Any] = {"record": name, "expr": expr}
        if labels:
            rule["labels"] = labels
        r.append(rule)

    # 1 h windows from the raw series
    rec(
        "nexagauge:score_count:increase1h", f"sum by ({SCORE_LABELS}) (increase({score}_count[1h]))"
    )
    rec("nexagauge:score_sum:increase1h", f"sum by ({SCORE_LABELS}) (increase({score}_sum[1h]))")
    rec(
        "nexagauge:score_bucket:increase1h",
        f"sum by ({SCORE_LABELS}, le) (increase({score}_bucket[1h]))",
    )
    rec("nexagauge:claims:increase1h", f"sum by ({SCORE_LABELS}, verdict) (increase({claims}[1h]))")
    # trailing 7 d windows from the recorded 1 h series (see docstring)
    for base in ("score_count", "score_sum", "score_bucket", "claims"):
        src = f"nexagauge:{base}:increase1h"
        rec(
            f"nexagauge:{base}:increase7d", f"sum_over_time({src}[7d]) / count_over_time({src}[1h])"
        )
    # per-route aggregates (models summed): what the alerts look at
    for win in ("1h", "7d"):
        rec(
            f"nexagauge_route:score_count:increase{win}",
            f"sum by ({ROUTE_LABELS}) (nexagauge:score_count:increase{win})",
        )
        rec(
            f"nexagauge_route:score_mean:{win}",
            f"sum by ({ROUTE_LABELS}) (nexagauge:score_sum:increase{win})"
            f" / (nexagauge_route:score_count:increase{win} > 0)",
        )
    # per-bin shares of the score distribution (non-cumulative), one rule per bin and window
    for win in ("1h", "7d"):
        bucket = f"nexagauge:score_bucket:increase{win}"
        count = f"nexagauge:score_count:increase{win}"
        for upper, lower, label in score_bins():
            num = f'{bucket}{{le="{upper}"}}'
            if lower is not None:
                num = f'({num} - ignoring(le) {bucket}{{le="{lower}"}})'
            rec(
                f"nexagauge:score_bin_share:{win}",
                f"{num} / ignoring(le) ({count} > 0)",
                {"bin": label},
            )
    # Population Stability Index of the last hour against the trailing 7 days
    cur, base = "nexagauge:score_bin_share:1h", "nexagauge:score_bin_share:7d"
    rec(
        "nexagauge:score_psi:1h_vs_7d",
        f"sum by ({SCORE_LABELS}) (({cur} - {base})"
        f" * ln(({cur} + {PSI_EPSILON}) / ({base} + {PSI_EPSILON})))",
    )
    return r


@dataclass(frozen=True)
class Alert:
    """One alert rule, written as ``<condition> and on(...) <sample guard> ...``."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    anchor: str
    dashboard: str
    labels: dict[str, str] = field(default_factory=dict)
    #: alerts on recorded score series live in the recording rules' group, after them, so they
    #: always read this evaluation's values (groups run independently of each other)
    on_scores: bool = False

    def rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity, **self.labels},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": f"{RUNBOOK_BASE}#{self.anchor}",
                "dashboard": f"/d/{self.dashboard}",
            },
        }


def alerts() -> list[Alert]:
    """Every alert rule. Each one needs a minimum number of samples before it can fire."""
    g, rel = GROUNDING, RELEVANCE
    on_route = f"on({ROUTE_LABELS})"
    on_score = f"on({SCORE_LABELS})"
    return [
        Alert(
            name="NexagaugeGroundingBelowFloor",
            expr=(
                f'nexagauge_route:score_mean:1h{{metric="{g}"}} < {GROUNDING_FLOOR}'
                f' and {on_route} nexagauge_route:score_count:increase1h{{metric="{g}"}}'
                f" >= {GROUNDING_FLOOR_MIN_SAMPLES}"
            ),
            for_="15m",
            severity="critical",
            summary="Grounding of {{ $labels.service }} / {{ $labels.span_name }} is below "
            f"{GROUNDING_FLOOR}",
            description='Mean grounding over the last hour is {{ $value | printf "%.2f" }} '
            f"(floor {GROUNDING_FLOOR}, at least {GROUNDING_FLOOR_MIN_SAMPLES} evaluations): "
            "answers are making claims their retrieved context does not support.",
            anchor="grounding-below-floor",
            dashboard="nexagauge-grounding",
            on_scores=True,
        ),
        Alert(
            name="NexagaugeGroundingDropped",
            expr=(
                f'(nexagauge_route:score_mean:7d{{metric="{g}"}}'
                f' - nexagauge_route:score_mean:1h{{metric="{g}"}}) > {GROUNDING_DROP}'
                f' and {on_route} nexagauge_route:score_count:increase1h{{metric="{g}"}}'
                f" >= {DROP_MIN_SAMPLES_1H}"
                f' and {on_route} nexagauge_route:score_count:increase7d{{metric="{g}"}}'
                f" >= {DROP_MIN_SAMPLES_7D}"
            ),
            for_="30m",
            severity="warning",
            summary="Grounding of {{ $labels.service }} / {{ $labels.span_name }} dropped "
            "below its 7-day baseline",
            description='The last hour\'s mean grounding is {{ $value | printf "%.2f" }} below '
            f"the trailing 7-day mean (threshold {GROUNDING_DROP}; at least "
            f"{DROP_MIN_SAMPLES_1H} evaluations in the hour and {DROP_MIN_SAMPLES_7D} in the "
            "baseline).",
            anchor="grounding-dropped",
            dashboard="nexagauge-grounding",
            on_scores=True,
        ),
        Alert(
            name="NexagaugeRelevanceDrift",
            expr=(
                f'nexagauge:score_psi:1h_vs_7d{{metric="{rel}"}} > {PSI_ALERT}'
                f' and {on_score} nexagauge:score_count:increase1h{{metric="{rel}"}}'
                f" >= {PSI_MIN_SAMPLES_1H}"
                f' and {on_score} nexagauge:score_count:increase7d{{metric="{rel}"}}'
                f" >= {PSI_MIN_SAMPLES_7D}"
            ),
            for_="30m",
            severity="warning",
            summary="Relevance scores of {{ $labels.service }} / {{ $labels.span_name }} "
            "({{ $labels.model }}) drifted",
            description="PSI of the last hour's answer-relevancy distribution against the "
            'trailing 7 days is {{ $value | printf "%.2f" }} (alert above '
            f"{PSI_ALERT}; at least {PSI_MIN_SAMPLES_1H} evaluations in the hour and "
            f"{PSI_MIN_SAMPLES_7D} in the baseline).",
            anchor="relevance-drift",
            dashboard="nexagauge-relevance-drift",
            on_scores=True,
        ),
        Alert(
            name="NexagaugeEvaluatorStalled",
            expr=(
                f"sum by (topic) ({mn.CONSUMER_LAG}) > {LAG_MAX}"
                f" and on(topic) sum by (topic) (deriv({mn.CONSUMER_LAG}[10m])) > 0"
            ),
            for_="15m",
            severity="critical",
            summary="Evaluator falls behind on topic {{ $labels.topic }}",
            description='Consumer lag on {{ $labels.topic }} is {{ $value | printf "%.0f" }} '
            f"messages (> {LAG_MAX}) and still growing.",
            anchor="evaluator-stalled",
            dashboard="nexagauge-evaluator-health",
            labels={"stall": "lag_growing"},
        ),
        Alert(
            name="NexagaugeEvaluatorStalled",
            expr=(
                f"sum(increase({mn.TRACES_SAMPLED}[15m])) >= {STALL_MIN_SAMPLED}"
                f" and on() (sum(increase({mn.EVALUATIONS}[15m])) or vector(0)) == 0"
            ),
            for_="10m",
            severity="critical",
            summary="Evaluator samples traces but completes no evaluations",
            description=f"At least {STALL_MIN_SAMPLED} traces were sampled in the last 15 "
            'minutes ({{ $value | printf "%.0f" }}) and not one evaluation finished.',
            anchor="evaluator-stalled",
            dashboard="nexagauge-evaluator-health",
            labels={"stall": "no_evaluations"},
        ),
        Alert(
            name="NexagaugeEvaluatorDown",
            expr=f'up{{job="{EVALUATOR_JOB}"}} == 0',
            for_="5m",
            severity="critical",
            summary="Prometheus cannot scrape the evaluator {{ $labels.instance }}",
            description="The /metrics endpoint of the evaluator has failed every scrape for 5 "
            "minutes; no score or health metric is being recorded.",
            anchor="evaluator-down",
            dashboard="nexagauge-evaluator-health",
        ),
        Alert(
            name="NexagaugeJudgeErrorRate",
            expr=(
                f'sum by (model) (increase({mn.JUDGE_CALLS}{{outcome="error"}}[15m]))'
                f' / sum by (model) (increase({mn.JUDGE_CALLS}{{outcome!="cached"}}[15m]))'
                f" > {JUDGE_ERROR_RATE}"
                f' and on(model) sum by (model) (increase({mn.JUDGE_CALLS}{{outcome!="cached"}}'
                f"[15m])) >= {JUDGE_MIN_CALLS}"
            ),
            for_="10m",
            severity="warning",
            summary="Judge {{ $labels.model }} fails {{ $value | humanizePercentage }} of calls",
            description=f"More than {JUDGE_ERROR_RATE:.0%} of judge calls to "
            "{{ $labels.model }} failed over 15 minutes (after retries; at least "
            f"{JUDGE_MIN_CALLS} calls).",
            anchor="judge-error-rate",
            dashboard="nexagauge-evaluator-health",
        ),
        Alert(
            name="NexagaugeJudgeCircuitOpen",
            expr=f"max by (instance) ({mn.JUDGE_BREAKER_STATE}) >= 1",
            for_="5m",
            severity="warning",
            summary="Judge circuit of {{ $labels.instance }} is open: evaluation paused",
            description="The judge circuit breaker has been open (or probing) for 5 minutes: "
            "the judge answers with 5xx/429 or not at all, so the evaluator paused consumption "
            "and waits for it. Nothing is lost; lag grows until the judge is back.",
            anchor="judge-circuit-open",
            dashboard="nexagauge-evaluator-health",
        ),
        Alert(
            name="NexagaugeBrokerUnreachable",
            expr=f"min by (instance) ({mn.BROKER_UP}) == 0",
            for_="5m",
            severity="critical",
            summary="Evaluator {{ $labels.instance }} has lost its Kafka broker",
            description="The evaluator's broker health check has failed for 5 minutes: no "
            "trace is consumed and no offset committed until the broker answers again.",
            anchor="broker-unreachable",
            dashboard="nexagauge-evaluator-health",
        ),
        Alert(
            name="NexagaugeBudgetExhausted",
            expr=(
                f"max by (window) ({mn.BUDGET_EXHAUSTED}) == 1"
                f' and on() sum(increase({mn.SKIPPED}{{reason=~"budget.*"}}[15m]))'
                f" >= {BUDGET_MIN_SKIPPED}"
            ),
            for_="10m",
            severity="warning",
            summary="Judge budget for the {{ $labels.window }} is exhausted",
            description="The evaluator stopped judging because the per-{{ $labels.window }} USD "
            f"budget is spent; at least {BUDGET_MIN_SKIPPED} sampled traces were skipped in "
            "15 minutes.",
            anchor="budget-exhausted",
            dashboard="nexagauge-evaluator-health",
        ),
    ]


def score_rules() -> dict[str, Any]:
    """``rules/scores.yml``: the recording rules, then the alerts that read them (one group)."""
    rules = recording_rules() + [a.rule() for a in alerts() if a.on_scores]
    return {"groups": [{"name": "nexagauge_scores", "rules": rules}]}


def evaluator_rules() -> dict[str, Any]:
    """``rules/evaluator.yml``: alerts on the evaluator's own health (raw series only)."""
    rules = [a.rule() for a in alerts() if not a.on_scores]
    return {"groups": [{"name": "nexagauge_evaluator", "rules": rules}]}
