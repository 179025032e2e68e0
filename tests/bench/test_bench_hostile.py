"""bench/hostile.py runs on small messages (a smoke run; its figures are in bench/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_hostile_bench_runs_and_reports_every_message(tmp_path: Path) -> None:
    out = tmp_path / "hostile.json"
    p = subprocess.run(
        [sys.executable, "bench/hostile.py", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())["results"]
    assert set(res) == {"chain-3000", "wide-8MB", "one-trace-8MB", "one-span-8MB", "salvage-8MB"}
    # every answer became a case, and the unreadable span cost only itself
    assert res["chain-3000"]["thread_cases"] == res["chain-3000"]["thread_spans"] == 300
    assert res["salvage-8MB"]["thread_cases"] == res["wide-8MB"]["thread_cases"] > 0
