"""The agent dataset of the report tests and the loopback judge that evaluates it.

Five agent runs of a support agent (tools ``lookup_order`` and ``lookup_policy``) and one plain
RAG case: an answer grounded in a tool result (its result long enough to be cut), one
contradicting the tool result, a failing tool (after one that answered), a loop (the same call three times, no tool
definitions recorded), and a hostile run with the XSS payload and both secrets in the tool's
name, call id, arguments, result and error, and in a document id (so in the source labels).

The judge grounds honestly (``tests/agents/honest_judge.py``: a claim is supported only if its
ids, numbers and most of its words are in the context it is sent) and says a task is completed
unless a tool call failed; anything else falls through to the loopback server's smart mode.
"""

from __future__ import annotations

import json
from typing import Any

from support.openai_server import Reply, Request

from tests.agents.honest_judge import grounding_reply
from tests.report.conftest import hostile

ORDER = {
    "order_id": "A-1042",
    "status": "shipped",
    "carrier": "PostNord",
    "history": " ".join(f"scan-{i} at hub {i}" for i in range(60)),  # a long result: cut
}
TOOLS = ["lookup_order", "lookup_policy"]
GROUNDED = "Order A-1042 has shipped with PostNord."
CONTRADICTED = "Order A-1042 was delivered by DHL."
#: what the hostile tool's result and the hostile document say (the hostile answer's claims)
PARCEL = "Parcel Z-77 is waiting at the depot."
RETURNS = "Returns close after 30 days."
REFUNDS = "Refunds are paid within 5 business days."
#: expected agent figures of the run
AGENT_RUNS, TOOL_CALLS, FAILED, LOOPS, UNDECLARED, FAULTY = 5, 9, 2, 1, 1, 3
FAULTY_IDS = ("failing-tool", "loop", "agent-hostile")
TASK_REASON = "The answer gives the order status the tool returned."
TASK_FAILED_REASON = "The order lookup failed: the user got no status."


def _lookup(call_id: str, **kw: Any) -> dict[str, Any]:
    return {"name": "lookup_order", "id": call_id, "arguments": {"order_id": "A-1042"}, **kw}


def agent_records() -> list[dict[str, Any]]:
    task = {"task_completion": {"enabled": True, "include_reasoning": True}}
    question = "Where is my order A-1042?"
    policy = {"id": "kb-7", "content": "Orders ship within 2 business days."}
    return [
        {
            "case_id": "grounded",
            "question": question,
            "answer": GROUNDED,
            "context": [policy],
            "tool_calls": [_lookup("call_1", result=ORDER, duration_ms=42.5)],
            "tools": TOOLS,
            **task,
        },
        {
            "case_id": "contradicted",
            "question": question,
            "answer": CONTRADICTED,
            "tool_calls": [_lookup("call_1", result=ORDER, duration_ms=40)],
            "tools": TOOLS,
            **task,
        },
        {
            "case_id": "failing-tool",
            "question": question,
            "answer": f"{REFUNDS} Sorry, the order service did not answer.",
            "tool_calls": [
                {
                    "name": "lookup_policy",
                    "id": "call_0",
                    "arguments": {"topic": "refunds"},
                    "result": REFUNDS,
                    "duration_ms": 12.25,
                },
                _lookup("call_1", error="TimeoutError: order service", duration_ms=5000),
            ],
            "tools": TOOLS,
            **task,
        },
        {
            "case_id": "loop",
            "question": question,
            "answer": "Order A-1042 has shipped.",
            "tool_calls": [_lookup(f"c{i}", result={"status": "shipped"}) for i in (1, 2, 3)],
        },
        {
            "case_id": "agent-hostile",
            "question": hostile("agent question"),
            "answer": f"{PARCEL} {RETURNS}",
            "context": [{"id": hostile("docid"), "content": f"{hostile('document')} {RETURNS}"}],
            "tool_calls": [
                {
                    "name": hostile("toolname"),
                    "id": hostile("callid"),
                    "arguments": hostile("arguments"),
                    "result": f"{hostile('result')} {PARCEL}",
                },
                _lookup("c2", error=hostile("error")),
            ],
            "tools": TOOLS,
            **task,
        },
        {
            "case_id": "rag",
            "question": "How fast do orders ship?",
            "answer": "Orders ship within 2 business days.",
            "contexts": ["Orders ship within 2 business days."],
        },
    ]


def agent_judge(req: Request) -> Reply | None:
    """Grounding: honest; task completion: yes unless a tool failed; else the smart mode."""
    ground = grounding_reply(req)
    if ground is not None:
        return ground
    system = str(req.messages[0].get("content")) if req.messages else ""
    if "accomplished the user's request" not in system:
        return None
    user = "\n".join(str(m.get("content")) for m in req.messages if m.get("role") == "user")
    failed = "Failure of tool" in user
    reason = TASK_FAILED_REASON if failed else TASK_REASON
    if "agent question" in user:
        reason = hostile("task reason")
    return Reply(content=json.dumps({"verdict": "no" if failed else "yes", "reason": reason}))
