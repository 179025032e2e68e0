"""The score dashboards: relevance drift and grounding, one panel set per score metric.

Part of ``dashboards/generate.py``: level against the trailing 7-day baseline with its sample
count, the score distribution, the PSI drift statistic and rejected-claim shares, read from the
recording rules of ``gen_rules``.
"""

from __future__ import annotations

from typing import Any

from gen_common import FILTER, SCORE_LABELS, mn
from gen_grafana import Panel, dashboard, none_when_zero, row, score_variables, target

from nexagauge.emit.alerts import (
    GROUNDING,
    GROUNDING_FLOOR,
    GROUNDING_FLOOR_MIN_SAMPLES,
    PSI_ALERT,
    PSI_EPSILON,
    PSI_MIN_SAMPLES_1H,
    PSI_WARN,
    RELEVANCE,
)


def quality_panels(metric: str, what: str) -> list[Panel | dict[str, Any]]:
    """The panels shared by the relevance and grounding dashboards for one score metric."""
    by = "service, span_name"
    legend = "{{service}} / {{span_name}}"
    sel = f'metric="{metric}", {FILTER}'
    mean_fast = (
        f"sum by ({by}) (rate({mn.SCORE}_sum{{{sel}}}[$__rate_interval]))"
        f" / sum by ({by}) (rate({mn.SCORE}_count{{{sel}}}[$__rate_interval]) > 0)"
    )
    mean_1h = (
        f"sum by ({by}) (nexagauge:score_sum:increase1h{{{sel}}})"
        f" / (sum by ({by}) (nexagauge:score_count:increase1h{{{sel}}}) > 0)"
    )
    mean_7d = (
        f"sum by ({by}) (nexagauge:score_sum:increase7d{{{sel}}})"
        f" / (sum by ({by}) (nexagauge:score_count:increase7d{{{sel}}}) > 0)"
    )
    min_n = GROUNDING_FLOOR_MIN_SAMPLES if metric == GROUNDING else PSI_MIN_SAMPLES_1H
    count_1h = f"sum by ({by}) (nexagauge:score_count:increase1h{{{sel}}})"
    rejected = (
        f'sum by ({by}) (nexagauge:claims:increase{{w}}{{{sel}, verdict="REJECTED"}})'
        f" / (sum by ({by}) (nexagauge:claims:increase{{w}}{{{sel}}}) > 0)"
    )
    unit01 = {"unit": "percentunit", "min": 0.0, "max": 1.0}
    return [
        row(f"{what}: level against the trailing 7-day baseline"),
        Panel(
            f"Mean {what.lower()} (1 h) vs 7-day baseline",
            "timeseries",
            [
                target(f"{mean_1h} and on({by}) {count_1h} >= {min_n}", f"{legend} last 1 h"),
                target(mean_7d, f"{legend} 7-day baseline"),
            ],
            w=16,
            h=9,
            description=(
                f"Mean {metric} over a sliding hour, drawn only where the hour holds at "
                f"least {min_n} evaluations (fewer samples are noise, not drift), "
                "against the mean of the trailing 7 days (dashed)."
            ),
            overrides=[
                {
                    "matcher": {"id": "byRegexp", "options": ".*7-day baseline"},
                    "properties": [
                        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}
                    ],
                }
            ],
            **unit01,  # type: ignore[arg-type]
        ),
        Panel(
            "Evaluations in the last hour",
            "stat",
            [target(count_1h, legend, instant=True)],
            w=8,
            h=9,
            description=(
                f"Sample count behind the 1 h mean. Red below {min_n}: a change on "
                "this few evaluations is not evidence of drift (alerts ignore it)."
            ),
            unit="short",
            thresholds=[(None, "red"), (float(min_n), "green")],
            options={
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background",
                "graphMode": "none",
                "textMode": "auto",
            },
        ),
        Panel(
            f"Mean {what.lower()} per scrape interval",
            "timeseries",
            [target(mean_fast, legend)],
            w=12,
            h=8,
            description="Unsmoothed mean of the evaluations finished in each interval; "
            "read it together with the sample counts next to it.",
            **unit01,  # type: ignore[arg-type]
        ),
        Panel(
            "Evaluations per interval",
            "timeseries",
            [
                target(
                    f"sum by ({by}) (increase({mn.SCORE}_count{{{sel}}}[$__rate_interval]))", legend
                )
            ],
            w=12,
            h=8,
            description="How many scores each point of the mean above stands on.",
            unit="short",
            custom={"drawStyle": "bars", "fillOpacity": 60},
        ),
        row(f"{what}: distribution and drift"),
        Panel(
            f"{what} score distribution",
            "heatmap",
            [
                target(
                    f"sum by (le) (increase({mn.SCORE}_bucket{{{sel}}}[$__rate_interval]))",
                    "{{le}}",
                    fmt="heatmap",
                    exemplar=True,
                )
            ],
            w=12,
            h=9,
            description="Evaluations per score bucket over time (histogram buckets of "
            f"{mn.SCORE}).",
            options={
                "calculate": False,
                "yAxis": {"unit": "short", "decimals": 1},
                "cellGap": 1,
                "color": {"mode": "scheme", "scheme": "Oranges", "exponent": 0.5, "steps": 64},
                "tooltip": {"show": True, "yHistogram": True},
                "exemplars": {"color": "rgba(255,0,255,0.7)"},
                "rowsFrame": {"layout": "le"},
            },
        ),
        Panel(
            "Population Stability Index (1 h vs 7 d)",
            "timeseries",
            [
                target(
                    f"max by ({by}, model) (nexagauge:score_psi:1h_vs_7d{{{sel}}})"
                    f" and on({by}, model) nexagauge:score_count:increase1h{{{sel}}}"
                    f" >= {PSI_MIN_SAMPLES_1H}",
                    "{{service}} / {{span_name}} / {{model}}",
                )
            ],
            w=12,
            h=9,
            description=(
                "PSI = sum over score bins of (p - q) * ln(p / q), p = share of the "
                "last hour, q = share of the trailing 7 days (epsilon "
                f"{PSI_EPSILON}). Below {PSI_WARN}: stable; {PSI_WARN}-{PSI_ALERT}: "
                f"moderate shift; above {PSI_ALERT}: significant. Shown where the hour "
                f"holds at least {PSI_MIN_SAMPLES_1H} evaluations."
            ),
            unit="none",
            min=0.0,
            thresholds=[(None, "green"), (PSI_WARN, "yellow"), (PSI_ALERT, "red")],
        ),
        Panel(
            "Score distribution: last hour vs 7-day baseline",
            "barchart",
            [
                target(
                    f"sum by (bin) (nexagauge:score_bin_share:1h{{{sel}}}"
                    f" * on({SCORE_LABELS}) group_left nexagauge:score_count:increase1h"
                    f"{{{sel}}}) / scalar(sum(nexagauge:score_count:increase1h{{{sel}}}))",
                    "last 1 h",
                    instant=True,
                    fmt="table",
                ),
                target(
                    f"sum by (bin) (nexagauge:score_bin_share:7d{{{sel}}}"
                    f" * on({SCORE_LABELS}) group_left nexagauge:score_count:increase7d"
                    f"{{{sel}}}) / scalar(sum(nexagauge:score_count:increase7d{{{sel}}}))",
                    "7-day baseline",
                    instant=True,
                    fmt="table",
                ),
            ],
            w=12,
            h=9,
            description="Share of evaluations per score bin across the selection: the two "
            "distributions the PSI compares.",
            unit="percentunit",
            options={
                "xField": "bin",
                "orientation": "vertical",
                "groupWidth": 0.7,
                "barWidth": 0.9,
                "showValue": "never",
                "legend": {"showLegend": True},
            },
            # one frame per query (bin, value) -> one table with a column per window
            transformations=[
                {"id": "joinByField", "options": {"byField": "bin", "mode": "outer"}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True, "Time 1": True, "Time 2": True},
                        "renameByName": {"Value #A": "last 1 h", "Value #B": "7-day baseline"},
                    },
                },
            ],
        ),
        Panel(
            "Share of rejected claims (1 h vs 7 d)",
            "timeseries",
            [
                target(rejected.replace("{w}", "1h"), f"{legend} last 1 h"),
                target(rejected.replace("{w}", "7d"), f"{legend} 7-day baseline"),
            ],
            w=12,
            h=9,
            description=f"Claims the {metric} judge REJECTED, as a share of all judged claims "
            f"({mn.CLAIMS}).",
            overrides=[
                {
                    "matcher": {"id": "byRegexp", "options": ".*7-day baseline"},
                    "properties": [
                        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}
                    ],
                }
            ],
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
            [
                target(
                    "sum by (alertname, alertstate, service, span_name) "
                    '(ALERTS{alertname=~"NexagaugeGrounding.*", '
                    'service=~"$service", span_name=~"$route"})'
                    # no alert is good news, shown as such (a 0 row), never "No data"
                    ' or on() label_replace(vector(0), "alertname", "none", "", "")',
                    "{{alertname}} {{service}} {{span_name}} {{alertstate}}",
                )
            ],
            w=24,
            h=5,
            description="Pending and firing grounding alerts (rules in "
            "dashboards/prometheus/rules/scores.yml; runbooks in docs/runbooks.md); one "
            '"none" row while no grounding alert is pending or firing.',
            thresholds=[(None, "yellow"), (1.0, "red")],
            mappings=none_when_zero("no grounding alert"),
            options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
        ),
    ]
    panels.append(
        Panel(
            f"Routes below the grounding floor ({GROUNDING_FLOOR})",
            "stat",
            [
                target(
                    f'count(nexagauge_route:score_mean:1h{{metric="{GROUNDING}", '
                    f'service=~"$service", span_name=~"$route"}} < {GROUNDING_FLOOR})'
                    " or on() vector(0)",
                    "",
                    instant=True,
                )
            ],
            w=24,
            h=4,
            description="How many routes have a last-hour mean grounding under the alert "
            "floor, whatever their sample count (the alert also needs "
            f'{GROUNDING_FLOOR_MIN_SAMPLES} evaluations); "none" when every route is above '
            'it. Which routes: the "Mean grounding (1 h) vs 7-day baseline" panel.',
            unit="short",
            thresholds=[(None, "green"), (1.0, "red")],
            mappings=none_when_zero("none: every route is above the floor"),
            options={
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background",
                "graphMode": "none",
                "textMode": "value",
            },
        )
    )
    return dashboard(
        "nexagauge-grounding",
        "nexa-gauge / Grounding",
        "Grounding (claims supported by the retrieved context) per service and route against "
        "its 7-day baseline, with alert state.",
        panels,
        score_variables(f"{mn.SCORE}_count"),
        ["grounding"],
    )
