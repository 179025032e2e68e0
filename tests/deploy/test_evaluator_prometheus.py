"""Every dashboard query and alert expression against a real evaluator that evaluated real traces.

Real parts only: a Kafka-protocol broker (Tansu), ``nexagauge serve`` as a subprocess, an
OpenAI-compatible judge over HTTP on loopback (smart mode: claims and verdicts from word overlap;
one call in ten answers HTTP 500, no retries, so the error panels have data), a loopback OTLP
receiver for the evaluation spans, the demo RAG app's traces (real SDK, OTLP protobuf, keyed by
trace id, 80 % of the answers off-topic or ungrounded, plus non-LLM traces and one undecodable
message) and a real Prometheus scraping the evaluator with the shipped rules.

Each expression must parse. Each must also return data, except the few whose series only exist
after events this scenario does not produce (``EVENT_ONLY`` below, each with the reason); the test
fails if one of those does return data too, so the list stays exact.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.broker import TansuBroker
from support.openai_server import OpenAIServer, Reply, Request
from support.otlp_receiver import OtlpReceiver
from support.prometheus import (
    PrometheusServer,
    PromQLSource,
    dashboard_expressions,
    free_port,
    rule_expressions,
    rule_files,
    run_source,
    without_data,
)

from nexagauge.demo.stack import stop_process
from nexagauge.sdk import conventions as C

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HERE = Path(__file__).parent
JOB = "nexagauge-evaluator"
N_QUESTIONS = 70

#: queries that legitimately return nothing here: their series appear only after events that
#: this scenario does not cause (substring of the origin -> reason)
EVENT_ONLY: dict[str, str] = {}  # empty: known label sets start at zero (nexagauge.emit.zero)
#: queries without data because the evaluator does not record the series (empty: the judge client
#: reports every call, error and latency through its observer; the test fails if one goes missing)
KNOWN_GAPS: dict[str, str] = {}
NO_DATA = {**EVENT_ONLY, **KNOWN_GAPS}


def _nexagauge_cmd() -> list[str]:
    exe = shutil.which("nexagauge", path=str(Path(sys.executable).parent)) or shutil.which(
        "nexagauge"
    )
    if exe is None:
        pytest.fail("the `nexagauge` command is not installed (pip install -e .)")
    return [exe]


def _flaky_judge() -> Any:
    lock = threading.Lock()
    n = [0]

    def handler(req: Request) -> Reply | None:
        with lock:
            n[0] += 1
            if n[0] % 10 == 0:
                return Reply(status=500, error_message="scripted judge failure")
        return None  # smart mode

    return handler


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"nexagauge serve exited ({proc.returncode}):\n"
                f"{log.read_text(errors='replace')[-4000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(
        f"{url} not ready after {timeout}s:\n{log.read_text(errors='replace')[-4000:]}"
    )


@pytest.fixture(scope="module")
def stack(
    prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("evaluator")
    log = tmp / "serve.log"
    with (
        TansuBroker() as broker,
        OpenAIServer(handler=_flaky_judge()) as judge,
        OtlpReceiver(http=False) as rx,
    ):
        asyncio.run(
            broker.create_topics(
                {"otlp_spans": 2, "otlp_logs": 1, "nexagauge_dlq": 1, "nexagauge_spans_by_trace": 2}
            )
        )
        port = free_port()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("NEXAGAUGE_", "OPENAI_", "OTEL_"))
        }
        env.update(
            {
                "NEXAGAUGE_JUDGE_BASE_URL": judge.base_url,
                "NEXAGAUGE_JUDGE_API_KEY": "test-key",
                "NEXAGAUGE_JUDGE_MODEL": "gpt-4o-mini",
                "NEXAGAUGE_JUDGE_MAX_RETRIES": "0",
                "NEXAGAUGE_CACHE_ENABLED": "false",
                "NEXAGAUGE_SAMPLING_BUDGET_USD_PER_DAY": "100",
                "NEXAGAUGE_KAFKA_FETCH_MAX_WAIT_MS": "20",
                "HF_HUB_OFFLINE": "1",
            }
        )
        cmd = [
            *_nexagauge_cmd(),
            "serve",
            "--bootstrap-servers",
            broker.bootstrap,
            "--traces-topic",
            "otlp_spans",
            "--no-rekey",
            "--no-logs",
            "--only",
            "relevance,grounding",
            "--rate",
            "1.0",
            "--grace",
            "0.3",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(port),
            "--otlp-endpoint",
            rx.endpoint_grpc,
        ]
        with log.open("wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=tmp)
        try:
            _wait_http(f"http://127.0.0.1:{port}/metrics", proc, log, timeout=60)
            with PrometheusServer(
                {JOB: [f"127.0.0.1:{port}"]},
                rule_files=rule_files(),
                binary=prometheus_bin,
                features=("exemplar-storage",),
            ) as prom:

                def produce(*extra: str) -> dict[str, Any]:
                    out = subprocess.run(
                        [
                            sys.executable,
                            str(HERE / "produce_traces.py"),
                            "--bootstrap",
                            broker.bootstrap,
                            *extra,
                        ],
                        capture_output=True,
                        text=True,
                        timeout=120,
                        env=env,
                    )
                    assert out.returncode == 0, out.stdout + out.stderr
                    return dict(json.loads(out.stdout.strip().splitlines()[-1]))

                # a first trickle creates the labelled series (a counter that first appears
                # with its final value shows no increase), then the main traffic
                produce("--n", "2", "--garbage", "0", "--seed", "1", "--agents", "1")
                prom.wait_for('nexagauge_score_count{metric="grounding"}', timeout=60)
                prom.wait_for("nexagauge_agent_runs_total", timeout=30)
                prom.wait_for("nexagauge_traces_sampled_total", timeout=30)
                time.sleep(2)
                produced = produce(
                    "--n",
                    str(N_QUESTIONS),
                    "--drift-share",
                    "0.8",
                    "--plain",
                    "3",
                    "--agents",
                    "12",
                )
                # every guard satisfied: enough evaluations in the hour for route and model
                prom.wait_for(
                    'sum(nexagauge:score_count:increase1h{metric="grounding"}) >= 50', timeout=120
                )
                prom.wait_for("nexagauge:score_psi:1h_vs_7d", timeout=30)
                prom.wait_for("nexagauge_dlq_messages_total", timeout=30)
                time.sleep(3)  # a few more scrapes and rule evaluations on the final counters
                yield {"prom": prom, "produced": produced, "rx": rx, "log": log, "judge": judge}
        finally:
            stop_process(proc, timeout=30)


def _empty(stack: dict[str, Any], sources: list[PromQLSource]) -> set[str]:
    return {s.origin for s in without_data(stack["prom"], sources)}


def test_the_evaluator_scored_the_traces(stack: dict[str, Any]) -> None:
    prom: PrometheusServer = stack["prom"]
    counts = {
        r["metric"]["metric"]: float(r["value"][1])
        for r in prom.query("sum by (metric) (nexagauge_score_count)")
    }
    assert counts.get("grounding", 0) >= 50 and counts.get("answer_relevancy", 0) >= 50, counts
    # 80 % of the answers are off-topic or ungrounded: grounding is far below the clean answers'
    mean = prom.query(
        'sum(nexagauge_score_sum{metric="grounding"})'
        ' / sum(nexagauge_score_count{metric="grounding"})'
    )
    assert float(mean[0]["value"][1]) < 0.8, mean
    spans = stack["rx"].spans
    assert spans, "no evaluation span reached the OTLP receiver"


def test_score_exemplars_point_at_the_evaluated_traces(stack: dict[str, Any]) -> None:
    """The heatmaps' exemplars carry trace ids of evaluated traces (the link to Jaeger)."""
    prom: PrometheusServer = stack["prom"]
    now = time.time()
    found = prom.query_exemplars('nexagauge_score_bucket{metric="grounding"}', now - 600, now)
    trace_ids = {e["labels"]["trace_id"] for series in found for e in series["exemplars"]}
    assert trace_ids, "no trace-id exemplars on the score histogram"
    # each is the trace of an evaluation span the evaluator exported (batched: allow a moment)
    deadline = time.monotonic() + 20
    while True:
        evaluated = {s.attributes.get(C.NG_EVALUATION_TRACE_ID) for s in stack["rx"].spans}
        if trace_ids <= evaluated or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert trace_ids <= evaluated, trace_ids - evaluated


