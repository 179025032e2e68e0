"""MetricsServer against clients that never read (issue 15 item 14), on real loopback sockets.

A ``/metrics`` body of megabytes and 20 clients that send a scrape and never read it: the bytes the
server holds for them stay bounded (a chunk per response being written, at most
``max_metrics_responses`` responses), the stalled clients are cut off after ``write_stall_s``,
other clients are answered meanwhile, and a normal scrape gets the whole body afterwards.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import httpx
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from nexagauge.emit.http import WRITE_CHUNK, MetricsServer
from nexagauge.emit.prometheus import EvaluatorMetrics

SAMPLES = 25_000


class _Big(Collector):
    """A collector whose exposition is a few megabytes (a large label set in production)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("big_gauge", "many series", labels=["series", "pad"])
        for i in range(SAMPLES):
            g.add_metric([f"series-{i:06d}", "p" * 40], float(i))
        yield g


async def _stalled_scrape(port: int) -> socket.socket:
    """A client that asks for /metrics and never reads (tiny receive window)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(s, ("127.0.0.1", port))
    await loop.sock_sendall(s, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


async def _until(cond: object, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return bool(cond())  # type: ignore[operator]


async def test_clients_that_never_read_hold_bounded_memory_and_are_cut_off(
    metrics: EvaluatorMetrics,
) -> None:
    metrics.registry.register(_Big())
    srv = MetricsServer(
        metrics, host="127.0.0.1", port=0, max_metrics_responses=4, write_stall_s=1.0
    )
    await srv.start()
    # a small kernel send buffer (inherited by accepted sockets) so the bytes a client does not
    # read stay in the process, where the bound is checked, not in the kernel
    srv._server.sockets[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)  # type: ignore[union-attr]
    stalled: list[socket.socket] = []
    try:
        async with httpx.AsyncClient(base_url=srv.url, timeout=10) as client:
            body_size = len((await client.get("/metrics")).content)
            assert body_size > 2_000_000
            stalled = [await _stalled_scrape(srv.port) for _ in range(20)]
            assert await _until(lambda: srv.open_connections == 20, 5)
            # the four slots are writing into stalled sockets once the rendering is done
            assert await _until(lambda: srv.buffered_bytes() > 0, 5)
            for _ in range(5):
                held = srv.buffered_bytes()
                # a couple of chunks per response being written, never the bodies (20 x 2 MB)
                assert held <= 4 * 3 * WRITE_CHUNK < body_size / 2, held
                await asyncio.sleep(0.05)
            # the server still answers others meanwhile
            t0 = time.monotonic()
            assert (await client.get("/healthz")).status_code == 200
            # under write_stall_s (1 s): a server waiting for the stalled writes to be cut off first
            # would answer only after that
            assert time.monotonic() - t0 < 0.9
            # every stalled client is cut off (stalled write or no slot in time), none lingers
            assert await _until(lambda: srv.open_connections == 0, 10), srv.stats
            assert srv.stats["write_stalled"] >= 4
            assert srv.stats["write_stalled"] + srv.stats["busy"] == 20, srv.stats
            # and a normal scrape gets the whole body again
            r = await client.get("/metrics")
            assert r.status_code == 200 and len(r.content) == body_size
            assert srv.buffered_bytes() == 0
    finally:
        for s in stalled:
            s.close()
        await srv.stop()


async def test_scrapes_arriving_together_share_one_rendering(metrics: EvaluatorMetrics) -> None:
    calls = 0

    class _Counting(_Big):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            nonlocal calls
            calls += 1
            yield from super().collect()

    metrics.registry.register(_Counting())
    srv = MetricsServer(metrics, host="127.0.0.1", port=0)
    await srv.start()
    try:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as client:
            rs = await asyncio.gather(*(client.get("/metrics") for _ in range(4)))
            assert {r.status_code for r in rs} == {200}
            assert len({r.content for r in rs}) == 1
            assert calls < 4  # concurrent scrapes shared a rendering
            before = calls
            await client.get("/metrics")
            assert calls == before + 1  # a later scrape renders afresh (never stale)
    finally:
        await srv.stop()


async def test_connections_over_the_cap_get_a_503(metrics: EvaluatorMetrics) -> None:
    srv = MetricsServer(metrics, host="127.0.0.1", port=0, max_connections=3)
    await srv.start()
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        idle = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in range(3)]
        assert await _until(lambda: srv.open_connections == 3, 5)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"HTTP/1.1 503")
        writer.close()
        assert srv.stats["too_many_connections"] == 1
        for _, w in idle:
            w.close()
        idle = []
        assert await _until(lambda: srv.open_connections == 0, 5)
        async with httpx.AsyncClient(base_url=srv.url, timeout=5) as client:
            assert (await client.get("/healthz")).status_code == 200
    finally:
        for _, w in idle:
            w.close()
        await srv.stop()
