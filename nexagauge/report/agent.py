"""The agent side of a case for the report: its tool calls, its agent signals, task completion.

Read from a case file: the tool calls (arguments, result or error, duration) from the scrubbed
``record`` block that ``nexagauge run`` writes (:mod:`nexagauge.report.record`), the signals
(failed calls, loops, undeclared tools, steps) from the ``agent_signals`` node's output, the one
place they are decided (:func:`nexagauge.nodes.agent_signals.agent_signals`), and
``task_completion`` from that node's metric when it ran. A case file of an older nexagauge may
carry the signals without the record's tool calls (then the calls are listed without arguments
and results), or the calls without the signals (the node did not run: the view says so). Long
values are cut (:func:`cut`) so that one huge tool result does not bury the page.

Example:
    >>> from nexagauge.report.record import RecordText
    >>> call = ToolCall(name="lookup", call_id="c1", result="ok")
    >>> rec = RecordText(present=True, tool_calls=(call,))
    >>> doc = {"nodes": {"agent_signals": {"output": {"signals": {"llm_steps": 2, "calls": [
    ...     {"name": "lookup", "call_id": "c1", "failed": False, "declared": None}]}}}}}
    >>> view = agent_view(doc, rec)
    >>> (view.calls[0].call.result, view.llm_steps, view.definitions_recorded, view.faulty)
    ('ok', 2, False, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nexagauge.report.excerpt import cut, excerpt
from nexagauge.report.record import RecordText
from nexagauge.schema.tools import ToolCall

#: characters of a tool call's arguments, result or error shown (longer values are cut)
VALUE_CHARS = 600
#: the metric of the ``task_completion`` node
TASK_COMPLETION = "task_completion"
#: the node whose output holds the signals (no scores: summary.json lists it with none)
AGENT_SIGNALS = "agent_signals"


@dataclass(frozen=True)
class CallView:
    """One tool call as the report shows it: the call (arguments, result and error cut to
    :data:`VALUE_CHARS`) and what the signals say of it. ``declared`` is ``None`` when the run
    recorded no tool definitions (or the signals were not computed); ``in_loop``: the call is
    one of a loop's repeated calls."""

    call: ToolCall
    failed: bool = False
    declared: bool | None = None
    in_loop: bool = False


@dataclass(frozen=True)
class LoopView:
    """The same tool called with the same arguments ``count`` times."""

    tool: str
    count: int
    call_ids: tuple[str, ...]


@dataclass(frozen=True)
class TaskView:
    """``task_completion`` of the run when it ran: score, verdict and the judge's reason, or the
    error that kept it from a score."""

    score: float | None
    verdict: str | None = None
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class AgentView:
    """The agent run of one case. ``signals`` False: the ``agent_signals`` node did not run (no
    failure, loop or undeclared call is known then, and none is claimed)."""

    calls: tuple[CallView, ...] = ()
    loops: tuple[LoopView, ...] = ()
    signals: bool = False
    agent: str | None = None
    llm_steps: int | None = None
    definitions_recorded: bool = False
    loop_threshold: int | None = None
    task: TaskView | None = None

    @property
    def failed(self) -> int:
        """Tool calls that failed."""
        return sum(c.failed for c in self.calls)

    @property
    def undeclared(self) -> int:
        """Calls to tools not in the declared definitions."""
        return sum(c.declared is False for c in self.calls)

    @property
    def faulty(self) -> bool:
        """A failed call, a loop or an undeclared call."""
        return bool(self.failed or self.loops or self.undeclared)


