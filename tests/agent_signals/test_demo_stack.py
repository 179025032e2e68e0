"""On the real demo stack, healthy (no drift): every panel of every dashboard has data, the
Agents dashboard included, and the agent signals of the demo's agent path are scraped.

Real parts only: ``nexagauge demo`` as a subprocess (embedded Tansu broker, rotel collector, the
online evaluator with the local judge, the traced demo app with its agent path) and the
``prometheus`` binary scraping its ``/metrics`` every second with the shipped rule files. Unlike
``tests/deploy/test_demo_dashboards.py`` (which waits for the drift to fire the grounding alerts),
nothing here is wrong: the grounding alert state and the routes under the floor are empty lists,
which the dashboards must show as "none", not as "No data".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.demo_stack import demo_under_prometheus
from support.prometheus import (
    PrometheusServer,
    dashboard_expressions,
    require_binary,
    rule_expressions,
    without_data,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def healthy_demo() -> Iterator[dict[str, Any]]:
    args = ["--duration", "150", "--rate", "4", "--drift-after", "100000"]  # no drift
    waits = [
        # every guarded panel has its samples; every agent fault happened at least once
        'min(nexagauge:score_count:increase1h{metric="answer_relevancy"}) >= 50',
        'sum(nexagauge_agent_tool_calls_total{outcome="failed"}) > 0',
        "sum(nexagauge_agent_loops_total) > 0",
        "sum(nexagauge_agent_undeclared_tool_calls_total) > 0",
        "sum(nexagauge_agent_grounding_score_count) > 0",
    ]
    with demo_under_prometheus(require_binary("prometheus"), args, waits) as demo:
        yield demo


def test_no_panel_without_data_on_a_healthy_demo(healthy_demo: dict[str, Any]) -> None:
    prom: PrometheusServer = healthy_demo["prom"]
    assert healthy_demo["proc"].poll() is None, "the demo must still be serving /metrics"
    assert not prom.query('ALERTS{alertname=~"NexagaugeGrounding.*"}'), "not a healthy stack"
    sources = dashboard_expressions() + [s for s in rule_expressions() if s.kind == "record"]
    assert any(s.origin.startswith("agents.json") for s in sources)
    empty = sorted(s.origin for s in without_data(prom, sources))
    assert not empty, "queries without data on a healthy demo stack:\n" + "\n".join(empty)


def test_empty_lists_read_as_none(healthy_demo: dict[str, Any]) -> None:
    """The two grounding panels that list alerts and routes under the floor answer 0 (shown as
    "none") on a healthy stack."""
    prom: PrometheusServer = healthy_demo["prom"]
    for s in dashboard_expressions():
        if "ALERTS{" in s.expr or "< 0.6" in s.expr:
            res = prom.query(s.expr)
            assert [float(r["value"][1]) for r in res] == [0.0], (s.origin, res)


def test_agent_signals_of_the_demo_agent(healthy_demo: dict[str, Any]) -> None:
    prom: PrometheusServer = healthy_demo["prom"]
    runs = prom.query('sum by (agent) (nexagauge_agent_runs_total{definitions="recorded"})')
    assert [r["metric"]["agent"] for r in runs] == ["acme-support"]
    # every run is counted, sampled or not: runs = the app's agent runs evaluated so far (the
    # demo samples every trace; the agent answer of each run is evaluated once)
    tools = {r["metric"]["tool"] for r in prom.query("nexagauge_agent_tool_calls_total")}
    assert tools == {"account_status", "search_docs", "escalate_ticket"}
    out = "".join(healthy_demo["lines"])
    assert "demo app running" in out
