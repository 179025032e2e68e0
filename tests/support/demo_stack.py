"""``nexagauge demo`` as a subprocess, scraped by a real Prometheus with the shipped rule files.

Shared by the tests that check dashboards against the demo stack (``tests/deploy``,
``tests/agent_signals``): start Prometheus, start the demo with the given arguments, wait until
it serves and until each given PromQL expression returns data, then yield; on exit stop the demo
with SIGTERM (its orderly shutdown) and check it stopped cleanly and left no process behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from support.procs import Key, descendants, kill_survivors, wait_gone
from support.prometheus import PrometheusServer, free_port, rule_files

from nexagauge.demo.stack import stop_process

JOB = "nexagauge-evaluator"


@contextlib.contextmanager
def demo_under_prometheus(
    prometheus_bin: str, args: Sequence[str], waits: Sequence[str], *, wait_s: float = 240
) -> Iterator[dict[str, Any]]:
    """Yields ``{"prom", "lines", "proc"}`` once every expression of ``waits`` returns data."""
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_", "OTEL_"))
    }
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    cmd = [sys.executable, "-m", "nexagauge", "demo", *args, "--metrics-port", str(port)]
    lines: list[str] = []
    started: dict[Key, str] = {}  # every process the demo started, seen while it ran
    with PrometheusServer(
        {JOB: [f"127.0.0.1:{port}"]}, rule_files=rule_files(), binary=prometheus_bin
    ) as prom:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 120
            while not any("demo app running" in x for x in lines):
                assert proc.poll() is None, "demo exited:\n" + "".join(lines)
                assert time.monotonic() < deadline, "demo not ready:\n" + "".join(lines)
                time.sleep(0.5)
            deadline = time.monotonic() + wait_s
            for expr in waits:
                try:
                    prom.wait_for(expr, timeout=max(1.0, deadline - time.monotonic()))
                except TimeoutError as e:
                    raise AssertionError(f"{e}\ndemo output:\n{''.join(lines)}") from e
                assert proc.poll() is None, "demo ended too early:\n" + "".join(lines)
            time.sleep(3)  # a few more scrapes and rule evaluations
            started.update(descendants(proc.pid))
            yield {"prom": prom, "lines": lines, "proc": proc}
        finally:
            started.update(descendants(proc.pid))
            code = stop_process(proc, timeout=60)  # SIGTERM: the demo's orderly shutdown
            left = wait_gone(started, within_s=10)
            kill_survivors(started)
    assert code == 143, "demo did not stop cleanly on SIGTERM:\n" + "".join(lines)
    assert left == [], f"the demo left processes behind: {left}"
