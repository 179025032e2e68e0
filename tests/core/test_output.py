"""CLI output helpers: safe case filenames, the per-metric summary, durations, the progress bar."""

from __future__ import annotations

import io
import re
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nexagauge.cli._output import SummaryBuilder, format_table, parse_duration, safe_filename
from nexagauge.cli._progress import Progress
from nexagauge.graph.executor import CaseResult, NodeOutcome
from nexagauge.nodes.eval import EvalMetric, EvalSummary
from nexagauge.schema.results import CostEstimate, NodeMetrics


@given(st.lists(st.text(min_size=0, max_size=120), max_size=30))
def test_safe_filenames_are_safe_and_unique(ids: list[str]) -> None:
    used: set[str] = set()
    names = [safe_filename(cid, i, used) for i, cid in enumerate(ids)]
    assert len({n.lower() for n in names}) == len(names)  # unique even case-insensitively
    for n in names:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", n) and not n.startswith(".")
        assert len(n) <= 120


def test_safe_filename_keeps_plain_ids() -> None:
    used: set[str] = set()
    assert safe_filename("eiffel-tower_1.v2", 0, used) == "eiffel-tower_1.v2"
    assert safe_filename("a/b", 1, used) != safe_filename("a_b", 2, used)


def _result(index: int, scores: dict[str, float | None], status: str = "ok") -> CaseResult:
    metrics = [
        EvalMetric(
            node="refmatch",
            name=k,
            category="answer",
            score=v,
            error=None if v is not None else "no bigrams",
            threshold=0.5,
            passed=None if v is None else v >= 0.5,
        )
        for k, v in scores.items()
    ]
    outcomes = {
        "refmatch": NodeOutcome(
            "refmatch",
            status,
            None if status == "ok" else "why",
            NodeMetrics(cost=CostEstimate(cost=0.01)),
        ),
        "eval": NodeOutcome("eval", "ok", None, EvalSummary(metrics=metrics)),
    }
    return CaseResult(index=index, case_id=f"c{index}", outcomes=outcomes)


def test_summary_statistics() -> None:
    b = SummaryBuilder(target="refmatch", metric_nodes=("refmatch", "relevance"))
    b.add(_result(0, {"rouge1": 0.2, "bleu": 0.9}))
    b.add(_result(1, {"rouge1": 0.6, "bleu": None}))
    b.add(_result(2, {"rouge1": 1.0, "bleu": 0.1}))
    b.add(_result(3, {}, status="skipped"))
    b.add(CaseResult(index=4, case_id=None, error="record 4: bad"))
    rows = {r["metric"]: r for r in b.metric_rows()}
    r1 = rows["rouge1"]
    assert r1["count"] == 3 and r1["mean"] == pytest.approx(0.6)
    assert r1["median"] == pytest.approx(statistics.median([0.2, 0.6, 1.0]))
    assert (r1["passed"], r1["failed"], r1["pass_rate"]) == (2, 1, pytest.approx(2 / 3))
    assert rows["bleu"]["errors"] == 1 and rows["bleu"]["count"] == 2
    assert r1["skipped"] == 1  # the case whose refmatch node was skipped
    assert rows["relevance"]["count"] == 0 and rows["relevance"]["mean"] is None  # planned, no data
    assert (b.records, b.cases, b.failed_records, b.metric_errors) == (5, 4, 1, 1)
    assert b.cost.cost == pytest.approx(0.04)


@pytest.mark.parametrize(
    "text,seconds",
    [("45s", 45), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1.5h", 5400)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_table_alignment() -> None:
    t = format_table(["name", "n"], [["a", 5], ["long-name", 12], ["b", "-"]]).splitlines()
    assert t[2] == "a           5" and t[3] == "long-name  12" and t[4] == "b           -"


def test_progress_bar_draws_and_ends_its_line() -> None:
    buf = io.StringIO()
    p = Progress(buf, total=4, min_interval=0.0)
    p.update(1)
    p.update(2, failed=1)
    p.close()
    out = buf.getvalue()
    assert "2/4 cases" in out and "1 failed" in out and out.endswith("\n")
    silent = io.StringIO()
    q = Progress(silent, total=4, enabled=False)
    q.update(3)
    q.close()
    assert silent.getvalue() == ""
