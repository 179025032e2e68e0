"""``bench/judge_client.py`` runs on tiny inputs (a smoke test: no speed is asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_judge_client_bench_reports_both_clients_on_both_transports(tmp_path: Path) -> None:
    out = tmp_path / "judge_client.json"
    p = subprocess.run(
        [sys.executable, "bench/judge_client.py", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "RESULT judge client CPU per call" in p.stdout
    data = json.loads(out.read_text())
    for transport in ("aiohttp", "httpx"):
        row = data[transport]
        assert len(row["plain"]) == len(row["ours"]) == len(row["ratio"]) == 1
        assert all(us > 0 for us in row["plain"] + row["ours"])
