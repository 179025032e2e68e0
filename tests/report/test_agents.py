"""The agent side of the report, on a real ``nexagauge run`` of agent records (issue 30 in the
report of issue 32), opened in a real headless Chromium with every request routed.

The run (conftest ``agent_run``, dataset and judge in ``agent_data.py``) goes through the real
command against the loopback judge, which grounds honestly: a grounded answer, one contradicting
the tool result, a failing tool, a loop, a hostile run (the XSS payload and both secrets in the
tool's name, call id, arguments, result and error and in a document id, hence in the source
labels) and a plain RAG case. Every figure is checked against the case files and summary.json.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from nexagauge.report.agent import VALUE_CHARS
from nexagauge.report.excerpt import excerpt
from tests.report.agent_data import (
    AGENT_RUNS,
    FAILED,
    FAULTY,
    FAULTY_IDS,
    LOOPS,
    REFUNDS,
    TASK_FAILED_REASON,
    TASK_REASON,
    TOOL_CALLS,
    UNDECLARED,
)
from tests.report.conftest import JUDGE_KEY, PLACEHOLDER, SECRETS, XSS, Opened, Opener
from tests.report.test_browser import _all_attributes_and_elements
from tests.report.test_screenshot import ARTIFACTS
from tests.report.test_secrets import _assert_absent

pytestmark = pytest.mark.integration


def _docs(out: Path) -> dict[str, dict[str, Any]]:
    docs = (json.loads(p.read_text()) for p in (out / "cases").glob("*.json"))
    return {d["case_id"]: d for d in docs}


def _open(agent_run: Path, open_report: Opener) -> Opened:
    opened = open_report(agent_run / "report.html")
    opened.page.locator("details.case").evaluate_all("els => els.forEach(e => e.open = true)")
    return opened


def _case(page: Any, key: str) -> Any:
    return page.locator(f'details.case[data-key="{key}#0"]')


def _clean(opened: Opened) -> None:
    assert opened.foreign_requests == [] and opened.blocked == [] and opened.errors == []


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def test_summary_agent_totals_reconcile(agent_run: Path, open_report: Opener) -> None:
    opened = open_report(agent_run / "report.html")
    page = opened.page
    summary = json.loads((agent_run / "summary.json").read_text())
    signals = [
        d["nodes"]["agent_signals"]["output"]["signals"]
        for d in _docs(agent_run).values()
        if d["nodes"]["agent_signals"]["status"] == "ok"
    ]
    calls = [c for s in signals for c in s["calls"]]
    assert summary["nodes"]["agent_signals"]["ok"] == len(signals) == AGENT_RUNS
    figures = {
        "n-agent-runs": len(signals),
        "n-tool-calls": len(calls),
        "n-tool-failures": sum(c["failed"] for c in calls),
        "n-loops": sum(len(s["loops"]) for s in signals),
    }
    assert figures == {"n-agent-runs": AGENT_RUNS, "n-tool-calls": TOOL_CALLS,
                       "n-tool-failures": FAILED, "n-loops": LOOPS}  # fmt: skip
    for card, n in figures.items():
        shown = page.text_content(f"#{card}")
        assert shown == (f"{n}{FAULTY} with faults" if card == "n-agent-runs" else str(n)), card
    undeclared = sum(c["declared"] is False for c in calls)
    assert undeclared == UNDECLARED
    assert page.text_content("#n-undeclared") == f"{UNDECLARED}1 run without definitions"
    _clean(opened)


def test_claims_name_their_source_and_its_passage(agent_run: Path, open_report: Opener) -> None:
    """The LLM judge's grounding verdicts: source label and the labelled document, cut."""
    page = _open(agent_run, open_report).page
    checked = 0
    for cid, doc in _docs(agent_run).items():
        if cid == "agent-hostile":
            continue  # test_hostile_text_in_agent_fields
        rec = doc["record"]
        sources = rec.get("context_sources") or []
        labelled = dict(zip(sources, rec["context"], strict=bool(sources)))
        verdicts = [v for v in doc["nodes"]["grounding"]["output"]["metrics"][0]["result"]
                    if "item" in v]  # fmt: skip
        rows = _case(page, cid).locator('h4:has-text("(grounding") + table.claims tbody tr')
        assert rows.count() == len(verdicts) >= 1
        for i, v in enumerate(verdicts):
            row = rows.nth(i)
            if v.get("source") is None:
                assert (
                    row.locator("td.source").count() == 0
                    or row.locator("td.source").text_content() == ""
                )
                continue
            assert row.locator("td.source").text_content() == v["source"]
            passage = row.locator("td.passage").text_content()
            assert passage == excerpt(labelled[v["source"]], v["item"]["text"])
            checked += 1
    assert checked >= 3
    grounded = _case(page, "grounded").locator("td.passage").first.text_content()
    # a long tool result: the lines the claim is about, the rest left out (…)
    assert grounded.splitlines() == [
        'Result of tool lookup_order (call call_1) with arguments {"order_id": "A-1042"}:',
        "carrier: PostNord",
        "…",
        "order_id: A-1042",
        "status: shipped",
    ]
    row = _case(page, "contradicted").locator("table.claims tbody tr").first
    assert row.locator("td.verdict").text_content() == "REJECTED contradicted"
    assert row.locator("td.source").text_content() == "tool:lookup_order#call_1"
    # the source links to its document in the case's context
    row.locator("a.src-link").click()
    target = page.locator("ol.ctx.labelled li:target")
    assert target.locator("code.src").text_content() == "tool:lookup_order#call_1"
    assert target.locator(".doc").text_content().startswith("Result of tool lookup_order")


