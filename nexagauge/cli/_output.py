"""Output helpers of the CLI: safe case filenames, the per-metric summary, plain-text tables.

The summary is computed incrementally from :class:`~nexagauge.graph.executor.CaseResult` objects
as they stream out of the executor (memory grows with the number of *scores*, a float per case and
metric, needed for the median - never with the reports themselves).

Example:
    >>> print(format_table(["metric", "mean"], [["rouge1", "0.50"]]))
    metric  mean
    ------  ----
    rouge1  0.50
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported lazily: `nexagauge nodes` / `cache` should start fast
    from nexagauge.graph.executor import CaseResult
    from nexagauge.schema.results import CostEstimate

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 80


def safe_filename(case_id: str, index: int, used: set[str]) -> str:
    """A filesystem-safe, unique (case-insensitively) file stem for a case id.

    Ids made only of safe characters keep their name; others are sanitized and suffixed with a
    short hash of the original id (so ``a/b`` and ``a_b`` never collide); a repeated id gets the
    record index appended.

    Example:
        >>> used = set()
        >>> safe_filename("eiffel-1", 0, used), safe_filename("eiffel-1", 3, used)
        ('eiffel-1', 'eiffel-1-3')
        >>> safe_filename("../etc/passwd", 4, used)[:14]
        '_.._etc_passwd'
    """
    name = _UNSAFE.sub("_", case_id).strip() or "case"
    if name.startswith("."):
        name = "_" + name
    if name != case_id or len(name) > MAX_NAME:
        digest = hashlib.sha1(case_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = f"{name[:MAX_NAME]}-{digest}"
    candidate = name
    n = 0
    while candidate.lower() in used:
        n += 1
        candidate = f"{name}-{index}" if n == 1 else f"{name}-{index}-{n}"
    used.add(candidate.lower())
    return candidate


def fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table with aligned columns (numbers right-aligned)."""
    body = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in body:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def is_num(s: str) -> bool:
        return bool(re.fullmatch(r"[-+]?\$?[\d.,]+%?", s))

    # a column is right-aligned when every cell that is not "-" is a number
    numeric = [
        any(is_num(r[i]) for r in body) and all(is_num(r[i]) or r[i] == "-" for r in body)
        for i in range(len(headers))
    ]

    def line(cells: Sequence[str]) -> str:
        out = []
        for i, c in enumerate(cells):
            out.append(c.rjust(widths[i]) if numeric[i] else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [line(list(headers)), "  ".join("-" * w for w in widths)]
    lines += [line(r) for r in body]
    return "\n".join(lines)


def _zero_cost() -> CostEstimate:
    from nexagauge.schema.results import CostEstimate

    return CostEstimate()


@dataclass
class _MetricAcc:
    node: str
    name: str
    scores: list[float] = field(default_factory=list)
    passed: int = 0
    failed: int = 0
    errors: int = 0


@dataclass
class _NodeAcc:
    ok: int = 0
    skipped: int = 0
    error: int = 0
    cached: int = 0
    elapsed_s: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass
class SummaryBuilder:
    """Accumulates per-metric and per-node statistics over a run."""

    target: str
    metric_nodes: tuple[str, ...]
    records: int = 0
    cases: int = 0
    failed_records: int = 0
    node_errors: int = 0
    metric_errors: int = 0
    cost: CostEstimate = field(default_factory=lambda: _zero_cost())
    metrics: dict[tuple[str, str], _MetricAcc] = field(default_factory=dict)
    nodes: dict[str, _NodeAcc] = field(default_factory=lambda: defaultdict(_NodeAcc))

    def add(self, res: CaseResult) -> None:
        from nexagauge.nodes.eval import EvalSummary

        self.records += 1
        if not res.ok:
            self.failed_records += 1
            return
        self.cases += 1
        self.cost = self.cost + res.cost
        for name, o in res.outcomes.items():
            acc = self.nodes[name]
            if o.status == "ok":
                acc.ok += 1
            elif o.status == "skipped":
                acc.skipped += 1
                acc.reasons[o.reason or "skipped"] += 1
            else:
                acc.error += 1
                acc.reasons[o.reason or "error"] += 1
                self.node_errors += 1
            acc.cached += int(o.cached)
            acc.elapsed_s += o.elapsed_s
        ev = res.outcomes.get("eval")
        summary = ev.output if ev is not None else None
        if not isinstance(summary, EvalSummary):
            return
        for m in summary.metrics:
            if m.category == "error":
                continue  # the node itself failed: counted per node (errors column) below
            acc_m = self.metrics.setdefault((m.node, m.name), _MetricAcc(m.node, m.name))
            if m.score is None:
                acc_m.errors += 1
                self.metric_errors += 1
            else:
                acc_m.scores.append(m.score)
                if m.passed is True:
                    acc_m.passed += 1
                elif m.passed is False:
                    acc_m.failed += 1

    # -- projections ---------------------------------------------------------------------------
    def display_names(self) -> dict[tuple[str, str], str]:
        counts = Counter(name for _, name in self.metrics)
        return {
            k: (k[1] if counts[k[1]] == 1 and k[1] else f"{k[0]}.{k[1]}" if k[1] else k[0])
            for k in self.metrics
        }

    def metric_rows(self) -> list[dict[str, Any]]:
        """One row per metric (plus a row per planned metric node that produced none)."""
        keys = list(self.metrics)
        for node in self.metric_nodes:
            if not any(k[0] == node for k in keys):
                keys.append((node, ""))
                self.metrics[(node, "")] = _MetricAcc(node, node)
        names = self.display_names()
        order = {n: i for i, n in enumerate(self.metric_nodes)}
        keys.sort(key=lambda k: (order.get(k[0], len(order)), k[1]))
        rows = []
        for k in keys:
            a = self.metrics[k]
            n = self.nodes.get(k[0], _NodeAcc())
            judged = a.passed + a.failed
            rows.append(
                {
                    "metric": names[k],
                    "node": k[0],
                    "count": len(a.scores),
                    "mean": statistics.fmean(a.scores) if a.scores else None,
                    "median": statistics.median(a.scores) if a.scores else None,
                    "min": min(a.scores) if a.scores else None,
                    "max": max(a.scores) if a.scores else None,
                    "pass_rate": a.passed / judged if judged else None,
                    "passed": a.passed,
                    "failed": a.failed,
                    "errors": a.errors + n.error,
                    "skipped": n.skipped,
                }
            )
        return rows

    def node_rows(self) -> dict[str, dict[str, Any]]:
        return {
            name: {
                "ok": a.ok,
                "skipped": a.skipped,
                "error": a.error,
                "cached": a.cached,
                "mean_elapsed_s": a.elapsed_s / max(1, a.ok + a.error + a.skipped),
                "reasons": dict(a.reasons.most_common()),
            }
            for name, a in self.nodes.items()
        }


CSV_COLUMNS = (
    "metric",
    "node",
    "count",
    "mean",
    "median",
    "min",
    "max",
    "pass_rate",
    "passed",
    "failed",
    "errors",
    "skipped",
)


def summary_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in CSV_COLUMNS})
    return buf.getvalue()


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically-enough for a report file (temp name, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    # backslashreplace: text no UTF-8 can hold (an unpaired surrogate, e.g. an input path with
    # undecodable bytes) is written as its JSON escape, so the file stays valid JSON
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
    tmp.replace(path)


def parse_duration(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``45s`` or plain seconds -> seconds.

    Example:
        >>> parse_duration("7d"), parse_duration("90")
        (604800.0, 90.0)
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not m:
        raise ValueError(f"invalid duration {text!r} (use e.g. 45s, 30m, 12h, 7d, 2w)")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
    return float(m.group(1)) * unit


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
