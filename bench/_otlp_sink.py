"""An OTLP/HTTP receiver for the evaluation spans ``nexagauge serve`` exports in a benchmark.

:class:`OtlpHttpSink` accepts ``POST /v1/traces`` (protobuf, optionally gzip) on a free loopback
port and keeps each span with the time it arrived (end-to-end latency is measured on it).
"""

from __future__ import annotations

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


class OtlpHttpSink:
    """``POST /v1/traces`` (protobuf, optionally gzip) on a free loopback port; keeps the spans."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()
        sink = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # one response, no 40 ms delayed-ACK stall

            def log_message(self, *a: Any) -> None:
                return

            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                    ExportTraceServiceResponse,
                )

                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                now = time.time()
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
                with sink.lock:
                    sink.spans.extend(got)
                data = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}/v1/traces"
        self._t = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._t.start()

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
