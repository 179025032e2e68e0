"""``nexagauge.demo.stack.popen``: a child started from the main thread dies with its parent.

Real processes: a Python parent starts ``sleep`` through :func:`popen` and is then SIGKILLed (no
cleanup can run); the kernel must end the ``sleep`` too (Linux parent-death signal). A child
started from another thread gets no parent-death signal, since that would fire when the *thread*
ends (see :func:`die_with_parent`).
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from support.procs import descendants, kill_survivors, wait_gone

from nexagauge.demo.stack import die_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PARENT = """
import subprocess, sys
from nexagauge.demo.stack import popen
popen(["sleep", "60"], start_new_session=True)
print("started", flush=True)
sys.stdin.read()
"""


def test_a_child_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    children = {}
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "started"
        children = descendants(parent.pid)
        assert [c.split()[0] for c in children.values()] == ["sleep"], children
        parent.kill()
        parent.wait(timeout=10)
        assert wait_gone(children, within_s=10) == [], children
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        kill_survivors(children)


def test_no_parent_death_signal_off_the_main_thread() -> None:
    assert die_with_parent() is not None
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(die_with_parent()))
    t.start()
    t.join()
    assert seen == [None]
