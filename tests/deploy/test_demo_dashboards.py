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

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.procs import Key, descendants, kill_survivors, wait_gone
from support.prometheus import (
    PrometheusServer,
    dashboard_expressions,
    free_port,
    rule_expressions,
    rule_files,
    without_data,
)

from nexagauge.demo.stack import stop_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JOB = "nexagauge-evaluator"


@pytest.fixture(scope="module")
def demo(prometheus_bin: str) -> Iterator[dict[str, Any]]:
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_", "OTEL_"))
    }
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    cmd = [
        sys.executable,
        "-m",
        "nexagauge",
        "demo",
        "--duration",
        "150",
        "--rate",
        "4",
        "--drift-after",
        "40",
        "--drift-share",
        "0.9",
        "--metrics-port",
        str(port),
    ]
    lines: list[str] = []
    started: dict[Key, str] = {}  # every process the demo started, seen while it ran
    with PrometheusServer(
        {JOB: [f"127.0.0.1:{port}"]}, rule_files=rule_files(), binary=prometheus_bin
    ) as prom:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 120
            while not any("demo app running" in x for x in lines):
                assert proc.poll() is None, "demo exited:\n" + "".join(lines)
                assert time.monotonic() < deadline, "demo not ready:\n" + "".join(lines)
                time.sleep(0.5)
            # enough traffic for every guarded panel (>= 50 evaluations of a route in the hour)
            # and the drift below the grounding floor
            deadline = time.monotonic() + 240
            for expr in (
                'min(nexagauge:score_count:increase1h{metric="answer_relevancy"}) >= 50',
                'nexagauge:score_psi:1h_vs_7d{metric="grounding"}',
                'ALERTS{alertname=~"NexagaugeGrounding.*"}',
            ):
                try:
                    prom.wait_for(expr, timeout=max(1.0, deadline - time.monotonic()))
                except TimeoutError as e:
                    raise AssertionError(f"{e}\ndemo output:\n{''.join(lines)}") from e
                assert proc.poll() is None, "demo ended too early:\n" + "".join(lines)
            time.sleep(3)  # a few more scrapes and rule evaluations
            started.update(descendants(proc.pid))
            yield {"prom": prom, "lines": lines, "proc": proc}
        finally:
            started.update(descendants(proc.pid))
            code = stop_process(proc, timeout=60)  # SIGTERM: the demo's orderly shutdown
            left = wait_gone(started, within_s=10)
            kill_survivors(started)
    assert code == 143, "demo did not stop cleanly on SIGTERM:\n" + "".join(lines)
    assert left == [], f"the demo left processes behind: {left}"


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
