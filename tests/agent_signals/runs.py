"""Agent runs of every shape the signals distinguish, built by hand (shared by the tests)."""

from __future__ import annotations

from nexagauge.schema.tools import AgentRun, ToolCall

ORDER = '{"order_id": "A-1042"}'


def call(name: str, cid: str, args: str | None = ORDER, **kw: object) -> ToolCall:
    return ToolCall(name=name, call_id=cid, arguments=args, **kw)


DECLARED = ("lookup_order", "lookup_policy")

CLEAN = AgentRun(
    agent="support",
    declared_tools=DECLARED,
    llm_steps=2,
    tool_calls=(call("lookup_order", "c1", result='{"status": "shipped"}', duration_ms=12.0),),
)
FAILING = AgentRun(
    agent="support",
    declared_tools=DECLARED,
    llm_steps=2,
    tool_calls=(
        call(
            "lookup_order", "c1", error="TimeoutError: order service A-1042 slow", duration_ms=900
        ),
    ),
)
LOOPING = AgentRun(
    agent="support",
    declared_tools=DECLARED,
    llm_steps=4,
    tool_calls=tuple(call("lookup_order", f"c{i}", result="{}", duration_ms=5.0) for i in range(3)),
)
UNDECLARED = AgentRun(
    agent="support",
    declared_tools=DECLARED,
    llm_steps=2,
    tool_calls=(call("escalate_ticket", "c1", result="ok"),),
)
NO_DEFINITIONS = AgentRun(
    agent="support",
    declared_tools=None,
    llm_steps=2,
    tool_calls=(call("escalate_ticket", "c1", result="ok"),),
)
