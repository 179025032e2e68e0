"""Smoke tests of the online benchmarks (ingest, online latency, memory, run_all) on tiny inputs.

They check that each benchmark runs end to end on the real parts (Tansu, ``nexagauge serve``, the
loopback judge) and reports its figures; they never check timing targets (benchmarks are not
part of the suite's assertions on speed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return p


def test_ingest_reports_pipeline_and_ceilings(tmp_path: Path) -> None:
    out = tmp_path / "ingest.json"
    p = _run(["bench/ingest.py", "--quick", "--messages", "60", "--json", str(out)])
    assert "RESULT ingest pipeline" in p.stdout and "of the decode+attrs ceiling" in p.stdout
    rep = json.loads(out.read_text())
    assert set(rep["summary"]) == {"fetch", "decode", "decode+attrs", "pipeline"}
    for v in rep["summary"].values():
        assert v["spans_s"] > 0 and v["spans_cpu_s"] > 0
    # every variant read the whole topic: 60 messages of 10 spans
    for v, runs in rep["runs"].items():
        assert all(r["messages"] == 60 for r in runs), v
    pipe = rep["runs"]["pipeline"][0]
    assert pipe["spans"] == 600
    # every trace left the pipeline: dropped as unsampleable at decode time, or assembled
    assert pipe["traces_done"] + pipe["discarded"] == rep["info"]["traces"] == 120
    assert pipe["evaluated"] == pipe["sampled"]


def test_memory_reports_rss_per_buffered_trace(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    p = _run(["bench/memory.py", "--traces", "200", "--json", str(out)])
    assert "RESULT memory 200 buffered traces" in p.stdout and "KiB per buffered trace" in p.stdout
    r = json.loads(out.read_text())
    assert r["buffered_traces"] == 200 and r["buffered_spans"] == 800 and r["evicted"] == 0
    assert r["baseline_kib"] > 0 and r["peak_kib"] >= r["buffered_kib"] > 0


def test_online_latency_reports_throughput_and_percentiles(tmp_path: Path) -> None:
    out = tmp_path / "online.json"
    p = _run(["bench/online_latency.py", "--quick", "--judge-ms", "50", "--json", str(out)])
    assert "RESULT online" in p.stdout and "evaluations/s at saturation" in p.stdout
    r = json.loads(out.read_text())
    for phase in ("steady", "saturation"):
        x = r[phase]
        assert x["evaluated"] == x["n"] > 0, phase
        assert 0 < x["p50_s"] <= x["p95_s"] <= x["max_s"]
    assert r["saturation"]["evals_per_s"] > 0
    # relevance + grounding really called the judge over HTTP: claims, relevance, grounding
    assert r["judge_calls"]["steady_per_eval"] >= 2
    assert r["serve_exit"] == 0
    assert r["serve_cpu_ms_per_eval"]["steady"] > 0


def test_run_all_writes_the_combined_table(tmp_path: Path) -> None:
    p = _run(
        ["bench/run_all.py", "--quick", "--only", "memory", "--outdir", str(tmp_path)],
        timeout=300,
    )
    table = (tmp_path / "results.md").read_text()
    assert "| benchmark" in table and "RSS per buffered trace" in table
    assert "machine:" in table and "load average" in table
    assert table in p.stdout
