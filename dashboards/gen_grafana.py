"""Grafana's dashboard JSON model: query targets, panels on the 24-column grid, variables.

Part of ``dashboards/generate.py``: the building blocks every dashboard is written with, so the
datasource, the variable definitions and the panel layout are decided once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gen_common import DS


def target(
    expr: str,
    legend: str = "",
    *,
    instant: bool = False,
    fmt: str = "time_series",
    ref: str = "A",
    interval: str = "",
    exemplar: bool = False,
) -> dict[str, Any]:
    t: dict[str, Any] = {
        "datasource": DS,
        "refId": ref,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
        "format": fmt,
        "editorMode": "code",
    }
    if exemplar:  # trace-id exemplars of the histogram: click through to the trace in Jaeger
        t["exemplar"] = True
    if interval:
        t["interval"] = interval
    return t


@dataclass
class Panel:
    """A dashboard panel; ``render`` places it on the 24-column grid."""

    title: str
    kind: str
    targets: list[dict[str, Any]]
    w: int = 12
    h: int = 8
    description: str = ""
    unit: str = ""
    min: float | None = None
    max: float | None = None
    thresholds: list[tuple[float | None, str]] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    custom: dict[str, Any] = field(default_factory=dict)
    overrides: list[dict[str, Any]] = field(default_factory=list)
    transformations: list[dict[str, Any]] = field(default_factory=list)
    #: value mappings, e.g. 0 -> "none" (an empty list that is good news says so)
    mappings: list[dict[str, Any]] = field(default_factory=list)

    def render(self, pid: int, x: int, y: int) -> dict[str, Any]:
        for i, t in enumerate(self.targets):
            t["refId"] = chr(ord("A") + i)
        defaults: dict[str, Any] = {"custom": dict(self.custom)}
        if self.unit:
            defaults["unit"] = self.unit
        if self.min is not None:
            defaults["min"] = self.min
        if self.max is not None:
            defaults["max"] = self.max
        if self.mappings:
            defaults["mappings"] = self.mappings
        steps = self.thresholds or [(None, "green")]
        defaults["thresholds"] = {
            "mode": "absolute",
            "steps": [{"color": c, "value": v} for v, c in steps],
        }
        if self.thresholds and self.kind == "timeseries":
            defaults["custom"].setdefault("thresholdsStyle", {"mode": "dashed"})
        return {
            "id": pid,
            "type": self.kind,
            "title": self.title,
            "description": self.description,
            "datasource": DS,
            "gridPos": {"x": x, "y": y, "w": self.w, "h": self.h},
            "targets": self.targets,
            "fieldConfig": {"defaults": defaults, "overrides": self.overrides},
            "options": self.options,
            **({"transformations": self.transformations} if self.transformations else {}),
        }


def none_when_zero(text: str) -> list[dict[str, Any]]:
    """A value mapping that shows ``text`` (green) for 0: "nothing of the kind", not "No data"."""
    return [{"type": "value", "options": {"0": {"text": text, "color": "green", "index": 0}}}]


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {
            "query": query,
            "refId": "PrometheusVariableQueryEditor-VariableQuery",
            "qryType": 1,
        },
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "refresh": 2,
        "sort": 1,
        "hide": 0,
        "options": [],
        "regex": "",
    }


def score_variables(source: str) -> list[dict[str, Any]]:
    """``service``, ``route`` (the ``span_name`` label) and ``model``, chained."""
    return [
        variable("service", "Service", f"label_values({source}, service)"),
        variable(
            "route",
            "Route (span name)",
            f'label_values({source}{{service=~"$service"}}, span_name)',
        ),
        variable(
            "model",
            "Model",
            f'label_values({source}{{service=~"$service", span_name=~"$route"}}, model)',
        ),
    ]


def layout(items: Iterable[Panel | dict[str, Any]]) -> list[dict[str, Any]]:
    """Place panels left to right, wrapping at 24 columns; rows start a new line."""
    out: list[dict[str, Any]] = []
    x = y = 0
    line_h = 0
    pid = 1
    for it in items:
        if isinstance(it, dict):  # a row
            y += line_h
            x, line_h = 0, 0
            out.append({**it, "id": pid, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}})
            y += 1
        else:
            if x + it.w > 24:
                y += line_h
                x, line_h = 0, 0
            out.append(it.render(pid, x, y))
            x += it.w
            line_h = max(line_h, it.h)
        pid += 1
    return out


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[Panel | dict[str, Any]],
    variables: list[dict[str, Any]],
    tags: list[str],
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["nexagauge", *tags],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "links": [
            {
                "type": "dashboards",
                "tags": ["nexagauge"],
                "asDropdown": False,
                "includeVars": True,
                "keepTime": True,
                "title": "nexa-gauge",
            }
        ],
        "templating": {"list": variables},
        "panels": layout(panels),
    }
