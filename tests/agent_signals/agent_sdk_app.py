"""A support agent instrumented with the nexa-gauge SDK (``@nexagauge.tool`` and
``@nexagauge.trace(tools=...)``), run in process: its spans as one OTLP request (what a collector
would put on Kafka)."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge
from nexagauge.sdk import conventions as C

ORDERS = {"A-1042": {"order_id": "A-1042", "status": "shipped", "eta": "2026-12-03"}}


@nexagauge.tool(description="Look up an order by id")
def lookup_order(order_id: str, tool_call_id: str) -> dict[str, Any]:
    if order_id not in ORDERS:
        raise LookupError(f"no order {order_id}")
    return ORDERS[order_id]


@nexagauge.tool(description="Look up a store policy")
def lookup_policy(topic: str, tool_call_id: str) -> str:
    return "Returns are accepted within 30 days."


@nexagauge.tool
def escalate_ticket(reason: str, tool_call_id: str) -> str:  # not declared to the agent
    return "escalated"


@nexagauge.trace(
    name="support-agent",
    operation=C.OPERATION_INVOKE_AGENT,
    tools=[lookup_order, lookup_policy],
    attributes={C.GEN_AI_AGENT_NAME: "support"},
)
def support_agent(question: str, plan: list[tuple[str, dict[str, Any]]]) -> str:
    """Calls the tools of ``plan`` in order (a failing tool is reported, not raised), then
    answers from the last result."""
    tools = {"lookup_order": lookup_order, "lookup_policy": lookup_policy}
    tools["escalate_ticket"] = escalate_ticket
    last: Any = None
    for i, (name, args) in enumerate(plan):
        try:
            last = tools[name](**args, tool_call_id=f"call_{i}")
        except LookupError:
            last = None
    return f"Here is what I found: {json.dumps(last)}"


PLANS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "clean": [("lookup_order", {"order_id": "A-1042"})],
    "failing": [("lookup_order", {"order_id": "Z-9"})],
    "looping": [("lookup_order", {"order_id": "A-1042"})] * 3,
    "undeclared": [("escalate_ticket", {"reason": "angry customer"})],
}


def run_agents(kinds: list[str]) -> bytes:
    """Run the agent once per kind; all finished spans as one ExportTraceServiceRequest."""
    exporter = InMemorySpanExporter()
    nexagauge.configure(
        exporter=exporter, batch=False, set_global=False, service_name="fjordhem-support"
    )
    try:
        for kind in kinds:
            support_agent(f"Question of the {kind} run?", PLANS[kind])
        return bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    finally:
        nexagauge.shutdown()