def test_context_is_listed_as_labelled_documents(agent_run: Path, open_report: Opener) -> None:
    page = _open(agent_run, open_report).page
    grounded = _case(page, "grounded").locator("ol.ctx.labelled > li")
    assert grounded.locator("code.src").all_text_contents() == [
        "doc:kb-7",
        "tool:lookup_order#call_1",
    ]
    assert grounded.first.locator(".doc").text_content() == "Orders ship within 2 business days."
    assert grounded.nth(1).locator(".doc").text_content().startswith("Result of tool lookup_order")
    rag = _case(page, "rag")  # no labels: the plain list, and no agent section
    assert rag.locator("ol.ctx.labelled").count() == 0 and rag.locator("ol.ctx li").count() == 1
    assert rag.locator("div.agent").count() == 0


def test_tool_calls_signals_and_task_completion(agent_run: Path, open_report: Opener) -> None:
    opened = _open(agent_run, open_report)
    page = opened.page
    docs = _docs(agent_run)
    # the grounded run: its call with arguments, result (cut), duration; clean; task completed
    g = _case(page, "grounded").locator("div.agent")
    [call] = docs["grounded"]["record"]["tool_calls"]
    row = g.locator("table.tools tbody tr")
    assert row.count() == 1
    assert row.locator("code.tool").text_content() == "lookup_order"
    assert row.locator("code.call-id").text_content() == "call_1"
    assert row.locator("td.args").text_content() == call["arguments"]
    result = row.locator("td.result").text_content()
    assert len(call["result"]) > VALUE_CHARS and result == _cut(call["result"], VALUE_CHARS)
    assert row.locator("td.dur").text_content() == "42.5 ms"
    assert g.locator("li[data-signal]").evaluate_all("e => e.map(x => x.dataset.signal)") == [
        "clean"
    ]
    assert g.locator("h4").text_content().endswith("(1 tool call, 1 LLM step)")
    assert g.locator(".task-score").text_content() == "1.000"
    assert g.locator(".task-reason").text_content() == TASK_REASON
    # the failing tool: the error, the row marked, the signal; the task not completed
    f = _case(page, "failing-tool").locator("div.agent")
    assert f.locator("tr.fail td.error").text_content() == "error: TimeoutError: order service"
    assert f.locator("li[data-signal=failed]").text_content() == (
        "1 failed tool call: lookup_order#call_1"
    )
    assert f.locator("tr.fail").count() == 1 and f.locator("table.tools tbody tr").count() == 2
    claim = _case(page, "failing-tool").locator("table.claims tbody tr").first
    assert claim.locator("td.source").text_content() == "tool:lookup_policy#call_0"
    assert claim.locator("td.passage").text_content().endswith(REFUNDS)
    assert f.locator(".task-score").text_content() == "0.000"
    assert f.locator(".task-reason").text_content() == TASK_FAILED_REASON
    assert f.locator("td.dur").all_text_contents() == ["12.2 ms", "5.00 s"]
    # the loop: three calls marked, the loop named, no definitions recorded (said, not guessed)
    lp = _case(page, "loop").locator("div.agent")
    assert lp.locator("table.tools tbody tr").count() == 3
    assert lp.locator("table.tools .badge", has_text="loop").count() == 3
    assert lp.locator("li[data-signal=loop]").text_content() == (
        "loop: lookup_order called 3 times with the same arguments (calls c1, c2, c3)"
    )
    assert lp.locator("li[data-signal=no-definitions]").is_visible()
    assert lp.locator("li[data-signal=undeclared]").count() == 0
    assert lp.locator("p.task").count() == 0  # task_completion not enabled for it: not shown
    # task_completion is shown with the agent run, not twice
    assert _case(page, "grounded").locator('h4:has-text("task_completion")').count() == 0
    _clean(opened)


