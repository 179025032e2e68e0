"""Unsampled agent traces through Kafka and ``nexagauge serve``: every run's signals are emitted
(result records over OTLP) and counted (``/metrics``), and the two agree.

Real parts: Tansu broker, the demo agent traced with the SDK (``tests/deploy/produce_traces.py``,
encoded as a collector's Kafka exporter writes them), ``nexagauge serve`` as a subprocess with a
sampling rate of 0 and no judge, an OTLP gRPC receiver for its result log records, its Prometheus
endpoint read with the Prometheus text parser.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.broker import TansuBroker
from support.otlp_receiver import OtlpReceiver
from support.prometheus import free_port

from nexagauge.demo.stack import stop_process
from nexagauge.sdk import conventions as C

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RUNS = 8


def _metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _total(m: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **lab: str) -> float:
    return sum(
        v for (n, labels), v in m.items() if n == name and lab.items() <= dict(labels).items()
    )


def test_unsampled_agent_runs_get_signals_that_reconcile(tmp_path: Path) -> None:
    exe = shutil.which("nexagauge", path=str(Path(sys.executable).parent)) or "nexagauge"
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_", "OTEL_"))
    }
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "NEXAGAUGE_JUDGE_MODE": "none",
            "NEXAGAUGE_SAMPLING_ALWAYS_ON_ERROR": "false",
            "NEXAGAUGE_CACHE_ENABLED": "false",
            "NEXAGAUGE_KAFKA_FETCH_MAX_WAIT_MS": "20",
        }
    )
    log = tmp_path / "serve.log"
    with TansuBroker() as broker, OtlpReceiver(http=False) as rx:
        asyncio.run(broker.create_topics({"otlp_spans": 2, "nexagauge_dlq": 1}))
        cmd = [
            exe, "serve", "--bootstrap-servers", broker.bootstrap, "--traces-topic", "otlp_spans",
            "--no-rekey", "--no-logs", "--rate", "0", "--grace", "0.3",
            "--metrics-host", "127.0.0.1", "--metrics-port", str(port),
            "--otlp-endpoint", rx.endpoint_grpc,
        ]  # fmt: skip
        with log.open("wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        try:
            out = subprocess.run(
                [
                    sys.executable, str(REPO / "tests" / "deploy" / "produce_traces.py"),
                    "--bootstrap", broker.bootstrap, "--n", "0", "--garbage", "0",
                    "--agents", str(RUNS),
                ],
                capture_output=True, text=True, timeout=120, env=env,
            )  # fmt: skip
            assert out.returncode == 0, out.stdout + out.stderr
            assert json.loads(out.stdout.strip().splitlines()[-1])["traces"] == RUNS
            deadline = time.monotonic() + 60
            while True:
                try:
                    m = _metrics(port)
                except OSError:
                    m = {}
                if _total(m, "nexagauge_agent_runs_total") >= RUNS:
                    break
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
                time.sleep(0.3)
            recs = rx.wait_for_logs(
                lambda x: x.attributes.get(C.GEN_AI_EVALUATION_NAME) == C.AGENT_SIGNAL_LOOPS,
                count=RUNS,
                timeout=30,
            )
            assert len(recs) >= RUNS
            time.sleep(1.0)  # the rest of the last batch
            m = _metrics(port)
        finally:
            stop_process(proc, timeout=30)
    assert _total(m, "nexagauge_traces_not_sampled_total") == RUNS
    assert _total(m, "nexagauge_evaluations_total") == 0  # nothing was judged or evaluated
    assert _total(m, "nexagauge_agent_runs_total") == RUNS  # and yet every run has its signals
    signal = [
        x
        for x in rx.logs
        if str(x.attributes.get(C.GEN_AI_EVALUATION_NAME, "")).startswith("agent.")
    ]
    by_name: Counter[str] = Counter()
    values: Counter[str] = Counter()
    for x in signal:
        name = x.attributes[C.GEN_AI_EVALUATION_NAME]
        by_name[name] += 1
        values[name] += float(x.attributes.get(C.GEN_AI_EVALUATION_SCORE_VALUE, 0.0))
    assert by_name[C.AGENT_SIGNAL_TOOL_CALLS] == RUNS
    # the counters agree with the records
    assert values[C.AGENT_SIGNAL_TOOL_CALLS] == _total(m, "nexagauge_agent_tool_calls_total")
    failed = _total(m, "nexagauge_agent_tool_calls_total", outcome="failed")
    assert values[C.AGENT_SIGNAL_TOOL_FAILURES] == failed >= 1
    assert values[C.AGENT_SIGNAL_LOOPS] == _total(m, "nexagauge_agent_loops_total") >= 1
    undeclared = _total(m, "nexagauge_agent_undeclared_tool_calls_total")
    assert values[C.AGENT_SIGNAL_UNDECLARED_TOOLS] == undeclared >= 1
    assert (
        values[C.AGENT_SIGNAL_LLM_STEPS]
        == _total(m, "nexagauge_agent_steps_sum", kind="llm")
        == RUNS
    )  # one LLM call per run
