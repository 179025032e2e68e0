"""The emitter: one call per evaluated span turns a case result into metrics and an evaluation span.

``await emitter.emit(target, case_result)`` (called by the online consumer after the node graph
ran) records, exactly once per ``(trace id, span id, metric, config fingerprint)``:

* each metric's score in the ``nexagauge_score`` histogram (exemplar: the trace and span id);
* claim verdict counts (``nexagauge_claims_total``) from ``ClaimVerdict`` models or verdict dicts;
* the evaluation itself (``nexagauge_evaluations_total{status=ok|failed}``), its latency (the
  evaluated span's end -> now), the last-evaluation timestamp, the judge tokens and USD of each
  node (from its ``CostEstimate``; cache hits cost nothing and count as ``judge_calls{outcome=
  "cached"}``) and ``nexagauge_skipped_total{reason=<code>, node=<node>}`` per skipped metric
  node (codes: :class:`~nexagauge.graph.skips.SkipReason`);
* one evaluation span (see :mod:`nexagauge.emit.spans`), exported over OTLP;
* one ``gen_ai.evaluation.result`` log record per newly counted metric, in the evaluated span's
  context (:mod:`nexagauge.emit.events`), written with the counters in step (3) below, so a
  retried or redelivered evaluation never sends them twice.

Order, so that a crash (kill -9) at any moment never loses an evaluation: (1) export the
evaluation span and **wait for the exporter's confirmation**; (2) record the keys durably (the
group-wide emitted-key store of the online service, else the on-disk journal); (3) count in
Prometheus; (4) return, after which the caller releases the Kafka offset. A crash before (2)
leaves no record: the redelivered trace is evaluated and exported again (same deterministic span
id) and counted then. A crash after (2) finds the key on redelivery: suppressed, because its span
is durable. A failed export raises (nothing recorded or counted; the caller retries).

A redelivered evaluation (same keys) increments only ``nexagauge_duplicate_evaluations_total``
and exports nothing. Deduplication uses a bounded in-memory window plus the store or journal;
:mod:`nexagauge.emit.dedupe` and docs/online.md say exactly what is and is not deduplicated.

``emit`` never blocks the event loop on I/O: the export runs on the span processor's thread (in
natural batches) and the journal append in a worker thread. It never raises for a failed metric
(that is a ``failed`` evaluation, emitted like any other); a journal write error is logged and
the evaluation is still counted (availability over strict deduplication across restarts).

Example:
    >>> import asyncio
    >>> from nexagauge.emit.prometheus import EvaluatorMetrics
    >>> from nexagauge.emit.spans import EvaluationSpanWriter
    >>> from nexagauge.emit.target import EvaluationTarget
    >>> from nexagauge.graph.executor import CaseResult
    >>> from nexagauge.settings import EmitSettings
    >>> em = Emitter(EvaluatorMetrics(), EvaluationSpanWriter.in_memory(), EmitSettings(dedupe_journal=False))
    >>> t = EvaluationTarget("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "svc", "chat", 0)
    >>> asyncio.run(em.emit(t, CaseResult(index=0, case_id=None, error="bad record")))
    True
    >>> em.metrics.registry.get_sample_value("nexagauge_evaluations_total",
    ...     {"status": "failed", "service": "svc", "span_name": "chat", "model": "unknown"})
    1.0
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nexagauge.emit.agent_records import signal_records, span_attributes
from nexagauge.emit.dedupe import DedupeJournal, DedupeWindow, EmittedKeyStore, key_hash
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.emit.target import EvaluationTarget
from nexagauge.emit.view import EvaluationView, MetricView, evaluation_view
from nexagauge.graph.executor import CaseResult
from nexagauge.nodes.agent_signals import AgentSignals, AgentSignalsMetrics

log = logging.getLogger(__name__)

#: pseudo-metric of the per-evaluation records (evaluations, latency, cost, span)
EVALUATION_KEY = "*"
#: pseudo-metric of an agent run's signals (records on the agent span, agent series)
AGENT_SIGNALS_KEY = "agent_signals"


def run_signals(result: CaseResult) -> AgentSignals | None:
    """The agent signals the graph computed for a case (``None``: not an agent case)."""
    o = result.outcomes.get("agent_signals")
    if o is not None and o.status == "ok" and isinstance(o.output, AgentSignalsMetrics):
        return o.output.signals
    return None


def tool_grounded_agent(result: CaseResult) -> tuple[str | None] | None:
    """``(agent name,)`` when the case is an agent answer whose context holds a tool result."""
    case = result.case
    if case is None or case.agent is None:
        return None
    if not any(src.startswith("tool:") for src in case.context_sources):
        return None
    return (case.agent.agent,)


def _metric_hash(target: EvaluationTarget, m: MetricView) -> str:
    return key_hash(target.dedupe_key(m.name))


def default_journal_path(cache_dir: str | Path) -> Path:
    """Where the dedupe journal lives when not configured: ``<cache dir>/emit/dedupe-journal``."""
    return Path(cache_dir) / "emit" / "dedupe-journal"


class Emitter:
    """Emits every evaluated span's results to Prometheus and as an evaluation span.

    Args:
        metrics: the process's :class:`EvaluatorMetrics`.
        spans: the :class:`EvaluationSpanWriter` (OTLP, in-memory or disabled).
        settings: the full ``Settings`` (uses ``emit``, ``run`` thresholds, ``judge`` models and
            ``cache.dir`` for the journal) or only an ``EmitSettings`` (then no thresholds from
            ``run``, no judge model names, and the journal only when ``dedupe_journal_path`` is set).
        clock: unix-seconds clock (tests inject one).
        store: group-wide emitted-key store (online service); when given, it is the durable
            record of emitted keys instead of the journal.
    """

    def __init__(
        self,
        metrics: EvaluatorMetrics,
        spans: EvaluationSpanWriter,
        settings: Any = None,
        *,
        clock: Callable[[], float] = time.time,
        store: EmittedKeyStore | None = None,
    ) -> None:
        from nexagauge.settings import EmitSettings, Settings

        if settings is None:
            settings = Settings()
        if isinstance(settings, Settings):
            emit = settings.emit
            self._run: Any = settings.run
            self._judge: Any = settings.judge
            cache_dir: Path | None = settings.cache.dir
        elif isinstance(settings, EmitSettings):
            emit, self._run, self._judge, cache_dir = settings, None, None, None
        else:
            raise TypeError(
                f"settings: expected Settings or EmitSettings, got {type(settings).__name__}"
            )
        self.metrics = metrics
        self.spans = spans
        if spans.on_export is None:
            spans.on_export = metrics.evaluation_spans_exported
        if spans.events is not None and spans.events.on_export is None:
            spans.events.on_export = metrics.evaluation_events_exported
        self.settings = emit
        self.clock = clock
        self.window = DedupeWindow(emit.dedupe_window)
        self.journal: DedupeJournal | None = None
        if emit.dedupe_journal and store is None:  # the store is the durable record
            path = emit.dedupe_journal_path or (
                default_journal_path(cache_dir) if cache_dir is not None else None
            )
            if path is not None:
                self.journal = DedupeJournal(path, emit.dedupe_window, fsync=emit.dedupe_fsync)
            else:
                log.warning("dedupe journal disabled: no dedupe_journal_path and no cache dir")
        #: group-wide emitted keys (online: a compacted Kafka topic); replaces the journal
        self.store: EmittedKeyStore | None = store
        self._loaded = self.journal is None
        self._load_lock = asyncio.Lock()
        self._busy: dict[str, asyncio.Future[None]] = {}
        self._signals_busy: set[str] = set()

    @classmethod
    def from_settings(
        cls,
        settings: Any,
        *,
        metrics: EvaluatorMetrics | None = None,
        spans: EvaluationSpanWriter | None = None,
        store: EmittedKeyStore | None = None,
    ) -> Emitter:
        """The production wiring: metrics and span writer built from ``settings.emit`` unless given.

        Example:
            >>> from nexagauge.settings import Settings
            >>> em = Emitter.from_settings(Settings(emit={"span_exporter": "none", "dedupe_journal": False}))
            >>> em.journal is None
            True
        """
        emit = getattr(settings, "emit", settings)
        return cls(
            metrics if metrics is not None else EvaluatorMetrics.from_settings(emit),
            spans if spans is not None else EvaluationSpanWriter.from_settings(emit),
            settings,
            store=store,
        )

    async def start(self) -> None:
        """Load the dedupe journal (off the loop). Called by :meth:`emit` if not called before."""
        if self._loaded:
            return
        async with self._load_lock:
            if self._loaded or self.journal is None:
                return
            try:
                hashes = await asyncio.to_thread(self.journal.load)
            except OSError as e:
                log.warning(
                    "dedupe journal %s unreadable (%s): starting empty", self.journal.path, e
                )
                hashes = []
            for h in hashes:
                self.window.add_hash(h)
            self._loaded = True
            log.info(
                "dedupe journal %s: %d recent evaluations loaded", self.journal.path, len(hashes)
            )

    async def emit(
        self,
        target: EvaluationTarget,
        case_result: CaseResult,
        *,
        started_ns: int | None = None,
        origin: Any = None,
    ) -> bool:
        """Record ``case_result`` (the evaluation of ``target``) once; see the module docstring.

        ``started_ns``: when the evaluation started (unix ns), the evaluation span's start time;
        default: now minus the slowest node's run time. ``origin``: where the evaluated trace came
        from (passed to the emitted-key store, see :class:`~nexagauge.emit.dedupe.EmittedKeyStore`).

        Order (what makes a crash at any point safe): export the evaluation span and wait for the
        exporter's confirmation; then record the keys durably (emitted-key store or journal);
        then count. Returns ``True`` when this call counted something, ``False`` for a duplicate
        or when the store refused the keys (the partition moved to another consumer, which
        evaluates and counts the trace itself). Raises when the span could not be exported: then
        nothing was counted or marked, and the caller retries or keeps the offset.
        """
        await self.start()
        view = evaluation_view(case_result, self._run)
        eval_h = key_hash(target.dedupe_key(EVALUATION_KEY))
        # one emit of an evaluation at a time: a concurrent duplicate waits for the first one's
        # outcome (it counts if the first one failed to export)
        while (busy := self._busy.get(eval_h)) is not None:
            await asyncio.wait([busy])
        new_eval = not self._seen(eval_h)
        new_metrics = [m for m in view.metrics if not self._seen(_metric_hash(target, m))]
        if not new_eval and not new_metrics:
            self.metrics.duplicates.inc()
            log.debug("duplicate evaluation of %s ignored", target.case_id)
            return False
        hashes = ([eval_h] if new_eval else []) + [_metric_hash(target, m) for m in new_metrics]
        busy = self._busy[eval_h] = asyncio.get_running_loop().create_future()
        try:
            now = self.clock()
            if new_eval:
                signals = run_signals(case_result)
                await self.spans.export(
                    target,
                    view,
                    start_ns=started_ns,
                    end_ns=int(now * 1e9),
                    judge_model=self._judge_label(view),
                    extra_attributes=span_attributes(signals) if signals is not None else None,
                )
            # Shielded: once the span is durable, cancelling emit() (drain deadline) must not
            # leave the keys recorded but uncounted, or counted but unrecorded.
            grounded = tool_grounded_agent(case_result)
            return await asyncio.shield(
                self._commit(target, view, new_eval, new_metrics, hashes, now, origin, grounded)
            )
        finally:
            self._busy.pop(eval_h, None)
            busy.set_result(None)

    def _seen(self, h: str) -> bool:
        return self.window.has_hash(h) or (self.store is not None and self.store.contains(h))

    async def _commit(
        self,
        target: EvaluationTarget,
        view: EvaluationView,
        new_eval: bool,
        new_metrics: list[MetricView],
        hashes: list[str],
        now: float,
        origin: Any,
        grounded: tuple[str | None] | None = None,
    ) -> bool:
        if not await self._keep(target, hashes, origin):
            return False
        self._record(target, view, new_eval, new_metrics, now, grounded)
        return True

    async def _keep(self, target: EvaluationTarget, hashes: list[str], origin: Any) -> bool:
        """Record ``hashes`` durably (store or journal) and in the window; ``False`` when the
        store refused them (the partition moved: its new owner counts them)."""
        if self.store is not None:
            if not await self.store.mark(hashes, origin):
                log.info(
                    "%s: partition moved to another consumer; not counted here", target.case_id
                )
                return False
        elif self.journal is not None:
            try:
                await asyncio.to_thread(self.journal.append, hashes)
            except OSError as e:
                log.warning(
                    "dedupe journal %s write failed (%s): counted, but a restart may count it again",
                    self.journal.path,
                    e,
                )
        for h in hashes:
            self.window.add_hash(h)
        return True

    async def emit_signals(
        self, target: EvaluationTarget, signals: AgentSignals, *, origin: Any = None
    ) -> bool:
        """Record one agent run's signals once: ``gen_ai.evaluation.result`` records in the
        context of ``target`` (the agent span; :mod:`nexagauge.emit.agent_records`), then the
        agent series (:mod:`nexagauge.emit.agent_metrics`). Called for every agent run, sampled
        or not; deduplicated like an evaluation (key: trace, span, ``agent_signals``, the
        target's fingerprint), so a redelivered trace counts nothing again. Returns whether this
        call counted them.

        Records go out only with ``emit.result_events = "logs"`` (there is no evaluation span
        to carry span events for an unsampled run); the series always.
        """
        await self.start()
        h = key_hash(target.dedupe_key(AGENT_SIGNALS_KEY))
        if h in self._signals_busy or self._seen(h):
            return False
        self._signals_busy.add(h)
        try:
            if not await asyncio.shield(self._keep(target, [h], origin)):
                return False
            events = self.spans.events
            try:
                if events is not None:
                    at = int(self.clock() * 1e9)
                    events.write_attributes(target, signal_records(signals), at)
            except Exception:  # best effort like the result records of an evaluation
                log.exception("agent signal records of %s could not be written", target.case_id)
            self.metrics.agents.record(signals)
            return True
        finally:
            self._signals_busy.discard(h)

    def _judge_model(self, node: str, view: EvaluationView) -> str | None:
        if view.judge == "local":
            return "local"
        if self._judge is None:
            return None
        model: str = self._judge.for_node(node).model
        return model

    def _judge_label(self, view: EvaluationView) -> str | None:
        """The ``judge_model`` attribute of the evaluation span (all judge models used)."""
        judge_models = {self._judge_model(n, view) for n in view.node_costs} - {None}
        if view.judge == "local" and view.judge_model:
            # the span names the variant (embedder, lexicon, calibration); metric labels stay
            # "local" to keep their cardinality at one
            return view.judge_model
        if judge_models:
            return ", ".join(sorted(x for x in judge_models if x))
        return self._judge_model("", view) if view.judge else None

    def _record(
        self,
        target: EvaluationTarget,
        view: EvaluationView,
        new_eval: bool,
        new_metrics: list[MetricView],
        now: float,
        grounded: tuple[str | None] | None = None,
    ) -> None:
        m = self.metrics
        labels = m.labels_for(target.service, target.span_name, target.model)
        try:  # the results as gen_ai.evaluation.result log events: once, after the keys are kept
            self.spans.write_results(target, new_metrics, at_ns=int(now * 1e9))
        except Exception:  # best effort like the metrics' exposition; never blocks counting
            log.exception("evaluation result events of %s could not be written", target.case_id)
        for mv in new_metrics:
            if mv.score is not None:
                m.record_score(mv.name, labels, mv.score, target.trace_id, target.span_id)
                if grounded is not None and mv.node == "grounding":
                    m.agents.record_grounding(grounded[0], mv.score)
            if mv.accepted or mv.rejected:  # a claim-based metric: both verdicts, even at 0
                m.record_claims(mv.name, labels, "ACCEPTED", mv.accepted)
                m.record_claims(mv.name, labels, "REJECTED", mv.rejected)
        if not new_eval:
            return
        latency = max(0.0, now - target.end_time_s) if target.end_time_unix_nano > 0 else None
        m.record_evaluation(view.status, labels, latency, now, target.trace_id, target.span_id)
        for node, cost in view.node_costs.items():
            m.record_judge_usage(
                node,
                self._judge_model(node, view),
                cost.input_tokens,
                cost.output_tokens,
                cost.cost,
            )
        for node in view.cached_judge_nodes:
            m.judge_call(node, self._judge_model(node, view), "cached")
        for node, sk in view.skipped.items():
            m.skip(sk.code, node=node)

    async def aclose(self) -> None:
        """Flush and stop span export (off the loop)."""
        await self.spans.aclose()
