"""The life of one sampled case in the evaluation stage: plan, run, emit, release.

:class:`CaseLifecycle` is the part of :class:`~nexagauge.online.stage.EvaluatorStage` that runs a
sampled case once a slot is free: it picks the executor of the case's node selection (without
``conversation_relevance`` while the conversation stage owns it), runs the graph, hands the
result to the emitter (retried with backoff; the emitter counts and records the evaluation only
once its outputs are durable), publishes the conversation turn, parks a permanent failure in the
dead-letter topic with what is needed to replay it, and releases the trace's offsets when its
last case is done. Ingest (decoding, assembly, sampling) stays in the stage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from nexagauge.emit.target import EvaluationTarget
from nexagauge.graph.executor import CaseResult, Executor
from nexagauge.graph.skips import SkipTally
from nexagauge.graph.topology import load_topology
from nexagauge.online.concurrency import AdaptiveLimit
from nexagauge.online.conversations.turns import trace_nodes
from nexagauge.online.delivery.dlq import DeadLetters, FailedCase
from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.extract import (
    ExtractedCase,
)
from nexagauge.online.ingest.sampling import Decision, Limiter
from nexagauge.online.plans import Executors

log = logging.getLogger(__name__)


class EmitterLike(Protocol):
    async def emit(
        self, target: EvaluationTarget, case_result: CaseResult, *, started_ns: int | None = None
    ) -> Any: ...


@dataclass
class _Active:
    """A trace being evaluated: released when its last case is emitted or dead-lettered."""

    trace: Trace
    remaining: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    #: where the trace came from, for the group-wide emitted-key store (markers.Origin)
    origin: Any = None


@dataclass
class StageStats(SkipTally):
    """Plain counters (tests and benchmarks read them; Prometheus gets the same via metrics)."""

    messages: int = 0
    spans: int = 0
    logs: int = 0
    poison: int = 0
    traces_done: int = 0
    not_sampled: int = 0
    discarded_traces: int = 0
    sampled: int = 0
    evaluated: int = 0
    failed: int = 0


class CaseLifecycle:
    """Case evaluation methods of the evaluation stage (see module docstring).

    The attributes below are the stage's (:class:`~nexagauge.online.stage.EvaluatorStage`);
    they are declared here so each half type-checks on its own.
    """

    o: Any
    emitter: EmitterLike
    metrics: Any
    dlq: DeadLetters | None
    limiter: Limiter
    stats: StageStats
    turns: Any
    _executors: Executors
    _active: dict[bytes, _Active]
    _in_flight: int
    limit: AdaptiveLimit
    runtime: Any
    #: the stage's clock (``time.monotonic``; tests pass a fake one): evaluation latencies for
    #: the concurrency limit are read from it, so a test decides what they were
    clock: Callable[[], float]
    _judge_retries: int = 0

    def _finish(self, trace: Trace) -> None:
        raise NotImplementedError  # the stage's: releases the trace's offsets

    def _pump(self) -> None:
        raise NotImplementedError  # the stage's: starts queued cases below max_in_flight

    def _node_key(self, nodes: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The node selection a case runs (``()``: nothing to run)."""
        key = nodes if nodes is not None else (tuple(self.o.nodes) if self.o.nodes else None)
        if self.turns is not None:  # the conversation stage owns conversation_relevance
            key = trace_nodes(key, load_topology().metric_nodes) or ()
        return key

    def _executor(self, nodes: tuple[str, ...] | None) -> tuple[Executor, str] | None:
        """The executor and config fingerprint of a node selection; ``None`` = nothing to run."""
        key = self._node_key(nodes)
        return None if key == () else self._executors.get(key)

    async def _evaluate(self, active: _Active, ec: ExtractedCase, d: Decision) -> None:
        cost = 0.0
        t0 = self.clock()
        #: when the evaluation itself ended: the limit follows the evaluation's latency (judge,
        #: our loop), not the emit's wait for its batched export (emit.confirm)
        evaluated_at: float | None = None
        at_limit = self._in_flight >= self.limit.value  # this case is counted already
        try:
            planned = self._executor(d.nodes)
            if planned is None:  # only conversation_relevance: the conversation stage's job
                await self.turns.publish(ec, d.nodes)
                self._done_case(active)
                return
            ex, fp = planned
            target = target_of(ec, fp, d.rule)
            started = time.time_ns()
            result = await ex.run_case(ec.case, 0)
            evaluated_at = self.clock()
            cost = result.cost.cost
            errors = errors_of(result)
            if errors and self.dlq is not None:
                # a permanent failure (transient judge errors never get here: the breaker waits
                # them out) is parked in the DLQ with its case, not emitted: `nexagauge dlq
                # replay` evaluates it later under the same evaluation ids (docs/online.md)
                await self.dlq.failed_evaluation(
                    trace_id=target.trace_id,
                    span_id=target.span_id,
                    config_fingerprint=fp,
                    errors=errors,
                    payload=self._failed_case(ec, target, d, active),
                )
                if self.metrics is not None:
                    self.metrics.dead_lettered("evaluation_failed")
            else:
                await self._emit(target, result, started, active.origin)
            if self.turns is not None:  # turn record keyed by conversation id (conversations.py)
                await self.turns.publish(ec, d.nodes)
            if errors:
                self.stats.failed += 1
            else:
                self.stats.evaluated += 1
            self._done_case(active)
        except asyncio.CancelledError:
            raise  # drain deadline: not released -> not committed -> re-delivered
        except Exception as e:
            log.exception("evaluation of %s failed", ec.case.case_id)
            self.stats.failed += 1
            ok = await self._dead_letter_failure(ec, str(e), d, active)
            if ok:
                self._done_case(active)
        finally:
            self.limiter.finish(cost)
            self.limit.completed(
                (self.clock() if evaluated_at is None else evaluated_at) - t0,
                throttled=self._judge_throttled(),
                at_limit=at_limit,
            )
            self._in_flight -= 1
            self._pump()

    def _judge_throttled(self) -> bool:
        """Whether the judge client retried a request (429, 5xx, timeout) since the last
        completion: the judge is throttling, the concurrency limit backs off."""
        stats = getattr(getattr(self.runtime, "judge", None), "stats", None)
        n = getattr(stats, "retries", 0)
        if not isinstance(n, int) or n == self._judge_retries:
            return False
        self._judge_retries = n
        return True

    async def _emit(
        self, target: EvaluationTarget, result: CaseResult, started_ns: int, origin: Any = None
    ) -> None:
        kw = {"origin": origin} if origin is not None else {}
        await retried(
            lambda: self.emitter.emit(target, result, started_ns=started_ns, **kw),
            self.o.emit_attempts,
        )

    def _failed_case(
        self, ec: ExtractedCase, target: EvaluationTarget | None, d: Decision, active: _Active
    ) -> FailedCase:
        """What a dead letter needs to be evaluated again (nexagauge.online.replay)."""
        return FailedCase(
            case=ec.case.model_dump(mode="json"),
            target={
                "service": ec.span.service,
                "span_name": ec.span.name,
                "end_time_unix_nano": int(ec.span.end_ns),
                "model": ec.model,
                "conversation_id": ec.conversation_id,
                "sampling_rule": target.sampling_rule if target is not None else d.rule,
            },
            nodes=self._node_key(d.nodes),  # as run here (a replay runs the same plan)
            sources=active.trace.sources,
            max_case_bytes=self.o.dlq_max_case_bytes,
        )

    async def _dead_letter_failure(
        self, ec: ExtractedCase, error: str, d: Decision, active: _Active
    ) -> bool:
        if self.dlq is None:
            return True
        try:
            await self.dlq.failed_evaluation(
                trace_id=ec.span.trace_hex,
                span_id=ec.span.span_hex,
                config_fingerprint="",
                errors={"pipeline": error},
                reason="emit_failed",
                payload=self._failed_case(ec, None, d, active),
            )
        except Exception:
            log.exception("could not dead-letter the failed evaluation of %s", ec.case.case_id)
            return False  # keep the offset: re-delivered after a restart
        if self.metrics is not None:
            self.metrics.dead_lettered("emit_failed")
        return True

    def _done_case(self, active: _Active) -> None:
        active.remaining -= 1
        if active.remaining == 0:
            self._active.pop(active.trace.trace_id, None)
            self._finish(active.trace)


