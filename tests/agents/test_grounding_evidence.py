"""Evidence from tools, offline and through the real graph (issue 30, items 2 and 6).

Records with tool calls (the documented ``tool_calls`` field, OpenAI ``tool_calls`` + ``tool``
messages, DeepEval ``tools_called``) become cases whose context holds every tool result with its
source label; grounding, judged by a loopback LLM judge that checks each claim against the
context it is sent, scores a grounded answer high and a contradicting one low, and names the
source of each verdict; uncaptured tool results skip grounding with their own reason; bad input
names the record and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.openai_server import OpenAIServer

from nexagauge.graph.executor import CaseResult, evaluate
from nexagauge.graph.runtime import Runtime
from nexagauge.graph.skips import SkipReason
from nexagauge.schema.case import RecordError, parse_record
from nexagauge.settings import Settings

from .honest_judge import grounding_reply

ORDER = {"order_id": "A-1042", "status": "shipped", "carrier": "PostNord", "eta": "2026-12-03"}
Q = "Where is my order A-1042?"
GOOD = "Order A-1042 has shipped with PostNord."
BAD = "Order A-1042 was delivered by DHL."


def documented(output: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "input": Q,
        "output": output,
        "context": [{"id": "kb-7", "content": "Orders ship within 2 business days."}],
        "tool_calls": [
            {
                "name": "lookup_order",
                "id": "call_1",
                "arguments": {"order_id": "A-1042"},
                "result": ORDER,
            },
        ],
        "tools": ["lookup_order", "lookup_policy"],
        **extra,
    }


def openai_style() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": Q},
            {
                "role": "assistant",
                "content": "Let me look up your order.",
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1042"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": json.dumps(ORDER)},
            {"role": "assistant", "content": GOOD},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup_order"}}],
    }


def test_documented_field_gives_labelled_evidence_and_the_agent_run() -> None:
    case = parse_record(documented(GOOD), 0)
    assert case.context_sources == ("doc:kb-7", "tool:lookup_order#call_1")
    doc, tool = case.context_documents
    assert doc == "Orders ship within 2 business days."
    assert tool.startswith('Result of tool lookup_order (call call_1) with arguments {"order_id"')
    assert "status: shipped" in tool and tool in case.context
    assert case.agent is not None
    assert case.agent.declared_tools == ("lookup_order", "lookup_policy")
    [call] = case.agent.tool_calls
    assert call.result == json.dumps(ORDER, sort_keys=True)
    assert "tool_calls" not in case.metadata and "tools" not in case.metadata


def test_openai_messages_with_tool_calls_and_tool_messages() -> None:
    case = parse_record(openai_style(), 0)
    assert (case.input, case.output) == (Q, GOOD)
    assert len(case.conversation) == 1  # the preamble + tool step is no turn
    assert case.agent is not None and case.agent.llm_steps == 2
    [call] = case.agent.tool_calls
    assert (call.call_id, call.arguments, call.result) == (
        "call_9",
        '{"order_id": "A-1042"}',
        json.dumps(ORDER),
    )
    assert case.context_sources == ("tool:lookup_order#call_9",)


def test_a_tools_column_without_tool_calls_stays_metadata() -> None:
    case = parse_record({"output": "x", "tools": "hammer, saw"}, 0)
    assert case.agent is None and case.metadata == {"tools": "hammer, saw"}


def test_deepeval_tools_called() -> None:
    case = parse_record(
        {
            "input": Q,
            "actual_output": None,
            "output": GOOD,
            "tools_called": [
                {
                    "name": "lookup_order",
                    "input_parameters": {"order_id": "A-1042"},
                    "output": ORDER,
                }
            ],
        },
        0,
    )
    assert case.agent is not None
    [call] = case.agent.tool_calls
    assert call.call_id == "lookup_order-1" and call.result is not None
    assert case.agent.declared_tools is None


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"output": "x", "tool_calls": "lookup"}, "tool_calls"),
        ({"output": "x", "tool_calls": [{"name": "a"}, {"arguments": {}}]}, "tool_calls[1].name"),
        (
            {"output": "x", "tools_called": [{"name": "a", "duration_ms": "fast"}]},
            "tools_called[0].duration_ms",
        ),
        (
            {"output": "x", "tool_calls": [{"name": "a"}], "tools": [{"type": "function"}]},
            "tools[0]",
        ),
        ({"output": "x", "tool_calls": [{"name": "a", "id": [1]}]}, "tool_calls[0].id"),
    ],
)
def test_bad_tool_calls_name_record_and_field(record: dict[str, Any], field: str) -> None:
    with pytest.raises(RecordError) as e:
        parse_record(record, 4)
    assert e.value.field == field and "record 4" in str(e.value)


@pytest.fixture(scope="module")
def judge() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        srv.handler = grounding_reply
        yield srv


async def run(records: list[dict[str, Any]], srv: OpenAIServer) -> list[CaseResult]:
    s = Settings(
        judge={
            "mode": "llm",
            "base_url": srv.base_url,
            "api_key": "sk-test-not-real-0001",
            "model": "gpt-4o-mini",
            "max_retries": 0,
        },
        cache={"enabled": False},
    )
    rt = Runtime.create(s, use_cache=False)
    try:
        return list(await evaluate(records, "eval", runtime=rt, only=["grounding"]))
    finally:
        await rt.aclose()


def grounding_of(res: CaseResult) -> Any:
    [m] = res.outcomes["grounding"].output.metrics
    return m


async def test_grounded_high_contradicting_low_with_sources(judge: OpenAIServer) -> None:
    good, bad = await run([documented(GOOD), documented(BAD, id="c2")], judge)
    g, b = grounding_of(good), grounding_of(bad)
    assert g.score == 1.0 and b.score == 0.0
    assert {c["label"] for c in g.result} == {"supported"}
    assert {c["source"] for c in g.result} == {"tool:lookup_order#call_1"}
    assert {c["label"] for c in b.result} == {"contradicted"}
    assert {c["source"] for c in b.result} == {"tool:lookup_order#call_1"}
    # the result record (log event and span event alike) names the sources
    from nexagauge.emit.attributes import result_attributes
    from nexagauge.emit.view import evaluation_view
    from nexagauge.sdk import conventions as C

    [gv] = [m for m in evaluation_view(good).metrics if m.name == "grounding"]
    [bv] = [m for m in evaluation_view(bad).metrics if m.name == "grounding"]
    assert result_attributes(gv)[C.NG_EVALUATION_SUPPORTED_BY] == ["tool:lookup_order#call_1"]
    assert C.NG_EVALUATION_CONTRADICTED_BY not in result_attributes(gv)
    assert result_attributes(bv)[C.NG_EVALUATION_CONTRADICTED_BY] == ["tool:lookup_order#call_1"]
    # the judge saw the tool result, labelled, in the context it grounded against
    assert any("status: shipped" in r.text and "call_1" in r.text for r in judge.chat_requests())


async def test_uncaptured_tool_results_skip_grounding_with_their_own_reason(
    judge: OpenAIServer,
) -> None:
    rec = documented(GOOD)
    rec["tool_calls"] = [*rec["tool_calls"], {"name": "lookup_policy", "id": "call_2"}]
    before = judge.stats.chat_requests
    [res] = await run([rec], judge)
    o = res.outcomes["grounding"]
    assert o.status == "skipped" and o.skip is SkipReason.TOOL_RESULTS_MISSING
    assert o.reason is not None and "lookup_policy#call_2" in o.reason
    assert judge.stats.chat_requests - before <= 1  # claims at most; never grounding
