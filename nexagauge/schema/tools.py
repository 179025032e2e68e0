"""Tool calls and agent runs: what an agent did around the answer being evaluated.

One model for every source (OTel GenAI ``execute_tool`` spans, OpenInference TOOL spans,
Traceloop tool spans, tool-call / tool-result message parts, offline records with OpenAI-style
``tool_calls``): extraction and record parsing fill it, grounding reads tool results as labelled
evidence, and the deterministic agent signals (failures, loops, undeclared tools, steps) are
computed from it.

Example:
    >>> call = ToolCall(name="lookup_order", call_id="call_1", arguments='{"id": "A-17"}',
    ...                 result='{"status": "shipped"}')
    >>> (call.source_label, call.failed, call.result_captured)
    ('tool:lookup_order#call_1', False, True)
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["MAX_EVIDENCE_CHARS", "AgentRun", "ToolCall", "doc_label", "readable"]

#: most characters of one tool result the judge is shown (longer results are cut, and say so)
MAX_EVIDENCE_CHARS = 4000
_MAX_DEPTH = 12


def _lines(v: Any, indent: str, out: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        out.append(indent + json.dumps(v, ensure_ascii=False, default=str)[:200])
        return
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, dict | list) and x:
                out.append(f"{indent}{k}:")
                _lines(x, indent + "  ", out, depth + 1)
            else:
                out.append(f"{indent}{k}: {_scalar(x)}")
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, dict | list) and x:
                out.append(f"{indent}-")
                _lines(x, indent + "  ", out, depth + 1)
            else:
                out.append(f"{indent}- {_scalar(x)}")
    else:
        out.append(indent + _scalar(v))


def _scalar(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        return "(empty)"
    return str(v)


def readable(text: str, limit: int = MAX_EVIDENCE_CHARS) -> str:
    """A tool result as text a judge can read: JSON objects and arrays become indented
    ``key: value`` lines; anything longer than ``limit`` characters is cut, and says so.

    Example:
        >>> print(readable('{"order_id": "A-17", "status": "shipped", "items": [{"sku": "L7"}]}'))
        order_id: A-17
        status: shipped
        items:
          -
            sku: L7
        >>> readable("x" * 30, limit=10)
        'xxxxxxxxxx\\n[cut: 10 of 30 characters shown]'
    """
    s = text.strip()
    if s[:1] in ("{", "["):
        try:
            v = json.loads(s)
        except (ValueError, RecursionError):
            v = None
        if isinstance(v, dict | list):
            out: list[str] = []
            _lines(v, "", out, 0)
            text = "\n".join(out)
    if len(text) > limit:
        return f"{text[:limit]}\n[cut: {limit} of {len(text)} characters shown]"
    return text


def doc_label(doc_id: str) -> str:
    """The source label of a retrieved document (``doc:<id>``), the twin of a tool's label.

    Example:
        >>> doc_label("kb-7")
        'doc:kb-7'
    """
    return f"doc:{doc_id}"


def tool_label(name: str, call_id: str) -> str:
    """The source label of a tool call's result (``tool:<name>#<call id>``), the twin of
    :func:`doc_label`: grounding's evidence, the signals and the reports all name a call so.

    Example:
        >>> tool_label("lookup_order", "call_1")
        'tool:lookup_order#call_1'
    """
    return f"tool:{name}#{call_id}"


class ToolCall(BaseModel):
    """One tool execution: name, call id, arguments, result or error, duration.

    ``call_id`` is the id the trace recorded, or a stable substitute when it recorded none (the
    tool span's id, or ``<name>-<n>`` in call order). ``result`` is ``None`` when the result was
    not captured (results are opt-in in the GenAI conventions); ``error`` names the failure of a
    call that failed (then there is usually no result).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    call_id: str
    arguments: str | None = None
    result: str | None = None
    error: str | None = None
    duration_ms: float | None = None

    @property
    def source_label(self) -> str:
        """The label grounding uses for this call's result (``tool:<name>#<call id>``)."""
        return tool_label(self.name, self.call_id)

    def evidence(self) -> str | None:
        """This call as a context document for grounding: what was called with what, and what
        it returned (:func:`readable`) or how it failed; ``None`` when nothing was captured.

        Example:
            >>> print(ToolCall(name="lookup", call_id="c1", arguments='{"id": 7}',
            ...                result='{"ok": true}').evidence())
            Result of tool lookup (call c1) with arguments {"id": 7}:
            ok: true
        """
        args = f" with arguments {self.arguments}" if self.arguments else ""
        head = f"tool {self.name} (call {self.call_id}){args}"
        if len(head) > 600:
            head = head[:600] + "..."
        if self.result is not None:
            return f"Result of {head}:\n{readable(self.result)}"
        if self.error is not None:
            return f"Failure of {head}: {readable(self.error, 1000)}"
        return None

    @property
    def failed(self) -> bool:
        """Whether the call failed (an error was recorded)."""
        return self.error is not None

    @property
    def result_captured(self) -> bool:
        """Whether the result (or the failure) is known: ``False`` means nothing was recorded."""
        return self.result is not None or self.error is not None


class AgentRun(BaseModel):
    """What the trace says of the agent run that produced an answer.

    ``declared_tools`` is ``None`` when no tool definitions were recorded (then calls to
    undeclared tools cannot be told apart, and the signal says so); ``llm_steps`` counts the LLM
    calls of the run, the final answer's included.

    Example:
        >>> run = AgentRun(agent="support", tool_calls=(ToolCall(name="t", call_id="1"),),
        ...                declared_tools=("t",), llm_steps=2)
        >>> (run.agent, len(run.tool_calls), run.llm_steps)
        ('support', 1, 2)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    declared_tools: tuple[str, ...] | None = None
    llm_steps: int = 0
