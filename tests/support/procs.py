"""Process accounting for tests that start process trees (``nexagauge demo`` and its children).

A test records every process below the one it started while that runs (:func:`descendants`),
then checks that none of them is left (:func:`still_alive`, :func:`wait_gone`). Processes are keyed
by ``(pid, start time)`` from ``/proc``, so a pid reused later by an unrelated process is not
counted, and only the test's own descendants count, whatever else runs on the host (other rotel or
Tansu processes included). Linux only (``/proc``).

Example::

    proc = subprocess.Popen([...])
    seen = descendants(proc.pid)          # repeat while it runs: children may start late
    proc.terminate(); proc.wait()
    assert wait_gone(seen, within_s=10) == []
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

#: a process key: (pid, start time in clock ticks since boot)
Key = tuple[int, int]


def proc_stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time in clock ticks)`` of a live process, from ``/proc/PID/stat``;
    ``None`` when it does not exist or is a zombie (exited, only not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and ')'
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def cmdline(pid: int) -> str:
    """The command line of ``pid`` with arguments joined by spaces ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> dict[Key, str]:
    """Every live process below ``root`` (children of children too) -> its command line."""
    parent_of: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := proc_stat(int(entry))) is not None:
            parent_of[int(entry)] = st
    found: dict[Key, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in parent_of.items():
            if ppid == parent:
                # "" while it exits (its memory is already gone): a caller merging samples with
                # ``seen.update(descendants(root))`` keeps the command seen before, not ""
                if cmd := cmdline(pid):
                    found[(pid, start)] = cmd
                frontier.append(pid)
    return found


def still_alive(procs: dict[Key, str]) -> list[str]:
    """``"pid command"`` of each process of ``procs`` that still runs (the same process: same
    start time), wherever it now hangs in the tree (an orphan re-parented to init counts)."""
    alive = []
    for (pid, start), cmd in procs.items():
        st = proc_stat(pid)
        if st is not None and st[1] == start:
            alive.append(f"{pid} {cmd}")
    return alive


def wait_gone(procs: dict[Key, str], within_s: float) -> list[str]:
    """Wait up to ``within_s`` for every process of ``procs`` to end; returns the survivors
    (a process may take a moment to exit after SIGTERM)."""
    deadline = time.monotonic() + within_s
    while (alive := still_alive(procs)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def kill_survivors(procs: dict[Key, str]) -> None:
    """SIGKILL each process of ``procs`` that still runs (test cleanup after a failure); a pid
    now held by another process is left alone."""
    for (pid, start), _ in procs.items():
        st = proc_stat(pid)
        if st is not None and st[1] == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
