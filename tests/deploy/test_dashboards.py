"""Grafana dashboards validated as data: structure, datasource, variables, queries, metric names.

(Grafana is not installable here; every panel query is also executed against a real Prometheus in
``test_prometheus_queries.py``.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.prometheus import (
    ALL_VALUES,
    DASHBOARDS_DIR,
    REPO,
    dashboard_expressions,
    rule_files,
    template_variables,
)

from nexagauge.emit import metric_names as mn

PROVISIONING = REPO / "dashboards" / "grafana" / "provisioning"
EXPECTED = {
    "relevance-drift.json": ("nexagauge-relevance-drift", "nexa-gauge / Relevance drift"),
    "grounding.json": ("nexagauge-grounding", "nexa-gauge / Grounding"),
    "evaluator-health.json": ("nexagauge-evaluator-health", "nexa-gauge / Evaluator health"),
    "agents.json": ("nexagauge-agents", "nexa-gauge / Agents"),
}
#: template variables per dashboard (the agent series have no service/route/model labels)
VARIABLES = {"agents.json": {"agent", "tool"}}
SCORE_VARIABLES = {"service", "route", "model"}
PANEL_TYPES = {"timeseries", "stat", "heatmap", "barchart", "table", "state-timeline", "bargauge"}
BUILTIN_VARS = {"__rate_interval", "__interval", "__range"}


def _load(name: str) -> dict[str, Any]:
    return json.loads((DASHBOARDS_DIR / name).read_text(encoding="utf-8"))


def _panels(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in d["panels"] if p["type"] != "row"]


def _exprs(d: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in _panels(d) for t in p["targets"]]


def _datasource_uid() -> str:
    doc = yaml.safe_load((PROVISIONING / "datasources" / "datasources.yml").read_text())
    prom = [d for d in doc["datasources"] if d["type"] == "prometheus"]
    assert len(prom) == 1 and prom[0]["isDefault"]
    return str(prom[0]["uid"])


def _known_series() -> set[str]:
    """Raw metric names (histograms with their suffixes) and every recorded series name."""
    names: set[str] = set()
    for attr, value in vars(mn).items():
        if attr.isupper() and isinstance(value, str) and value.startswith(mn.PREFIX + "_"):
            names |= {value, f"{value}_bucket", f"{value}_sum", f"{value}_count"}
    for f in rule_files():
        for g in yaml.safe_load(f.read_text())["groups"]:
            names |= {r["record"] for r in g["rules"] if "record" in r}
    return names


_SERIES = re.compile(r"(?<![\w:\"])(nexagauge[\w:]*)")


def test_the_dashboards_exist() -> None:
    assert {p.name for p in DASHBOARDS_DIR.glob("*.json")} == set(EXPECTED)
    for name, (uid, title) in EXPECTED.items():
        d = _load(name)
        assert (d["uid"], d["title"]) == (uid, title)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_structure(name: str) -> None:
    d = _load(name)
    ds = _datasource_uid()
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"
    cells: set[tuple[int, int]] = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] >= 1, (name, p["title"])
        area = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not (cells & area), f"{name}: panel {p['title']!r} overlaps another"
        cells |= area
    panels = _panels(d)
    assert len(panels) >= 6
    for p in panels:
        where = f"{name}: panel {p['title']!r}"
        assert p["type"] in PANEL_TYPES, where
        assert p["title"].strip(), where
        assert p["datasource"] == {"type": "prometheus", "uid": ds}, where
        assert p["targets"], f"{where} has no query"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), where
        for t in p["targets"]:
            assert t["expr"].strip(), f"{where} target {t['refId']}: empty expr"
            assert t["datasource"]["uid"] == ds, where
            assert t["expr"].count("(") == t["expr"].count(")"), where


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variables_defined_and_used(name: str) -> None:
    d = _load(name)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert set(variables) == VARIABLES.get(name, SCORE_VARIABLES)
    if "route" in variables:
        assert "span_name" in variables["route"]["query"]["query"], "route = the span_name label"
    for v in variables.values():
        assert v["datasource"]["uid"] == _datasource_uid()
        assert v["includeAll"] and v["allValue"] == ".*" and v["multi"]
    used: set[str] = set()
    for e in _exprs(d):
        refs = template_variables(e)
        assert refs <= set(variables) | BUILTIN_VARS, f"{name}: undefined variable in {e}"
        used |= refs
    for v in variables.values():
        used |= template_variables(v["query"]["query"])
    assert set(variables) <= used, f"{name}: variables never used: {set(variables) - used}"
    # label filters use regex matching, so "All" (.*) and multi-value selections work
    for e in _exprs(d):
        for var in variables:
            assert f'="${var}"' not in e and f'!="${var}"' not in e, f"{name}: use =~ for ${var}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_queries_use_only_existing_series(name: str) -> None:
    known = _known_series()
    d = _load(name)
    texts = _exprs(d) + [v["query"]["query"] for v in d["templating"]["list"]]
    for e in texts:
        for s in _SERIES.findall(e):
            assert s in known, f"{name}: unknown series {s!r} in {e}"


def test_rules_use_only_existing_series() -> None:
    known = _known_series()
    for f in rule_files():
        for g in yaml.safe_load(f.read_text())["groups"]:
            for r in g["rules"]:
                for s in _SERIES.findall(r["expr"]):
                    assert s in known, f"{f.name}: unknown series {s!r} in {r['expr']}"


def test_drift_dashboards_show_baseline_psi_counts_heatmap_and_rejections() -> None:
    for name, metric in (
        ("relevance-drift.json", "answer_relevancy"),
        ("grounding.json", "grounding"),
    ):
        d = _load(name)
        exprs = "\n".join(_exprs(d))
        types = {p["type"] for p in _panels(d)}
        assert "heatmap" in types
        assert f'metric="{metric}"' in exprs
        assert "increase7d" in exprs, "no 7-day baseline"
        assert "nexagauge:score_psi:1h_vs_7d" in exprs, "no PSI panel"
        assert "nexagauge:score_count:increase1h" in exprs, "no sample counts"
        assert 'verdict="REJECTED"' in exprs, "no rejected-claims share"
        heat = next(p for p in _panels(d) if p["type"] == "heatmap")
        assert heat["targets"][0]["format"] == "heatmap" and "_bucket" in heat["targets"][0]["expr"]
    assert "ALERTS{" in "\n".join(_exprs(_load("grounding.json"))), "grounding: no alert state"


def test_health_dashboard_covers_the_evaluator() -> None:
    exprs = "\n".join(_exprs(_load("evaluator-health.json")))
    for series in (
        mn.SPANS_CONSUMED,
        mn.EVALUATIONS,
        mn.CONSUMER_LAG,
        mn.TRACES_SAMPLED,
        mn.TRACES_NOT_SAMPLED,
        mn.SKIPPED,
        mn.JUDGE_LATENCY,
        mn.JUDGE_TOKENS,
        mn.JUDGE_COST,
        mn.JUDGE_CALLS,
        mn.DLQ,
        mn.BUDGET_REMAINING,
        mn.LAST_EVALUATION,
        mn.EVALUATION_LATENCY,
        mn.EVALUATION_SPANS,
        mn.DUPLICATE_EVALUATIONS,
    ):
        assert series in exprs, f"evaluator health: nothing shows {series}"


def test_extracted_expressions_cover_every_target() -> None:
    n_targets = sum(len(p["targets"]) for name in EXPECTED for p in _panels(_load(name)))
    srcs = dashboard_expressions()
    assert sum(s.kind == "panel" for s in srcs) == n_targets
    assert sum(s.kind == "variable" for s in srcs) == sum(
        len(VARIABLES.get(name, SCORE_VARIABLES)) for name in EXPECTED
    )
    for s in srcs:
        assert "$" not in s.expr, f"{s.origin}: unsubstituted variable in {s.expr}"
    assert set(ALL_VALUES) >= {"service", "route", "model", "__rate_interval"}


def test_provisioning_points_at_the_dashboards() -> None:
    doc = yaml.safe_load((PROVISIONING / "dashboards" / "nexagauge.yml").read_text())
    (provider,) = doc["providers"]
    assert provider["type"] == "file"
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    target = provider["options"]["path"]
    assert any(m.startswith("./dashboards/grafana/dashboards:" + target) for m in mounts), mounts


def test_generated_dashboards_are_valid_json_files() -> None:
    for p in Path(DASHBOARDS_DIR).glob("*.json"):
        json.loads(p.read_text(encoding="utf-8"))
