"""The report's command-line surface: ``run --report/--no-report/--baseline``, ``report``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.report.conftest import nexagauge_command, run_env

RECORD = {"case_id": "c1", "question": "Where?", "answer": "In Paris.", "contexts": ["Paris."]}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(RECORD) + "\n")
    return path


def _nexagauge(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*nexagauge_command(), *args],
        cwd=tmp_path,
        env=run_env(tmp_path / "cache", NEXAGAUGE_JUDGE_MODE="none"),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_default_report_and_no_report(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "out"
    p = _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    assert (out / "report.html").is_file() and f"report: {out / 'report.html'}" in p.stdout
    # the case file carries what was evaluated
    doc = json.loads((out / "cases" / "c1.json").read_text())
    assert doc["record"] == {
        "input": "Where?",
        "output": "In Paris.",
        "context": ["Paris."],
        "reference": None,
        "conversation": [],
        "metadata": {},
    }
    p = _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out), "--no-report")
    assert p.returncode == 0 and not (out / "report.html").exists()  # the stale one is gone


def test_report_file_and_json_stdout(tmp_path: Path, data: Path) -> None:
    out, html = tmp_path / "out", tmp_path / "site" / "index.html"
    html.parent.mkdir()
    p = _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out), "--report",
                   str(html), "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["cases"] == 1  # stdout stays the summary JSON
    assert html.is_file() and not (out / "report.html").exists()


def test_bad_baseline_is_a_usage_error_before_anything_runs(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "out"
    p = _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out), "--baseline",
                   str(tmp_path / "nope"))  # fmt: skip
    assert p.returncode == 2 and "--baseline" in p.stderr and not out.exists()
    p = _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "--report", "x.html", "--no-report")
    assert p.returncode == 2 and "not allowed with" in p.stderr


def test_report_command(tmp_path: Path, data: Path) -> None:
    p = _nexagauge(tmp_path, "report", str(tmp_path))
    assert p.returncode == 2 and "no summary.json" in p.stderr
    out = tmp_path / "out"
    assert _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out)).returncode == 0
    p = _nexagauge(tmp_path, "report", str(out), "--baseline", str(out), "-o", "r.html")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="comparison"' in html and "In Paris." in html
    p = _nexagauge(tmp_path, "report", str(out), "-o", str(tmp_path / "no" / "dir" / "r.html"))
    assert p.returncode == 2 and "cannot write the report" in p.stderr


def test_unwritable_report_is_an_error_and_the_results_stand(tmp_path: Path, data: Path) -> None:
    out, html = tmp_path / "out", tmp_path / "missing-dir" / "r.html"
    p = _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out), "--report", str(html))
    assert "report not written: cannot write the report" in p.stderr
    assert p.returncode == 0 == json.loads((out / "summary.json").read_text())["exit_status"]


def test_run_scrub_pii_also_scrubs_the_report(tmp_path: Path) -> None:
    data = tmp_path / "pii.jsonl"
    data.write_text(json.dumps({"question": "Mail bob@example.com", "answer": "Done."}) + "\n")
    out = tmp_path / "out"
    assert _nexagauge(tmp_path, "run", "chunk", "-i", str(data), "-o", str(out)).returncode == 0
    assert "bob@example.com" in (out / "report.html").read_text(encoding="utf-8")  # pii kept
    p = subprocess.run(
        [*nexagauge_command(), "report", str(out)],
        cwd=tmp_path,
        env=run_env(tmp_path / "cache", NEXAGAUGE_RUN_SCRUB_PII="true"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "bob@example.com" not in html and "[scrubbed:email" in html
