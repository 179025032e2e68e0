"""No secret and no configuration value reaches the report, in any form.

The dataset of the real runs (conftest.py) puts an OpenAI project key and an AWS access key id in
every field (case id, question, answer, context, reference, metadata key and value, the judge's
reasoning through the loopback judge, a bad record) and the configured judge API key in a
metadata value. The report file is searched for each secret raw, JSON-escaped, percent-encoded,
base64- and hex-encoded; the new ``record`` block of the case files is checked too.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from tests.report.conftest import (
    JUDGE_KEY,
    PLACEHOLDER,
    SECRETS,
    Opener,
    Runs,
    nexagauge_command,
    run_env,
)

pytestmark = pytest.mark.integration

FIELDS = ("question", "answer", "second claim", "context", "reference", "metakey", "metadata",
          "reasoning", "noanswer")  # fmt: skip


def _forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [
        secret,
        json.dumps(secret)[1:-1],
        urllib.parse.quote(secret),
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        raw.hex(),
        secret[:16],  # a telling prefix survives no partial scrub
    ]


def _assert_absent(text: str, secrets: tuple[str, ...]) -> None:
    for secret in secrets:
        for form in _forms(secret):
            assert form not in text, f"{secret[:8]}... present as {form[:24]}..."


def test_no_secret_in_any_form(runs: Runs, open_report: Opener) -> None:
    html = (runs.new / "report.html").read_text(encoding="utf-8")
    _assert_absent(html, (*SECRETS, JUDGE_KEY))
    # what the page shows: every field is there, scrubbed (not dropped)
    page = open_report(runs.new / "report.html").page
    page.locator("details.case").evaluate_all("els => els.forEach(e => e.open = true)")
    text = page.evaluate("document.body.innerText")
    _assert_absent(text, (*SECRETS, JUDGE_KEY))
    for field in FIELDS:
        assert f"{field}: " in text, field
    assert len(re.findall(PLACEHOLDER, text)) >= 2 * len(FIELDS)  # both secrets of each field
    assert "[scrubbed:configured_secret]" in text  # the judge key pasted into metadata


def test_no_configuration_or_environment_value(runs: Runs) -> None:
    html = (runs.new / "report.html").read_text(encoding="utf-8")
    root = runs.new.parent
    assert str(root) not in html  # no output, input or cache path (the input's file name only)
    assert str(root / "cache") not in html and "127.0.0.1" not in html  # NEXAGAUGE_* values
    assert "new.jsonl" in html


def test_case_files_record_block_is_scrubbed(runs: Runs) -> None:
    blocks = [json.loads(p.read_text())["record"] for p in (runs.new / "cases").glob("*.json")]
    assert len(blocks) == 6
    dumped = json.dumps(blocks)
    _assert_absent(dumped, SECRETS)
    hostile = next(b for b in blocks if b["input"].startswith("question: "))
    assert re.search(PLACEHOLDER, hostile["output"]) and hostile["context"][1] == (
        "Plain passage about Paris."
    )


def test_report_command_scrubs_configured_secrets(runs: Runs, tmp_path: Path) -> None:
    """``nexagauge report`` replaces the configured judge key (env) wherever it occurs."""
    out = tmp_path / "r.html"
    env = run_env(tmp_path / "cache", OPENAI_API_KEY=JUDGE_KEY)
    p = subprocess.run(
        [*nexagauge_command(), "report", str(runs.base), "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    html = out.read_text(encoding="utf-8")
    _assert_absent(html, (*SECRETS, JUDGE_KEY))
    assert "[scrubbed:configured_secret]" in html
    # without the key configured it stays (it has no recognisable shape): the literal rule works
    p = subprocess.run(
        [*nexagauge_command(), "report", str(runs.base), "-o", str(out)],
        env=run_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and JUDGE_KEY in out.read_text(encoding="utf-8")
