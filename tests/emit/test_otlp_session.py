"""The OTLP/HTTP exporters' ``requests`` session (:mod:`nexagauge.emit.otlp_session`): the
environment (proxies, ``NO_PROXY``, CA bundle) is read once per URL and still honoured; real
exports go through a proxy named in the environment to a real OTLP receiver."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from support.otlp_receiver import OtlpReceiver

from nexagauge.emit.events import EvaluationEventWriter
from nexagauge.emit.otlp import otlp_exporter
from nexagauge.emit.otlp_session import EnvOnceSession, http_session
from nexagauge.emit.target import EvaluationTarget
from nexagauge.emit.view import MetricView

COLLECTOR = "http://collector.invalid:4318"


class _Proxy:
    """A plain-HTTP forward proxy on loopback: records each absolute request URI and forwards
    the request to ``upstream`` (``host:port``), answering with its reply."""

    def __init__(self, upstream: str) -> None:
        self.seen: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                proxy.seen.append(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                conn = http.client.HTTPConnection(upstream, timeout=5)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request("POST", urlsplit(self.path).path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type") or "")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    rx = OtlpReceiver(grpc=False).start()
    try:
        yield rx
    finally:
        rx.stop()


@pytest.fixture
def proxy(receiver: OtlpReceiver) -> Iterator[_Proxy]:
    p = _Proxy(urlsplit(receiver.endpoint_http).netloc)
    try:
        yield p
    finally:
        p.close()


def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("NO_PROXY", "no_proxy", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.integration
def test_span_and_record_exports_go_through_the_environments_proxy(receiver, proxy, monkeypatch):
    _no_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    emit = SimpleNamespace(otlp_endpoint=COLLECTOR, otlp_protocol="http")

    spans = otlp_exporter(emit, "/v1/traces")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    for name in ("first", "second"):  # the second POST uses the settings kept for the URL
        provider.get_tracer("t").start_span(name).end()
    provider.shutdown()

    events = EvaluationEventWriter(otlp_exporter(emit, "/v1/logs"), batch=False)
    target = EvaluationTarget("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "s", "c", 0)
    events.write(target, [MetricView("answer_relevancy", "relevance", 0.8, passed=True)])
    events.shutdown()

    assert proxy.seen == [f"{COLLECTOR}/v1/traces"] * 2 + [f"{COLLECTOR}/v1/logs"]
    got = receiver.wait_for_spans(lambda s: s.name in ("first", "second"), timeout=5)
    assert sorted(s.name for s in got) == ["first", "second"]
    assert len(receiver.logs) == 1


def test_no_proxy_and_ca_bundle_are_honoured_and_read_once(monkeypatch):
    _no_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "direct.invalid")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/bundle.pem")
    s = EnvOnceSession()
    via = s.merge_environment_settings("http://c.invalid:4318/v1/traces", {}, None, None, None)
    direct = s.merge_environment_settings("http://direct.invalid/v1/logs", {}, None, None, None)
    assert via["proxies"].get("http") == "http://proxy.invalid:3128"
    assert "http" not in direct["proxies"]
    assert via["verify"] == direct["verify"] == "/etc/ssl/bundle.pem"
    # kept per URL: the environment is not read again (a long-running evaluator's is fixed)
    monkeypatch.setenv("HTTP_PROXY", "http://other.invalid:3128")
    again = s.merge_environment_settings("http://c.invalid:4318/v1/traces", {}, None, None, None)
    assert again["proxies"].get("http") == "http://proxy.invalid:3128"
    again["proxies"]["https"] = "mutated"  # each caller gets its own copy
    assert (
        "https"
        not in s.merge_environment_settings(
            "http://c.invalid:4318/v1/traces", None, None, None, None
        )["proxies"]
    )
    # a per-request proxies argument is merged afresh
    mine = s.merge_environment_settings(
        "http://c.invalid:4318/v1/traces", {"http": "http://mine:1"}, None, None, None
    )
    assert mine["proxies"]["http"] == "http://mine:1"


def test_a_credential_provider_from_the_environment_keeps_its_own_session(monkeypatch):
    for name in (
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_LOGS_CREDENTIAL_PROVIDER",
    ):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(http_session("/v1/traces"), EnvOnceSession)
    monkeypatch.setenv("OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER", "mine")
    assert http_session("/v1/traces") is None
    assert isinstance(http_session("/v1/logs"), EnvOnceSession)
    monkeypatch.setenv("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER", "mine")
    assert http_session("/v1/logs") is None
