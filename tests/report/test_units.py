"""Unit tests of the report package: loading, comparison, charts, scrubbing, old results."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from nexagauge.report.charts import BINS, histogram, histograms
from nexagauge.report.compare import TOLERANCE, compare_cases
from nexagauge.report.load import ReportError, load_run, passage_of
from nexagauge.report.model import CaseView, ScoreView
from nexagauge.report.redact import LITERAL_MARK, Redactor, settings_secrets
from nexagauge.report.render import build_report, render
from nexagauge.settings import JudgeOverride, Settings


def _case(cid: str, **scores: float | None) -> CaseView:
    return CaseView(
        f"{cid}#0", cid, 0, 1, scores=tuple(ScoreView(k, v, None, None) for k, v in scores.items())
    )


def test_compare_regressed_improved_new_missing() -> None:
    old = [_case("a", g=0.9, r=0.5), _case("b", g=0.2), _case("c", g=0.5), _case("gone", g=1.0)]
    new = [_case("a", g=0.4, r=0.9), _case("b", g=0.7), _case("c", g=0.5 + TOLERANCE / 10)]
    new.append(_case("fresh", g=0.1))
    c = compare_cases(old, new)
    # a went down on g (and up on r): regressed; b only up: improved; c within tolerance
    assert (c.regressed, c.improved, c.matched) == (1, 1, 3)
    assert c.regressed_keys == {"a#0"} and c.improved_keys == {"b#0"}
    assert c.new_cases == ("fresh",) and c.missing_cases == ("gone",)
    assert [(x.case_id, x.metric, x.delta) for x in c.changes] == [
        ("a", "g", -0.5),
        ("a", "r", 0.4),
        ("b", "g", 0.5),
    ]


def test_compare_score_lost_is_listed_without_delta() -> None:
    c = compare_cases([_case("a", g=0.9)], [_case("a", g=None)])
    assert c.changes[0].delta is None and (c.regressed, c.improved) == (0, 0)


def test_repeated_case_ids_are_matched_by_occurrence(tmp_path: Path) -> None:
    for i, score in enumerate((0.1, 0.9)):
        _write_case(tmp_path, f"same-{i}", {"case_id": "same", "index": i, "scores": {"g": score}})
    run = load_run(tmp_path, Redactor())
    assert [c.key for c in run.cases] == ["same#0", "same#1"]


def test_histogram_bins_and_range() -> None:
    h = histogram("m", [0.0, 0.1, 0.999, 1.0])
    assert len(h.bars) == BINS and [b.count for b in h.bars][-1] == 2  # 1.0 in the last bin
    assert sum(b.count for b in h.bars) == h.total == 4
    wide = histogram("m", [-1.0, 3.0])  # a metric scored outside [0, 1] widens the axis
    assert (wide.lo, wide.hi) == (-1.0, 3.0)
    with pytest.raises(ValueError):
        histogram("m", [])
    cases = [_case("a", g=0.5, r=None), _case("b", g=0.7)]
    assert [h.metric for h in histograms(["g", "r"], cases)] == ["g"]


def test_passage_of_local_judge_reasons() -> None:
    r = 'score -1.49; best context sentence (similarity 0.848): "It\'s from 1889."; numbers'
    assert passage_of(r) == "It's from 1889."
    assert passage_of("supported (score +0.3); best context sentence (similarity 0.9): ''") == ""
    assert passage_of("Verdicts follow word overlap.") is None
    assert passage_of(None) is None


def test_redactor_literals_and_rules() -> None:
    r = Redactor(["s3cr3t-value", "abc"])  # too short to replace literally
    out = r.data({"k s3cr3t-value": ["AKIAQ7XW3RZ5MPLT2JKN", 1, None], "abc": "abc"})
    assert out == {f"k {LITERAL_MARK}": ["[scrubbed:api_key]", 1, None], "abc": "abc"}


def test_settings_secrets_every_secret_at_any_depth() -> None:
    s = Settings()
    s.judge.api_key = SecretStr("judge-key-111111")
    s.judge.nodes["grounding"] = JudgeOverride(api_key=SecretStr("node-key-222222"))
    s.kafka.sasl_password = SecretStr("kafka-pw-333333")
    found = settings_secrets(s)
    assert {"judge-key-111111", "node-key-222222", "kafka-pw-333333"} <= set(found)


def _write_case(root: Path, name: str, doc: dict[str, Any]) -> None:
    (root / "cases").mkdir(parents=True, exist_ok=True)
    (root / "summary.json").write_text(json.dumps({"target": "eval", "records": 1}))
    (root / "cases" / f"{name}.json").write_text(json.dumps(doc))


def test_results_of_an_older_nexagauge_render(tmp_path: Path) -> None:
    """Case files without the ``record`` block (before issue 32) still make a report."""
    _write_case(tmp_path, "old", {"case_id": "old", "index": 0, "scores": {"g": 0.5}})
    run = load_run(tmp_path, Redactor())
    assert run.cases[0].record.present is False
    html = render(run)
    assert "does not carry the question and answer" in html


def test_unreadable_case_file_is_a_problem_not_a_failure(tmp_path: Path) -> None:
    _write_case(tmp_path, "ok", {"case_id": "ok", "index": 0})
    (tmp_path / "cases" / "broken.json").write_text('{"case_id": ')
    (tmp_path / "errors.jsonl").write_text(
        '{"kind": "record", "line": 3, "reason": "x"}\nnot json\n'
    )
    run = load_run(tmp_path, Redactor())
    assert [c.case_id for c in run.cases] == ["ok"]
    kinds = [(p.kind, p.reason.split(":")[0]) for p in run.problems]
    assert kinds == [
        ("record", "x"),
        ("unreadable", "errors.jsonl line 2"),
        ("case file", "cases/broken.json"),
    ]


def test_not_a_results_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no summary\.json"):
        build_report(tmp_path)
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(ReportError, match="not a JSON object"):
        build_report(tmp_path)


def test_static_script_writes_no_markup() -> None:
    """The inlined script reads with textContent and toggles hidden; it never writes markup."""
    from importlib import resources

    js = resources.files("nexagauge.report").joinpath("templates").joinpath("report.js")
    text = js.read_text("utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "Function(", "</script"):  # fmt: skip
        assert sink not in text, sink


def test_pii_is_scrubbed_on_request(tmp_path: Path) -> None:
    record = {"input": "Mail bob@example.com about it", "output": "Done.", "context": []}
    _write_case(tmp_path, "p", {"case_id": "p", "index": 0, "record": record})
    assert "bob@example.com" in build_report(tmp_path)  # personal data is kept by default
    html = build_report(tmp_path, pii=True)
    assert "bob@example.com" not in html and "[scrubbed:email" in html


def test_only_the_largest_changes_are_listed_counts_cover_all() -> None:
    from nexagauge.report.compare import compare_runs
    from nexagauge.report.model import RunView
    from nexagauge.report.render import MAX_CHANGES

    n = MAX_CHANGES + 5
    old = _case("a", **{f"m{i}": 0.5 for i in range(n)})
    new = _case("a", **{f"m{i}": 0.5 + (i + 1) / (10 * n) for i in range(n)})

    def run(case: CaseView) -> RunView:
        return RunView("r", "eval", "x.jsonl", None, None, None, (), 1, 1, 0, 0, 0, 0, None,
                       False, 0.0, 0.0, 0.0, (), (), (case,), ())  # fmt: skip

    html = render(run(new), compare_runs(run(old), run(new)))
    assert html.count("<tr data-delta=") == MAX_CHANGES
    assert f"({n}; the {MAX_CHANGES} largest are listed)" in html
    listed = [float(v) for v in re.findall(r'<tr data-delta="([^"]+)"', html)]
    assert min(listed) > 5 / (10 * n) * 1.0001  # the 5 smallest changes are the ones left out