@dataclass(frozen=True)
class AgentTotals:
    """The agent figures of a whole run (the sums of its cases' :class:`AgentView`)."""

    runs: int
    tool_calls: int
    failed: int
    loops: int
    undeclared: int
    faulty_runs: int
    without_definitions: int


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _i(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _f(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _call(text: ToolCall | None, sig: dict[str, Any], loop_ids: set[tuple[str, str]]) -> CallView:
    name = (text.name if text else None) or str(sig.get("name") or "")
    call_id = (text.call_id if text else None) or str(sig.get("call_id") or "")
    error = (text.error if text else None) or _s(sig.get("error"))
    declared = sig.get("declared")
    dur = text.duration_ms if text and text.duration_ms is not None else _f(sig.get("duration_ms"))
    call = ToolCall(
        name=name,
        call_id=call_id,
        arguments=cut(text.arguments, VALUE_CHARS) if text else None,
        result=cut(text.result, VALUE_CHARS) if text else None,
        error=cut(error, VALUE_CHARS),
        duration_ms=dur,
    )
    return CallView(
        call=call,
        failed=sig.get("failed") is True or (not sig and call.failed),
        declared=declared if isinstance(declared, bool) else None,
        in_loop=(name, call_id) in loop_ids,
    )


def _pair(
    texts: tuple[ToolCall, ...], sigs: list[dict[str, Any]]
) -> list[tuple[ToolCall | None, dict[str, Any]]]:
    """The record's calls beside the signals' calls (same order when both come from one run)."""
    if not sigs:
        return [(t, {}) for t in texts]
    by_key = {(t.name, t.call_id): t for t in texts}
    return [(by_key.get((str(s.get("name")), str(s.get("call_id")))), s) for s in sigs]


def _task(node: dict[str, Any]) -> TaskView | None:
    metrics = [m for m in _l(_d(node.get("output")).get("metrics")) if isinstance(m, dict)]
    metric = next((m for m in metrics if m.get("name") == TASK_COMPLETION), None)
    if metric is None:
        return None
    rows = [r for r in _l(metric.get("result")) if isinstance(r, dict)]
    verdict = next((_s(r.get("verdict")) for r in rows if "verdict" in r), None)
    reason = next((_s(r.get("reasoning")) for r in rows if "reasoning" in r), None)
    return TaskView(_f(metric.get("score")), verdict, reason, _s(metric.get("error")))


def agent_view(doc: dict[str, Any], record: RecordText) -> AgentView | None:
    """The :class:`AgentView` of a case file's JSON (``None``: the case has no agent run)."""
    nodes = _d(doc.get("nodes"))
    node = _d(nodes.get(AGENT_SIGNALS))
    sig = _d(_d(node.get("output")).get("signals"))
    if not sig and not record.tool_calls:
        return None
    loops = tuple(
        LoopView(
            tool=str(lp.get("tool")),
            count=_i(lp.get("count")),
            call_ids=tuple(str(i) for i in _l(lp.get("call_ids"))),
        )
        for lp in _l(sig.get("loops"))
        if isinstance(lp, dict)
    )
    loop_ids = {(lp.tool, cid) for lp in loops for cid in lp.call_ids}
    sigs = [c for c in _l(sig.get("calls")) if isinstance(c, dict)]
    steps, threshold = sig.get("llm_steps"), sig.get("loop_threshold")
    return AgentView(
        calls=tuple(_call(t, s, loop_ids) for t, s in _pair(record.tool_calls, sigs)),
        loops=loops,
        signals=bool(sig),
        agent=_s(sig.get("agent")),
        llm_steps=steps if isinstance(steps, int) else None,
        definitions_recorded=sig.get("definitions_recorded") is True,
        loop_threshold=threshold if isinstance(threshold, int) else None,
        task=_task(_d(nodes.get(TASK_COMPLETION))),
    )


def agent_totals(views: Iterable[AgentView | None]) -> AgentTotals | None:
    """The run's :class:`AgentTotals` (``None`` when no case had an agent run)."""
    runs = [v for v in views if v is not None]
    if not runs:
        return None
    return AgentTotals(
        runs=len(runs),
        tool_calls=sum(len(v.calls) for v in runs),
        failed=sum(v.failed for v in runs),
        loops=sum(len(v.loops) for v in runs),
        undeclared=sum(v.undeclared for v in runs),
        faulty_runs=sum(v.faulty for v in runs),
        without_definitions=sum(v.signals and not v.definitions_recorded for v in runs),
    )


def passage(record: RecordText, source: str | None, claim: str) -> str | None:
    """The passage of the context document labelled ``source`` that ``claim`` is about
    (:func:`~nexagauge.report.excerpt.excerpt`); ``None``: no source, or no such document."""
    doc = record.document(source)
    return None if doc is None else excerpt(doc, claim)
