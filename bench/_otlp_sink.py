"""An OTLP/HTTP receiver for what ``nexagauge serve`` exports in a benchmark.

:class:`OtlpHttpSink` listens on a free loopback port; its :attr:`~OtlpHttpSink.endpoint` is the
base URL to give ``emit.otlp_endpoint``, so the evaluator's exporters add their own paths:
``POST /v1/traces`` (evaluation spans, kept with the time each arrived: end-to-end latency is
measured on it) and ``POST /v1/logs`` (``gen_ai.evaluation.result`` log records). Bodies are
protobuf, optionally gzip; any other path is answered 404.

Example::

    sink = OtlpHttpSink()        # emit.otlp_endpoint = sink.endpoint, otlp_protocol = "http/protobuf"
    ...; spans, logs = sink.snapshot(), sink.log_snapshot(); sink.close()
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ReceivedSpan:
    name: str
    trace_id: bytes
    parent_span_id: bytes
    start_ns: int
    end_ns: int
    received_s: float


@dataclass
class ReceivedLog:
    event_name: str
    trace_id: bytes
    span_id: bytes
    received_s: float


def _spans(body: bytes, now: float) -> tuple[list[ReceivedSpan], bytes]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    req = ExportTraceServiceRequest.FromString(body)
    got = [
        ReceivedSpan(
            s.name,
            bytes(s.trace_id),
            bytes(s.parent_span_id),
            s.start_time_unix_nano,
            s.end_time_unix_nano,
            now,
        )
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    return got, ExportTraceServiceResponse().SerializeToString()


def _logs(body: bytes, now: float) -> tuple[list[ReceivedLog], bytes]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )

    req = ExportLogsServiceRequest.FromString(body)
    got = [
        ReceivedLog(r.event_name, bytes(r.trace_id), bytes(r.span_id), now)
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    ]
    return got, ExportLogsServiceResponse().SerializeToString()


class OtlpHttpSink:
    """OTLP/HTTP ``/v1/traces`` and ``/v1/logs`` on a free loopback port; keeps what arrives."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.logs: list[ReceivedLog] = []
        self.lock = threading.Lock()
        sink = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # one response, no 40 ms delayed-ACK stall

            def log_message(self, *a: Any) -> None:
                return

            def handle(self) -> None:
                # the exporter went away (a member stopped mid-export): nobody to answer
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    super().handle()

            def _answer(self, code: int, data: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                path = self.path.split("?", 1)[0].rstrip("/")
                if path not in ("/v1/traces", "/v1/logs"):
                    self._answer(404, b"")
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                now = time.time()
                if path == "/v1/traces":
                    spans, data = _spans(body, now)
                    with sink.lock:
                        sink.spans.extend(spans)
                else:
                    logs, data = _logs(body, now)
                    with sink.lock:
                        sink.logs.extend(logs)
                self._answer(200, data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        #: base URL for ``emit.otlp_endpoint`` (the exporters append /v1/traces and /v1/logs)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._t = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._t.start()

    def snapshot(self) -> list[ReceivedSpan]:
        """The evaluation spans received so far."""
        with self.lock:
            return list(self.spans)

    def log_snapshot(self) -> list[ReceivedLog]:
        """The log records (evaluation result events) received so far."""
        with self.lock:
            return list(self.logs)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