def test_agent_faults_filter(agent_run: Path, open_report: Opener) -> None:
    page = open_report(agent_run / "report.html").page
    visible = page.locator("details.case:not([hidden])")
    total = visible.count()
    page.check("#agent-faults-only")
    shown = {visible.nth(i).locator(".cid").text_content() for i in range(visible.count())}
    assert shown == set(FAULTY_IDS) and len(shown) == FAULTY
    assert page.locator("details.case:not([hidden]) .badge.agent-fault").count() == FAULTY
    page.check("#failing-only")  # both: faulty and failing (the loop's answer is grounded)
    assert visible.count() == len([c for c in FAULTY_IDS if c != "loop"])
    page.uncheck("#failing-only")
    page.uncheck("#agent-faults-only")
    assert visible.count() == total == 6
    page.fill("#search", "lookup_policy")  # a tool's name finds the runs that called it
    assert [visible.nth(i).get_attribute("data-key") for i in range(visible.count())] == [
        "failing-tool#0"
    ]


def test_hostile_text_in_agent_fields(agent_run: Path, open_report: Opener) -> None:
    """Tool name, call id, arguments, result, error, source labels: text, scrubbed."""
    opened = _open(agent_run, open_report)
    page = opened.page
    assert _all_attributes_and_elements(page) == {
        "xss": None,
        "scripts": 1,
        "injected": 0,
        "handlers": [],
    }
    _clean(opened)
    case = _case(page, "agent-hostile")
    rows = case.locator("table.tools tbody tr")
    texts = {
        "toolname": rows.first.locator("code.tool").text_content(),
        "callid": rows.first.locator("code.call-id").text_content(),
        "arguments": rows.first.locator("td.args").text_content(),
        "result": rows.first.locator("td.result").text_content(),
        "error": rows.nth(1).locator("td.error").text_content(),
        "docid": case.locator("ol.ctx.labelled code.src").first.text_content(),
        "tool label": case.locator("ol.ctx.labelled code.src").nth(1).text_content(),
        "claim source": case.locator("table.claims td.source").first.text_content(),
        "doc source": case.locator("table.claims td.source").nth(1).text_content(),
        "task reason": case.locator(".task-reason").text_content(),
        "undeclared": case.locator("li[data-signal=undeclared]").text_content(),
    }
    for name, text in texts.items():
        assert XSS in text, name  # the payload, character for character, as text
        assert re.search(PLACEHOLDER, text), name  # the secrets beside it, scrubbed
    assert texts["claim source"].startswith("tool:toolname: ")
    assert texts["doc source"].startswith("doc:docid: ")
    html = (agent_run / "report.html").read_text(encoding="utf-8")
    assert XSS not in html and "<img" not in html and html.count("</script>") == 1
    _assert_absent(html, (*SECRETS, JUDGE_KEY))
    _assert_absent(page.evaluate("document.body.innerText"), (*SECRETS, JUDGE_KEY))
    # the case files' record block carries the tool calls and sources, scrubbed
    rec = _docs(agent_run)["agent-hostile"]["record"]
    _assert_absent(json.dumps(rec), SECRETS)
    assert len(rec["tool_calls"]) == 2 and len(rec["context_sources"]) == 3


def test_agent_case_png(agent_run: Path, open_report: Opener) -> None:
    """A PNG of an agent case (``build/test-artifacts/report_agent_case.png``, the picture of
    docs/cli.md's report section) and of the summary with the agent totals."""
    opened = open_report(agent_run / "report.html", viewport=(1280, 1000))
    page = opened.page
    case = _case(page, "failing-tool")
    case.locator("summary").click()
    case.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report_agent_case.png"
    case.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    page.locator("#summary").screenshot(path=str(ARTIFACTS / "report_agent_summary.png"))
    _clean(opened)
