"""What the agent did in a trace: its tool calls, declared tools and LLM steps, in any vocabulary.

Which spans are tool executions and LLM calls is decided by :mod:`nexagauge.online.ingest.roles`;
this module reads them into :class:`~nexagauge.schema.tools.ToolCall` records:

- **tool spans** (GenAI ``execute_tool``, OpenInference ``TOOL``, Traceloop ``tool``): name
  (``gen_ai.tool.name``, ``tool.name``, ``traceloop.entity.name``, else the span name), call id
  (``gen_ai.tool.call.id``; spans that record none take the id of the model's matching tool call
  -- same name and arguments, in call order -- else the span id), arguments
  (``gen_ai.tool.call.arguments``, ``input.value``, ``tool.parameters``, the kwargs of
  ``traceloop.entity.input``), result (``gen_ai.tool.call.result``, ``output.value``,
  ``traceloop.entity.output``, else the ``tool`` message answering the call in a later LLM input),
  error (``error.type`` / the ``exception`` event / the status of a span with status ERROR) and
  duration;
- **message parts** when no tool span exists: each tool call the model asked for (``tool_call``
  parts, OpenInference ``message.tool_calls``, an OpenAI response) with the result a later LLM
  input sent back (``tool_call_response`` parts, ``tool`` messages with ``tool_call_id``).

Each call keeps the time it was known to have ended, so a case only sees the calls (and LLM
steps) that came before its answer (:meth:`TraceAgent.run_before`).

Example:
    >>> from nexagauge.online.ingest.roles import TraceRoles
    >>> trace_agent(TraceRoles()).run_before(10) is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nexagauge.online.ingest.content import ToolRequest, parse_json
from nexagauge.online.ingest.roles import TraceRoles
from nexagauge.online.ingest.spanview import SpanView
from nexagauge.schema.tools import AgentRun, ToolCall
from nexagauge.sdk import conventions as C

__all__ = ["TimedCall", "TraceAgent", "trace_agent"]


@dataclass(frozen=True, slots=True)
class TimedCall:
    """A tool call and when it was known to be done (span end, or the first LLM input that
    carried its result)."""

    end_ns: int
    call: ToolCall


@dataclass(slots=True)
class TraceAgent:
    """The agent activity of one trace (see module docstring)."""

    calls: list[TimedCall] = field(default_factory=list)
    declared: tuple[str, ...] | None = None
    agent: str | None = None
    llm_ends: list[int] = field(default_factory=list)
    #: whether the trace is an agent's at all (a tool, tool definitions or an agent span)
    is_agent: bool = False
    #: spans whose agent data could not be read (each costs only its own contribution)
    unreadable: list[tuple[SpanView, Exception]] = field(default_factory=list)

    def run_before(self, end_ns: int) -> AgentRun | None:
        """The :class:`AgentRun` of an answer that ended at ``end_ns`` (``None``: no agent)."""
        if not self.is_agent:
            return None
        return AgentRun(
            agent=self.agent,
            tool_calls=tuple(c.call for c in self.calls if c.end_ns <= end_ns),
            declared_tools=self.declared,
            llm_steps=sum(1 for e in self.llm_ends if e <= end_ns),
        )


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _as_text(v: Any) -> str | None:
    """A string value, or a structured (OTLP map / array) one as JSON text."""
    if v is None or isinstance(v, str):
        return v or None
    return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)


def _same_args(a: str | None, b: str | None) -> bool:
    if a == b:
        return True
    pa, pb = parse_json(a, "arguments"), parse_json(b, "arguments")
    return isinstance(pa, Mapping | list) and pa == pb


def _entity_args(v: Any) -> str | None:
    """Arguments of a Traceloop tool from ``{"args": [...], "kwargs": {...}}``."""
    p = parse_json(v, C.TRACELOOP_ENTITY_INPUT)
    if isinstance(p, Mapping) and ("args" in p or "kwargs" in p):
        args, kwargs = p.get("args") or [], p.get("kwargs") or {}
        p = kwargs if not args else {"args": args, **kwargs} if kwargs else args
    if p is None:
        return None
    return p if isinstance(p, str) else json.dumps(p, ensure_ascii=False, sort_keys=True)


def _entity_result(v: Any) -> str | None:
    p = parse_json(v, C.TRACELOOP_ENTITY_OUTPUT)
    if p is None:
        return None
    return p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)


def _error(v: SpanView) -> str | None:
    if not v.rec.error:
        return None
    for name, ea in v.events:
        if name == C.EXCEPTION_EVENT:
            kind, msg = _text(ea.get(C.EXCEPTION_TYPE)), _text(ea.get(C.EXCEPTION_MESSAGE))
            if kind or msg:
                return ": ".join(x for x in (kind, msg) if x)
    kind = v.text_attr(C.ERROR_TYPE)
    msg = v.status_message
    return ": ".join(x for x in (kind, msg) if x) or "error"


def _tool_span(v: SpanView) -> tuple[str, str | None, str | None, str | None, str | None]:
    """(name, call id, arguments, result, error) of one tool span."""
    a = v.attrs
    name = (
        v.text_attr(C.GEN_AI_TOOL_NAME)
        or v.text_attr(C.OI_TOOL_NAME)
        or v.text_attr(C.TRACELOOP_ENTITY_NAME)
        or v.rec.name
    )
    args = _as_text(a.get(C.GEN_AI_TOOL_CALL_ARGUMENTS))
    args = args or _text(a.get(C.OI_INPUT_VALUE)) or _text(a.get(C.OI_TOOL_PARAMETERS))
    if args is None and C.TRACELOOP_ENTITY_INPUT in a:
        args = _entity_args(a[C.TRACELOOP_ENTITY_INPUT])
    result = _as_text(a.get(C.GEN_AI_TOOL_CALL_RESULT)) or _text(a.get(C.OI_OUTPUT_VALUE))
    if result is None and C.TRACELOOP_ENTITY_OUTPUT in a:
        result = _entity_result(a[C.TRACELOOP_ENTITY_OUTPUT])
    return name, v.text_attr(C.GEN_AI_TOOL_CALL_ID), args, result, _error(v)


def _requests(llms: list[SpanView], ta: TraceAgent) -> list[tuple[int, ToolRequest]]:
    """Tool calls the model asked for, in order, each id once: (LLM span end, request)."""
    requests: list[tuple[int, ToolRequest]] = []
    seen_ids: set[str] = set()
    for v in llms:
        ta.llm_ends.append(v.rec.end_ns)
        try:
            outs = v.output_tool_calls
        except Exception as e:  # one unreadable span costs only itself
            ta.unreadable.append((v, e))
            continue
        for req in outs:
            if req[0] is None or req[0] not in seen_ids:
                requests.append((v.rec.end_ns, req))
                if req[0] is not None:
                    seen_ids.add(req[0])
    return requests


def _results(
    llms: list[SpanView], wanted: set[str], ta: TraceAgent
) -> dict[str, tuple[int, str | None]]:
    """The results of the calls ``wanted`` that later LLM inputs carried: call id -> (start of
    the first LLM call that was sent it, result). Histories are read only while a wanted call
    is unresolved (tool spans with results need none)."""
    out: dict[str, tuple[int, str | None]] = {}
    for v in llms:
        if len(out) == len(wanted):
            break
        try:
            ins = v.input_tool_results
        except Exception as e:
            if not any(u is v for u, _ in ta.unreadable):
                ta.unreadable.append((v, e))
            continue
        for cid, res in ins:
            if cid in wanted and cid not in out:
                out[cid] = (v.rec.start_ns, res)
    return out


def _declared(tr: TraceRoles, ta: TraceAgent) -> tuple[str, ...] | None:
    declared: set[str] | None = None
    for v in [*tr.llm_calls, *tr.agents, *tr.tools]:
        try:
            names = v.tool_definitions
        except Exception as e:
            ta.unreadable.append((v, e))
            continue
        if names is not None:
            declared = {*(declared or ()), *names}
    return tuple(sorted(declared)) if declared is not None else None


def trace_agent(tr: TraceRoles) -> TraceAgent:
    """The tool calls, declared tools, LLM steps and agent name of one trace, in time order.

    Linear in the spans and messages of the trace; unreadable values count as absent (the
    span's own extraction reports them).
    """
    ta = TraceAgent()
    llms = sorted(tr.llm_calls, key=lambda s: s.rec.end_ns)
    requests = _requests(llms, ta)
    ta.declared = _declared(tr, ta)
    used = [False] * len(requests)

    def match(name: str, args: str | None) -> str | None:
        for pass_args in (True, False):
            for i, (_, (cid, rname, rargs)) in enumerate(requests):
                if used[i] or rname != name or (pass_args and not _same_args(args, rargs)):
                    continue
                used[i] = True
                return cid
        return None

    spans: list[tuple[SpanView, str, str | None, str | None, str | None, str | None]] = []
    for v in sorted(tr.tools, key=lambda s: s.rec.start_ns):
        try:
            name, cid, args, result, error = _tool_span(v)
        except Exception as e:
            ta.unreadable.append((v, e))
            continue
        if cid is not None:
            for i, (_, req) in enumerate(requests):
                if req[0] == cid:
                    used[i] = True
        else:
            cid = match(name, args)
        spans.append((v, name, cid, args, result, error))
    wanted = {cid for _, _, cid, _, res, err in spans if cid and res is None and err is None}
    wanted |= {req[0] for i, (_, req) in enumerate(requests) if not used[i] and req[0]}
    results = _results(llms, wanted, ta) if wanted else {}
    for v, name, cid, args, result, error in spans:
        if result is None and error is None and cid in results:
            result = results[cid][1]
        duration = (v.rec.end_ns - v.rec.start_ns) / 1e6 if v.rec.end_ns else None
        call = ToolCall(
            name=name,
            call_id=cid or v.rec.span_hex,
            arguments=args,
            result=result,
            error=error,
            duration_ms=duration,
        )
        ta.calls.append(TimedCall(v.rec.end_ns, call))
    counts: dict[str, int] = {}
    for i, (end, (cid, name, args)) in enumerate(requests):
        if used[i]:
            continue
        counts[name] = counts.get(name, 0) + 1
        seen, result = results.get(cid, (end, None)) if cid else (end, None)
        call = ToolCall(
            name=name, call_id=cid or f"{name}-{counts[name]}", arguments=args, result=result
        )
        ta.calls.append(TimedCall(seen, call))
    ta.calls.sort(key=lambda c: c.end_ns)
    for v in [*tr.agents, *tr.llm_calls, *tr.tools]:
        ta.agent = ta.agent or v.text_attr(C.GEN_AI_AGENT_NAME) or v.text_attr(C.OI_AGENT_NAME)
    agent_spans = [v for v in tr.agents if _is_agent_span(v)]
    if ta.agent is None and agent_spans:
        v = agent_spans[0]
        ta.agent = v.text_attr(C.TRACELOOP_ENTITY_NAME) or v.rec.name
    ta.is_agent = bool(ta.calls or ta.declared is not None or agent_spans)
    return ta


def _is_agent_span(v: SpanView) -> bool:
    a = v.attrs
    return (
        a.get(C.GEN_AI_OPERATION_NAME) == C.OPERATION_INVOKE_AGENT
        or str(a.get(C.OI_SPAN_KIND, "")).upper() == C.OI_SPAN_KIND_AGENT
        or str(a.get(C.TRACELOOP_SPAN_KIND, "")).lower() == C.TRACELOOP_SPAN_KIND_AGENT
    )
