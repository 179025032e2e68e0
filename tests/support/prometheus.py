"""A real Prometheus server for tests, and every PromQL expression the project ships.

Two reusable parts:

* :class:`PrometheusServer` starts the ``prometheus`` binary (Debian package ``prometheus``) on
  loopback with a temporary configuration that scrapes the given targets and loads the given
  rule files, waits until it is ready, runs instant / range / label queries through the HTTP API,
  and stops it (context manager; the temp dir goes with it).
* :func:`shipped_expressions` extracts every PromQL expression from the Grafana dashboards
  (panel targets and template variables) and the Prometheus rule files (recording rules, alert
  rules and the parts of each alert condition), with Grafana template variables substituted;
  :func:`run_source` runs one as Grafana would and :func:`without_data` lists those returning
  nothing (the deploy and end-to-end tests' "no No-data panel" check).

:func:`require_binary` implements the suite's rule for external binaries: a missing binary fails
the test with a clear message when ``CI`` is set, and skips it otherwise.

Example::

    with PrometheusServer({"nexagauge-evaluator": ["127.0.0.1:9464"]},
                          rule_files=rule_files()) as prom:
        prom.wait_for("up == 1")
        for src in shipped_expressions():
            run_source(prom, src)  # AssertionError when Prometheus rejects it
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from nexagauge.demo.stack import stop_process

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS_DIR = REPO / "dashboards" / "grafana" / "dashboards"
RULES_DIR = REPO / "dashboards" / "prometheus" / "rules"

#: what a dashboard's variables become when every value is selected ("All")
ALL_VALUES: dict[str, str] = {
    "service": ".*",
    "route": ".*",
    "model": ".*",
    "agent": ".*",
    "tool": ".*",
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
}


class PromQLError(RuntimeError):
    """Prometheus rejected a query (parse or execution error); the message names the query."""


def require_binary(name: str) -> str:
    """Path of ``name`` on PATH; fail (``CI`` set) or skip (otherwise) the test when missing.

    Example: ``promtool = require_binary("promtool")``.
    """
    import pytest

    path = shutil.which(name)
    if path:
        return path
    hint = {
        "prometheus": "apt-get install -y --no-install-recommends prometheus",
        "promtool": "apt-get install -y --no-install-recommends prometheus",
        "docker-compose": "apt-get install -y --no-install-recommends docker-compose",
    }.get(name, f"install {name}")
    msg = f"`{name}` is not on PATH; install it with: {hint}"
    if os.environ.get("CI"):
        pytest.fail(f"{msg} (CI is set: this test must run in CI)", pytrace=False)
    pytest.skip(msg)
    raise AssertionError("unreachable")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rule_files() -> list[Path]:
    """The shipped rule files (dashboards/prometheus/rules/*.yml)."""
    return sorted(RULES_DIR.glob("*.yml"))


@dataclass
class PrometheusServer:
    """``prometheus`` on 127.0.0.1 with its own config and TSDB in a temp dir.

    Args:
        targets: scrape job name -> list of ``host:port`` targets.
        rule_files: rule files to load (absolute paths).
        scrape_interval / evaluation_interval: Prometheus durations (tests use ``1s``).
        binary: the ``prometheus`` executable; default: from PATH (see :func:`require_binary`).
    """

    targets: Mapping[str, Sequence[str]]
    rule_files: Sequence[Path] = ()
    scrape_interval: str = "1s"
    evaluation_interval: str = "1s"
    binary: str | None = None
    #: ``--enable-feature`` flags, e.g. ``("exemplar-storage",)`` (as in docker-compose.yml)
    features: Sequence[str] = ()
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        return {
            "global": {
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
            },
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(addrs)}]}
                for job, addrs in self.targets.items()
            ],
        }

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        binary = self.binary or shutil.which("prometheus")
        if not binary:
            raise FileNotFoundError("prometheus binary not found (apt-get install prometheus)")
        self._tmp = tempfile.TemporaryDirectory(prefix="nexagauge-prom-")
        tmp = Path(self._tmp.name)
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(self.config()), encoding="utf-8")
        self.port = self.port or free_port()
        log = (tmp / "prometheus.log").open("wb")
        self._proc = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d",
                "--log.level=warn",
                *(f"--enable-feature={f}" for f in self.features),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self._proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"prometheus not ready after {timeout}s")

    def log(self) -> str:
        """The server's log so far (for assertion messages)."""
        if self._tmp is None:
            return ""
        p = Path(self._tmp.name) / "prometheus.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, timeout=10)
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP API ----------------------------------------------------------------------------
    def _get(self, path: str, params: Mapping[str, str | Sequence[str]]) -> Any:
        q = urllib.parse.urlencode(
            [(k, v) for k, vs in params.items() for v in ([vs] if isinstance(vs, str) else vs)]
        )
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=30) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
        if body.get("status") != "success":
            raise PromQLError(
                f"{path} {dict(params)!r}: {body.get('errorType')}: {body.get('error')}"
            )
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; returns the result list (vector/matrix) or ``[scalar]`` for scalars."""
        params: dict[str, str] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", params)
        res = data["result"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": res}]
        return list(res)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """Range query (what a Grafana time-series panel runs)."""
        data = self._get(
            "/api/v1/query_range",
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )
        return list(data["result"])

    def query_exemplars(self, selector: str, start: float, end: float) -> list[dict[str, Any]]:
        """Exemplars of the series matching ``selector`` (needs ``features=("exemplar-storage",)``)."""
        data = self._get(
            "/api/v1/query_exemplars",
            {"query": selector, "start": f"{start:.3f}", "end": f"{end:.3f}"},
        )
        return list(data)

    def label_values(self, label: str, match: str | None = None) -> list[str]:
        """Values of ``label`` (optionally among series matching ``match``): Grafana's
        ``label_values(match, label)`` variable query."""
        params: dict[str, str | Sequence[str]] = {}
        if match:
            params["match[]"] = [match]
        return list(self._get(f"/api/v1/label/{label}/values", params))

    def targets_health(self) -> dict[str, str]:
        """``scrapeUrl -> health`` of every active target."""
        data = self._get("/api/v1/targets", {"state": "active"})
        return {t["scrapeUrl"]: t["health"] for t in data["activeTargets"]}

    def wait_for(self, expr: str, timeout: float = 30.0, interval: float = 0.25) -> list[Any]:
        """Poll ``expr`` until it returns a non-empty result; raise TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            res = self.query(expr)
            if res:
                return res
            if time.monotonic() > deadline:
                raise TimeoutError(f"no data for {expr!r} after {timeout}s\n{self.log()[-2000:]}")
            time.sleep(interval)


# --------------------------------------------------------------------------------------------
# The PromQL the project ships
# --------------------------------------------------------------------------------------------

Kind = Literal["panel", "variable", "record", "alert", "alert_part"]


@dataclass(frozen=True)
class PromQLSource:
    """One PromQL expression and where it comes from.

    ``expr`` is ready to run (template variables substituted). For ``variable`` sources it is
    the series selector of a ``label_values(selector, label)`` query and ``label`` is set.
    """

    origin: str
    kind: Kind
    expr: str
    instant: bool = False
    label: str | None = None


_VAR = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def template_variables(expr: str) -> set[str]:
    """Names of the Grafana variables an expression references (``$x``, ``${x}``, ``[[x]]``)."""
    return {next(g for g in m.groups() if g) for m in _VAR.finditer(expr)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace Grafana variables with ``values``; an unknown variable raises KeyError.

    Example: ``substitute('x{a=~"$a"}[$__rate_interval]', {"a": ".*", "__rate_interval": "1m"})``
    gives ``'x{a=~".*"}[1m]'``.
    """

    def repl(m: re.Match[str]) -> str:
        name = next(g for g in m.groups() if g)
        if name not in values:
            raise KeyError(f"template variable ${name} has no value (in {expr!r})")
        return values[name]

    return _VAR.sub(repl, expr)


def _walk_panels(panels: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _walk_panels(p.get("panels", []))


_LABEL_VALUES = re.compile(r"^\s*label_values\((?:(.*),)?\s*(\w+)\s*\)\s*$", re.S)


def dashboard_expressions(
    paths: Iterable[Path] | None = None, values: Mapping[str, str] | None = None
) -> list[PromQLSource]:
    """Every panel target and template-variable query of the dashboards, substituted."""
    vals = {**ALL_VALUES, **(values or {})}
    out: list[PromQLSource] = []
    for path in sorted(paths or DASHBOARDS_DIR.glob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        name = path.name
        for v in d.get("templating", {}).get("list", []):
            if v.get("type") != "query":
                continue
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = _LABEL_VALUES.match(q)
            if not m:
                raise ValueError(f"{name}: variable {v['name']}: unsupported query {q!r}")
            selector = m.group(1) or '{__name__=~".+"}'
            out.append(
                PromQLSource(
                    f"{name}: variable ${v['name']}",
                    "variable",
                    substitute(selector.strip(), vals),
                    True,
                    m.group(2),
                )
            )
        for p in _walk_panels(d.get("panels", [])):
            for t in p.get("targets", []):
                out.append(
                    PromQLSource(
                        f"{name}: panel {p.get('title')!r} target {t.get('refId')}",
                        "panel",
                        substitute(t["expr"], vals),
                        bool(t.get("instant")) and not t.get("range", False),
                    )
                )
    return out


def rule_expressions(paths: Iterable[Path] | None = None) -> list[PromQLSource]:
    """Every recording rule, every alert rule and the parts of every alert condition."""
    out: list[PromQLSource] = []
    for path in sorted(paths or rule_files()):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for g in doc.get("groups", []):
            for i, r in enumerate(g.get("rules", [])):
                if "record" in r:
                    where = f"{path.name}: record {r['record']} #{i}"
                    out.append(PromQLSource(where, "record", r["expr"], True))
                else:
                    where = f"{path.name}: alert {r['alert']} #{i}"
                    out.append(PromQLSource(where, "alert", r["expr"], True))
                    for j, part in enumerate(alert_parts(r["expr"])):
                        out.append(PromQLSource(f"{where} part {j}", "alert_part", part, True))
    return out


def shipped_expressions(values: Mapping[str, str] | None = None) -> list[PromQLSource]:
    """:func:`dashboard_expressions` + :func:`rule_expressions`."""
    return dashboard_expressions(values=values) + rule_expressions()


# -- running them as Grafana / the rule evaluator would --------------------------------------


def run_source(prom: PrometheusServer, src: PromQLSource, window: float = 60.0) -> list[Any]:
    """What ``src`` returns on ``prom`` now: a variable's label values, an instant query's
    result, or a range query over the last ``window`` seconds (step 1 s, as a time-series panel).

    A query Prometheus rejects raises AssertionError naming the source and the expression.

    Example: ``assert run_source(prom, src), src.origin``.
    """
    try:
        if src.kind == "variable":
            assert src.label
            return list(prom.label_values(src.label, src.expr))
        if src.instant:
            return prom.query(src.expr)
        now = time.time()
        return prom.query_range(src.expr, now - window, now, 1)
    except PromQLError as e:
        raise AssertionError(f"{src.origin}: Prometheus rejected {src.expr}\n{e}") from e


def without_data(
    prom: PrometheusServer, sources: Iterable[PromQLSource], window: float = 60.0
) -> list[PromQLSource]:
    """The sources whose query returns nothing ("No data" in Grafana), in the given order; each
    runs through :func:`run_source`, so a rejected query fails whatever the caller expects.

    Example::

        empty = [s.origin for s in without_data(prom, dashboard_expressions())]
        assert not empty, "queries without data:\n" + "\n".join(empty)
    """
    return [s for s in sources if not run_source(prom, s, window)]


# -- splitting an alert condition into the signals it compares -------------------------------

_CMP = ("==", "!=", ">=", "<=", ">", "<")
_NUMBER = re.compile(r"^\s*(?:bool\s+)?[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$")
_MATCHING = re.compile(
    r"^\s*(?:on|ignoring)\s*\([^)]*\)\s*(?:group_(?:left|right)"
    r"(?:\s*\([^)]*\))?\s*)?",
    re.S,
)


def _top_level(expr: str) -> list[tuple[int, str]]:
    """(index, char) of the characters of ``expr`` outside (), {}, [] and string literals."""
    out: list[tuple[int, str]] = []
    depth = 0
    quote: str | None = None
    i = 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif depth == 0:
            out.append((i, c))
        i += 1
    return out


def _split_set_ops(expr: str) -> list[str]:
    top = {i for i, _ in _top_level(expr)}
    parts: list[str] = []
    start = 0
    for m in re.finditer(r"\b(and|unless|or)\b", expr):
        if m.start() in top and m.end() - 1 in top:
            parts.append(expr[start : m.start()])
            start = m.end()
    parts.append(expr[start:])
    return parts


def _strip_comparison(part: str) -> str:
    top = _top_level(part)
    idx = {i for i, _ in top}
    for pos in range(len(part) - 1, -1, -1):
        if pos not in idx:
            continue
        for op in _CMP:
            if part.startswith(op, pos) and all(pos + k in idx for k in range(len(op))):
                if pos > 0 and part[pos - 1] in "=!<>" and (pos - 1) in idx:
                    continue  # second char of a two-char operator
                if _NUMBER.match(part[pos + len(op) :]):
                    return part[:pos]
                return part
    return part


def alert_parts(expr: str) -> list[str]:
    """The signals an alert condition compares, without thresholds and set operators.

    ``a < 0.6 and on(x) b >= 20`` -> ``["a", "b"]``: each must return data on a live server even
    when the alert does not fire, which proves its selectors match real series.
    """
    parts = []
    for raw in _split_set_ops(expr):
        p = _MATCHING.sub("", raw, count=1)
        p = _strip_comparison(p).strip()
        if p:
            parts.append(p)
    return parts
