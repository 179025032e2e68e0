"""No "No data" panel on a healthy stack: every shipped dashboard query returns a result (possibly
0) against a real Prometheus scraping the demo stack with the local judge.

Real parts only: ``nexagauge demo`` as a subprocess (embedded Tansu broker, rotel collector, the
online evaluator with the **local judge**, the traced demo RAG app; no budget configured, no judge
errors, no dead letters, no evictions: a healthy stack) and the ``prometheus`` binary scraping its
``/metrics`` every second with the shipped rule files. While the demo still runs, each panel
target (template variables at "All"), each variable query and each recording rule must return at
least one series: the evaluator creates its known label sets at zero (``nexagauge.emit.zero``),
so judge calls/tokens/spend/latency, the budget, skips by reason, errors and the DLQ show 0, not
"No data".

The grounding dashboard's alert panel and its "routes below the floor" table list *pending or
firing* alerts and routes under the floor (Prometheus' ``ALERTS`` series exists only then), so the
queries run after the demo's drift (which it produces on purpose) has pulled grounding below the
floor.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from support.demo_stack import demo_under_prometheus
from support.prometheus import (
    PrometheusServer,
    dashboard_expressions,
    rule_expressions,
    without_data,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def demo(prometheus_bin: str) -> Iterator[dict[str, Any]]:
    args = ["--duration", "150", "--rate", "4", "--drift-after", "40", "--drift-share", "0.9"]
    # enough traffic for every guarded panel (>= 50 evaluations of a route in the hour) and the
    # drift below the grounding floor
    waits = [
        'min(nexagauge:score_count:increase1h{metric="answer_relevancy"}) >= 50',
        'nexagauge:score_psi:1h_vs_7d{metric="grounding"}',
        'ALERTS{alertname=~"NexagaugeGrounding.*"}',
    ]
    with demo_under_prometheus(prometheus_bin, args, waits) as running:
        yield running


def test_every_dashboard_query_returns_data_on_the_demo_stack(demo: dict[str, Any]) -> None:
    prom: PrometheusServer = demo["prom"]
    assert demo["proc"].poll() is None, "the demo must still be serving /metrics"
    sources = dashboard_expressions() + [s for s in rule_expressions() if s.kind == "record"]
    assert len(sources) > 60
    empty = sorted(s.origin for s in without_data(prom, sources))
    assert not empty, "queries without data on a healthy demo stack:\n" + "\n".join(empty)


def test_the_healthy_stack_had_no_judge_errors_budget_or_dead_letters(
    demo: dict[str, Any],
) -> None:
    """The zeros above are real zeros: the series exist and nothing of the kind happened."""
    prom: PrometheusServer = demo["prom"]

    def total(expr: str) -> float:
        res = prom.query(f"sum({expr})")
        assert res, expr
        return float(res[0]["value"][1])

    assert total('nexagauge_judge_calls_total{outcome="error"}') == 0
    assert total("nexagauge_dlq_messages_total") == 0
    assert total('nexagauge_skipped_total{reason=~"budget.*|rate_limit"}') == 0
    assert total("nexagauge_evicted_traces_total") == 0
    assert total("nexagauge_judge_cost_usd_total") == 0  # the local judge costs nothing
    # no budget configured: nothing is exhausted and the remaining budget is unlimited
    assert total("nexagauge_budget_exhausted") == 0
    remaining = prom.query("min(nexagauge_budget_remaining_usd)")
    assert remaining and remaining[0]["value"][1] == "+Inf"
    assert total('nexagauge_evaluations_total{status="ok"}') > 0
    out = "".join(demo["lines"])
    assert re.search(r"evaluated\s+[1-9]", out), out
