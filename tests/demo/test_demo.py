"""``nexagauge demo`` end to end: real broker, collector, evaluator with the local judge, traced app."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest
from support.procs import descendants, still_alive, wait_gone

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_runs_the_pipeline_reports_drift_and_stops_everything():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("NEXAGAUGE_JUDGE_BASE_URL", None)
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nexagauge",
            "demo",
            "--duration",
            "24",
            "--rate",
            "6",
            "--drift-share",
            "0.8",
            "--metrics-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    scraped = ""
    started: dict[tuple[int, int], str] = {}  # every process the demo started, seen while it ran
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 240
        url = None
        for line in proc.stdout:
            lines.append(line)
            started.update(descendants(proc.pid))
            m = re.search(r"scores on (http://\S+/metrics)", line)
            if m:
                url = m.group(1)
            if (
                url
                and not scraped
                and "evaluated" in line
                and re.search(r"evaluated\s+[1-9]", line)
            ):
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
    assert "nexagauge_score_count{" in scraped, scraped[:2000]
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
    # every process the demo started is gone (its own children only: other rotel/tansu
    # processes on the host are not counted)
    commands = " ".join(started.values())
    assert "rotel-agent" in commands and "tansu" in commands, started
    assert wait_gone(started, within_s=10) == [], started


def test_process_accounting_sees_only_its_owndescendants():
    """The helpers above count a grandchild of ours, and not an identical process of someone else."""
    stranger = subprocess.Popen(["sleep", "30"])  # same command, not below `mine`
    mine = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(found := descendants(mine.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(found.values()) == ["sleep 30 ", "sleep 30 "], found
        assert all(pid != stranger.pid for pid, _ in found), found
        assert len(still_alive(found)) == 2
    finally:
        for pid, _ in descendants(mine.pid):
            os.kill(pid, 9)
        mine.wait(timeout=10)
        stranger.kill()
        stranger.wait(timeout=10)
    assert still_alive(found) == []