def test_dashboard_queries_return_data(stack: dict[str, Any]) -> None:
    empty = _empty(stack, dashboard_expressions())
    allowed = {o for o in empty if any(k in o for k in NO_DATA)}
    unexpected = sorted(empty - allowed)
    assert not unexpected, "queries without data:\n" + "\n".join(unexpected)


def test_rule_expressions_parse_and_signals_return_data(stack: dict[str, Any]) -> None:
    sources = [s for s in rule_expressions() if s.kind != "alert"]
    empty = _empty(stack, sources)
    allowed = {o for o in empty if any(k in o for k in NO_DATA)}
    unexpected = sorted(empty - allowed)
    assert not unexpected, "expressions without data:\n" + "\n".join(unexpected)
    for s in rule_expressions():
        if s.kind == "alert":
            run_source(stack["prom"], s)  # parses and executes


def test_event_only_list_is_exact(stack: dict[str, Any]) -> None:
    srcs = dashboard_expressions() + [s for s in rule_expressions() if s.kind != "alert"]
    empty = _empty(stack, srcs)
    for key, reason in NO_DATA.items():
        matching = [s.origin for s in srcs if key in s.origin]
        assert matching, f"entry {key!r} matches no query"
        assert all(o in empty for o in matching), (
            f"{key!r} ({reason}) returns data now: remove it from EVENT_ONLY / KNOWN_GAPS"
        )


def test_agent_signals_of_every_agent_run(stack: dict[str, Any]) -> None:
    """The demo agent's 13 runs (1 + 12, the first three each with one fault) as scraped series:
    every run counted once, each fault present."""
    prom: PrometheusServer = stack["prom"]

    def total(expr: str) -> float:
        res = prom.query(f"sum({expr})")
        assert res, expr
        return float(res[0]["value"][1])

    assert total("nexagauge_agent_runs_total") == 13
    assert total('nexagauge_agent_runs_total{agent="acme-support", definitions="recorded"}') == 13
    assert total('nexagauge_agent_tool_calls_total{outcome="failed"}') >= 1
    assert total('nexagauge_agent_loops_total{tool="search_docs"}') >= 1
    assert total('nexagauge_agent_undeclared_tool_calls_total{tool="escalate_ticket"}') >= 1
    assert total("nexagauge_agent_steps_count") == 2 * 13  # llm and tool, once per run
