"""``bench/scrub_cost.py`` runs on tiny inputs and its figures reconcile (issue 31)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_scrub_cost_runs_and_reports_the_ratio(tmp_path: Path) -> None:
    out = tmp_path / "scrub.json"
    p = subprocess.run(
        [sys.executable, "bench/scrub_cost.py", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["cases"] == 12 and d["sensitive"] == 4
    assert d["serve_cpu_per_case_s"] > d["scrub_cpu_per_sensitive_case_s"] > 0
    assert d["ratio"] == pytest.approx(
        d["scrub_cpu_per_sensitive_case_s"] / d["serve_cpu_per_case_s"]
    )
    assert f"{d['ratio']:.1%} of its serve CPU" in p.stdout
