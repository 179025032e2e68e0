"""The report of real ``nexagauge run`` results, opened in a real headless Chromium.

Every test opens the file with each request routed (only the file itself is served) and checks
that nothing else was requested and nothing was logged as an error. The results are those of
two real runs against the loopback judge (see conftest.py).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nexagauge.sdk.scrubbing import scrub_text
from tests.report.conftest import (
    HOSTILE_ID,
    IMPROVED,
    OPENAI_KEY,
    PLACEHOLDER,
    REGRESSED,
    XSS,
    Opened,
    Opener,
    Runs,
)

pytestmark = pytest.mark.integration


def _report(runs: Runs) -> Path:
    return runs.new / "report.html"


def _clean(opened: Opened) -> None:
    assert opened.foreign_requests == [], opened.foreign_requests
    assert opened.blocked == []
    assert opened.errors == []


def test_run_writes_the_report_by_default(runs: Runs) -> None:
    assert runs.base_rc == 1 and runs.new_rc == 1  # the dataset holds bad records on purpose
    assert (runs.base / "report.html").is_file() and _report(runs).is_file()
    assert "report" not in runs.new_stderr  # no "report not written"


def test_offline_from_file_no_request_no_console_error(runs: Runs, open_report: Opener) -> None:
    opened = open_report(_report(runs))
    _clean(opened)
    assert opened.requests == [opened.url]
    page = opened.page
    assert page.title().startswith("nexa-gauge report")
    # no external resource of any kind in the markup, and a CSP that forbids every request
    html = _report(runs).read_text(encoding="utf-8")
    for marker in ("http://", "https://", "//fonts", "@import", "url("):
        assert marker not in html.split("<main>")[0], marker
    assert (
        page.evaluate("document.querySelectorAll('link, img, iframe, object, embed').length") == 0
    )
    csp = page.get_attribute("meta[http-equiv=Content-Security-Policy]", "content")
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp


def test_works_from_a_static_http_host(runs: Runs, open_report: Opener) -> None:
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(runs.new))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        opened = open_report(f"http://127.0.0.1:{srv.server_address[1]}/report.html")
        _clean(opened)
        assert opened.page.locator("details.case").count() == len(
            list((runs.new / "cases").glob("*.json"))
        )
    finally:
        srv.shutdown()
        srv.server_close()


def test_summary_reconciles_with_summary_json(runs: Runs, open_report: Opener) -> None:
    summary = json.loads((runs.new / "summary.json").read_text())
    page = open_report(_report(runs)).page
    assert page.text_content("#n-cases") == str(summary["cases"])
    assert page.text_content("#n-bad") == str(summary["failed_records"]) == "2"
    assert page.text_content("#cost") == f"${summary['cost']['cost']:.4f}"
    tokens = summary["cost"]["input_tokens"], summary["cost"]["output_tokens"]
    assert page.text_content("#tokens") == f"{tokens[0]:,.0f} / {tokens[1]:,.0f}"
    assert tokens[0] > 0
    assert page.text_content("#duration") == f"{summary['duration_s']:.1f} s"
    assert page.text_content("#judge").startswith(summary["judge"])
    for row in summary["metrics"]:
        tr = page.locator(f'#metrics-table tr[data-metric="{row["metric"]}"]')
        mean = "—" if row["mean"] is None else f"{row['mean']:.3f}"
        rate = "—" if row["pass_rate"] is None else f"{100 * row['pass_rate']:.0f}%"
        assert tr.locator("td.mean").text_content() == mean
        assert tr.locator("td.pass").text_content() == rate
    reasons = page.locator("#reasons-table tbody tr").all_text_contents()
    for node, acc in summary["nodes"].items():
        for why, n in acc["reasons"].items():
            assert any(node in r and why in r and r.strip().endswith(str(n)) for r in reasons)


def test_one_chart_per_scored_metric_counts_reconcile(runs: Runs, open_report: Opener) -> None:
    summary = json.loads((runs.new / "summary.json").read_text())
    page = open_report(_report(runs)).page
    scored = {r["metric"]: r["count"] for r in summary["metrics"] if r["count"]}
    charts = page.locator("figure.chart")
    assert charts.count() == len(scored) >= 3
    for i in range(charts.count()):
        fig = charts.nth(i)
        name = fig.get_attribute("data-metric")
        assert name in scored
        assert fig.locator("figcaption").text_content().startswith(name)
        bars = [int(b.get_attribute("data-count")) for b in fig.locator("rect.bar").all()]
        assert sum(bars) == scored[name]
        assert fig.locator("svg").is_visible()


def test_cases_show_question_answer_context_scores_claims(runs: Runs, open_report: Opener) -> None:
    page = open_report(_report(runs)).page
    first = page.locator("details.case").first
    assert first.is_visible() and first.get_attribute("open") is not None
    case = page.locator('details.case[data-key="eiffel#0"]')
    case.locator("summary").click()
    assert case.locator(".q").text_content() == "What is the Eiffel Tower and where is it?"
    assert case.locator(".a").text_content().startswith("The Eiffel Tower is a wrought-iron")
    ctx = case.locator("ol.ctx li").all_text_contents()
    assert ctx[1] == "It was completed in 1889 for the World's Fair."
    doc = json.loads((runs.new / "cases" / "eiffel.json").read_text())
    rows = case.locator("table.scores tbody tr").all()
    assert len(rows) == len(doc["scores"])
    for row in rows:
        name, score, result = row.locator("td").all_text_contents()
        assert score == f"{doc['scores'][name]:.3f}"
        assert result == ("pass" if doc["passed"][name] else "fail")
    # every relevance and grounding claim with its verdict
    claims = case.locator("table.claims")
    assert claims.count() == 2
    for node in ("relevance", "grounding"):
        verdicts = doc["nodes"][node]["output"]["metrics"][0]["result"]
        shown = case.locator(f'h4:has-text("({node}") + table.claims tbody tr').all()
        claim_rows = [v for v in verdicts if "item" in v]
        assert len(shown) == len(claim_rows) >= 2
        for tr, v in zip(shown, claim_rows, strict=True):
            assert tr.locator("td").first.text_content() == v["item"]["text"]
            assert tr.locator("td.verdict").text_content().startswith(v["verdict"])


def test_search_hides_and_clearing_restores(runs: Runs, open_report: Opener) -> None:
    page = open_report(_report(runs)).page
    total = page.locator("details.case").count()
    page.fill("#search", "1889")  # a word of an answer
    visible = page.locator("details.case:not([hidden])")
    assert [visible.nth(i).get_attribute("data-key") for i in range(visible.count())] == [
        "eiffel#0"
    ]
    assert page.text_content("#shown-count") == "1"
    page.fill("#search", "deg-2")  # a case id
    assert visible.count() == 1 and visible.first.get_attribute("data-key") == "deg-2#0"
    page.fill("#search", "where eiffel")  # words of a question, in any order
    assert {visible.nth(i).get_attribute("data-key") for i in range(visible.count())} == {
        "eiffel#0",
        "deg-2#0",
    }
    page.fill("#search", "no-such-word-anywhere")
    assert visible.count() == 0 and page.locator("#no-match").is_visible()
    page.fill("#search", "")
    assert visible.count() == total and page.text_content("#shown-count") == str(total)


def test_failing_only_filter(runs: Runs, open_report: Opener) -> None:
    page = open_report(_report(runs)).page
    expected = set()
    for p in (runs.new / "cases").glob("*.json"):
        doc = json.loads(p.read_text())
        if any(v is False for v in doc["passed"].values()):
            expected.add(scrub_text(doc["case_id"]))  # the report scrubs case ids too
    assert expected and "deg-1" in expected
    page.check("#failing-only")
    visible = page.locator("details.case:not([hidden])")
    shown = {visible.nth(i).locator(".cid").text_content() for i in range(visible.count())}
    assert shown == expected
    assert page.text_content("#n-failing") == str(len(expected))
    page.uncheck("#failing-only")
    assert visible.count() == page.locator("details.case").count()


def test_bad_records_and_warnings_listed(runs: Runs, open_report: Opener) -> None:
    page = open_report(_report(runs)).page
    lines = [json.loads(x) for x in (runs.new / "errors.jsonl").read_text().splitlines()]
    rows = page.locator("#problems-table tbody tr")
    assert rows.count() == len(lines) >= 3
    kinds = [rows.nth(i).locator("td").first.text_content() for i in range(rows.count())]
    assert kinds.count("record") == 2 and kinds.count("warning") == 1
    for i, obj in enumerate(lines):
        cells = rows.nth(i).locator("td").all_text_contents()
        assert cells[1] == str(obj["line"]) and cells[2] == str(obj["index"])
        if obj.get("field"):
            assert cells[4] == obj["field"]
        assert cells[5].split(":")[0] in obj["reason"]


def test_comparison_known_regressions_sortable(runs: Runs, open_report: Opener) -> None:
    page = open_report(_report(runs)).page
    assert page.text_content("#n-regressed") == str(len(REGRESSED))
    assert page.text_content("#n-improved") == str(len(IMPROVED))
    page.check("#regressed-only")
    visible = page.locator("details.case:not([hidden])")
    assert {visible.nth(i).locator(".cid").text_content() for i in range(visible.count())} == set(
        REGRESSED
    )
    rows = page.locator("#changes tbody tr")

    def deltas() -> list[float]:
        return [float(rows.nth(i).get_attribute("data-delta")) for i in range(rows.count())]

    def case_ids() -> set[str]:
        return {rows.nth(i).locator("td").first.text_content() for i in range(rows.count())}

    assert case_ids() == {*REGRESSED, *IMPROVED}  # nothing else changed (a deterministic judge)
    first = rows.first.locator("td").all_text_contents()
    assert first[0] in REGRESSED and first[4].startswith("\u2212")  # worst first: old → new, Δ<0
    assert deltas() == sorted(deltas())
    page.click('button[data-sort="delta"]')
    assert deltas() == sorted(deltas(), reverse=True)
    assert rows.first.locator("td").first.text_content() in IMPROVED
    page.click('button[data-sort="abs"]')
    assert [abs(d) for d in deltas()] == sorted((abs(d) for d in deltas()), reverse=True)
    assert page.get_attribute('th:has(button[data-sort="abs"])', "aria-sort") == "descending"
    # a case link opens that case
    rows.first.locator("a").click()
    key = page.evaluate("decodeURIComponent(location.hash.slice(1))")
    page.wait_for_selector(f"details#{key}[open]", timeout=2000)


def _all_attributes_and_elements(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """() => ({
            xss: window.__xss === undefined ? null : window.__xss,
            scripts: document.querySelectorAll('script').length,
            injected: document.querySelectorAll('img, iframe, object, embed, main svg:not(figure svg)').length,
            handlers: Array.from(document.querySelectorAll('*')).flatMap(
                e => Array.from(e.attributes).filter(a => a.name.startsWith('on')).map(a => a.name)),
        })"""
        )
    )


def test_hostile_text_is_shown_as_text_in_every_field(runs: Runs, open_report: Opener) -> None:
    opened = open_report(_report(runs))
    page = opened.page
    page.locator("details.case").evaluate_all("els => els.forEach(e => e.open = true)")
    found = _all_attributes_and_elements(page)
    assert found == {"xss": None, "scripts": 1, "injected": 0, "handlers": []}
    _clean(opened)  # a blocked script or image would have logged a CSP error
    case = page.locator("details.case").filter(has=page.locator(".cid", has_text="id-<img"))
    assert case.count() == 1
    # the secret replaced by a placeholder (its exact form is the scrubber's business)
    shown_id = case.locator(".cid").text_content()
    assert re.fullmatch(
        re.escape(HOSTILE_ID.replace(OPENAI_KEY, "@")).replace("@", PLACEHOLDER), shown_id
    )
    texts = {
        "question": case.locator(".q").text_content(),
        "answer": case.locator(".a").text_content(),
        "context": case.locator("ol.ctx li").first.text_content(),
        "reference": case.locator(".ref").text_content(),
        "metakey": case.locator("dl.meta dt").first.text_content(),
        "metadata": case.locator("dl.meta dd").first.text_content(),
        "claim": case.locator("table.claims td").first.text_content(),
        "reasoning": case.locator("p.reasoning").first.text_content(),
    }
    for name, text in texts.items():
        assert XSS in text, name  # the payload, character for character, as text
    problems = page.locator("#problems-table").text_content()
    assert XSS in problems  # the case id of the record without an answer
    # the raw markup never carries the payload unescaped (no </script> break-out either)
    html = _report(runs).read_text(encoding="utf-8")
    assert XSS not in html and "<img" not in html and html.count("</script>") == 1
