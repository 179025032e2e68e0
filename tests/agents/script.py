"""The scripted support agent of a fictional retailer (Fjordhem Home), shared by the agent apps,
the loopback LLM that plays the model, and the end-to-end assertions.

Two declared tools: ``lookup_order`` (returns JSON) and ``lookup_policy`` (returns text); one
undeclared tool the model calls anyway (``escalate_ticket``). Each :class:`Run` is one user turn
(one trace): the model's rounds (tool calls, optionally with preamble text, then the final
answer), which tool fails, and what the evaluator must find.

The loopback LLM (:func:`llm_reply`) is stateless: it finds the run by its question and the round
by the number of assistant tool-call messages already in the request, so every library (and the
``openai-agents`` SDK) gets the same answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

AGENT = "fjordhem-support"
SYSTEM = "You are the support agent of Fjordhem Home. Use the tools; answer from their results."
MODEL = "gpt-4o-mini"

#: a secret in a tool result (the evaluator scrubs tool text like any other case text)
SECRET = "sk-live-9Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf"
ORDERS: dict[str, dict[str, Any]] = {
    "A-1042": {
        "order_id": "A-1042",
        "status": "shipped",
        "carrier": "PostNord",
        "eta": "2026-12-03",
        "items": [{"sku": "LAMP-7", "qty": 1}],
        # a credential the order service leaks into its result: it must reach no judge
        "payment_api_key": SECRET,
    },
    "A-2077": {
        "order_id": "A-2077",
        "status": "processing",
        "carrier": None,
        "eta": "2026-12-09",
        "items": [{"sku": "SOFA-2", "qty": 1}],
    },
    "A-3150": {
        "order_id": "A-3150",
        "status": "delivered",
        "carrier": "DHL",
        "eta": "2026-11-20",
        "items": [{"sku": "RUG-4", "qty": 2}],
    },
}
POLICIES = {
    "returns": "Fjordhem accepts returns within 30 days of delivery; refunds take 5 business days.",
    "shipping": "Fjordhem ships within 2 business days; delivery in Norway takes 3 to 5 days.",
}
#: the passage the retriever of the retrieval + tool run finds
PASSAGE_ID = "kb-7"
PASSAGE = "Rugs bought at Fjordhem may be exchanged for another colour within 60 days."

TOOL_DEFS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order by its id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_policy",
            "description": "Look up a store policy by topic.",
            "parameters": {
                "type": "object",
                "properties": {"topic": {"type": "string"}},
                "required": ["topic"],
            },
        },
    },
]
DECLARED = ("lookup_order", "lookup_policy")


class ToolFailed(RuntimeError):
    """What a failing tool raises (the failing-tool run)."""


def run_tool(name: str, args: dict[str, Any]) -> str:
    """The tools' behaviour (every library's app calls this)."""
    if name == "lookup_order":
        order = ORDERS.get(str(args.get("order_id")))
        if order is None:
            raise ToolFailed(f"order {args.get('order_id')} not found")
        return json.dumps(order)
    if name == "lookup_policy":
        return POLICIES[str(args.get("topic"))]
    if name == "escalate_ticket":
        return "Ticket T-88 opened for a human agent."
    raise KeyError(name)


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Run:
    """One user turn of the agent (see module docstring)."""

    key: str
    question: str
    #: tool-call rounds: (preamble text or "", calls)
    rounds: tuple[tuple[str, tuple[Call, ...]], ...]
    answer: str
    #: whether the answer is grounded in the tool results (high grounding) or contradicts them
    grounded: bool = True
    retrieval: bool = False
    failing: bool = False
    undeclared: bool = False
    loop: bool = False
    calls: tuple[Call, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", tuple(c for _, cs in self.rounds for c in cs))


_O = Call("lookup_order", {"order_id": "A-1042"})
RUNS: tuple[Run, ...] = (
    Run(
        "grounded",
        "Where is my order A-1042?",
        (("Let me look up your order.", (_O,)),),
        "Order A-1042 has shipped with PostNord and should arrive on 2026-12-03.",
    ),
    Run(
        "contradicting",
        "Has order A-2077 been delivered?",
        (("", (Call("lookup_order", {"order_id": "A-2077"}),)),),
        "Order A-2077 was delivered by DHL on 2026-11-18.",
        grounded=False,
    ),
    Run(
        "retrieval_tool",
        "Can I exchange the rugs from order A-3150?",
        (("", (Call("lookup_order", {"order_id": "A-3150"}),)),),
        "Order A-3150 was delivered on 2026-11-20, and rugs may be exchanged for another "
        "colour within 60 days.",
        retrieval=True,
    ),
    Run(
        "failing",
        "Where is order A-9999?",
        (("Let me check that order.", (Call("lookup_order", {"order_id": "A-9999"}),)),),
        "Order A-9999 was not found.",
        failing=True,
    ),
    Run(
        "loop",
        "Is order A-1042 on its way yet?",
        (("", (_O,)), ("", (_O,)), ("", (_O,))),
        "Order A-1042 has shipped with PostNord.",
        loop=True,
    ),
    Run(
        "undeclared",
        "I want a human to call me about order A-1042.",
        (("", (Call("escalate_ticket", {"order_id": "A-1042"}),)),),
        "Ticket T-88 opened for a human agent.",
        undeclared=True,
    ),
    Run(
        "parallel",
        "Where is order A-1042 and what is the returns policy?",
        (("", (_O, Call("lookup_policy", {"topic": "returns"}))),),
        "Order A-1042 has shipped with PostNord; Fjordhem accepts returns within 30 days of "
        "delivery.",
    ),
    Run(
        "two_round",
        "Order A-3150 arrived: how long do refunds take if I return it?",
        (
            ("", (Call("lookup_order", {"order_id": "A-3150"}),)),
            ("Now the returns policy.", (Call("lookup_policy", {"topic": "returns"}),)),
        ),
        "Order A-3150 was delivered on 2026-11-20; refunds take 5 business days.",
    ),
)
BY_QUESTION = {r.question: r for r in RUNS}


def _tool_rounds_done(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))


def _question(messages: list[dict[str, Any]]) -> str | None:
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
            return str(c)
    return None


def llm_reply(body: dict[str, Any], index: int) -> dict[str, Any] | None:
    """The chat-completions response body the model gives at this point of a run (``None``:
    not one of the scripted questions)."""
    msgs = list(body.get("messages") or [])
    q = _question(msgs)
    run = next((r for k, r in BY_QUESTION.items() if q and k in q), None)
    if run is None:
        return None
    done = _tool_rounds_done(msgs)
    tag = str(body.get("model", "")).removeprefix("agent-").replace("-", "")
    message: dict[str, Any] = {"role": "assistant"}
    if done < len(run.rounds):
        preamble, calls = run.rounds[done]
        message["content"] = preamble or None
        message["tool_calls"] = [
            {
                "id": f"call_{tag}_{run.key}_{done}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args)},
            }
            for i, c in enumerate(calls)
        ]
        finish = "tool_calls"
    else:
        message["content"] = run.answer
        finish = "stop"
    return {
        "id": f"chatcmpl-agent-{index}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", MODEL),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }
