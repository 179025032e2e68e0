"""Issue 16 on real parts: secrets never reach a real OTLP receiver; shutdown/force_flush keep
their timeouts against a real collector endpoint that accepts connections and never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support.otlp_receiver import OtlpReceiver, ReceivedSpan

import nexagauge
from nexagauge.sdk import _errors

from .test_otlp_integration import ENV
from .test_secret_corpus import KINDS, _placements

pytestmark = pytest.mark.integration


@pytest.fixture
def rx(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    receiver = OtlpReceiver(grpc=False).start()
    try:
        yield receiver
    finally:
        nexagauge.shutdown(timeout_millis=2000)
        receiver.stop()


def _received_text(span: ReceivedSpan) -> str:
    parts: list[str] = [span.name, span.status_message]
    for attrs in [span.attributes, *(e.attributes for e in span.events)]:
        for key, value in attrs.items():
            parts.append(key)
            parts.extend(value if isinstance(value, (list, tuple)) else [value])
    return "\n".join(str(p) for p in parts)


SAMPLE = {k[0]: k for k in KINDS}


@pytest.mark.parametrize(
    "kind", ["openai_env", "aws_json", "azure_account_key", "bearer_no_digit", "private_key"]
)
def test_no_secret_reaches_a_real_otlp_receiver(rx: OtlpReceiver, kind: str) -> None:
    _, text, secret = SAMPLE[kind]
    nexagauge.configure(
        service_name="secrets",
        endpoint=rx.endpoint_http,
        protocol="http/protobuf",
        set_global=False,
    )
    placements = _placements(text, secret)
    placements.pop("at_the_size_limit")  # 64 KiB bodies: covered by the in-memory corpus test
    for run in placements.values():
        run()
    assert nexagauge.force_flush(10_000)
    spans = rx.wait_for_spans(count=len(placements), timeout=20)
    received = "\n".join(_received_text(s) for s in spans)
    assert secret not in received
    assert "[scrubbed:" in received


def _silent_server() -> tuple[socket.socket, threading.Event]:
    """A TCP endpoint that accepts connections and never answers (a hung collector)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)  # read nothing, answer nothing
            except OSError:
                continue
        for c in held:
            c.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, stop


def test_shutdown_keeps_its_timeout_against_a_hung_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    server, stop = _silent_server()
    port = server.getsockname()[1]
    before = set(threading.enumerate())
    _errors.set_strict(False)
    try:
        nexagauge.configure(
            endpoint=f"http://127.0.0.1:{port}",
            protocol="http/protobuf",
            timeout=10,
            set_global=False,
        )

        @nexagauge.trace(name="work")
        def work(question: str) -> str:
            return "ok"

        for _ in range(5):
            work("q")
        t0 = time.monotonic()
        assert nexagauge.force_flush(1000) is False
        assert time.monotonic() - t0 < 2.5
        t0 = time.monotonic()
        nexagauge.shutdown(timeout_millis=1000)
        assert time.monotonic() - t0 < 2.5
    finally:
        stop.set()
        server.close()
        _errors.set_strict(None)
        _errors.reset_logged()
    # shutdown returned on time and left the export it abandoned running; that export must
    # still end within the exporter's own timeout (10 s), and must not outlive this test: its
    # retries would run (and draw random jitter) under whatever test comes next
    leftover = set(threading.enumerate()) - before
    for t in leftover:
        t.join(timeout=20)
    assert not [t.name for t in leftover if t.is_alive()]
