"""bench/agent_extract.py runs on tiny inputs and reports both traces (a smoke run; its figures
are in bench/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_agent_extract_bench_runs(tmp_path: Path) -> None:
    out = tmp_path / "ae.json"
    p = subprocess.run(
        [sys.executable, "bench/agent_extract.py", "--quick", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["rag"]["spans_per_trace"] == got["agent"]["spans_per_trace"]
    assert got["ratio"] == got["agent"]["us_per_trace_best"] / got["rag"]["us_per_trace_best"]
    assert "agent / RAG extraction cost per trace" in p.stdout
