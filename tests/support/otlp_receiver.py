"""A real OTLP receiver on loopback (gRPC + HTTP/protobuf) that keeps what it receives, for tests.

Reusable by any test that exports over OTLP: the SDK's integration tests (spans from
``@nexagauge.trace``) and the online evaluator's end-to-end tests (evaluation spans it emits, and
log records of instrumentations that emit GenAI events as logs).

* gRPC: ``opentelemetry.proto.collector.{trace,logs}.v1`` services on ``127.0.0.1:<port>``.
* HTTP: ``POST /v1/traces`` and ``POST /v1/logs`` with ``application/x-protobuf`` bodies (gzip or
  deflate accepted). OTLP/JSON is answered 415 (its hex ids differ from protobuf's JSON mapping;
  the Python exporters never send it).

Both bind port 0 (a free port); :attr:`OtlpReceiver.endpoint_grpc` / :attr:`endpoint_http` give the
URLs to configure exporters with. Received spans are flattened into :class:`ReceivedSpan` (ids as
hex, attributes decoded to Python values) and can be awaited with :meth:`wait_for_spans`.

Example::

    with OtlpReceiver() as rx:
        nexagauge.configure(endpoint=rx.endpoint_http, protocol="http/protobuf")
        ...
        spans = rx.wait_for_spans(lambda s: s.name == "answer", timeout=10)
        assert spans[0].attributes["gen_ai.conversation.id"] == "s1"
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc as _grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["OtlpReceiver", "ReceivedLog", "ReceivedSpan", "decode_any_value"]


def decode_any_value(value: AnyValue) -> Any:
    """OTLP ``AnyValue`` -> Python value (str, bool, int, float, bytes, list, dict or None)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [decode_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return decode_attributes(value.kvlist_value.values)
    return getattr(value, kind)


def decode_attributes(attrs: Iterable[KeyValue]) -> dict[str, Any]:
    """OTLP attribute list -> dict (array values become lists)."""
    return {kv.key: decode_any_value(kv.value) for kv in attrs}


@dataclass(frozen=True)
class ReceivedEvent:
    name: str
    attributes: dict[str, Any]
    time_unix_nano: int


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as received, with ids in lowercase hex ("" for no parent)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: dict[str, Any]
    events: tuple[ReceivedEvent, ...]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any]
    scope_name: str
    scope_version: str
    transport: str  # "grpc" or "http"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReceivedLog:
    """One log record (e.g. a GenAI event) as received."""

    event_name: str
    body: Any
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    severity_text: str
    resource: dict[str, Any]
    scope_name: str
    transport: str


