"""The report of a real run with the local judge: grounding claims with the judge's reason and
the context passage it names as support or contradiction."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.report.conftest import Opener, nexagauge_command, run_env

pytestmark = pytest.mark.integration

RECORD = {
    "case_id": "paris",
    "question": "Where is the Eiffel Tower?",
    "answer": "The Eiffel Tower is in Paris. It was finished in 1925.",
    "contexts": [
        "The Eiffel Tower stands on the Champ de Mars in Paris.",
        "It was completed in 1889 for the World's Fair.",
    ],
    "grounding": {"include_reasoning": True},
}


def test_grounding_passages_from_the_local_judge(tmp_path: Path, open_report: Opener) -> None:
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(RECORD) + "\n")
    args = ["run", "grounding", "-i", str(data), "-o", str(tmp_path / "out"), "--no-cache", "-q"]
    p = subprocess.run(
        [*nexagauge_command(), *args],
        cwd=tmp_path,
        env=run_env(tmp_path / "cache", NEXAGAUGE_JUDGE_MODE="local"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "out" / "cases" / "paris.json").read_text())
    verdicts = [
        v for v in doc["nodes"]["grounding"]["output"]["metrics"][0]["result"] if "item" in v
    ]
    opened = open_report(tmp_path / "out" / "report.html")
    rows = opened.page.locator('h4:has-text("(grounding") + table.claims tbody tr')
    assert rows.count() == len(verdicts) == 2
    for i, v in enumerate(verdicts):
        row = rows.nth(i)
        assert row.locator("td").first.text_content() == v["item"]["text"]
        assert row.locator("td.verdict").text_content() == f"{v['verdict']} {v['label']}"
        assert row.locator("td.reason").text_content() == v["reason"]
        # the passage is the context sentence the judge names (quoted in its reason)
        assert row.locator("td.passage").text_content() in RECORD["contexts"]
        assert row.locator("td.passage").text_content() in v["reason"]
    assert rows.nth(1).locator("td.passage").text_content() == RECORD["contexts"][1]
    assert opened.errors == [] and opened.foreign_requests == []
