"""``nexagauge demo`` stopped by a signal leaves no process behind.

Real processes only: the demo (embedded Tansu broker, rotel collector, the evaluator with the local
judge, the traced demo app) runs as a subprocess until its app is running; every process below it
is recorded, then the demo gets a signal:

- SIGTERM (a service manager, ``kill``) runs the same orderly shutdown as Ctrl-C (SIGINT): the
  demo exits with 128 + the signal number and every child is stopped (SIGHUP takes SIGTERM's path:
  ``test_cli_signals.py``);
- SIGKILL cannot be handled: the children are started with a parent-death signal (Linux), so the
  kernel ends them when the demo dies.

Before the fix, SIGTERM killed the demo without its cleanup and the broker and the collector (in
their own sessions) and the app lived on, re-parented to init.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from support.procs import Key, descendants, kill_survivors, wait_gone

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: the three kinds of child the demo starts, as they appear in their command lines
CHILDREN = ("tansu", "rotel-agent", "nexagauge.demo.app")


@dataclass
class RunningDemo:
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    started: dict[Key, str] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def demo() -> Iterator[RunningDemo]:
    """``nexagauge demo`` with its app running (a long duration: only a signal ends it)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_", "OTEL_"))
    }
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    cmd = [sys.executable, "-m", "nexagauge", "demo", "--duration", "600", "--rate", "2"]
    proc = subprocess.Popen(
        [*cmd, "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    run = RunningDemo(proc)
    reader = threading.Thread(target=lambda: run.lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 240
        while True:
            run.started.update(descendants(proc.pid))
            commands = " ".join(run.started.values())
            if "demo app running" in run.output and all(c in commands for c in CHILDREN):
                break
            assert proc.poll() is None, "demo exited:\n" + run.output
            assert time.monotonic() < deadline, f"demo not ready:\n{run.output}\n{run.started}"
            time.sleep(0.2)
        yield run
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        kill_survivors(run.started)  # a failed run must not leave a broker behind either
        reader.join(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_runs_the_orderly_shutdown(demo: RunningDemo, sig: signal.Signals) -> None:
    demo.proc.send_signal(sig)  # to the demo only, as `kill` does (not to its process group)
    try:
        code = demo.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the demo did not stop within 90 s of {sig.name}:\n{demo.output}")
    assert wait_gone(demo.started, within_s=10) == [], demo.started
    assert code == 128 + sig, demo.output
    if sig != signal.SIGINT:  # Ctrl-C needs no explanation
        assert f"{sig.name}: stopping" in demo.output, demo.output


def test_children_do_not_outlive_a_killed_demo(demo: RunningDemo) -> None:
    demo.proc.kill()
    demo.proc.wait(timeout=30)
    assert wait_gone(demo.started, within_s=10) == [], demo.started
