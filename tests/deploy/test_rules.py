"""Prometheus rules: generated files up to date, promtool check + unit tests, rule hygiene."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.prometheus import REPO, alert_parts, rule_files

RULE_TESTS = sorted((REPO / "dashboards" / "prometheus" / "tests").glob("*.yml"))
RUNBOOKS = REPO / "docs" / "runbooks.md"
#: alerts whose condition is itself the evidence (no sample count applies)
NO_SAMPLE_GUARD = {
    "NexagaugeEvaluatorDown": "up == 0 is one failed scrape; `for` covers it",
    "NexagaugeJudgeCircuitOpen": "a state held for 5m, not a rate of few events",
    "NexagaugeBrokerUnreachable": "a state held for 5m, not a rate of few events",
}


def _alerts() -> list[dict[str, Any]]:
    out = []
    for f in rule_files():
        for g in yaml.safe_load(f.read_text())["groups"]:
            out += [r for r in g["rules"] if "alert" in r]
    return out


def _duration_s(d: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", d))


def _anchors(markdown: str) -> set[str]:
    """GitHub-style anchors of the headings of a markdown document."""
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_generated_files_are_up_to_date() -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "dashboards" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 0, (
        "dashboards/ differ from what dashboards/generate.py writes; run "
        f"`python dashboards/generate.py` and commit:\n{r.stdout}{r.stderr}"
    )


def test_promtool_check_rules(promtool: str) -> None:
    files = rule_files()
    assert {f.name for f in files} == {"scores.yml", "evaluator.yml", "agents.yml"}
    r = subprocess.run(
        [promtool, "check", "rules", *map(str, files)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_unit_tests_pass(promtool: str) -> None:
    assert RULE_TESTS, "no promtool test files in dashboards/prometheus/tests/"
    r = subprocess.run(
        [promtool, "test", "rules", *map(str, RULE_TESTS)],
        capture_output=True,
        text=True,
        cwd=RULE_TESTS[0].parent,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(RULE_TESTS), r.stdout


def test_promtool_unit_tests_can_fail(promtool: str, tmp_path: Path) -> None:
    """A wrong expectation makes promtool fail: the unit tests are not vacuous."""
    src = RULE_TESTS[0]
    doc = yaml.safe_load(src.read_text())
    doc["rule_files"] = [str((src.parent / f).resolve()) for f in doc["rule_files"]]
    firing = next(t for t in doc["tests"] for a in t.get("alert_rule_test", []) if a["exp_alerts"])
    for a in firing["alert_rule_test"]:
        a["exp_alerts"] = [] if a["exp_alerts"] else a["exp_alerts"]
    doc["tests"] = [firing]
    bad = tmp_path / "bad_test.yml"
    bad.write_text(yaml.safe_dump(doc))
    r = subprocess.run([promtool, "test", "rules", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "FAILED" in r.stdout + r.stderr


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for f in RULE_TESTS:
        for t in yaml.safe_load(f.read_text())["tests"]:
            for a in t.get("alert_rule_test", []):
                (fired if a["exp_alerts"] else quiet).add(a["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - fired == set(), f"alerts never tested firing: {sorted(names - fired)}"
    assert names - quiet == set(), f"alerts never tested quiet: {sorted(names - quiet)}"


def test_alerts_have_for_severity_runbook_and_sample_guard() -> None:
    anchors = _anchors(RUNBOOKS.read_text(encoding="utf-8"))
    dashboards = {p.stem for p in (REPO / "dashboards" / "grafana" / "dashboards").glob("*.json")}
    expected = {
        "NexagaugeGroundingBelowFloor",
        "NexagaugeGroundingDropped",
        "NexagaugeRelevanceDrift",
        "NexagaugeEvaluatorStalled",
        "NexagaugeEvaluatorDown",
        "NexagaugeJudgeErrorRate",
        "NexagaugeBudgetExhausted",
        "NexagaugeJudgeCircuitOpen",
        "NexagaugeBrokerUnreachable",
        "NexagaugeAgentToolFailures",
        "NexagaugeAgentLoops",
    }
    alerts = _alerts()
    assert {a["alert"] for a in alerts} == expected
    for a in alerts:
        name = a["alert"]
        assert _duration_s(a.get("for", "0s")) >= 300, f"{name}: `for` shorter than 5m"
        assert a["labels"]["severity"] in {"warning", "critical"}, name
        ann = a["annotations"]
        assert {"summary", "description", "runbook_url", "dashboard"} <= set(ann), name
        path, _, anchor = ann["runbook_url"].partition("#")
        assert path == "docs/runbooks.md" and anchor in anchors, (
            f"{name}: runbook anchor #{anchor} not a heading of docs/runbooks.md"
        )
        uid = ann["dashboard"].removeprefix("/d/").removeprefix("nexagauge-")
        assert uid in dashboards, f"{name}: dashboard {ann['dashboard']} does not exist"
        parts = alert_parts(a["expr"])
        if name not in NO_SAMPLE_GUARD:
            # a count threshold (evaluations, calls, traces, messages) on one of the parts
            guards = [int(n) for n in re.findall(r"\s>=?\s*(\d+)(?![.\d])", a["expr"])]
            assert len(parts) >= 2 and any(n >= 5 for n in guards), (
                f"{name}: no minimum-sample guard in {a['expr']}"
            )


@pytest.mark.parametrize(
    ("expr", "parts"),
    [
        ('a{x="1"} < 0.6 and on(x) b >= 20', ['a{x="1"}', "b"]),
        ("(a - b) > 0.15 and on(m, s) c >= 20 and on(m) d >= 200", ["(a - b)", "c", "d"]),
        ("s(x) >= 5 and on() (s(y) or vector(0)) == 0", ["s(x)", "(s(y) or vector(0))"]),
        ('up{job="j"} == 0', ['up{job="j"}']),
        ('a{l=~"x>y"} > bool 1', ['a{l=~"x>y"}']),
        ("a / (b > 0)", ["a / (b > 0)"]),
    ],
)
def test_alert_parts(expr: str, parts: list[str]) -> None:
    assert alert_parts(expr) == parts
