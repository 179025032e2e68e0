"""THE end-to-end test, every part real and on loopback:

app with ``@nexagauge.trace`` -> OTLP gRPC -> rotel collector -> Tansu (Kafka protocol)
-> ``nexagauge serve`` (subprocess: re-key stage + evaluator, LLM judge = a loopback
OpenAI-compatible server) -> evaluation spans received by an OTLP receiver, scores on /metrics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nexagauge.sdk import conventions as C

from .kafka_helpers import topics, write_serve_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
N_TURNS = 6


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:  # not listening yet
        return 0


def test_app_to_scores_end_to_end(tmp_path: Path, broker: Any) -> None:
    from support.broker import free_port
    from support.collector import RotelCollector
    from support.openai_server import OpenAIServer
    from support.otlp_receiver import OtlpReceiver

    names = topics("e2e")
    metrics_port = free_port()
    with (
        OtlpReceiver() as rx,
        OpenAIServer() as judge,
        RotelCollector(
            broker.bootstrap, traces_topic=names["traces_topic"], logs_topic=names["logs_topic"]
        ) as col,
    ):
        cfg = write_serve_config(
            tmp_path,
            broker,
            names,
            judge_server=judge,
            receiver=rx,
            metrics_port=metrics_port,
            online={"nodes": ["relevance", "grounding"], "trace_grace_s": 0.3},
            judge={"api_key": "sk-test-not-a-real-key-123456"},
        )
        log = (tmp_path / "serve.log").open("wb")
        serve = subprocess.Popen(
            [sys.executable, "-m", "nexagauge", "-v", "serve", "--config", str(cfg)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100"},
        )
        try:
            deadline = time.monotonic() + 60
            while _status(metrics_port, "/readyz") != 200:
                assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "serve never became ready"
                time.sleep(0.2)
            answers_file = tmp_path / "answers.json"
            app = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.online.e2e_app",
                    col.grpc_endpoint,
                    str(N_TURNS),
                    str(answers_file),
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100"},
            )
            assert app.returncode == 0, app.stderr[-2000:]
            answers = {tuple(x) for x in json.loads(answers_file.read_text())}
            assert len(answers) == N_TURNS

            evals = rx.wait_for_spans(
                lambda s: s.name == C.NG_EVALUATION_SPAN_NAME, timeout=60, count=N_TURNS
            )
            # one evaluation span per answer span: same trace, child of the evaluated span
            assert {(s.trace_id, s.parent_span_id) for s in evals} == answers
            # one gen_ai.evaluation.result log record per metric, in the context of the
            # evaluated (answer) span; none repeated as span events
            logs = rx.wait_for_logs(
                lambda r: r.event_name == C.GEN_AI_EVALUATION_RESULT_EVENT,
                timeout=30,
                count=2 * N_TURNS,
            )
            for s in evals:
                assert not [e for e in s.events if e.name == C.GEN_AI_EVALUATION_RESULT_EVENT]
                evaluated = (s.trace_id, s.parent_span_id)
                results = [r for r in logs if (r.trace_id, r.span_id) == evaluated]
                by_name = {r.attributes[C.GEN_AI_EVALUATION_NAME]: r.attributes for r in results}
                assert len(by_name) == len(results), results  # each metric once
                assert {"answer_relevancy", "grounding"} <= set(by_name), by_name
                for attrs in by_name.values():
                    assert 0.0 <= attrs[C.GEN_AI_EVALUATION_SCORE_VALUE] <= 1.0
                assert s.attributes[C.NG_EVALUATION_TRACE_ID] == s.trace_id
                assert C.NG_EVALUATION_SCORE_PREFIX + "answer_relevancy" in s.attributes
            # the judge really was called over HTTP, and its key never reached the spans
            assert judge.stats.requests >= N_TURNS
            assert not any("sk-test-not-a-real-key" in json.dumps(s.attributes) for s in evals)

            text = ""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                text = _metrics(metrics_port)
                if (
                    f'nexagauge_score_count{{metric="answer_relevancy",model="unknown",service="shop-bot",span_name="answer"}} {float(N_TURNS)}'
                    in text
                ):
                    break
                time.sleep(0.3)
            assert 'nexagauge_score_count{metric="answer_relevancy"' in text, text[:3000]
            assert f'service="shop-bot",span_name="answer"}} {float(N_TURNS)}' in text
            assert 'nexagauge_traces_assembled_total{trigger="turn_end"}' in text
            assert "nexagauge_consumer_lag" in text
            assert _status(metrics_port, "/healthz") == 200
        finally:
            if serve.poll() is None:
                serve.send_signal(signal.SIGTERM)
            try:
                rc = serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
                rc = -9
            log.close()
        assert rc == 0, (tmp_path / "serve.log").read_text()[-3000:]
