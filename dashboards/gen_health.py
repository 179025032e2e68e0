"""The evaluator-health dashboard: throughput, backlog, skips, errors, judge cost.

Part of ``dashboards/generate.py``: what an operator of ``nexagauge serve`` watches, on the raw
series the evaluator exports (no recording rules needed).
"""

from __future__ import annotations

from typing import Any

from gen_common import EVALUATOR_JOB, FILTER, mn
from gen_grafana import Panel, dashboard, row, score_variables, target

from nexagauge.emit.alerts import LAG_MAX


def health_dashboard() -> dict[str, Any]:
    ev_sel = FILTER
    rate = "$__rate_interval"
    panels: list[Panel | dict[str, Any]] = [
        row("Throughput"),
        Panel(
            "Spans and messages consumed",
            "timeseries",
            [
                target(f"sum by (topic) (rate({mn.SPANS_CONSUMED}[{rate}]))", "spans {{topic}}"),
                target(
                    f"sum by (topic) (rate({mn.MESSAGES_CONSUMED}[{rate}]))", "messages {{topic}}"
                ),
            ],
            unit="ops",
            description="Read from Kafka per second.",
        ),
        Panel(
            "Evaluations by status",
            "timeseries",
            [
                target(
                    f"sum by (status) (rate({mn.EVALUATIONS}{{{ev_sel}}}[{rate}]))", "{{status}}"
                ),
            ],
            unit="ops",
            description="Evaluations finished per second (filtered by service/route/model).",
        ),
        Panel(
            "Traces assembled by trigger",
            "timeseries",
            [
                target(f"sum by (trigger) (rate({mn.TRACES_ASSEMBLED}[{rate}]))", "{{trigger}}"),
            ],
            unit="ops",
            w=8,
        ),
        Panel(
            "Sampling share",
            "timeseries",
            [
                target(
                    f"sum(rate({mn.TRACES_SAMPLED}[{rate}])) / (sum(rate({mn.TRACES_SAMPLED}"
                    f"[{rate}])) + sum(rate({mn.TRACES_NOT_SAMPLED}[{rate}])) > 0)",
                    "sampled",
                ),
            ],
            unit="percentunit",
            min=0.0,
            max=1.0,
            w=8,
            description="Share of assembled traces the sampler sent to evaluation.",
        ),
        Panel(
            "Sampled traces by rule",
            "timeseries",
            [
                target(f"sum by (rule) (rate({mn.TRACES_SAMPLED}[{rate}]))", "{{rule}}"),
            ],
            unit="ops",
            w=8,
        ),
        row("Backlog"),
        Panel(
            "Consumer lag",
            "timeseries",
            [
                target(f"sum by (topic) ({mn.CONSUMER_LAG})", "{{topic}}"),
            ],
            unit="short",
            thresholds=[(None, "green"), (float(LAG_MAX), "red")],
            description=f"Messages behind the head, per topic. The stall alert needs > {LAG_MAX} "
            "and growing.",
        ),
        Panel(
            "Buffered traces, in-flight evaluations, paused partitions",
            "timeseries",
            [
                target(f"sum({mn.BUFFER_TRACES})", "buffered traces"),
                target(f"sum({mn.BUFFER_SPANS})", "buffered spans"),
                target(f"sum({mn.IN_FLIGHT})", "in flight"),
                target(f"sum({mn.PAUSED_PARTITIONS})", "paused partitions"),
            ],
            unit="short",
        ),
        Panel(
            "Time since the last evaluation",
            "stat",
            [
                target(f"time() - max({mn.LAST_EVALUATION})", "", instant=True),
            ],
            unit="s",
            w=6,
            thresholds=[(None, "green"), (900.0, "red")],
            options={
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background",
                "graphMode": "none",
            },
        ),
        Panel(
            "Evaluator up",
            "stat",
            [
                target(f'up{{job="{EVALUATOR_JOB}"}}', "{{instance}}", instant=True),
            ],
            w=6,
            thresholds=[(None, "red"), (1.0, "green")],
            options={
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background",
                "graphMode": "none",
            },
        ),
        Panel(
            "Evaluation latency (span end to score)",
            "timeseries",
            [
                target(
                    f"histogram_quantile({q}, sum by (le) (rate({mn.EVALUATION_LATENCY}_bucket"
                    f"[{rate}])))",
                    f"p{int(q * 100)}",
                )
                for q in (0.5, 0.95, 0.99)
            ],
            unit="s",
            w=12,
        ),
        row("Skips, errors and dead letters"),
        Panel(
            "Skipped by reason",
            "timeseries",
            [
                target(f"sum by (reason) (rate({mn.SKIPPED}[{rate}]))", "{{reason}}"),
            ],
            unit="ops",
            w=8,
        ),
        Panel(
            "Errors",
            "timeseries",
            [
                target(
                    f'sum(rate({mn.EVALUATIONS}{{status="failed", {ev_sel}}}[{rate}]))',
                    "failed evaluations",
                ),
                target(
                    f'sum by (model) (rate({mn.JUDGE_CALLS}{{outcome="error"}}[{rate}]))',
                    "judge errors {{model}}",
                ),
                target(f"sum(rate({mn.LATE_SPANS}[{rate}]))", "late spans"),
                target(f"sum by (reason) (rate({mn.EVICTED}[{rate}]))", "evicted ({{reason}})"),
            ],
            unit="ops",
            w=8,
        ),
        Panel(
            "Evaluation spans exported (OTLP)",
            "timeseries",
            [
                target(f"sum by (outcome) (rate({mn.EVALUATION_SPANS}[{rate}]))", "{{outcome}}"),
                target(
                    f"sum(rate({mn.DUPLICATE_EVALUATIONS}[{rate}]))", "redelivered, not recounted"
                ),
            ],
            unit="ops",
            w=8,
            description="Evaluation spans handed to the OTLP exporter (to the collector and "
            "Jaeger), by outcome; redelivered evaluations whose scores were not counted again.",
        ),
        Panel(
            "Dead-letter queue",
            "timeseries",
            [
                target(f"sum by (reason) (increase({mn.DLQ}[{rate}]))", "{{reason}}"),
            ],
            unit="short",
            w=8,
            custom={"drawStyle": "bars", "fillOpacity": 60},
            description="Messages the evaluator could not decode or evaluate, sent to the DLQ "
            "topic with the reason.",
        ),
        row("Judge"),
        Panel(
            "Judge latency",
            "timeseries",
            [
                target(
                    f"histogram_quantile({q}, sum by (le, node) (rate({mn.JUDGE_LATENCY}_bucket"
                    f"[{rate}])))",
                    f"{{{{node}}}} p{int(q * 100)}",
                )
                for q in (0.5, 0.95)
            ],
            unit="s",
        ),
        Panel(
            "Judge calls by outcome",
            "timeseries",
            [
                target(f"sum by (outcome) (rate({mn.JUDGE_CALLS}[{rate}]))", "{{outcome}}"),
            ],
            unit="ops",
        ),
        Panel(
            "Judge tokens",
            "timeseries",
            [
                target(
                    f"sum by (model, direction) (rate({mn.JUDGE_TOKENS}[{rate}]))",
                    "{{model}} {{direction}}",
                ),
            ],
            unit="short",
            w=8,
            description="Tokens per second sent to / received from the judge.",
        ),
        Panel(
            "Judge spend (USD per hour)",
            "timeseries",
            [
                target(f"sum by (model) (rate({mn.JUDGE_COST}[{rate}])) * 3600", "{{model}}"),
            ],
            unit="currencyUSD",
            w=8,
        ),
        Panel(
            "Budget",
            "timeseries",
            [
                target(f"max by (window) ({mn.BUDGET_REMAINING})", "remaining per {{window}}"),
                target(f"max by (window) ({mn.BUDGET_EXHAUSTED})", "exhausted ({{window}})"),
            ],
            unit="currencyUSD",
            w=8,
            description="Remaining USD of the hourly and daily judge budgets; exhausted = 1 "
            "while judging is paused.",
        ),
        row("Dependencies"),
        Panel(
            "Judge circuit and broker",
            "timeseries",
            [
                target(
                    f"max by (instance) ({mn.JUDGE_BREAKER_STATE})", "judge circuit {{instance}}"
                ),
                target(f"min by (instance) ({mn.BROKER_UP})", "broker up {{instance}}"),
            ],
            unit="short",
            w=12,
            description="Judge circuit breaker: 0 closed, 1 probing, 2 open (consumption paused, "
            "nothing lost). Broker up: 1 when the last health check answered.",
        ),
        Panel(
            "Broker contact age and topics re-created",
            "timeseries",
            [
                target(f"max by (instance) ({mn.BROKER_CONTACT_AGE})", "contact age {{instance}}"),
                target(
                    f"sum by (topic) (increase({mn.TOPICS_RECREATED}[{rate}]))",
                    "re-created {{topic}}",
                ),
            ],
            unit="short",
            w=12,
            description="Seconds since the broker last answered (readiness fails past "
            "kafka.broker_unreachable_after_s); own topics re-created after the broker lost them.",
        ),
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
