"""Memory of the ``/metrics`` server while clients that never read hold scrapes (issue 15 item 14).

The server runs in its own child process: the real ``MetricsServer`` serving an
``EvaluatorMetrics`` registry plus a collector whose exposition is ~8.5 MB (a large label set),
the body size of the reported measurement. Steps, all in one run:

1. two normal scrapes read the whole body (rendering code and buffers warm): the child's peak
   RSS so far (``VmHWM``: what serving one scrape needs) = **baseline**;
2. ``--clients`` (default 20) sockets with a 4 KiB receive buffer each send ``GET /metrics`` and
   never read; for ``--hold`` seconds (default 15, longer than the 10 s write-stall limit)
   ``/healthz`` is probed every 0.5 s (latency)
   and one normal scrape is made (status and time: ``busy`` 503 is the expected answer while
   stalled clients hold the slots);
3. after the hold: the child's peak RSS (``VmHWM``, **peak**), whether every stalled client was
   disconnected by the server, and one more normal scrape (must be a full 200).

Reported: body MB, baseline and peak RSS, peak / baseline, MB per stalled client above baseline,
``/healthz`` worst latency. Before the bounds the issue measured 122 -> 644 MB (5.3x) for the same
body and client count; the target is a peak within 1.5x of the baseline.

    python bench/metrics_slow_clients.py [--clients 20] [--hold 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine_line

SAMPLES = 95_000  # ~8.5 MB of exposition


def serve() -> None:
    """Child process: the metrics server with a large registry; prints its port."""
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    from nexagauge.emit.http import MetricsServer
    from nexagauge.emit.prometheus import EvaluatorMetrics

    class Big(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            g = GaugeMetricFamily("big_gauge", "many series", labels=["series", "pad"])
            for i in range(SAMPLES):
                g.add_metric([f"series-{i:06d}", "p" * 40], float(i))
            yield g

    async def main() -> None:
        metrics = EvaluatorMetrics()
        metrics.registry.register(Big())
        srv = MetricsServer(metrics, host="127.0.0.1", port=0)
        await srv.start()
        print(srv.port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def status_mib(pid: int, field: str = "VmRSS") -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak so far) of a process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def get(url: str, timeout: float = 60) -> tuple[int, int, float]:
    """(status, body bytes, seconds) of one GET."""
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, len(r.read()), time.perf_counter() - t0
    except urllib.error.HTTPError as e:
        return e.code, len(e.read()), time.perf_counter() - t0


def stalled_client(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def disconnected(s: socket.socket) -> bool:
    """Whether the server closed or reset the connection (reading what it sent until then)."""
    s.setblocking(False)
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def run(clients: int, hold: float) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        for _ in range(2):  # rendering and buffers warm; the peak of a normal scrape is known
            status, body, _ = get(base + "/metrics")
            assert status == 200, status
        time.sleep(1.0)
        baseline = status_mib(child.pid, "VmHWM")
        idle = status_mib(child.pid)
        socks = [stalled_client(port) for _ in range(clients)]
        health: list[float] = []
        scrape = None
        t0 = last_probe = time.monotonic()
        while time.monotonic() - t0 < hold:
            if time.monotonic() - last_probe >= 0.5:
                health.append(get(base + "/healthz", timeout=10)[2])
                last_probe = time.monotonic()
            if scrape is None and time.monotonic() - t0 > 1.0:
                scrape = get(base + "/metrics", timeout=30)
            time.sleep(0.05)
        peak = status_mib(child.pid, "VmHWM")
        cut_off = sum(disconnected(s) for s in socks)
        for s in socks:
            s.close()
        after = get(base + "/metrics")
    finally:
        child.terminate()
        child.wait(timeout=10)
    return {
        "clients": clients,
        "hold_s": hold,
        "body_mb": round(body / 1e6, 2),
        "idle_rss_mib": round(idle, 1),
        "baseline_rss_mib": round(baseline, 1),
        "peak_rss_mib": round(peak, 1),
        "peak_over_baseline": round(peak / baseline, 2),
        "mib_per_stalled_client": round((peak - baseline) / clients, 2),
        "healthz_worst_ms": round(1000 * max(health), 1) if health else None,
        "scrape_during_status": scrape[0] if scrape else None,
        "scrape_during_s": round(scrape[2], 2) if scrape else None,
        "stalled_clients_cut_off": cut_off,
        "scrape_after_status": after[0],
        "scrape_after_complete": after[1] == body,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--hold", type=float, default=15.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve()
        return 0
    print(machine_line())
    res = run(a.clients, a.hold)
    for k, v in res.items():
        print(f"{k:>26}: {v}")
    if a.json:
        a.json.write_text(json.dumps({"machine": machine_line(), **res}, indent=2) + "\n")
    ok = (
        res["peak_over_baseline"] <= 1.5
        and res["stalled_clients_cut_off"] == a.clients
        and res["scrape_after_complete"]
    )
    print(
        "target (peak <= 1.5x baseline, every stalled client cut off):", "met" if ok else "MISSED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
