"""``@nexagauge.tool`` records execute_tool spans per the GenAI conventions; ``@nexagauge.trace(tools=)``
records the agent's tool definitions; the online role table reads the tool spans as tool calls."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import nexagauge
from nexagauge.sdk import conventions as C

from .conftest import Spans, reconfigure


@nexagauge.tool(description="Look up an order by id")
def lookup_order(order_id: str, tool_call_id: str | None = None) -> dict[str, Any]:
    if order_id == "missing":
        raise LookupError(f"order {order_id} not found")
    return {"order_id": order_id, "status": "shipped"}


@nexagauge.tool(name="lookup_policy", call_id_arg="cid")
async def policy(topic: str, cid: str) -> str:
    await asyncio.sleep(0)
    if topic == "boom":
        raise TimeoutError("policy service timed out")
    return f"Returns of {topic} are accepted within 30 days."


class Shop:
    @nexagauge.tool
    def stock(self, sku: str) -> int:
        return 3


@nexagauge.trace(operation=C.OPERATION_INVOKE_AGENT, tools=[lookup_order, policy, "escalate"])
def agent(question: str) -> str:
    order = lookup_order("A-1042", tool_call_id="call_1")
    return f"Your order {order['order_id']} is {order['status']}."


def test_sync_tool_span(sdk_spans: Spans) -> None:
    assert lookup_order("A-1042", tool_call_id="call_1")["status"] == "shipped"
    span = sdk_spans.one("execute_tool lookup_order")
    a = span.attributes
    assert a[C.GEN_AI_OPERATION_NAME] == C.OPERATION_EXECUTE_TOOL
    assert a[C.GEN_AI_TOOL_NAME] == "lookup_order"
    assert a[C.GEN_AI_TOOL_TYPE] == "function"
    assert a[C.GEN_AI_TOOL_DESCRIPTION] == "Look up an order by id"
    assert a[C.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert json.loads(a[C.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"order_id": "A-1042"}
    assert json.loads(a[C.GEN_AI_TOOL_CALL_RESULT]) == {"order_id": "A-1042", "status": "shipped"}
    assert span.status.status_code != StatusCode.ERROR
    # recorded once, as the tool's: never also as a traced call's input/output messages
    assert C.GEN_AI_INPUT_MESSAGES not in a and C.GEN_AI_OUTPUT_MESSAGES not in a


def test_async_tool_span_and_failure(sdk_spans: Spans) -> None:
    text = asyncio.run(policy("lamps", "c7"))
    ok = sdk_spans.one("execute_tool lookup_policy")
    assert ok.attributes[C.GEN_AI_TOOL_CALL_ID] == "c7"
    assert ok.attributes[C.GEN_AI_TOOL_CALL_RESULT] == text
    assert json.loads(ok.attributes[C.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"topic": "lamps"}
    sdk_spans.exporter.clear()
    with pytest.raises(TimeoutError, match="timed out"):
        asyncio.run(policy("boom", cid="c8"))
    failed = sdk_spans.one("execute_tool lookup_policy")
    assert json.loads(failed.attributes[C.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"topic": "boom"}
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes[C.ERROR_TYPE] == "TimeoutError"
    assert C.GEN_AI_TOOL_CALL_RESULT not in failed.attributes  # no result on failure
    assert [e.name for e in failed.events] == [C.EXCEPTION_EVENT]
    assert failed.attributes[C.GEN_AI_TOOL_CALL_ID] == "c8"


def test_sync_failure_reraises_the_same_exception(sdk_spans: Spans) -> None:
    with pytest.raises(LookupError) as info:
        lookup_order("missing")
    assert str(info.value) == "order missing not found"
    span = sdk_spans.one("execute_tool lookup_order")
    assert span.attributes[C.ERROR_TYPE] == "LookupError"
    assert C.GEN_AI_TOOL_CALL_ID not in span.attributes  # none given


def test_method_tool_leaves_self_out(sdk_spans: Spans) -> None:
    assert Shop().stock("LAMP-7") == 3
    span = sdk_spans.one("execute_tool stock")
    assert json.loads(span.attributes[C.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"sku": "LAMP-7"}
    assert span.attributes[C.GEN_AI_TOOL_CALL_RESULT] == "3"


def test_capture_switches_and_scrubbing(sdk_spans: Spans) -> None:
    lookup_order("sk-abcdefghijklmnopqrstuvwx1234", tool_call_id="c1")
    span = sdk_spans.one("execute_tool lookup_order")
    args = span.attributes[C.GEN_AI_TOOL_CALL_ARGUMENTS]
    assert "sk-abcdefghijklmnopqrstuvwx1234" not in args and "scrubbed" in args
    assert "sk-abcdefghij" not in span.attributes[C.GEN_AI_TOOL_CALL_RESULT]
    assert span.attributes[C.NG_SCRUBBED]
    sdk_spans.exporter.clear()
    reconfigure(sdk_spans, capture_content=False)
    lookup_order("A-1", tool_call_id="c2")
    span = sdk_spans.one("execute_tool lookup_order")
    assert C.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes
    assert C.GEN_AI_TOOL_CALL_RESULT not in span.attributes
    assert span.attributes[C.GEN_AI_TOOL_CALL_ID] == "c2"  # metadata, not content


def test_capture_off_per_tool(sdk_spans: Spans) -> None:
    @nexagauge.tool(capture_arguments=False, capture_result=False)
    def secret_tool(x: str) -> str:
        return x

    secret_tool("private")
    span = sdk_spans.one("execute_tool secret_tool")
    assert C.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes
    assert C.GEN_AI_TOOL_CALL_RESULT not in span.attributes


def test_agent_records_definitions_and_parents_tool_spans(sdk_spans: Spans) -> None:
    assert agent("Where is my order?").startswith("Your order A-1042")
    root = sdk_spans.one("agent")
    defs = json.loads(root.attributes[C.GEN_AI_TOOL_DEFINITIONS])
    assert defs == [
        {"type": "function", "name": "lookup_order", "description": "Look up an order by id"},
        {"type": "function", "name": "lookup_policy"},
        {"type": "function", "name": "escalate"},
    ]
    child = sdk_spans.one("execute_tool lookup_order")
    assert child.parent is not None and child.parent.span_id == root.context.span_id


def test_off_runs_plain() -> None:
    nexagauge.configure(enabled=False, set_global=False)
    try:
        assert lookup_order("A-1")["status"] == "shipped"
        assert asyncio.run(policy("x", "c")).startswith("Returns")
    finally:
        nexagauge.shutdown()


def test_bad_uses_fail_at_decoration() -> None:
    with pytest.raises(ValueError, match="call_id_arg"):
        nexagauge.tool(call_id_arg="nope")(lambda x: x)
    with pytest.raises(TypeError, match="generator"):

        @nexagauge.tool
        def gen() -> Any:
            yield 1

    with pytest.raises(TypeError, match="tools"):
        nexagauge.trace(tools="lookup_order")(lambda q: q)
    with pytest.raises(TypeError, match="tools"):
        nexagauge.trace(tools=[3])(lambda q: q)


def test_long_values_are_cut_and_unserialisable_values_converted(sdk_spans: Spans) -> None:
    reconfigure(sdk_spans, max_value_length=64)

    @nexagauge.tool
    def echo(payload: Any, *rest: Any, **options: Any) -> Any:
        return {"when": __import__("datetime").date(2026, 1, 2), "n": len(str(payload))}

    echo("x" * 500, 1, flag=True)
    span = sdk_spans.one("execute_tool echo")
    args = span.attributes[C.GEN_AI_TOOL_CALL_ARGUMENTS]
    assert args.startswith('{"payload": "xxx') and len(args) < 200
    assert span.attributes[C.NG_ORIGINAL_LENGTH_PREFIX + C.GEN_AI_TOOL_CALL_ARGUMENTS] > 500
    assert json.loads(span.attributes[C.GEN_AI_TOOL_CALL_RESULT]) == {
        "when": "2026-01-02",
        "n": 500,
    }