class OtlpReceiver:
    """Loopback OTLP receiver (gRPC and HTTP). Start with :meth:`start` or ``with``; always stop.

    ``grpc=False`` / ``http=False`` skip a transport. ``fail_next(n, status)`` makes the next ``n``
    requests fail (gRPC ``UNAVAILABLE`` / HTTP ``status``), to test exporter retries and failures.
    """

    def __init__(self, *, grpc: bool = True, http: bool = True, host: str = "127.0.0.1") -> None:
        self._want_grpc = grpc
        self._want_http = http
        self.host = host
        self._cond = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._logs: list[ReceivedLog] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (transport, path, headers)
        self._fail_remaining = 0
        self._fail_status = 503
        #: called with the spans of each trace export request after they are stored and before
        #: the reply is sent (chaos tests kill the exporting process here: "just after an export")
        self.on_traces: Callable[[list[ReceivedSpan]], None] | None = None
        self._grpc_server: _grpc.Server | None = None
        self._http_server: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> OtlpReceiver:
        if self._want_grpc:
            server = _grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceServicer(self), server)
            logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsServicer(self), server)
            self.grpc_port = server.add_insecure_port(f"{self.host}:0")
            if not self.grpc_port:
                raise RuntimeError("could not bind the gRPC OTLP receiver")
            server.start()
            self._grpc_server = server
        if self._want_http:
            receiver = self

            class Handler(_HttpHandler):
                rx = receiver

            httpd = ThreadingHTTPServer((self.host, 0), Handler)
            httpd.daemon_threads = True
            self.http_port = httpd.server_address[1]
            thread = threading.Thread(
                target=httpd.serve_forever, name="otlp-receiver-http", daemon=True
            )
            thread.start()
            self._http_server, self._http_thread = httpd, thread
        return self

    def stop(self) -> None:
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=None).wait(5)
            self._grpc_server = None
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            if self._http_thread is not None:
                self._http_thread.join(5)
            self._http_server = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- endpoints ------------------------------------------------------------------------------
    @property
    def endpoint_grpc(self) -> str:
        """``http://127.0.0.1:<port>`` (the ``http`` scheme tells gRPC exporters: insecure)."""
        if not self.grpc_port:
            raise RuntimeError("gRPC transport not started")
        return f"http://{self.host}:{self.grpc_port}"

    @property
    def endpoint_http(self) -> str:
        """Base URL (``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics); traces go to ``/v1/traces``."""
        if not self.http_port:
            raise RuntimeError("HTTP transport not started")
        return f"http://{self.host}:{self.http_port}"

    @property
    def traces_url(self) -> str:
        return self.endpoint_http + "/v1/traces"

    @property
    def logs_url(self) -> str:
        return self.endpoint_http + "/v1/logs"

    # -- results --------------------------------------------------------------------------------
    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._cond:
            return list(self._spans)

    @property
    def logs(self) -> list[ReceivedLog]:
        with self._cond:
            return list(self._logs)

    def clear(self) -> None:
        with self._cond:
            self._spans.clear()
            self._logs.clear()
            self.requests.clear()

    def fail_next(self, n: int, http_status: int = 503) -> None:
        with self._cond:
            self._fail_remaining = n
            self._fail_status = http_status

    def wait_for_spans(
        self,
        predicate: Callable[[ReceivedSpan], bool] = lambda s: True,
        timeout: float = 10.0,
        count: int = 1,
    ) -> list[ReceivedSpan]:
        """Block until at least ``count`` received spans satisfy ``predicate``; return them all.

        Raises ``TimeoutError`` listing the span names received so far.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                hits = [s for s in self._spans if predicate(s)]
                if len(hits) >= count:
                    return hits
                left = deadline - time.monotonic()
                if left <= 0:
                    names = [s.name for s in self._spans]
                    raise TimeoutError(
                        f"{len(hits)}/{count} matching spans after {timeout}s; received: {names}"
                    )
                self._cond.wait(left)

    def wait_for_logs(
        self,
        predicate: Callable[[ReceivedLog], bool] = lambda r: True,
        timeout: float = 10.0,
        count: int = 1,
    ) -> list[ReceivedLog]:
        """Like :meth:`wait_for_spans`, for log records."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                hits = [r for r in self._logs if predicate(r)]
                if len(hits) >= count:
                    return hits
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(hits)}/{count} matching log records after {timeout}s")
                self._cond.wait(left)

    # -- ingestion (called from server threads) -------------------------------------------------
    def _should_fail(self) -> bool:
        with self._cond:
            if self._fail_remaining > 0:
                self._fail_remaining -= 1
                return True
            return False

    def _ingest_traces(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        transport: str,
        headers: dict[str, str],
    ) -> None:
        spans: list[ReceivedSpan] = []
        for rs in request.resource_spans:
            resource = decode_attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    spans.append(
                        ReceivedSpan(
                            trace_id=sp.trace_id.hex(),
                            span_id=sp.span_id.hex(),
                            parent_span_id=sp.parent_span_id.hex(),
                            name=sp.name,
                            kind=sp.kind,
                            start_time_unix_nano=sp.start_time_unix_nano,
                            end_time_unix_nano=sp.end_time_unix_nano,
                            attributes=decode_attributes(sp.attributes),
                            events=tuple(
                                ReceivedEvent(
                                    e.name, decode_attributes(e.attributes), e.time_unix_nano
                                )
                                for e in sp.events
                            ),
                            status_code=sp.status.code,
                            status_message=sp.status.message,
                            resource=resource,
                            scope_name=ss.scope.name,
                            scope_version=ss.scope.version,
                            transport=transport,
                            headers=headers,
                        )
                    )
        with self._cond:
            self._spans.extend(spans)
            self.requests.append((transport, "/v1/traces", headers))
            self._cond.notify_all()
        hook = self.on_traces
        if hook is not None:
            hook(spans)

    def _ingest_logs(
        self,
        request: logs_service_pb2.ExportLogsServiceRequest,
        transport: str,
        headers: dict[str, str],
    ) -> None:
        logs: list[ReceivedLog] = []
        for rl in request.resource_logs:
            resource = decode_attributes(rl.resource.attributes)
            for sl in rl.scope_logs:
                for lr in sl.log_records:
                    attrs = decode_attributes(lr.attributes)
                    event_name = getattr(lr, "event_name", "") or str(attrs.get("event.name", ""))
                    logs.append(
                        ReceivedLog(
                            event_name=event_name,
                            body=decode_any_value(lr.body),
                            attributes=attrs,
                            trace_id=lr.trace_id.hex(),
                            span_id=lr.span_id.hex(),
                            severity_text=lr.severity_text,
                            resource=resource,
                            scope_name=sl.scope.name,
                            transport=transport,
                        )
                    )
        with self._cond:
            self._logs.extend(logs)
            self.requests.append((transport, "/v1/logs", headers))
            self._cond.notify_all()


class _TraceServicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, rx: OtlpReceiver) -> None:
        self.rx = rx

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: _grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        if self.rx._should_fail():
            context.abort(_grpc.StatusCode.UNAVAILABLE, "receiver told to fail")
        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        self.rx._ingest_traces(request, "grpc", headers)
        return trace_service_pb2.ExportTraceServiceResponse()


class _LogsServicer(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, rx: OtlpReceiver) -> None:
        self.rx = rx

    def Export(
        self, request: logs_service_pb2.ExportLogsServiceRequest, context: _grpc.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        if self.rx._should_fail():
            context.abort(_grpc.StatusCode.UNAVAILABLE, "receiver told to fail")
        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        self.rx._ingest_logs(request, "grpc", headers)
        return logs_service_pb2.ExportLogsServiceResponse()


class _HttpHandler(BaseHTTPRequestHandler):
    rx: OtlpReceiver
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one response, no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
        except Exception as exc:
            self._reply(400, f"bad {encoding} body: {exc}".encode(), "text/plain")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        if self.rx._should_fail():
            self._reply(self.rx._fail_status, b"receiver told to fail", "text/plain")
            return
        if "json" in (self.headers.get("Content-Type") or ""):
            self._reply(415, b"OTLP/JSON not supported by this test receiver", "text/plain")
            return
        try:
            if path == "/v1/traces":
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                self.rx._ingest_traces(req, "http", headers)
                resp: Any = trace_service_pb2.ExportTraceServiceResponse()
            elif path == "/v1/logs":
                lreq = logs_service_pb2.ExportLogsServiceRequest()
                lreq.ParseFromString(body)
                self.rx._ingest_logs(lreq, "http", headers)
                resp = logs_service_pb2.ExportLogsServiceResponse()
            else:
                self._reply(404, b"unknown OTLP path", "text/plain")
                return
        except Exception as exc:
            self._reply(400, f"undecodable OTLP body: {exc}".encode(), "text/plain")
            return
        self._reply(200, resp.SerializeToString(), "application/x-protobuf")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
