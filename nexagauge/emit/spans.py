"""Evaluation spans: scores written back into the evaluated trace, exported over OTLP.

For every evaluated span the writer starts one span named ``nexagauge.evaluation`` **in the same
trace, as a child of the evaluated span** (its parent context is rebuilt from the target's trace and
span ids). The span carries:

* ``nexagauge.evaluation.*`` attributes: one ``score.<metric>`` per scored metric, one
  ``error.<metric>`` per failed metric, one ``skipped.<node>`` (bounded code) and
  ``skip_reason.<node>`` (text) per planned metric node the case did not get, the evaluated ids,
  case id, config fingerprint, judge model, cost, tokens and status;
* span status ERROR when any metric failed.

Alongside the span, each metric's ``gen_ai.evaluation.result`` goes out once: by default as a
log-based event in the evaluated span's context (:mod:`nexagauge.emit.events`, the writer's
``events``); with ``span_events=True`` (``emit.result_events = "span_events"``) as a span event of
the evaluation span instead, with the same attributes (never both: a backend counting results
would count each twice).

The span id is **deterministic**: a hash of (trace id, span id, config fingerprint). A redelivered
evaluation that is exported again therefore produces the same span id, which trace backends treat
as the same span rather than a second evaluation.

Export runs on a dedicated ``TracerProvider`` (never the global one, so the evaluator's own
instrumentation and the evaluation spans do not mix) with a
:class:`~nexagauge.emit.confirm.ConfirmingSpanProcessor`: ``write`` only enqueues; the OTLP export
happens on the processor's background thread, and :meth:`EvaluationSpanWriter.export` awaits the
outcome of that span's export (the emitter counts an evaluation only once its span is durable). The exporter is configured
from :class:`~nexagauge.settings.EmitSettings` and the standard ``OTEL_EXPORTER_OTLP_*`` variables
(endpoint, headers, certificates, timeout) and ``OTEL_BSP_*`` (batching).

Example:
    >>> w = EvaluationSpanWriter.in_memory()
    >>> from nexagauge.emit.target import EvaluationTarget
    >>> from nexagauge.emit.view import EvaluationView, MetricView
    >>> t = EvaluationTarget("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "svc", "chat", 0)
    >>> sid = w.write(t, EvaluationView(metrics=[MetricView("answer_relevancy", "relevance", 0.8, passed=True)]))
    >>> [s.name for s in w.memory.get_finished_spans()]
    ['nexagauge.evaluation']
    >>> w.shutdown()
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind, Status, StatusCode

from nexagauge.emit.attributes import bounded
from nexagauge.emit.confirm import ConfirmingSpanProcessor, confirm_inline, confirm_next_end
from nexagauge.emit.events import EvaluationEventWriter
from nexagauge.emit.otlp import (
    INSTRUMENTATION_SCOPE,
    CountingExporter,
    ExportingWriter,
    WriterSettings,
    counted_export,
    evaluated_context,
    otlp_exporter,
)
from nexagauge.emit.target import EvaluationTarget
from nexagauge.emit.view import EvaluationView, MetricView
from nexagauge.sdk import conventions as C

__all__ = ["EvaluationSpanWriter", "bounded", "build_exporter", "evaluation_span_id"]

_forced_span_id: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "nexagauge_eval_span_id", default=None
)


class _EvaluationIdGenerator(RandomIdGenerator):
    """Random ids, except the span id of the evaluation span being started (set by the writer)."""

    def generate_span_id(self) -> int:
        forced = _forced_span_id.get()
        return forced if forced else super().generate_span_id()


def evaluation_span_id(trace_id: str, span_id: str, config_fingerprint: str) -> int:
    """Deterministic 64-bit span id of the evaluation of (trace, span) under a configuration.

    Example:
        >>> a = evaluation_span_id("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "f1")
        >>> a == evaluation_span_id("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "f1")
        True
        >>> a != evaluation_span_id("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "f2")
        True
    """
    h = hashlib.blake2b(digest_size=8, person=b"ng-eval-span")
    h.update(f"{trace_id}\x00{span_id}\x00{config_fingerprint}".encode())
    v = int.from_bytes(h.digest(), "big")
    return v or 1  # 0 is the invalid span id


def build_exporter(emit: Any) -> SpanExporter:
    """The OTLP span exporter described by ``EmitSettings`` (gRPC or HTTP/protobuf).

    ``otlp_endpoint=None`` leaves the endpoint to the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    / ``OTEL_EXPORTER_OTLP_ENDPOINT`` variables (then the OTLP default, localhost:4317 / :4318).
    """
    exporter: SpanExporter = otlp_exporter(emit, "/v1/traces")
    return exporter


class WriteOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`EvaluationSpanWriter.write` (and ``export``)."""

    start_ns: int | None
    end_ns: int | None
    judge_model: str | None
    #: more attributes of the evaluation span (the agent signals: ``nexagauge.evaluation.agent.*``)
    extra_attributes: Mapping[str, Any] | None


class SpanExportError(RuntimeError):
    """The exporter did not confirm an evaluation span (the evaluation is not durable)."""


class _CountingExporter(CountingExporter, SpanExporter):
    """Wraps the real exporter to report each batch's outcome to the writer's ``on_export`` hook
    (and, for synchronous processors, to the span's confirmation)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return counted_export(
            lambda: self.inner.export(spans),
            SpanExportResult.SUCCESS,
            SpanExportResult.FAILURE,
            len(spans),
            self.writer.on_export,
            "evaluation span",
            then=confirm_inline,
        )


class EvaluationSpanWriter(ExportingWriter[InMemorySpanExporter]):
    """Writes one evaluation span per evaluated span (see module docstring).

    Args:
        exporter: where spans go; ``None`` disables export (``write`` still returns the id).
        service_name: ``service.name`` of the evaluator's resource (merged with
            ``OTEL_RESOURCE_ATTRIBUTES``).
        batch: ``True`` (production): a :class:`ConfirmingSpanProcessor` exports on a background
            thread and confirms each span; ``False``: export synchronously in ``write`` (only for
            in-memory exporters in tests).
        max_explanation_chars: bound of ``gen_ai.evaluation.explanation`` and error attributes.
        events: the writer of the log-based ``gen_ai.evaluation.result`` events (``None``: none).
        span_events: add the results as span events of the evaluation span instead.
    """

    MEMORY = InMemorySpanExporter

    def __init__(
        self,
        exporter: SpanExporter | None,
        *,
        batch: bool = True,
        events: EvaluationEventWriter | None = None,
        span_events: bool = False,
        **settings: Unpack[WriterSettings],
    ) -> None:
        super().__init__(exporter, **settings)
        self.events = events
        self.followers = (events,) if events is not None else ()
        self.span_events = span_events
        self.provider = TracerProvider(
            resource=self.resource, sampler=ALWAYS_ON, id_generator=_EvaluationIdGenerator()
        )
        self.processor: SpanProcessor | None = None
        if exporter is not None:
            counted = _CountingExporter(exporter, self)
            self.processor = (
                ConfirmingSpanProcessor(counted) if batch else SimpleSpanProcessor(counted)
            )
            self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer(INSTRUMENTATION_SCOPE)

    @classmethod
    def in_memory(cls, **kwargs: Any) -> EvaluationSpanWriter:
        """A writer that keeps finished spans in memory (``writer.memory.get_finished_spans()``)
        and, unless ``span_events=True`` or ``events`` is given, the result events too
        (``writer.events.memory.get_finished_logs()``)."""
        if not kwargs.get("span_events") and "events" not in kwargs:
            kwargs["events"] = EvaluationEventWriter.in_memory(
                **{
                    k: kwargs[k]
                    for k in ("service_name", "max_explanation_chars", "include_explanation")
                    if k in kwargs
                }
            )
        return super().in_memory(**kwargs)

    @classmethod
    def from_settings(cls, emit: Any) -> EvaluationSpanWriter:
        """Build from ``EmitSettings``: ``span_exporter`` = ``otlp`` | ``memory`` | ``none``;
        ``result_events`` = ``logs`` (an event writer exporting the same way) | ``span_events``
        | ``none``."""
        return cls._per_settings(
            emit,
            build_exporter,
            events=EvaluationEventWriter.from_settings(emit),
            span_events=getattr(emit, "result_events", "logs") == "span_events",
        )

    # -- writing --------------------------------------------------------------------------------
    def write(
        self,
        target: EvaluationTarget,
        view: EvaluationView,
        *,
        start_ns: int | None = None,
        end_ns: int | None = None,
        judge_model: str | None = None,
        extra_attributes: Mapping[str, Any] | None = None,
    ) -> str:
        """Start and end the evaluation span of ``target``; returns its span id (16 hex).

        Non-blocking with the batch processor (the span is queued for the export thread).
        """
        self._check_open()
        end = end_ns if end_ns is not None else time.time_ns()
        start = start_ns if start_ns is not None else end - int(view.elapsed_s * 1e9)
        start = min(start, end)
        sid = evaluation_span_id(target.trace_id, target.span_id, target.config_fingerprint)
        ctx = evaluated_context(target)
        attributes = self._attributes(target, view, judge_model)
        if extra_attributes:
            attributes.update(extra_attributes)
        token = _forced_span_id.set(sid)
        try:
            span = self.tracer.start_span(
                C.NG_EVALUATION_SPAN_NAME,
                context=ctx,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=start,
            )
        finally:
            _forced_span_id.reset(token)
        for m in view.metrics if self.span_events else ():
            span.add_event(
                C.GEN_AI_EVALUATION_RESULT_EVENT, self.result_attributes(m), timestamp=end
            )
        if view.status == "failed":
            if view.case_error is not None:
                span.set_attribute(C.ERROR_TYPE, "RecordError")
                msg = view.case_error
            else:
                failed = [m.name for m in view.metrics if m.failed]
                span.set_attribute(C.ERROR_TYPE, view.error_type or "_OTHER")
                msg = f"metrics without a score: {', '.join(failed)}"
            span.set_status(Status(StatusCode.ERROR, bounded(msg, self.max_explanation_chars)))
        span.end(end_time=end)
        return f"{sid:016x}"

    def write_results(
        self, target: EvaluationTarget, metrics: Sequence[MetricView], *, at_ns: int | None = None
    ) -> int:
        """Emit ``metrics`` as ``gen_ai.evaluation.result`` log events in ``target``'s context
        (nothing in span-events mode or without an event writer); returns how many.

        The emitter calls it once per evaluation, after the evaluation span's export was
        confirmed and its keys were recorded, for the metrics counted then: a retried or
        redelivered evaluation never sends them twice.
        """
        if self.events is None:
            return 0
        return self.events.write(target, metrics, at_ns=at_ns)

    async def export(
        self, target: EvaluationTarget, view: EvaluationView, **options: Unpack[WriteOptions]
    ) -> str:
        """:meth:`write`, then wait (off the loop) until the span's export is confirmed.

        Raises :class:`SpanExportError` when the exporter reports a failure (after its own
        retries). Without an exporter (``span_exporter = "none"``) returns after ``write``.
        """
        with confirm_next_end() as done:
            sid = self.write(target, view, **options)
        if self.processor is not None and not await asyncio.wrap_future(done):
            raise SpanExportError(f"evaluation span {sid} of {target.case_id} not exported")
        return sid

    def _attributes(
        self, target: EvaluationTarget, view: EvaluationView, judge_model: str | None
    ) -> dict[str, Any]:
        a: dict[str, Any] = {
            C.NG_EVALUATION_TRACE_ID: target.trace_id,
            C.NG_EVALUATION_SPAN_ID: target.span_id,
            C.NG_EVALUATION_CASE_ID: target.case_id,
            C.NG_EVALUATION_STATUS: view.status,
            C.NG_EVALUATION_COST_USD: float(view.cost.cost),
            C.NG_EVALUATION_INPUT_TOKENS: round(view.cost.input_tokens),
            C.NG_EVALUATION_OUTPUT_TOKENS: round(view.cost.output_tokens),
        }
        if target.config_fingerprint:
            a[C.NG_EVALUATION_CONFIG_FINGERPRINT] = target.config_fingerprint
        if judge_model:
            a[C.NG_EVALUATION_JUDGE_MODEL] = judge_model
        if target.conversation_id:
            a[C.GEN_AI_CONVERSATION_ID] = target.conversation_id
        for m in view.metrics:
            if m.score is not None:
                a[C.NG_EVALUATION_SCORE_PREFIX + m.name] = float(m.score)
            else:
                err = bounded(m.error or "failed", self.max_explanation_chars)
                a[C.NG_EVALUATION_ERROR_PREFIX + m.name] = err
        for node, sk in view.skipped.items():
            a[C.NG_EVALUATION_SKIPPED_PREFIX + node] = sk.code.value
            a[C.NG_EVALUATION_SKIP_REASON_PREFIX + node] = bounded(
                sk.text, self.max_explanation_chars
            )
        return a
