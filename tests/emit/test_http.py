"""MetricsServer: real HTTP scrapes of /metrics, /healthz, /readyz on loopback (httpx client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from nexagauge.emit.http import MetricsServer, start_server
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.settings import EmitSettings

from .conftest import SPAN_ID, TRACE_ID


@pytest.fixture
async def server(metrics: EvaluatorMetrics) -> AsyncIterator[MetricsServer]:
    state = {"ready": (False, "no partitions assigned")}
    srv = MetricsServer.from_settings(
        metrics, EmitSettings(metrics_port=0), readiness=lambda: state["ready"]
    )
    srv.state = state  # type: ignore[attr-defined]
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def test_metrics_text_and_openmetrics(
    server: MetricsServer, metrics: EvaluatorMetrics
) -> None:
    assert server.host == "127.0.0.1" and server.port > 0
    metrics.record_score(
        "grounding", metrics.labels_for("svc", "chat", "m"), 0.3, TRACE_ID, SPAN_ID
    )
    async with httpx.AsyncClient(base_url=server.url) as c:
        plain = await c.get("/metrics")
        assert plain.status_code == 200
        assert plain.headers["content-type"].startswith("text/plain")
        fams = {f.name: f for f in text_families(plain.text)}
        assert "nexagauge_score" in fams
        assert TRACE_ID not in plain.text
        # what Prometheus sends
        accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        om = await c.get("/metrics", headers={"Accept": accept})
        assert om.status_code == 200
        assert om.headers["content-type"].startswith("application/openmetrics-text")
        fams = {f.name: f for f in text_string_to_metric_families(om.text)}
        ex = [s.exemplar for s in fams["nexagauge_score"].samples if s.exemplar]
        assert ex and ex[0].labels["trace_id"] == TRACE_ID


async def test_healthz_and_head(server: MetricsServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as c:
        r = await c.get("/healthz")
        assert (r.status_code, r.text) == (200, "ok\n")
        h = await c.head("/metrics")
        assert h.status_code == 200 and h.content == b"" and int(h.headers["content-length"]) > 0


async def test_readyz_follows_the_callback(server: MetricsServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as c:
        r = await c.get("/readyz")
        assert r.status_code == 503 and "no partitions assigned" in r.text
        server.state["ready"] = (True, "3 partitions assigned")  # type: ignore[attr-defined]
        r = await c.get("/readyz")
        assert r.status_code == 200 and "3 partitions" in r.text


async def test_readiness_variants(metrics: EvaluatorMetrics) -> None:
    async def async_ready() -> bool:
        await asyncio.sleep(0)
        return True

    def broken() -> bool:
        raise RuntimeError("consumer stalled")

    for cb, code, text in (
        (None, 200, "ready"),
        (async_ready, 200, "ready"),
        (broken, 503, "consumer stalled"),
        (lambda: False, 503, "not ready"),
    ):
        async with (
            MetricsServer(metrics, port=0, readiness=cb) as srv,
            httpx.AsyncClient(base_url=srv.url) as c,
        ):
            r = await c.get("/readyz")
            assert r.status_code == code and text in r.text


async def test_errors(server: MetricsServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as c:
        assert (await c.get("/nope")).status_code == 404
        r = await c.post("/metrics", content=b"x")
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    # oversized request head and garbage request line, on a raw socket
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
    assert (await reader.readline()).startswith(b"HTTP/1.1 431")
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"garbage\r\n\r\n")
    assert (await reader.readline()).startswith(b"HTTP/1.1 400")
    writer.close()
    # a client that connects and says nothing does not stop others from being served
    _idle = await asyncio.open_connection("127.0.0.1", server.port)
    async with httpx.AsyncClient(base_url=server.url) as c:
        assert (await c.get("/healthz")).status_code == 200
    _idle[1].close()


async def test_stop_releases_the_port(metrics: EvaluatorMetrics) -> None:
    srv = MetricsServer(metrics, port=0)
    await srv.start()
    port = srv.port
    idle = await asyncio.open_connection(
        "127.0.0.1", port
    )  # an open connection must not block stop
    await asyncio.wait_for(srv.stop(), 5)
    await srv.stop()  # idempotent
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    idle[1].close()


async def test_start_server_helper(metrics: EvaluatorMetrics) -> None:
    srv = await start_server(
        EmitSettings(metrics_port=0), metrics, ready=lambda: (False, "stalled")
    )
    try:
        async with httpx.AsyncClient(base_url=srv.url) as c:
            r = await c.get("/readyz")
            assert r.status_code == 503 and "stalled" in r.text
    finally:
        await srv.aclose()
