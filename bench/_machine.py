"""The machine a benchmark ran on, and this process's memory: every report starts with them.

- :func:`machine` / :func:`machine_line`: CPU model, cores, memory, load average, Python.
- :func:`rss_kib` / :func:`peak_rss_kib` read ``/proc/self/status`` (no psutil needed).
- :func:`exit_on_sigterm`: a terminated benchmark still stops its broker and child processes.
- :func:`pin_one_core`: per-core figures (one CPU, one OpenMP thread).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``with`` blocks stop the broker and child processes."""
    import signal

    def _raise(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)


def pin_one_core() -> None:
    """Run this process on one CPU with one OpenMP thread, for per-core figures.

    Call it from a benchmark's ``main()``, never at import: a test that imports the module (for
    one of its helpers) would otherwise pin the whole test run to one core, and every child
    process it starts would inherit ``OMP_NUM_THREADS=1``.
    """
    os.environ["OMP_NUM_THREADS"] = "1"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def machine() -> dict[str, Any]:
    """CPU model, cores, memory and load average (1/5/15 min) right now."""
    return {
        "cpu": cpu_model(),
        "nproc": os.cpu_count() or 0,
        "mem_gib": round(mem_total_gib(), 1),
        "load": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def machine_line() -> str:
    m = machine()
    load = "/".join(f"{x:.2f}" for x in m["load"])
    return (
        f"machine: {m['cpu']}, {m['nproc']} cores, {m['mem_gib']} GiB, python {m['python']}, "
        f"load avg {load}"
    )


def load_line(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The closing line of a bench report: the load average around the run (``machine()`` taken
    before and after it) and the machine."""
    return (
        f"load avg before {before['load'][0]:.2f}, after {after['load'][0]:.2f}; {machine_line()}"
    )


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def rss_kib() -> int:
    """Resident set size of this process now (KiB)."""
    return _status_kib("VmRSS")


def peak_rss_kib() -> int:
    """Peak resident set size of this process so far (KiB, ``VmHWM``)."""
    return _status_kib("VmHWM")
