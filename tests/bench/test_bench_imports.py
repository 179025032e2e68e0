"""Importing a benchmark module changes nothing about the importing process.

Tests import bench modules for their helpers (``local_judge.probe`` for its folds,
``local_judge.accuracy`` for ``prepare``). ``local_judge.models`` once pinned the process to one
CPU and set ``OMP_NUM_THREADS=1`` at import, so collecting ``tests/local/test_calibration.py``
pinned the whole test run to one core and every process it started inherited one OpenMP thread:
the calibration fixture took 225-316 s instead of about 140 s. Pinning belongs in a benchmark's
``main()`` (``_machine.pin_one_core``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import glob, importlib, json, os, sys
sys.path.insert(0, "bench")
before = (sorted(os.sched_getaffinity(0)), os.environ.get("OMP_NUM_THREADS"))
changed = []
paths = sorted(glob.glob("bench/*.py")) + sorted(glob.glob("bench/local_judge/*.py"))
names = [p[len("bench/"):-3].replace("/", ".").removesuffix(".__init__") for p in paths]
assert "local_judge.eval" in names, names
for name in names:
    importlib.import_module(name)
    now = (sorted(os.sched_getaffinity(0)), os.environ.get("OMP_NUM_THREADS"))
    if now != before:
        changed.append(name)
        before = now
print(json.dumps({"changed": changed, "cpus": len(before[0])}))
"""


def test_no_bench_module_pins_the_cpu_or_threads_at_import() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["HF_HUB_OFFLINE"] = "1"
    p = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["changed"] == [], res


def test_pin_one_core_pins_only_when_called() -> None:
    """The benchmarks that report per-core figures still pin themselves (in ``main``)."""
    code = (
        "import os, sys; sys.path.insert(0, 'bench'); import _machine; "
        "a = len(os.sched_getaffinity(0)); _machine.pin_one_core(); "
        "print(a, len(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'])"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    _, after, threads = p.stdout.split()
    assert after == "1" and threads == "1"
    for script in ("models.py", "throughput.py"):
        src = (ROOT / "bench" / "local_judge" / script).read_text("utf-8")
        main = src[src.index("\ndef main(") + 1 :]
        assert "pin_one_core()" in main.split("\ndef ", 1)[0], script
