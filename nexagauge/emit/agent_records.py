"""Agent signals as ``gen_ai.evaluation.result`` records and evaluation-span attributes.

One agent run's :class:`~nexagauge.nodes.agent_signals.AgentSignals` become (names in
:mod:`nexagauge.sdk.conventions`):

* result records (:func:`signal_records`), written in the **agent span's** context by
  :meth:`~nexagauge.emit.emitter.Emitter.emit_signals` for every agent run, sampled or not:
  ``agent.tool_calls`` and ``agent.llm_steps`` (score value = how many), ``agent.tool_failures``,
  ``agent.loops`` and ``agent.undeclared_tools`` (score value = how many, label ``pass`` when
  none, ``fail`` otherwise; ``agent.undeclared_tools`` has no score and the label
  ``not_recorded`` when the trace recorded no tool definitions) and ``agent.tool_latency`` (the
  slowest call's seconds, when any duration was recorded);
* evaluation-span attributes (:func:`span_attributes`, ``nexagauge.evaluation.agent.*``) on the
  evaluation span of a sampled agent answer.

Nothing from the trace's text is in them: tool names and call ids (cleaned like label values),
counts, durations and error *classes* (``TimeoutError``), never arguments, results or error
messages.

Example:
    >>> from nexagauge.nodes.agent_signals import agent_signals
    >>> from nexagauge.schema.tools import AgentRun, ToolCall
    >>> recs = signal_records(agent_signals(AgentRun(agent="a", llm_steps=2,
    ...     tool_calls=(ToolCall(name="t", call_id="c1", error="TimeoutError: slow"),))))
    >>> [(r["gen_ai.evaluation.name"], r.get("gen_ai.evaluation.score.label")) for r in recs]
    [('agent.tool_calls', None), ('agent.llm_steps', None), ('agent.tool_failures', 'fail'), ('agent.loops', 'pass'), ('agent.undeclared_tools', 'not_recorded')]
"""

from __future__ import annotations

from typing import Any

from nexagauge.emit.labels import clean_label
from nexagauge.emit.view import error_type
from nexagauge.nodes.agent_signals import AgentSignals, CallSignal
from nexagauge.sdk import conventions as C

#: most calls one explanation names (the count is always exact)
MAX_NAMED = 8


def _call(c: CallSignal) -> str:
    return f"{clean_label(c.name)}#{clean_label(c.call_id)}"


def _named(calls: list[str]) -> str:
    more = len(calls) - MAX_NAMED
    return ", ".join(calls[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def _record(name: str, value: float | None, label: str | None, why: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {C.GEN_AI_EVALUATION_NAME: name}
    if value is not None:
        attrs[C.GEN_AI_EVALUATION_SCORE_VALUE] = float(value)
    if label is not None:
        attrs[C.GEN_AI_EVALUATION_SCORE_LABEL] = label
    if why:
        attrs[C.GEN_AI_EVALUATION_EXPLANATION] = why
    return attrs


def _verdict(n: int) -> str:
    return "fail" if n else "pass"


def signal_records(s: AgentSignals) -> list[dict[str, Any]]:
    """The ``gen_ai.evaluation.result`` attribute sets of one run's signals (see module doc)."""
    failed, undeclared = s.failed, s.undeclared
    out = [
        _record(C.AGENT_SIGNAL_TOOL_CALLS, s.tool_calls, None, None),
        _record(C.AGENT_SIGNAL_LLM_STEPS, s.llm_steps, None, None),
        _record(
            C.AGENT_SIGNAL_TOOL_FAILURES,
            len(failed),
            _verdict(len(failed)),
            f"{len(failed)} of {s.tool_calls} tool calls failed: "
            + _named([f"{_call(c)} ({error_type(c.error)})" for c in failed])
            if failed
            else None,
        ),
        _record(
            C.AGENT_SIGNAL_LOOPS,
            len(s.loops),
            _verdict(len(s.loops)),
            "; ".join(
                f"{clean_label(lp.tool)} called {lp.count} times with the same arguments"
                for lp in s.loops[:MAX_NAMED]
            )
            or None,
        ),
    ]
    if s.definitions_recorded:
        out.append(
            _record(
                C.AGENT_SIGNAL_UNDECLARED_TOOLS,
                len(undeclared),
                _verdict(len(undeclared)),
                "not among the declared tools: " + _named([_call(c) for c in undeclared])
                if undeclared
                else None,
            )
        )
    else:
        out.append(
            _record(
                C.AGENT_SIGNAL_UNDECLARED_TOOLS,
                None,
                C.AGENT_DEFINITIONS_NOT_RECORDED,
                "the trace recorded no tool definitions: undeclared tools cannot be checked",
            )
        )
    slowest = s.slowest
    if slowest is not None and slowest.duration_ms is not None:
        out.append(
            _record(
                C.AGENT_SIGNAL_TOOL_LATENCY,
                slowest.duration_ms / 1000.0,
                None,
                f"slowest tool call: {_call(slowest)}",
            )
        )
    return out


def span_attributes(s: AgentSignals) -> dict[str, Any]:
    """The ``nexagauge.evaluation.agent.*`` attributes of an evaluation span.

    Example:
        >>> from nexagauge.nodes.agent_signals import agent_signals
        >>> from nexagauge.schema.tools import AgentRun
        >>> span_attributes(agent_signals(AgentRun(llm_steps=1)))["nexagauge.evaluation.agent.tool_definitions"]
        'not_recorded'
    """
    p = C.NG_EVALUATION_AGENT_PREFIX
    out: dict[str, Any] = {
        p + "tool_calls": s.tool_calls,
        p + "llm_steps": s.llm_steps,
        p + "failed_tool_calls": len(s.failed),
        p + "loops": len(s.loops),
        p + "tool_definitions": "recorded" if s.definitions_recorded else "not_recorded",
    }
    if s.definitions_recorded:  # else unknown: no count at all, never a false 0
        out[p + "undeclared_tool_calls"] = len(s.undeclared)
    return out
