"""The benchmarks' OTLP/HTTP sink takes what ``nexagauge serve`` exports when the bench points
``emit.otlp_endpoint`` at it: evaluation spans (``/v1/traces``) and ``gen_ai.evaluation.result``
log records (``/v1/logs``).

Issue 33: the sink parsed every POST as trace data, so the evaluator's log exports failed there
(~80 tracebacks per ``online_latency`` run; serve retried and dropped them). These tests use the
package's own exporters, built from settings exactly as the bench writes them.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from nexagauge.emit.events import EvaluationEventWriter, build_log_exporter
from nexagauge.emit.spans import build_exporter
from nexagauge.emit.target import EvaluationTarget
from nexagauge.emit.view import MetricView
from nexagauge.settings import EmitSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _otlp_sink import OtlpHttpSink

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SPAN_ID = "b7ad6b7169203331"


@pytest.fixture
def sink() -> Iterator[OtlpHttpSink]:
    s = OtlpHttpSink()
    try:
        yield s
    finally:
        s.close()


def _emit(sink: OtlpHttpSink) -> EmitSettings:
    """The ``[emit]`` table ``bench/online_latency.py`` writes for ``nexagauge serve``."""
    return EmitSettings(otlp_endpoint=sink.endpoint, otlp_protocol="http/protobuf")


def test_sink_accepts_the_evaluators_result_log_exports(sink: OtlpHttpSink) -> None:
    outcomes: list[tuple[str, int]] = []
    writer = EvaluationEventWriter(build_log_exporter(_emit(sink)), batch=False)
    writer.on_export = lambda what, n: outcomes.append((what, n))
    try:
        target = EvaluationTarget(TRACE_ID, SPAN_ID, "svc", "chat", 0)
        assert writer.write(target, [MetricView("answer_relevancy", "relevance", 0.8)]) == 1
    finally:
        writer.shutdown()
    assert outcomes == [("exported", 1)]
    logs = sink.log_snapshot()
    assert [(r.event_name, r.trace_id.hex(), r.span_id.hex()) for r in logs] == [
        ("gen_ai.evaluation.result", TRACE_ID, SPAN_ID)
    ]
    assert sink.snapshot() == []  # a log record is not an evaluation span


def test_sink_keeps_evaluation_spans_apart_from_logs(sink: OtlpHttpSink) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(build_exporter(_emit(sink))))
    with provider.get_tracer("t").start_as_current_span("evaluation relevance"):
        pass
    provider.shutdown()
    assert [s.name for s in sink.snapshot()] == ["evaluation relevance"]
    assert sink.log_snapshot() == []


def test_sink_refuses_unknown_paths(sink: OtlpHttpSink) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{sink.port}/v1/metrics", data=b"", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 404


def test_exporter_gone_before_the_answer_is_no_traceback(
    sink: OtlpHttpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member stopped with an export in flight (the scale-out bench stops members mid-run):
    the sink's answer meets a closed socket and is dropped without a traceback."""
    import socket
    import struct
    import time

    for _ in range(20):
        conn = socket.create_connection(("127.0.0.1", sink.port))
        # RST on close, so the sink's answer meets a reset connection, not a half-closed one
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 0\r\n\r\n"
        )
        conn.close()
    time.sleep(0.5)
    assert "Traceback" not in capsys.readouterr().err
