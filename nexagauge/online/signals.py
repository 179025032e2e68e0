"""Agent signals in the evaluation stage: every agent run, sampled or not, before sampling.

The signals (failed tool calls, loops, undeclared tools, steps, tool latency;
:func:`nexagauge.nodes.agent_signals.agent_signals`) cost no judge call, so with
``online.agent_signals`` on (the default) the stage computes them for **every** extracted case
that has an agent run, independent of the judge sampling rate, and hands them to
:meth:`nexagauge.emit.emitter.Emitter.emit_signals` (result records on the agent span, the agent
series), deduplicated like evaluations. The trace's offsets are released only once its signals
are emitted (a crash before re-reads and re-emits them; the dedupe keys make that count once).

What it takes: a trace no sampling rule can pick is still extracted when it *looks like* an agent
trace (:func:`looks_agent`: a span with an agent or tool role in any vocabulary, read from the
eagerly decoded marks, so plain traffic is not extracted), and decode-time discard
(``online.early_discard``) keeps every span (an agent trace's first LLM step ends, and would be
dropped, before its tool spans show what it is). Tool calls recorded *only* as message parts of
LLM spans, in a trace with no agent or tool span, are read when the trace is sampled.

Example:
    >>> from types import SimpleNamespace as NS
    >>> looks_agent([NS(marks={"gen_ai.operation.name": "execute_tool"})]), looks_agent([NS(marks={})])
    (True, False)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from nexagauge.emit.target import config_fingerprint
from nexagauge.nodes.agent_signals import agent_signals
from nexagauge.online.cases import _Active, retried, target_of
from nexagauge.online.delivery.markers import primary_source
from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.extract import ExtractedCase
from nexagauge.sdk import conventions as C

log = logging.getLogger(__name__)

#: marks (eagerly decoded attributes) that say a span is an agent or a tool execution
AGENT_MARKS: dict[str, frozenset[str]] = {
    C.GEN_AI_OPERATION_NAME: frozenset({C.OPERATION_INVOKE_AGENT, C.OPERATION_EXECUTE_TOOL}),
    C.OI_SPAN_KIND: frozenset({C.OI_SPAN_KIND_AGENT, C.OI_SPAN_KIND_TOOL}),
    C.TRACELOOP_SPAN_KIND: frozenset({"agent", "tool"}),
}
#: the attribute keys the decoder must read eagerly for :func:`looks_agent`
AGENT_MARK_KEYS = frozenset(AGENT_MARKS)


def looks_agent(spans: Iterable[Any]) -> bool:
    """Whether any span (with ``.marks``) is an agent or a tool execution, in any vocabulary."""
    for s in spans:
        marks = s.marks
        for key, values in AGENT_MARKS.items():
            if marks.get(key) in values:
                return True
    return False


class SignalLifecycle:
    """The agent-signal part of :class:`~nexagauge.online.stage.EvaluatorStage` (a mixin; the
    attributes are the stage's)."""

    settings: Any
    emitter: Any
    metrics: Any
    stats: Any
    _active: dict[bytes, _Active]
    #: the stage's: releases the trace when its last case (or signal) is done
    _done_case: Callable[[_Active], None]
    #: the stage's: releases the offsets of a trace
    _finish: Callable[[Trace], None]
    #: the group-wide emitted-key store (nexagauge.online.delivery.markers.EmittedKeys)
    keys: Any

    def _new_active(self, trace: Trace) -> _Active:
        """The bookkeeping of a trace being worked on (with its origin for the key store)."""
        active = _Active(trace)
        if self.keys is not None:
            active.origin = self.keys.origin(primary_source(trace.sources))
        return active

    def _signals_only(self, trace: Trace, cases: list[ExtractedCase]) -> None:
        """A trace no rule can sample: its agent signals, if any, then done (counted as not
        sampled)."""
        self.stats.not_sampled += 1
        if self.metrics is not None:
            self.metrics.trace_not_sampled()
        active = self._new_active(trace) if cases else None
        if active is not None and self._start_signals(active, cases):
            self._active[trace.trace_id] = active
        else:
            self._finish(trace)

    def _start_signals(self, active: _Active, cases: Iterable[ExtractedCase]) -> int:
        """Start emitting the signals of every agent case of a trace; returns how many. Each
        holds the trace (``active.remaining``) until its signals are emitted."""
        emit = getattr(self.emitter, "emit_signals", None)
        if emit is None or not self.settings.online.agent_signals:
            return 0
        n = 0
        for ec in cases:
            if ec.case.agent is None:
                continue
            active.remaining += 1
            task = asyncio.ensure_future(self._signal(active, ec))
            active.tasks.add(task)
            task.add_done_callback(active.tasks.discard)
            n += 1
        return n

    async def _signal(self, active: _Active, ec: ExtractedCase) -> None:
        run = ec.case.agent
        threshold = self.settings.agents.loop_threshold
        target = target_of(ec, config_fingerprint(["agent_signals"], {"loop_threshold": threshold}))
        try:
            if run is not None:
                signals = agent_signals(run, loop_threshold=threshold)
                await retried(
                    lambda: self.emitter.emit_signals(target, signals, origin=active.origin),
                    self.settings.online.emit_attempts,
                )
        except asyncio.CancelledError:
            raise  # drain deadline: not released -> re-delivered (the dedupe keys count it once)
        except Exception:  # signals are not worth holding the partition: logged and released
            log.exception("agent signals of %s could not be emitted", target.case_id)
        self._done_case(active)
