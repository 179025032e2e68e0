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

from pydantic import BaseModel, ConfigDict

__all__ = ["AgentRun", "ToolCall", "doc_label"]


def doc_label(doc_id: str) -> str:
    """The source label of a retrieved document (``doc:<id>``), the twin of a tool's label.

    Example:
        >>> doc_label("kb-7")
        'doc:kb-7'
    """
    return f"doc:{doc_id}"


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
        return f"tool:{self.name}#{self.call_id}"

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
