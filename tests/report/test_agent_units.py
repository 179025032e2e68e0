"""Unit tests of the report's agent side: the record block, older case files, passages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nexagauge.report.agent import VALUE_CHARS, agent_view
from nexagauge.report.excerpt import PASSAGE_CHARS, excerpt
from nexagauge.report.load import load_run
from nexagauge.report.record import read_record, record_block
from nexagauge.report.redact import Redactor
from nexagauge.report.render import render
from nexagauge.schema.case import parse_record

KEY = "sk-proj-Q8vTzR3mXw2LkP9sN4bY7cJ1hF6dG0aE5uI2oW8qZ3xV7nM4"
SIGNALS = {
    "llm_steps": 3,
    "calls": [
        {"name": "lookup", "call_id": "c1", "failed": False, "declared": True},
        {"name": "lookup", "call_id": "c2", "failed": False, "declared": True},
        {"name": "refund", "call_id": "c3", "failed": True, "error": "Timeout", "declared": False},
    ],
    "loops": [{"tool": "lookup", "count": 2, "call_ids": ["c1", "c2"]}],
    "definitions_recorded": True,
    "loop_threshold": 2,
}


def _write(root: Path, docs: list[dict[str, Any]]) -> None:
    (root / "cases").mkdir(parents=True)
    (root / "summary.json").write_text(json.dumps({"target": "eval", "records": len(docs)}))
    for i, doc in enumerate(docs):
        (root / "cases" / f"c{i}.json").write_text(json.dumps({"index": i, **doc}))


def test_record_block_carries_sources_and_tool_calls_scrubbed() -> None:
    case = parse_record(
        {
            "input": "Where is A-7?",
            "output": "A-7 shipped.",
            "context": [{"id": "kb-1", "content": "Orders ship fast."}],
            "tool_calls": [
                {"name": "lookup", "id": "c1", "arguments": {"key": KEY}, "result": "shipped"},
                {"name": "refund", "id": "c2", "error": f"denied for {KEY}", "duration_ms": 12},
            ],
        },
        0,
    )
    block = record_block(case)
    assert block["context_sources"] == ["doc:kb-1", "tool:lookup#c1", "tool:refund#c2"]
    assert KEY not in json.dumps(block)
    rec = read_record({"record": block})
    assert rec.context_sources == tuple(block["context_sources"])
    assert [(c.name, c.call_id, c.result, c.duration_ms) for c in rec.tool_calls] == [
        ("lookup", "c1", "shipped", None),
        ("refund", "c2", None, 12.0),
    ]
    assert rec.tool_calls[1].error is not None and "[scrubbed:" in rec.tool_calls[1].error
    assert rec.document("tool:lookup#c1") == block["context"][1]
    assert rec.document("doc:nope") is None


def test_signals_without_the_record_tool_calls(tmp_path: Path) -> None:
    """A case file with the agent_signals output but no tool calls in its record block."""
    _write(
        tmp_path,
        [{"case_id": "a", "record": {"output": "x"}, "nodes": {"agent_signals": {
            "status": "ok", "output": {"metrics": [], "signals": SIGNALS}}}}],
    )  # fmt: skip
    run = load_run(tmp_path, Redactor())
    view = run.cases[0].agent
    assert view is not None and view.signals and view.llm_steps == 3
    assert [
        (c.call.call_id, c.call.arguments, c.failed, c.in_loop, c.declared) for c in view.calls
    ] == [
        ("c1", None, False, True, True),
        ("c2", None, False, True, True),
        ("c3", None, True, False, False),
    ]
    assert (view.failed, len(view.loops), view.undeclared, view.faulty) == (1, 1, 1, True)
    assert run.agents is not None
    assert (run.agents.runs, run.agents.tool_calls, run.agents.faulty_runs) == (1, 3, 1)
    html = render(run)
    assert 'id="agent-faults-only"' in html and 'data-signal="loop"' in html
    assert "lookup</code> called 2 times" in html


def test_tool_calls_without_signals_claim_no_fault_but_a_recorded_error(tmp_path: Path) -> None:
    """The agent_signals node did not run (``run grounding``): calls listed, signals not
    computed (said), a recorded error is still a failed call."""
    long = "r" * (VALUE_CHARS + 50)
    calls = [{"name": "t", "call_id": "1", "result": long}, {"name": "u", "call_id": "2",
             "error": "boom"}]  # fmt: skip
    _write(tmp_path, [{"case_id": "a", "record": {"output": "x", "tool_calls": calls}}])
    run = load_run(tmp_path, Redactor())
    view = run.cases[0].agent
    assert view is not None and not view.signals and view.llm_steps is None
    assert view.calls[0].call.result == "r" * VALUE_CHARS + "…"
    assert [c.failed for c in view.calls] == [False, True] and view.undeclared == 0
    html = render(run)
    assert 'data-signal="none"' in html and 'data-signal="no-definitions"' not in html


def test_older_case_files_have_no_agent_section(tmp_path: Path) -> None:
    _write(tmp_path, [{"case_id": "a", "record": {"output": "x", "context": ["d1", "d2"]}}])
    run = load_run(tmp_path, Redactor())
    assert run.cases[0].agent is None and run.agents is None
    html = render(run)
    assert '<div class="agent">' not in html and 'id="agent-faults-only"' not in html
    assert 'class="ctx labelled"' not in html and '<li class="text">d2</li>' in html


def _claims_doc(source: str | None, reason: str | None) -> dict[str, Any]:
    claim = {"item": {"text": "It opened in 1889."}, "verdict": "ACCEPTED", "label": "supported"}
    claim |= {"source": source, "reason": reason}
    return {
        "case_id": "a",
        "record": {"output": "x", "context": ["Built 1887.", "It opened in 1889."],
                   "context_sources": ["doc:1", "doc:2"]},
        "nodes": {"grounding": {"output": {"metrics": [{"name": "grounding", "score": 1.0,
                  "result": [claim]}]}}},
    }  # fmt: skip


def test_claim_passage_from_its_source_else_the_local_reason(tmp_path: Path) -> None:
    reason = "best context sentence (similarity 0.900): 'Built 1887.'"
    _write(tmp_path, [_claims_doc("doc:2", reason), _claims_doc("doc:9", reason),
                      _claims_doc(None, None)])  # fmt: skip
    cases = load_run(tmp_path, Redactor()).cases
    got = [(c.details[0].claims[0].source, c.details[0].claims[0].passage) for c in cases]
    assert got == [("doc:2", "It opened in 1889."), ("doc:9", "Built 1887."), (None, None)]


def test_excerpt_keeps_what_the_claim_is_about() -> None:
    prose = " ".join(f"Filler sentence {i} here." for i in range(40))
    doc = f"{prose} The tower opened in 1889. {prose}"
    out = excerpt(doc, "It opened in 1889.")
    assert out == "… The tower opened in 1889. …"
    short = "Orders ship in 2 days."
    assert excerpt(short, "anything") == short
    nothing = excerpt("z" * (PASSAGE_CHARS * 2), "unrelated claim")
    assert nothing == "z" * PASSAGE_CHARS + "…"
    assert agent_view({}, read_record({})) is None
