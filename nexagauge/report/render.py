"""Render a run (and its comparison with a baseline) as one self-contained HTML file.

The page is a Jinja2 template (``templates/report.html.j2``) with autoescaping on: every value
from the results is HTML-escaped by the template engine, never concatenated into markup. The
stylesheet and the script are package files inlined into the page; a Content-Security-Policy
``<meta>`` allows exactly those two (by SHA-256) and nothing else: no request of any kind (no
script, style, font, image or connection from anywhere), and no other script can run even if
markup were ever injected. The script reads the page with ``textContent`` and toggles ``hidden``;
it never writes markup. Nothing of the data is embedded as JSON or in a ``<script>``.

Example:
    >>> import json, pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "summary.json").write_text(json.dumps({"target": "eval", "records": 0}))
    >>> html = build_report(d)
    >>> html.startswith("<!DOCTYPE html>"), "Content-Security-Policy" in html
    (True, True)
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from nexagauge.report.agent import AGENT_SIGNALS
from nexagauge.report.charts import histograms
from nexagauge.report.compare import Comparison, compare_runs
from nexagauge.report.load import ReportError, load_run
from nexagauge.report.model import RunView
from nexagauge.report.redact import Redactor

#: default file name of the report in a results directory
REPORT_NAME = "report.html"
#: most changed scores listed in the comparison table (the largest changes; counts cover all)
MAX_CHANGES = 2000


def _asset(name: str) -> str:
    return (
        resources.files("nexagauge.report").joinpath("templates").joinpath(name).read_text("utf-8")
    )


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nexagauge.report", "templates"),
        autoescape=True,  # every value is escaped: record text is shown, never interpreted
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        score=fmt_score, pct=fmt_pct, signed=fmt_signed, num=fmt_num, duration=fmt_duration
    )
    return env


def fmt_score(v: float | None) -> str:
    """A score with 3 decimals, or an em dash for none.

    Example:
        >>> fmt_score(0.12345), fmt_score(None)
        ('0.123', '—')
    """
    return "—" if v is None else f"{v:.3f}"


def fmt_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def fmt_signed(v: float | None) -> str:
    """A signed change: ``+0.120``, or U+2212 (the typeset minus sign) and ``0.300``."""
    if v is None:
        return "—"
    return f"+{v:.3f}" if v >= 0 else f"\u2212{-v:.3f}"


def fmt_num(v: float | int | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def fmt_duration(ms: float | None) -> str:
    """A duration given in milliseconds: ``42.5 ms`` below a second, ``5.00 s`` from one on.

    Example:
        >>> fmt_duration(42.5), fmt_duration(5000), fmt_duration(None)
        ('42.5 ms', '5.00 s', '—')
    """
    if ms is None:
        return "—"
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _version() -> str:
    try:
        return metadata.version("nexagauge")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def render(run: RunView, comparison: Comparison | None = None) -> str:
    """The HTML page of ``run`` (with the comparison section when ``comparison`` is given)."""
    css, js = _asset("report.css"), _asset("report.js")
    csp = (
        f"default-src 'none'; script-src '{_sha256(js)}'; style-src '{_sha256(css)}'; "
        "img-src 'none'; connect-src 'none'; font-src 'none'; base-uri 'none'; "
        "form-action 'none'"
    )
    metric_names = [m.metric for m in run.metrics]
    for case in run.cases:
        metric_names += [s.name for s in case.scores if s.name not in metric_names]
    changes = comparison.changes if comparison is not None else ()
    if len(changes) > MAX_CHANGES:  # keep the largest changes; the counts above cover all
        changes = tuple(
            sorted(changes, key=lambda c: -abs(c.delta) if c.delta is not None else 0.0)[
                :MAX_CHANGES
            ]
        )
    page: str = (
        _environment()
        .get_template("report.html.j2")
        .render(
            run=run,
            cmp=comparison,
            changes=changes,
            anchors={c.key: i for i, c in enumerate(run.cases)},
            charts=histograms(metric_names, run.cases),
            signals_node=AGENT_SIGNALS,
            css=css,
            js=js,
            csp=csp,
            version=_version(),
            generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
    )
    return page


def build_report(
    results_dir: str | Path,
    *,
    baseline: str | Path | None = None,
    literals: Iterable[str] = (),
    pii: bool = False,
) -> str:
    """The HTML report of a results directory (and its comparison with ``baseline``).

    ``literals``: configured secrets to replace wherever they occur (the judge API key);
    ``pii``: also scrub personal data. Raises :class:`ReportError` for a directory that is not
    a results directory.
    """
    redactor = Redactor(literals, pii=pii)
    run = load_run(results_dir, redactor)
    comparison = None
    if baseline is not None:
        comparison = compare_runs(load_run(baseline, redactor), run)
    return render(run, comparison)


def write_report(
    results_dir: str | Path,
    output: str | Path,
    *,
    baseline: str | Path | None = None,
    literals: Iterable[str] = (),
    pii: bool = False,
) -> Path:
    """Write :func:`build_report` to ``output`` (via a temporary file, then renamed)."""
    html = build_report(results_dir, baseline=baseline, literals=literals, pii=pii)
    out = Path(output)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(html, encoding="utf-8", errors="backslashreplace")
        tmp.replace(out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ReportError(f"cannot write the report {str(out)!r}: {e}") from None
    return out
