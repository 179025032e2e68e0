"""``agent_signals``: what an agent run did wrong, read from its tool calls alone (no judge).

Deterministic and cheap, so the online evaluator computes them on **every** agent trace, before
and independent of judge sampling (``online.agent_signals``), and ``nexagauge run`` gets them
through the graph like any other node. One pure function, :func:`agent_signals`, decides them for
both; the emitter only reports what it returns:

* **failed tool calls**: calls that recorded an error;
* **loops**: the same tool called with the same arguments at least ``agents.loop_threshold``
  times in one run (arguments compared as JSON when they parse, so key order does not matter;
  calls whose arguments were not recorded are never counted as a loop);
* **undeclared tools**: calls to a tool not in the run's declared tool definitions; when the
  trace recorded no definitions at all, ``definitions_recorded`` is ``False`` and no call is
  called undeclared (an unknown is never reported as a fault);
* **steps**: LLM calls and tool calls of the run; **tool latency**: each call's duration.

The node has no scores (signals are counts, not qualities in [0, 1]): its output carries the
:class:`AgentSignals` and an empty ``metrics`` list, so the ``eval`` summary and pass rates are
unchanged by it.

Example:
    >>> from nexagauge.schema.tools import AgentRun, ToolCall
    >>> run = AgentRun(agent="support", declared_tools=("lookup_order",), llm_steps=2,
    ...     tool_calls=(ToolCall(name="lookup_order", call_id="c1", arguments='{"id": 1}'),
    ...                 ToolCall(name="refund", call_id="c2", error="TimeoutError: slow")))
    >>> s = agent_signals(run)
    >>> (s.tool_calls, [c.name for c in s.failed], [c.name for c in s.undeclared], s.loops)
    (2, ['refund'], ['refund'], ())
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexagauge.graph.node import NodeContext
from nexagauge.nodes._kinds import UncachedNode
from nexagauge.schema.results import NodeMetrics
from nexagauge.schema.tools import AgentRun, tool_label

__all__ = [
    "AgentSignals",
    "AgentSignalsMetrics",
    "AgentSignalsNode",
    "CallSignal",
    "ToolLoop",
    "agent_signals",
]

#: the default of ``agents.loop_threshold``
DEFAULT_LOOP_THRESHOLD = 3


class CallSignal(BaseModel):
    """One tool call as the signals see it (no arguments or results: they are case text)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    call_id: str
    failed: bool = False
    #: the error as recorded (case text: emitters report only its class, never this text)
    error: str | None = None
    duration_ms: float | None = None
    #: in the declared definitions; ``None`` when the run recorded no definitions
    declared: bool | None = None

    @property
    def source_label(self) -> str:
        """``tool:<name>#<call id>``, the label grounding uses for the same call."""
        return tool_label(self.name, self.call_id)


class ToolLoop(BaseModel):
    """Calls of one tool with the same arguments, repeated ``count`` (>= the threshold) times."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    count: int
    #: the call ids of the repeated calls, in call order
    call_ids: tuple[str, ...]


class AgentSignals(BaseModel):
    """The deterministic signals of one agent run (see module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = None
    llm_steps: int = 0
    calls: tuple[CallSignal, ...] = ()
    loops: tuple[ToolLoop, ...] = ()
    #: whether the trace recorded the run's tool definitions (else undeclared is unknown)
    definitions_recorded: bool = False
    loop_threshold: int = DEFAULT_LOOP_THRESHOLD

    @property
    def tool_calls(self) -> int:
        """How many tool calls the run made."""
        return len(self.calls)

    @property
    def failed(self) -> tuple[CallSignal, ...]:
        """The calls that failed."""
        return tuple(c for c in self.calls if c.failed)

    @property
    def undeclared(self) -> tuple[CallSignal, ...]:
        """The calls to tools not in the declared definitions (empty when none were recorded)."""
        return tuple(c for c in self.calls if c.declared is False)

    @property
    def slowest(self) -> CallSignal | None:
        """The call with the longest recorded duration, if any duration was recorded."""
        timed = [c for c in self.calls if c.duration_ms is not None]
        return max(timed, key=lambda c: c.duration_ms or 0.0) if timed else None


class AgentSignalsMetrics(NodeMetrics):
    """Output of ``agent_signals``: no scored metrics, the run's :class:`AgentSignals`."""

    signals: AgentSignals | None = None


def _same_arguments(arguments: str) -> str:
    """The comparison key of a call's arguments: canonical JSON when they parse, else the text."""
    try:
        value: Any = json.loads(arguments)
    except ValueError:
        return arguments.strip()
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def agent_signals(run: AgentRun, *, loop_threshold: int = DEFAULT_LOOP_THRESHOLD) -> AgentSignals:
    """The signals of ``run``: the one definition the node, the online stage and the emitter use.

    Linear in the number of tool calls.

    Example:
        >>> from nexagauge.schema.tools import AgentRun, ToolCall
        >>> calls = tuple(ToolCall(name="t", call_id=f"c{i}", arguments='{"a": 1, "b": 2}'
        ...               if i % 2 else '{"b": 2, "a": 1}') for i in range(3))
        >>> s = agent_signals(AgentRun(tool_calls=calls), loop_threshold=3)
        >>> (s.loops[0].tool, s.loops[0].count, s.definitions_recorded, s.undeclared)
        ('t', 3, False, ())
    """
    if loop_threshold < 2:
        raise ValueError(f"loop_threshold must be >= 2, got {loop_threshold}")
    declared = None if run.declared_tools is None else frozenset(run.declared_tools)
    calls: list[CallSignal] = []
    groups: dict[tuple[str, str], list[str]] = {}
    for call in run.tool_calls:
        calls.append(
            CallSignal(
                name=call.name,
                call_id=call.call_id,
                failed=call.failed,
                error=call.error,
                duration_ms=call.duration_ms,
                declared=None if declared is None else call.name in declared,
            )
        )
        if call.arguments is not None:  # unrecorded arguments: never a loop
            key = (call.name, _same_arguments(call.arguments))
            groups.setdefault(key, []).append(call.call_id)
    loops = tuple(
        ToolLoop(tool=name, count=len(ids), call_ids=tuple(ids))
        for (name, _), ids in groups.items()
        if len(ids) >= loop_threshold
    )
    return AgentSignals(
        agent=run.agent,
        llm_steps=run.llm_steps,
        calls=tuple(calls),
        loops=loops,
        definitions_recorded=declared is not None,
        loop_threshold=loop_threshold,
    )


class AgentSignalsNode(UncachedNode):
    """Computes :func:`agent_signals` for a case with an agent run (field ``agent``); uncached,
    as it costs less than a cache lookup."""

    name = "agent_signals"
    version = "1"
    output_model = AgentSignalsMetrics

    def cache_key_parts(self, ctx: NodeContext) -> dict[str, Any]:
        return {"loop_threshold": ctx.runtime.settings.agents.loop_threshold}

    async def run(self, ctx: NodeContext) -> AgentSignalsMetrics:
        run = ctx.case.agent
        if run is None:  # the topology's field check keeps such cases away; never guess
            raise ValueError("agent_signals: the case has no agent run")
        threshold = ctx.runtime.settings.agents.loop_threshold
        return AgentSignalsMetrics(signals=agent_signals(run, loop_threshold=threshold))
