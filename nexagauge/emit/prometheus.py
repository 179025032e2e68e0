"""Prometheus metrics of the evaluator: every series of :mod:`nexagauge.emit.metric_names`.

One :class:`EvaluatorMetrics` per process (tests pass a fresh ``CollectorRegistry`` each). Two kinds
of callers:

* the online consumer (``nexagauge/online/``) calls the pipeline helpers directly
  (:meth:`~EvaluatorMetrics.spans_consumed`, :meth:`~EvaluatorMetrics.set_consumer_lag`, ...);
* the :class:`~nexagauge.emit.emitter.Emitter` records scores, claims, evaluations, latency and
  judge usage per evaluated span (idempotently); nobody else should call those ``record_*`` helpers.

Cardinality is bounded by construction: ``service``, ``span_name`` and ``model`` go through a
:class:`LabelLimiter` (a per-label value allow-list, then a cap of ``max_label_values`` distinct
values per label; anything beyond becomes ``"other"``); enum labels (``status``, ``trigger``,
``direction``, ``outcome``, ``window``) accept only their documented values (anything else becomes
``"other"``); free-form reasons are capped too. Trace and session ids are never labels: the score
and latency histograms carry them as **exemplars**, which only the OpenMetrics exposition shows
(:func:`exposition` picks the format from the scraper's ``Accept`` header).

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> m = EvaluatorMetrics(CollectorRegistry(), max_label_values=2)
    >>> m.labels_for("svc-a", "chat", "gpt-4o")
    {'service': 'svc-a', 'span_name': 'chat', 'model': 'gpt-4o'}
    >>> m.spans_consumed("otlp_spans", 10)
    >>> m.registry.get_sample_value("nexagauge_spans_consumed_total", {"topic": "otlp_spans"})
    10.0
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from nexagauge.emit import metric_names as N
from nexagauge.emit.agent_metrics import AgentMetrics
from nexagauge.emit.health import HealthMetrics
from nexagauge.emit.labels import (
    DIMENSIONS,
    DIRECTIONS,
    DISABLED,
    DLQ_REASONS,
    EVAL_STATUSES,
    EVICTION_REASONS,
    JUDGE_OUTCOMES,
    KNOWN_REASONS,
    LATE_LOG_REASONS,
    MAX_LABEL_CHARS,
    OTHER,
    SPAN_EXPORT_OUTCOMES,
    TRIGGERS,
    UNKNOWN,
    VERDICTS,
    WINDOWS,
    LabelLimiter,
)
from nexagauge.emit.series import Series
from nexagauge.graph.skips import EVALUATION_SKIPS, skip_code

log = logging.getLogger(__name__)

__all__ = [  # the label values and limiter live in nexagauge.emit.labels; re-exported here
    "DIMENSIONS",
    "DISABLED",
    "MAX_LABEL_CHARS",
    "OTHER",
    "UNKNOWN",
    "EvaluatorMetrics",
    "LabelLimiter",
    "exposition",
]

#: Evaluation latency (span end -> score emitted): seconds to tens of minutes (judge queues).
LATENCY_BUCKETS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
#: One judge call: tens of milliseconds (cached/local) to a minute (slow remote models).
JUDGE_LATENCY_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)


def _enum(value: str, allowed: frozenset[str]) -> str:
    return value if value in allowed else OTHER


class EvaluatorMetrics:
    """Creates and updates every evaluator metric in one registry.

    Args:
        registry: where the metrics live; ``None`` creates a private ``CollectorRegistry`` (never
            the global default one, so two instances never collide). Pass
            ``prometheus_client.REGISTRY`` to also expose process metrics with the default one.
        label_allowlist: which of ``service``/``span_name``/``model`` are populated (others are
            ``""``); ``None`` = all three.
        max_label_values: cap of distinct values per bounded label (beyond: ``"other"``).
        label_values: optional per-label value allow-lists (e.g. ``{"model": ["gpt-4o"]}``).
        exemplars: attach trace-id exemplars to the score and latency histograms.

    Example:
        >>> m = EvaluatorMetrics()
        >>> m.trace_assembled("root_end")
        >>> m.registry.get_sample_value("nexagauge_traces_assembled_total", {"trigger": "root_end"})
        1.0
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        label_allowlist: Iterable[str] | None = None,
        max_label_values: int = 200,
        label_values: Mapping[str, Iterable[str]] | None = None,
        max_reason_values: int = 64,
        exemplars: bool = True,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.limiter = LabelLimiter(label_allowlist, max_label_values, label_values)
        # Judge and reason labels: bounded separately so a burst of odd reasons cannot starve
        # the service/span_name/model budget.
        self._reasons = LabelLimiter(None, max_reason_values)
        # Metric names come from the graph, but GEval metric names come from records: capped too.
        self._metric_names = LabelLimiter(None, max_label_values)
        self.exemplars = exemplars
        r = self.registry
        #: dependency health: judge circuit breaker, broker contact (nexagauge.emit.health)
        self.health = HealthMetrics(r)
        #: agent signals (nexagauge.emit.agent_metrics), counted by Emitter.emit_signals
        self.agents = AgentMetrics(r)

        s = Series(r)
        dm = tuple(DIMENSIONS)
        # scores
        self.score = s.histogram(
            N.SCORE,
            "Metric score in [0, 1] of evaluated spans.",
            ("metric", *dm),
            buckets=N.SCORE_BUCKETS,
        )
        self.claims = s.counter(N.CLAIMS, "Judged claims by verdict.", ("metric", "verdict", *dm))
        # pipeline
        self.spans = s.counter(N.SPANS_CONSUMED, "Spans decoded from Kafka.", ("topic",))
        self.messages = s.counter(N.MESSAGES_CONSUMED, "Kafka messages consumed.", ("topic",))
        self.assembled = s.counter(
            N.TRACES_ASSEMBLED, "Traces completed in the buffer, by trigger.", ("trigger",)
        )
        self.sampled = s.counter(
            N.TRACES_SAMPLED, "Traces selected for evaluation, by rule.", ("rule",)
        )
        self.not_sampled = s.counter(N.TRACES_NOT_SAMPLED, "Traces not sampled.")
        self.evaluations = s.counter(N.EVALUATIONS, "Evaluated spans by status.", ("status", *dm))
        self.skipped = s.counter(
            N.SKIPPED,
            "Evaluations (node empty) or metric nodes skipped, by reason code.",
            ("reason", "node"),
        )
        self.latency = s.histogram(
            N.EVALUATION_LATENCY,
            "Seconds from the evaluated span's end to its scores being emitted.",
            (),
            buckets=LATENCY_BUCKETS,
        )
        self.late = s.counter(N.LATE_SPANS, "Spans of already evaluated traces.")
        self.late_logs = s.counter(
            N.LATE_LOG_RECORDS, "GenAI log records of traces already handed on.", ("reason",)
        )
        self.evicted = s.counter(
            N.EVICTED, "Traces evicted from the buffer before completion.", ("reason",)
        )
        self.buffer_traces = s.gauge(N.BUFFER_TRACES, "Traces in the assembly buffer.")
        self.buffer_spans = s.gauge(N.BUFFER_SPANS, "Spans in the assembly buffer.")
        self.lag = s.gauge(
            N.CONSUMER_LAG, "Consumer lag (messages) per partition.", ("topic", "partition")
        )
        self.dlq = s.counter(N.DLQ, "Messages sent to the dead-letter topic.", ("reason",))
        self.in_flight = s.gauge(N.IN_FLIGHT, "Evaluations running now.")
        self.concurrency_limit = s.gauge(
            N.CONCURRENCY_LIMIT,
            "Evaluations allowed to run at once now (adaptive between online.min_in_flight and "
            "online.max_in_flight).",
        )
        self.paused = s.gauge(N.PAUSED_PARTITIONS, "Partitions paused for backpressure.")
        self.last_evaluation = s.gauge(
            N.LAST_EVALUATION, "Unix time of the last emitted evaluation."
        )
        self.duplicates = s.counter(
            N.DUPLICATE_EVALUATIONS, "Redelivered evaluations whose scores were not counted again."
        )
        self.span_exports = s.counter(
            N.EVALUATION_SPANS,
            "Evaluation spans handed to the OTLP exporter, by export outcome.",
            ("outcome",),
        )
        self.event_exports = s.counter(
            N.EVALUATION_EVENTS,
            "gen_ai.evaluation.result log records handed to the OTLP exporter, by outcome.",
            ("outcome",),
        )
        # judge
        judge = ("node", "model")
        self.judge_calls = s.counter(N.JUDGE_CALLS, "Judge calls by outcome.", (*judge, "outcome"))
        self.judge_tokens = s.counter(N.JUDGE_TOKENS, "Judge tokens.", (*judge, "direction"))
        self.judge_cost = s.counter(N.JUDGE_COST, "Judge spend in USD.", judge)
        self.judge_latency = s.histogram(
            N.JUDGE_LATENCY, "Seconds per judge call.", judge, buckets=JUDGE_LATENCY_BUCKETS
        )
        window = ("window",)
        self.budget_remaining = s.gauge(
            N.BUDGET_REMAINING, "Judge budget left in the window (USD).", window
        )
        self.budget_exhausted = s.gauge(
            N.BUDGET_EXHAUSTED, "1 while the judge budget of the window is spent.", window
        )
        self._judge_seen: set[tuple[str, str]] = set()
        self._judge_lock = threading.Lock()
        self._start_at_zero()

    def _start_at_zero(self) -> None:
        """Create the label sets known without any configuration at 0 (assembly triggers,
        whole-evaluation skip codes, eviction and dead-letter reasons, export outcomes), so their
        panels show 0 rather than "No data"; :mod:`nexagauge.emit.zero` adds the configured ones.
        """
        for trigger in sorted(TRIGGERS):
            self.assembled.labels(trigger=trigger)
        for code in EVALUATION_SKIPS:
            self.skipped.labels(reason=code.value, node="")
        for reason in EVICTION_REASONS:
            self.evicted.labels(reason=reason)
        for reason in DLQ_REASONS:
            self.dlq.labels(reason=reason)
        for reason in LATE_LOG_REASONS:
            self.late_logs.labels(reason=reason)
        for outcome in sorted(SPAN_EXPORT_OUTCOMES):
            self.span_exports.labels(outcome=outcome)
            self.event_exports.labels(outcome=outcome)

    @classmethod
    def from_settings(
        cls, emit: object, registry: CollectorRegistry | None = None
    ) -> EvaluatorMetrics:
        """Build from an ``EmitSettings`` (label allow-list, cap, value allow-lists, exemplars).

        Example:
            >>> from nexagauge.settings import EmitSettings
            >>> EvaluatorMetrics.from_settings(EmitSettings(max_label_values=5)).limiter.max_values
            5
        """
        return cls(
            registry,
            label_allowlist=getattr(emit, "label_allowlist", None),
            max_label_values=getattr(emit, "max_label_values", 200),
            label_values=getattr(emit, "label_values", None),
            exemplars=getattr(emit, "exemplars", True),
        )

    # -- bounded labels ---------------------------------------------------------------------
    def labels_for(
        self, service: str | None, span_name: str | None, model: str | None
    ) -> dict[str, str]:
        """The bounded ``service``/``span_name``/``model`` label values for one evaluated span."""
        return {
            "service": self.limiter("service", service),
            "span_name": self.limiter("span_name", span_name),
            "model": self.limiter("model", model),
        }

    def _reason(self, reason: str) -> str:
        # known reasons (skip codes, DLQ and eviction reasons) are bounded already: never capped
        return reason if reason in KNOWN_REASONS else self._reasons("reason", reason)

    def node_label(self, node: str) -> str:
        """The bounded ``node`` label value of a graph node."""
        return self._reasons("node", node)

    def _model(self, model: str | None) -> str:
        # Judge models come from configuration (few), but are still capped: their own budget, and
        # never switched off by the application-model allow-list.
        return self._reasons("judge_model", model)

    # -- consumer / pipeline helpers (called by nexagauge/online) -----------------------------
    def spans_consumed(self, topic: str, n: int = 1) -> None:
        """Count ``n`` spans decoded from ``topic``."""
        self.spans.labels(topic=topic).inc(n)

    def messages_consumed(self, topic: str, n: int = 1) -> None:
        """Count ``n`` Kafka messages consumed from ``topic``."""
        self.messages.labels(topic=topic).inc(n)

    def trace_assembled(self, trigger: str, n: int = 1) -> None:
        """Count a trace completed by ``trigger`` (``root_end|turn_end|inactivity|evicted``)."""
        self.assembled.labels(trigger=_enum(trigger, TRIGGERS)).inc(n)

    def trace_sampled(self, rule: str, n: int = 1) -> None:
        """Count a trace selected by the sampling rule named ``rule``."""
        self.sampled.labels(rule=self._reasons("rule", rule)).inc(n)

    def trace_not_sampled(self, n: int = 1) -> None:
        """Count a trace the sampler did not select."""
        self.not_sampled.inc(n)

    def skip(self, reason: str, n: int = 1, *, node: str = "") -> None:
        """Count work skipped for ``reason``: a :class:`~nexagauge.graph.skips.SkipReason` code
        (``rate_limit``, ``budget_hour``, ``no_case``...) or a human text, which is mapped to its
        code (the label never holds free text). ``node``: the metric node a case did not get;
        empty for a whole evaluation."""
        node = self.node_label(node) if node else ""
        self.skipped.labels(reason=skip_code(reason).value, node=node).inc(n)

    def late_spans(self, n: int = 1) -> None:
        """Count spans that arrived after their trace was evaluated (not re-scored)."""
        self.late.inc(n)

    def late_log_records(self, reason: str, n: int = 1) -> None:
        """Count log records of a trace already handed on (``content_missing``/``trace_done``)."""
        self.late_logs.labels(reason=_enum(reason, frozenset(LATE_LOG_REASONS))).inc(n)

    def trace_evicted(self, reason: str, n: int = 1) -> None:
        """Count traces evicted from the buffer (``max_traces`` or ``max_spans``)."""
        self.evicted.labels(reason=self._reason(reason)).inc(n)

    def set_buffer(self, traces: int, spans: int) -> None:
        """Set the current assembly-buffer size."""
        self.buffer_traces.set(traces)
        self.buffer_spans.set(spans)

    def set_consumer_lag(self, topic: str, partition: int, lag: int) -> None:
        """Set the lag of one assigned partition (high watermark - position)."""
        self.lag.labels(topic=topic, partition=str(partition)).set(lag)

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop the lag series of a revoked partition (so it does not stay frozen)."""
        with contextlib.suppress(KeyError):
            self.lag.remove(topic, str(partition))

    def dead_lettered(self, reason: str, n: int = 1) -> None:
        """Count messages sent to the dead-letter topic for ``reason``."""
        self.dlq.labels(reason=self._reason(reason)).inc(n)

    def set_in_flight(self, n: int) -> None:
        """Set how many evaluations run now."""
        self.in_flight.set(n)

    def set_concurrency_limit(self, n: int) -> None:
        """Set how many evaluations may run at once now (the adaptive limit)."""
        self.concurrency_limit.set(n)

    def set_paused_partitions(self, n: int) -> None:
        """Set how many partitions are paused for backpressure."""
        self.paused.set(n)

    def judge_call(
        self, node: str, model: str | None, outcome: str, latency_s: float | None = None
    ) -> None:
        """Count one judge call (``outcome``: ok|error|cached) and observe its latency.

        A ``cached`` call (an answer served from the judge's or the node cache) made no request:
        it is counted but its latency is not observed (it would drag the histogram towards 0).
        Tokens and USD are recorded by the :class:`~nexagauge.emit.emitter.Emitter` from each
        case's ``CostEstimate`` (once per evaluation, deduplicated); do not also report them here.
        """
        m, node = self._model(model), self.node_label(node)
        self._touch_judge_labels(node, m)
        outcome = _enum(outcome, JUDGE_OUTCOMES)
        self.judge_calls.labels(node=node, model=m, outcome=outcome).inc()
        if outcome != "cached" and latency_s is not None and latency_s >= 0:
            self.judge_latency.labels(node=node, model=m).observe(latency_s)

    def touch_judge(self, node: str, model: str | None) -> None:
        """Create every judge series of ``node`` and ``model`` at zero (calls by outcome, tokens
        by direction, spend, latency), so judge panels show 0 before the first call."""
        self._touch_judge_labels(self.node_label(node), self._model(model))

    def _touch_judge_labels(self, node: str, model: str) -> None:
        key = (node, model)
        if key in self._judge_seen:
            return
        with self._judge_lock:
            if key in self._judge_seen:
                return
            for outcome in sorted(JUDGE_OUTCOMES):
                self.judge_calls.labels(node=node, model=model, outcome=outcome)
            for direction in sorted(DIRECTIONS):
                self.judge_tokens.labels(node=node, model=model, direction=direction)
            self.judge_cost.labels(node=node, model=model)
            self.judge_latency.labels(node=node, model=model)
            self._judge_seen.add(key)

    def set_budget(self, window: str, remaining_usd: float, exhausted: bool) -> None:
        """Set the judge budget state of ``window`` (``hour`` or ``day``)."""
        w = _enum(window, WINDOWS)
        self.budget_remaining.labels(window=w).set(max(0.0, remaining_usd))
        self.budget_exhausted.labels(window=w).set(1 if exhausted else 0)

    def evaluation_spans_exported(self, outcome: str, n: int = 1) -> None:
        """Count ``n`` evaluation spans whose OTLP export ended with ``outcome`` (exported|failed).

        Called from the span processor's export thread (the writer's ``on_export`` hook).
        """
        self.span_exports.labels(outcome=_enum(outcome, SPAN_EXPORT_OUTCOMES)).inc(n)

    def evaluation_events_exported(self, outcome: str, n: int = 1) -> None:
        """Count ``n`` result log records whose OTLP export ended with ``outcome``."""
        self.event_exports.labels(outcome=_enum(outcome, SPAN_EXPORT_OUTCOMES)).inc(n)

    # -- per-evaluation records (called by the Emitter only) ----------------------------------
    def record_score(
        self,
        metric: str,
        labels: Mapping[str, str],
        score: float,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> None:
        """Observe one score (clamped to [0, 1]) with an optional trace-id exemplar."""
        s = min(1.0, max(0.0, float(score)))
        metric = self._metric_names("metric", metric)
        self.score.labels(metric=metric, **labels).observe(s, self._exemplar(trace_id, span_id))

    def record_claims(self, metric: str, labels: Mapping[str, str], verdict: str, n: int) -> None:
        """Count ``n`` claims of ``metric`` with ``verdict`` (ACCEPTED|REJECTED); ``n = 0``
        creates the series at zero (the emitter records both verdicts of a judged metric, so a
        rejected-claims share is 0, not "No data", while every claim is accepted)."""
        if n >= 0:
            metric = self._metric_names("metric", metric)
            self.claims.labels(metric=metric, verdict=_enum(verdict, VERDICTS), **labels).inc(n)

    def record_evaluation(
        self,
        status: str,
        labels: Mapping[str, str],
        latency_s: float | None,
        when_s: float,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> None:
        """Count one evaluated span, observe its latency and bump the last-evaluation time.

        The other status of the same service/route/model is created at zero (a failure rate of
        0 is data)."""
        status = _enum(status, EVAL_STATUSES)
        for other in EVAL_STATUSES:
            if other != status:
                self.evaluations.labels(status=other, **labels)
        self.evaluations.labels(status=status, **labels).inc()
        if latency_s is not None and latency_s >= 0:
            self.latency.observe(latency_s, self._exemplar(trace_id, span_id))
        self.last_evaluation.set(when_s)

    def record_judge_usage(
        self,
        node: str,
        model: str | None,
        input_tokens: float,
        output_tokens: float,
        cost_usd: float,
    ) -> None:
        """Add one node's judge tokens and USD (from its ``CostEstimate``)."""
        m, node = self._model(model), self.node_label(node)
        self._touch_judge_labels(node, m)
        if input_tokens > 0:
            self.judge_tokens.labels(node=node, model=m, direction="input").inc(input_tokens)
        if output_tokens > 0:
            self.judge_tokens.labels(node=node, model=m, direction="output").inc(output_tokens)
        if cost_usd > 0:
            self.judge_cost.labels(node=node, model=m).inc(cost_usd)

    def _exemplar(self, trace_id: str | None, span_id: str | None) -> dict[str, str] | None:
        if not self.exemplars or not trace_id:
            return None
        ex = {"trace_id": trace_id}
        if span_id:
            ex["span_id"] = span_id
        return ex

    # -- exposition ---------------------------------------------------------------------------
    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """Render the registry for a scraper; see :func:`exposition`."""
        return exposition(self.registry, accept)


def exposition(registry: CollectorRegistry, accept: str | None = None) -> tuple[bytes, str]:
    """Render ``registry`` as (body, content type) for the scraper's ``Accept`` header.

    ``application/openmetrics-text`` (what Prometheus sends when it wants exemplars) gets the
    OpenMetrics format with exemplars; anything else gets the classic text format (which has no
    exemplars).

    Example:
        >>> body, ctype = exposition(CollectorRegistry(), "application/openmetrics-text; version=1.0.0")
        >>> ctype.split(";")[0], body.endswith(b"# EOF\\n")
        ('application/openmetrics-text', True)
    """
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
