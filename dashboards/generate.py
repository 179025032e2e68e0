"""Generate nexa-gauge's Grafana dashboards and Prometheus rules from one description.

Why code and not hand-written JSON: every query is written once against the metric names in
``nexagauge.emit.metric_names``, the same label filter is applied to every panel, and the alert
rules, the recording rules they rely on and the dashboards that show them cannot drift apart.
The output is committed (Grafana and Prometheus read the files; no Python runs in the stack);
``tests/deploy`` fails when the committed files differ from what this script writes.

Usage::

    python dashboards/generate.py            # rewrite dashboards/grafana/*.json and rules/*.yml
    python dashboards/generate.py --check    # exit 1 when a committed file is out of date

Layout of what it writes:

- ``dashboards/grafana/dashboards/{relevance-drift,grounding,evaluator-health}.json``
- ``dashboards/prometheus/rules/scores.yml``: recording rules (per-route 1 h / 7 d score
  aggregates, per-bin shares of the score histogram, the PSI drift statistic; see
  ``docs/deploy.md``) followed, in the same group, by the score alerts that read them
- ``dashboards/prometheus/rules/evaluator.yml``: alerts on the evaluator's health

Every alert has a minimum sample count, a ``for`` duration and a runbook link into
``docs/runbooks.md``.

Thresholds are constants below; change them here and regenerate (``promtool test rules`` files in
``dashboards/prometheus/tests/`` pin the behaviour and must be updated with them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

try:
    from nexagauge.emit import metric_names as mn
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nexagauge.emit import metric_names as mn

HERE = Path(__file__).resolve().parent
GRAFANA_DIR = HERE / "grafana" / "dashboards"
RULES_DIR = HERE / "prometheus" / "rules"

#: the provisioned Prometheus datasource (dashboards/grafana/provisioning/datasources/)
DATASOURCE_UID = "nexagauge-prometheus"
DS = {"type": "prometheus", "uid": DATASOURCE_UID}
#: the scrape job of the evaluator in dashboards/prometheus/prometheus.yml
EVALUATOR_JOB = "nexagauge-evaluator"
#: where runbook_url annotations point; a path relative to the repository root by default
RUNBOOK_BASE = "docs/runbooks.md"

# Alert thresholds: one source shared with the evaluator (``nexagauge demo`` checks the same rules)
from nexagauge.emit.alerts import (  # noqa: E402
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
    PSI_WARN,
    RELEVANCE,
    STALL_MIN_SAMPLED,
)

#: label set of every recorded score series (model kept so dashboards can filter by it)
SCORE_LABELS = "metric, service, span_name, model"
ROUTE_LABELS = "metric, service, span_name"

FILTER = 'service=~"$service", span_name=~"$route", model=~"$model"'


# --------------------------------------------------------------------------------------------
# Prometheus rules
# --------------------------------------------------------------------------------------------


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
    rec("nexagauge:score_count:increase1h",
        f"sum by ({SCORE_LABELS}) (increase({score}_count[1h]))")
    rec("nexagauge:score_sum:increase1h",
        f"sum by ({SCORE_LABELS}) (increase({score}_sum[1h]))")
    rec("nexagauge:score_bucket:increase1h",
        f"sum by ({SCORE_LABELS}, le) (increase({score}_bucket[1h]))")
    rec("nexagauge:claims:increase1h",
        f"sum by ({SCORE_LABELS}, verdict) (increase({claims}[1h]))")
    # trailing 7 d windows from the recorded 1 h series (see docstring)
    for base in ("score_count", "score_sum", "score_bucket", "claims"):
        src = f"nexagauge:{base}:increase1h"
        rec(f"nexagauge:{base}:increase7d",
            f"sum_over_time({src}[7d]) / count_over_time({src}[1h])")
    # per-route aggregates (models summed): what the alerts look at
    for win in ("1h", "7d"):
        rec(f"nexagauge_route:score_count:increase{win}",
            f"sum by ({ROUTE_LABELS}) (nexagauge:score_count:increase{win})")
        rec(f"nexagauge_route:score_mean:{win}",
            f"sum by ({ROUTE_LABELS}) (nexagauge:score_sum:increase{win})"
            f" / (nexagauge_route:score_count:increase{win} > 0)")
    # per-bin shares of the score distribution (non-cumulative), one rule per bin and window
    for win in ("1h", "7d"):
        bucket = f"nexagauge:score_bucket:increase{win}"
        count = f"nexagauge:score_count:increase{win}"
        for upper, lower, label in score_bins():
            num = f'{bucket}{{le="{upper}"}}'
            if lower is not None:
                num = f'({num} - ignoring(le) {bucket}{{le="{lower}"}})'
            rec(f"nexagauge:score_bin_share:{win}",
                f"{num} / ignoring(le) ({count} > 0)", {"bin": label})
    # Population Stability Index of the last hour against the trailing 7 days
    cur, base = "nexagauge:score_bin_share:1h", "nexagauge:score_bin_share:7d"
    rec("nexagauge:score_psi:1h_vs_7d",
        f"sum by ({SCORE_LABELS}) (({cur} - {base})"
        f" * ln(({cur} + {PSI_EPSILON}) / ({base} + {PSI_EPSILON})))")
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
            description="Mean grounding over the last hour is {{ $value | printf \"%.2f\" }} "
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
            description="The last hour's mean grounding is {{ $value | printf \"%.2f\" }} below "
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
            "trailing 7 days is {{ $value | printf \"%.2f\" }} (alert above "
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
            description="Consumer lag on {{ $labels.topic }} is {{ $value | printf \"%.0f\" }} "
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
            "minutes ({{ $value | printf \"%.0f\" }}) and not one evaluation finished.",
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


# --------------------------------------------------------------------------------------------
# Grafana dashboards
# --------------------------------------------------------------------------------------------


def target(expr: str, legend: str = "", *, instant: bool = False, fmt: str = "time_series",
           ref: str = "A", interval: str = "", exemplar: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {
        "datasource": DS,
        "refId": ref,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
        "format": fmt,
        "editorMode": "code",
    }
    if exemplar:  # trace-id exemplars of the histogram: click through to the trace in Jaeger
        t["exemplar"] = True
    if interval:
        t["interval"] = interval
    return t


@dataclass
class Panel:
    """A dashboard panel; ``render`` places it on the 24-column grid."""

    title: str
    kind: str
    targets: list[dict[str, Any]]
    w: int = 12
    h: int = 8
    description: str = ""
    unit: str = ""
    min: float | None = None
    max: float | None = None
    thresholds: list[tuple[float | None, str]] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    custom: dict[str, Any] = field(default_factory=dict)
    overrides: list[dict[str, Any]] = field(default_factory=list)
    transformations: list[dict[str, Any]] = field(default_factory=list)

    def render(self, pid: int, x: int, y: int) -> dict[str, Any]:
        for i, t in enumerate(self.targets):
            t["refId"] = chr(ord("A") + i)
        defaults: dict[str, Any] = {"custom": dict(self.custom)}
        if self.unit:
            defaults["unit"] = self.unit
        if self.min is not None:
            defaults["min"] = self.min
        if self.max is not None:
            defaults["max"] = self.max
        steps = self.thresholds or [(None, "green")]
        defaults["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": c, "value": v} for v, c in steps],
        }
        if self.thresholds and self.kind == "timeseries":
            defaults["custom"].setdefault("thresholdsStyle", {"mode": "dashed"})
        return {
            "id": pid,
            "type": self.kind,
            "title": self.title,
            "description": self.description,
            "datasource": DS,
            "gridPos": {"x": x, "y": y, "w": self.w, "h": self.h},
            "targets": self.targets,
            "fieldConfig": {"defaults": defaults, "overrides": self.overrides},
            "options": self.options,
            **({"transformations": self.transformations} if self.transformations else {}),
        }


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery",
                  "qryType": 1},
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "refresh": 2,
        "sort": 1,
        "hide": 0,
        "options": [],
        "regex": "",
    }


def score_variables(source: str) -> list[dict[str, Any]]:
    """``service``, ``route`` (the ``span_name`` label) and ``model``, chained."""
    return [
        variable("service", "Service", f"label_values({source}, service)"),
        variable("route", "Route (span name)",
                 f'label_values({source}{{service=~"$service"}}, span_name)'),
        variable("model", "Model",
                 f'label_values({source}{{service=~"$service", span_name=~"$route"}}, model)'),
    ]


def layout(items: Iterable[Panel | dict[str, Any]]) -> list[dict[str, Any]]:
    """Place panels left to right, wrapping at 24 columns; rows start a new line."""
    out: list[dict[str, Any]] = []
    x = y = 0
    line_h = 0
    pid = 1
    for it in items:
        if isinstance(it, dict):  # a row
            y += line_h
            x, line_h = 0, 0
            out.append({**it, "id": pid, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}})
            y += 1
        else:
            if x + it.w > 24:
                y += line_h
                x, line_h = 0, 0
            out.append(it.render(pid, x, y))
            x += it.w
            line_h = max(line_h, it.h)
        pid += 1
    return out


def dashboard(uid: str, title: str, description: str, panels: list[Panel | dict[str, Any]],
              variables: list[dict[str, Any]], tags: list[str]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["nexagauge", *tags],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard",
        }]},
        "links": [{"type": "dashboards", "tags": ["nexagauge"], "asDropdown": False,
                   "includeVars": True, "keepTime": True, "title": "nexa-gauge"}],
        "templating": {"list": variables},
        "panels": layout(panels),
    }


def _score_sel(metric: str, base: str = f"{mn.SCORE}_count") -> str:
    return f'{base}{{metric="{metric}", {FILTER}}}'


def quality_panels(metric: str, what: str) -> list[Panel | dict[str, Any]]:
    """The panels shared by the relevance and grounding dashboards for one score metric."""
    by = "service, span_name"
    legend = "{{service}} / {{span_name}}"
    sel = f'metric="{metric}", {FILTER}'
    mean_fast = (f"sum by ({by}) (rate({mn.SCORE}_sum{{{sel}}}[$__rate_interval]))"
                 f" / sum by ({by}) (rate({mn.SCORE}_count{{{sel}}}[$__rate_interval]) > 0)")
    mean_1h = (f"sum by ({by}) (nexagauge:score_sum:increase1h{{{sel}}})"
               f" / (sum by ({by}) (nexagauge:score_count:increase1h{{{sel}}}) > 0)")
    mean_7d = (f"sum by ({by}) (nexagauge:score_sum:increase7d{{{sel}}})"
               f" / (sum by ({by}) (nexagauge:score_count:increase7d{{{sel}}}) > 0)")
    min_n = GROUNDING_FLOOR_MIN_SAMPLES if metric == GROUNDING else PSI_MIN_SAMPLES_1H
    count_1h = f"sum by ({by}) (nexagauge:score_count:increase1h{{{sel}}})"
    rejected = (f'sum by ({by}) (nexagauge:claims:increase{{w}}{{{sel}, verdict="REJECTED"}})'
                f" / (sum by ({by}) (nexagauge:claims:increase{{w}}{{{sel}}}) > 0)")
    unit01 = {"unit": "percentunit", "min": 0.0, "max": 1.0}
    return [
        row(f"{what}: level against the trailing 7-day baseline"),
        Panel(
            f"Mean {what.lower()} (1 h) vs 7-day baseline",
            "timeseries",
            [
                target(f"{mean_1h} and on({by}) {count_1h} >= {min_n}",
                       f"{legend} last 1 h"),
                target(mean_7d, f"{legend} 7-day baseline"),
            ],
            w=16, h=9,
            description=(f"Mean {metric} over a sliding hour, drawn only where the hour holds at "
                         f"least {min_n} evaluations (fewer samples are noise, not drift), "
                         "against the mean of the trailing 7 days (dashed)."),
            overrides=[{
                "matcher": {"id": "byRegexp", "options": ".*7-day baseline"},
                "properties": [{"id": "custom.lineStyle",
                                "value": {"fill": "dash", "dash": [10, 10]}}],
            }],
            **unit01,  # type: ignore[arg-type]
        ),
        Panel(
            "Evaluations in the last hour",
            "stat",
            [target(count_1h, legend, instant=True)],
            w=8, h=9,
            description=(f"Sample count behind the 1 h mean. Red below {min_n}: a change on "
                         "this few evaluations is not evidence of drift (alerts ignore it)."),
            unit="short",
            thresholds=[(None, "red"), (float(min_n), "green")],
            options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                     "colorMode": "background", "graphMode": "none", "textMode": "auto"},
        ),
        Panel(
            f"Mean {what.lower()} per scrape interval",
            "timeseries",
            [target(mean_fast, legend)],
            w=12, h=8,
            description="Unsmoothed mean of the evaluations finished in each interval; "
            "read it together with the sample counts next to it.",
            **unit01,  # type: ignore[arg-type]
        ),
        Panel(
            "Evaluations per interval",
            "timeseries",
            [target(f"sum by ({by}) (increase({mn.SCORE}_count{{{sel}}}[$__rate_interval]))",
                    legend)],
            w=12, h=8,
            description="How many scores each point of the mean above stands on.",
            unit="short",
            custom={"drawStyle": "bars", "fillOpacity": 60},
        ),
        row(f"{what}: distribution and drift"),
        Panel(
            f"{what} score distribution",
            "heatmap",
            [target(f"sum by (le) (increase({mn.SCORE}_bucket{{{sel}}}[$__rate_interval]))",
                    "{{le}}", fmt="heatmap", exemplar=True)],
            w=12, h=9,
            description="Evaluations per score bucket over time (histogram buckets of "
            f"{mn.SCORE}).",
            options={"calculate": False, "yAxis": {"unit": "short", "decimals": 1},
                     "cellGap": 1, "color": {"mode": "scheme", "scheme": "Oranges",
                                             "exponent": 0.5, "steps": 64},
                     "tooltip": {"show": True, "yHistogram": True},
                     "exemplars": {"color": "rgba(255,0,255,0.7)"},
                     "rowsFrame": {"layout": "le"}},
        ),
        Panel(
            "Population Stability Index (1 h vs 7 d)",
            "timeseries",
            [target(f'max by ({by}, model) (nexagauge:score_psi:1h_vs_7d{{{sel}}})'
                    f" and on({by}, model) nexagauge:score_count:increase1h{{{sel}}}"
                    f" >= {PSI_MIN_SAMPLES_1H}",
                    "{{service}} / {{span_name}} / {{model}}")],
            w=12, h=9,
            description=("PSI = sum over score bins of (p - q) * ln(p / q), p = share of the "
                         "last hour, q = share of the trailing 7 days (epsilon "
                         f"{PSI_EPSILON}). Below {PSI_WARN}: stable; {PSI_WARN}-{PSI_ALERT}: "
                         f"moderate shift; above {PSI_ALERT}: significant. Shown where the hour "
                         f"holds at least {PSI_MIN_SAMPLES_1H} evaluations."),
            unit="none", min=0.0,
            thresholds=[(None, "green"), (PSI_WARN, "yellow"), (PSI_ALERT, "red")],
        ),
        Panel(
            "Score distribution: last hour vs 7-day baseline",
            "barchart",
            [
                target(f"sum by (bin) (nexagauge:score_bin_share:1h{{{sel}}}"
                       f" * on({SCORE_LABELS}) group_left nexagauge:score_count:increase1h"
                       f"{{{sel}}}) / scalar(sum(nexagauge:score_count:increase1h{{{sel}}}))",
                       "last 1 h", instant=True, fmt="table"),
                target(f"sum by (bin) (nexagauge:score_bin_share:7d{{{sel}}}"
                       f" * on({SCORE_LABELS}) group_left nexagauge:score_count:increase7d"
                       f"{{{sel}}}) / scalar(sum(nexagauge:score_count:increase7d{{{sel}}}))",
                       "7-day baseline", instant=True, fmt="table"),
            ],
            w=12, h=9,
            description="Share of evaluations per score bin across the selection: the two "
            "distributions the PSI compares.",
            unit="percentunit",
            options={"xField": "bin", "orientation": "vertical", "groupWidth": 0.7,
                     "barWidth": 0.9, "showValue": "never", "legend": {"showLegend": True}},
            # one frame per query (bin, value) -> one table with a column per window
            transformations=[
                {"id": "joinByField", "options": {"byField": "bin", "mode": "outer"}},
                {"id": "organize", "options": {
                    "excludeByName": {"Time": True, "Time 1": True, "Time 2": True},
                    "renameByName": {"Value #A": "last 1 h", "Value #B": "7-day baseline"},
                }},
            ],
        ),
        Panel(
            "Share of rejected claims (1 h vs 7 d)",
            "timeseries",
            [target(rejected.replace("{w}", "1h"), f"{legend} last 1 h"),
             target(rejected.replace("{w}", "7d"), f"{legend} 7-day baseline")],
            w=12, h=9,
            description=f"Claims the {metric} judge REJECTED, as a share of all judged claims "
            f"({mn.CLAIMS}).",
            overrides=[{
                "matcher": {"id": "byRegexp", "options": ".*7-day baseline"},
                "properties": [{"id": "custom.lineStyle",
                                "value": {"fill": "dash", "dash": [10, 10]}}],
            }],
            **unit01,  # type: ignore[arg-type]
        ),
    ]


def relevance_dashboard() -> dict[str, Any]:
    return dashboard(
        "nexagauge-relevance-drift",
        "nexa-gauge / Relevance drift",
        "Answer relevancy per service and route against its trailing 7-day baseline, with "
        "sample counts and a PSI drift statistic over the score histogram.",
        quality_panels(RELEVANCE, "Relevance"),
        score_variables(f"{mn.SCORE}_count"),
        ["relevance", "drift"],
    )


def grounding_dashboard() -> dict[str, Any]:
    panels = quality_panels(GROUNDING, "Grounding")
    panels[1:1] = [
        Panel(
            "Grounding alerts",
            "state-timeline",
            [target('sum by (alertname, alertstate, service, span_name) '
                    '(ALERTS{alertname=~"NexagaugeGrounding.*", '
                    'service=~"$service", span_name=~"$route"})',
                    "{{alertname}} {{service}} / {{span_name}} ({{alertstate}})")],
            w=24, h=5,
            description="Pending and firing grounding alerts (rules in "
            "dashboards/prometheus/rules/scores.yml; runbooks in docs/runbooks.md).",
            thresholds=[(None, "yellow"), (1.0, "red")],
            options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
        ),
    ]
    panels.append(Panel(
        f"Routes below the grounding floor ({GROUNDING_FLOOR})",
        "table",
        [target(f'nexagauge_route:score_mean:1h{{metric="{GROUNDING}", '
                f'service=~"$service", span_name=~"$route"}} < {GROUNDING_FLOOR}',
                "", instant=True, fmt="table")],
        w=24, h=6,
        description="Routes whose last-hour mean grounding is under the alert floor, "
        "whatever their sample count (the alert also needs "
        f"{GROUNDING_FLOOR_MIN_SAMPLES} evaluations).",
        unit="percentunit",
    ))
    return dashboard(
        "nexagauge-grounding",
        "nexa-gauge / Grounding",
        "Grounding (claims supported by the retrieved context) per service and route against "
        "its 7-day baseline, with alert state.",
        panels,
        score_variables(f"{mn.SCORE}_count"),
        ["grounding"],
    )


def health_dashboard() -> dict[str, Any]:
    ev_sel = FILTER
    rate = "$__rate_interval"
    panels: list[Panel | dict[str, Any]] = [
        row("Throughput"),
        Panel("Spans and messages consumed", "timeseries", [
            target(f"sum by (topic) (rate({mn.SPANS_CONSUMED}[{rate}]))", "spans {{topic}}"),
            target(f"sum by (topic) (rate({mn.MESSAGES_CONSUMED}[{rate}]))",
                   "messages {{topic}}"),
        ], unit="ops", description="Read from Kafka per second."),
        Panel("Evaluations by status", "timeseries", [
            target(f"sum by (status) (rate({mn.EVALUATIONS}{{{ev_sel}}}[{rate}]))",
                   "{{status}}"),
        ], unit="ops", description="Evaluations finished per second (filtered by "
           "service/route/model)."),
        Panel("Traces assembled by trigger", "timeseries", [
            target(f"sum by (trigger) (rate({mn.TRACES_ASSEMBLED}[{rate}]))", "{{trigger}}"),
        ], unit="ops", w=8),
        Panel("Sampling share", "timeseries", [
            target(f"sum(rate({mn.TRACES_SAMPLED}[{rate}])) / (sum(rate({mn.TRACES_SAMPLED}"
                   f"[{rate}])) + sum(rate({mn.TRACES_NOT_SAMPLED}[{rate}])) > 0)", "sampled"),
        ], unit="percentunit", min=0.0, max=1.0, w=8,
           description="Share of assembled traces the sampler sent to evaluation."),
        Panel("Sampled traces by rule", "timeseries", [
            target(f"sum by (rule) (rate({mn.TRACES_SAMPLED}[{rate}]))", "{{rule}}"),
        ], unit="ops", w=8),
        row("Backlog"),
        Panel("Consumer lag", "timeseries", [
            target(f"sum by (topic) ({mn.CONSUMER_LAG})", "{{topic}}"),
        ], unit="short", thresholds=[(None, "green"), (float(LAG_MAX), "red")],
           description=f"Messages behind the head, per topic. The stall alert needs > {LAG_MAX} "
           "and growing."),
        Panel("Buffered traces, in-flight evaluations, paused partitions", "timeseries", [
            target(f"sum({mn.BUFFER_TRACES})", "buffered traces"),
            target(f"sum({mn.BUFFER_SPANS})", "buffered spans"),
            target(f"sum({mn.IN_FLIGHT})", "in flight"),
            target(f"sum({mn.PAUSED_PARTITIONS})", "paused partitions"),
        ], unit="short"),
        Panel("Time since the last evaluation", "stat", [
            target(f"time() - max({mn.LAST_EVALUATION})", "", instant=True),
        ], unit="s", w=6, thresholds=[(None, "green"), (900.0, "red")],
           options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "background", "graphMode": "none"}),
        Panel("Evaluator up", "stat", [
            target(f'up{{job="{EVALUATOR_JOB}"}}', "{{instance}}", instant=True),
        ], w=6, thresholds=[(None, "red"), (1.0, "green")],
           options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "background", "graphMode": "none"}),
        Panel("Evaluation latency (span end to score)", "timeseries", [
            target(f"histogram_quantile({q}, sum by (le) (rate({mn.EVALUATION_LATENCY}_bucket"
                   f"[{rate}])))", f"p{int(q * 100)}")
            for q in (0.5, 0.95, 0.99)
        ], unit="s", w=12),
        row("Skips, errors and dead letters"),
        Panel("Skipped by reason", "timeseries", [
            target(f"sum by (reason) (rate({mn.SKIPPED}[{rate}]))", "{{reason}}"),
        ], unit="ops", w=8),
        Panel("Errors", "timeseries", [
            target(f'sum(rate({mn.EVALUATIONS}{{status="failed", {ev_sel}}}[{rate}]))',
                   "failed evaluations"),
            target(f'sum by (model) (rate({mn.JUDGE_CALLS}{{outcome="error"}}[{rate}]))',
                   "judge errors {{model}}"),
            target(f"sum(rate({mn.LATE_SPANS}[{rate}]))", "late spans"),
            target(f"sum by (reason) (rate({mn.EVICTED}[{rate}]))", "evicted ({{reason}})"),
        ], unit="ops", w=8),
        Panel("Evaluation spans exported (OTLP)", "timeseries", [
            target(f"sum by (outcome) (rate({mn.EVALUATION_SPANS}[{rate}]))", "{{outcome}}"),
            target(f"sum(rate({mn.DUPLICATE_EVALUATIONS}[{rate}]))", "redelivered, not recounted"),
        ], unit="ops", w=8,
           description="Evaluation spans handed to the OTLP exporter (to the collector and "
           "Jaeger), by outcome; redelivered evaluations whose scores were not counted again."),
        Panel("Dead-letter queue", "timeseries", [
            target(f"sum by (reason) (increase({mn.DLQ}[{rate}]))", "{{reason}}"),
        ], unit="short", w=8, custom={"drawStyle": "bars", "fillOpacity": 60},
           description="Messages the evaluator could not decode or evaluate, sent to the DLQ "
           "topic with the reason."),
        row("Judge"),
        Panel("Judge latency", "timeseries", [
            target(f"histogram_quantile({q}, sum by (le, node) (rate({mn.JUDGE_LATENCY}_bucket"
                   f"[{rate}])))", f"{{{{node}}}} p{int(q * 100)}")
            for q in (0.5, 0.95)
        ], unit="s"),
        Panel("Judge calls by outcome", "timeseries", [
            target(f"sum by (outcome) (rate({mn.JUDGE_CALLS}[{rate}]))", "{{outcome}}"),
        ], unit="ops"),
        Panel("Judge tokens", "timeseries", [
            target(f"sum by (model, direction) (rate({mn.JUDGE_TOKENS}[{rate}]))",
                   "{{model}} {{direction}}"),
        ], unit="short", w=8, description="Tokens per second sent to / received from the judge."),
        Panel("Judge spend (USD per hour)", "timeseries", [
            target(f"sum by (model) (rate({mn.JUDGE_COST}[{rate}])) * 3600", "{{model}}"),
        ], unit="currencyUSD", w=8),
        Panel("Budget", "timeseries", [
            target(f"max by (window) ({mn.BUDGET_REMAINING})", "remaining per {{window}}"),
            target(f"max by (window) ({mn.BUDGET_EXHAUSTED})", "exhausted ({{window}})"),
        ], unit="currencyUSD", w=8,
           description="Remaining USD of the hourly and daily judge budgets; exhausted = 1 "
           "while judging is paused."),
    ]
    return dashboard(
        "nexagauge-evaluator-health",
        "nexa-gauge / Evaluator health",
        "Throughput, backlog, sampling, skips, errors, dead letters and judge cost of the "
        "online evaluator (nexagauge serve).",
        panels,
        score_variables(mn.EVALUATIONS),
        ["health"],
    )


# --------------------------------------------------------------------------------------------


HEADER = ("# Generated by dashboards/generate.py from nexagauge/emit/metric_names.py; "
          "edit the generator, not this file.\n")


def outputs() -> dict[Path, str]:
    """Every generated file and its content."""
    def dump_yaml(obj: Any) -> str:
        return HEADER + yaml.safe_dump(obj, sort_keys=False, width=100, allow_unicode=True)

    def dump_json(obj: Any) -> str:
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"

    return {
        GRAFANA_DIR / "relevance-drift.json": dump_json(relevance_dashboard()),
        GRAFANA_DIR / "grounding.json": dump_json(grounding_dashboard()),
        GRAFANA_DIR / "evaluator-health.json": dump_json(health_dashboard()),
        RULES_DIR / "scores.yml": dump_yaml(score_rules()),
        RULES_DIR / "evaluator.yml": dump_yaml(evaluator_rules()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 when a committed file differs")
    args = ap.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for p in stale:
        verb = "out of date" if args.check else "wrote"
        print(f"{verb}: {p.relative_to(HERE.parent)}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    raise SystemExit(main())
