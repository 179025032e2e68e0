"""openai-v2 content in log records that reach Kafka well after the spans, on real parts.

The real ``opentelemetry-instrumentation-openai-v2`` in its default and "events" content modes
(``tests/online/rag_apps.py``, both apps at once, 3 turns each, the real ``openai`` client on a
loopback server) -> OTLP gRPC -> rotel, whose logs pipeline holds log records up to 4 s (its traces
pipeline 50 ms) -> Tansu -> ``nexagauge serve`` (subprocess, re-key stage, LLM judge on
loopback) with a 0.5 s trace grace. The records reach the evaluator seconds after their spans,
past the grace: with ``online.log_content_wait_s = 0`` (the behaviour before it existed) 0 of 6
traces were evaluated (handed on without content); with the wait each trace is evaluated once
with its content, and nothing is counted missing or late.
"""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.serve_process import ServeProcess

from nexagauge.sdk import conventions as C

from .kafka_helpers import topics, write_serve_config
from .rag_apps import SYSTEM, TURNS, run_apps

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KINDS = ("openai-v2-default", "openai-v2-events")
#: rotel's logs batch timeout (its traces pipeline: 50 ms); its batches leave on a timer, so a
#: record is held up to this long: at 2 s the records were often still within the grace
LOGS_DELAY_MS = 4000
#: longer than the logs delay (the default, 5 s, is not what this test is about)
CONTENT_WAIT_S = 8.0


def _metric(text: str, name: str, labels: dict[str, str]) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _wait_assigned(port: int, names: dict[str, str]) -> None:
    """Until both stages own their partitions (their lag series appear): a message already in
    a topic when the first fetch comes would be read together with a late one, hiding the
    delay this test is about."""
    want = [names["traces_topic"], names["logs_topic"], names["rekeyed_topic"]]
    deadline = time.monotonic() + 30
    while True:
        lag = [ln for ln in _scrape(port).splitlines() if ln.startswith("nexagauge_consumer_lag{")]
        if all(any(f'topic="{t}"' in ln for ln in lag) for t in want):
            return
        assert time.monotonic() < deadline, "serve never got its partitions"
        time.sleep(0.2)


def test_content_records_behind_the_grace_are_waited_for(tmp_path: Path, broker: Any) -> None:
    from support.broker import free_port
    from support.collector import RotelCollector
    from support.openai_server import OpenAIServer, Reply
    from support.otlp_receiver import OtlpReceiver

    names = topics("logwait")
    metrics_port = free_port()
    with (
        OtlpReceiver() as rx,
        OpenAIServer() as judge,
        OpenAIServer() as llm,
        RotelCollector(
            broker.bootstrap,
            traces_topic=names["traces_topic"],
            logs_topic=names["logs_topic"],
            logs_batch_timeout_ms=LOGS_DELAY_MS,
        ) as col,
    ):
        llm.handler = lambda req: Reply(content="The Lyon shop opens at 8 am on Sundays.")
        cfg = write_serve_config(
            tmp_path,
            broker,
            names,
            judge_server=judge,
            receiver=rx,
            metrics_port=metrics_port,
            online={
                "nodes": ["relevance", "grounding"],
                "trace_grace_s": 0.5,
                "log_content_wait_s": CONTENT_WAIT_S,
            },
        )
        env = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BLRP_SCHEDULE_DELAY": "100"}
        with ServeProcess(cfg, metrics_port, tmp_path / "serve.log", env=env) as srv:
            _wait_assigned(metrics_port, names)

            turns = run_apps(KINDS, col.grpc_endpoint, llm.base_url, tmp_path, srv.env)
            by_trace = {t["trace_id"]: t for t in turns}
            assert len(by_trace) == len(KINDS) * TURNS
            rx.wait_for_spans(
                lambda s: s.name == C.NG_EVALUATION_SPAN_NAME, timeout=60, count=len(by_trace)
            )
            text = _scrape(metrics_port)
        assert srv.rc == 0, srv.log_text()[-3000:]

    evals = [s for s in rx.spans if s.name == C.NG_EVALUATION_SPAN_NAME]
    assert Counter(s.trace_id for s in evals) == Counter(list(by_trace))
    grounding = [r.text for r in judge.chat_requests() if "Claims:" in r.text]
    for t in turns:  # the content came from the log records: the system prompt and documents
        assert any(t["documents"][0] in g and SYSTEM in g for g in grounding), t
    skipped = "nexagauge_skipped_total"
    assert _metric(text, skipped, {"reason": "content_missing"}) == 0.0
    assert _metric(text, skipped, {"reason": "no_case"}) == 0.0
    assert _metric(text, "nexagauge_late_log_records_total", {}) == 0.0