def target_of(ec: ExtractedCase, fingerprint: str, rule: str = "default") -> EvaluationTarget:
    """The span a case was extracted from, as the emitter's target."""
    return EvaluationTarget(
        trace_id=ec.span.trace_hex,
        span_id=ec.span.span_hex,
        service=ec.span.service,
        span_name=ec.span.name,
        end_time_unix_nano=int(ec.span.end_ns),
        model=ec.model,
        conversation_id=ec.conversation_id,
        sampling_rule=rule,
        config_fingerprint=fingerprint,
    )


async def retried(emit: Callable[[], Awaitable[Any]], attempts: int) -> None:
    """``await emit()``, retried with exponential backoff (0.2 s, doubling) up to ``attempts``
    times; then raises ``RuntimeError`` naming the last error. Cancellation passes through."""
    delay = 0.2
    for attempt in range(1, attempts + 1):
        try:
            await emit()
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if attempt == attempts:
                raise RuntimeError(f"emit failed after {attempt} attempts: {e}") from e
            await asyncio.sleep(delay)
            delay *= 2


def errors_of(result: CaseResult) -> dict[str, str]:
    """Node -> error of a result (node failures and metrics without a score)."""
    out: dict[str, str] = {}
    if result.error:
        out["case"] = result.error
    for name, o in result.outcomes.items():
        if o.status == "error":
            out[name] = o.reason or "error"
            continue
        for m in getattr(o.output, "metrics", None) or []:
            err = getattr(m, "error", None)
            if err and getattr(m, "score", 1) is None:
                out[f"{name}.{getattr(m, 'name', '?')}"] = str(err)
    return out
