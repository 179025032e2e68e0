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
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from nexagauge.emit.confirm import ConfirmingSpanProcessor, confirm_inline, confirm_next_end
from nexagauge.emit.events import EvaluationEventWriter, bounded, result_attributes
from nexagauge.emit.otlp import otlp_args
from nexagauge.emit.target import TRACE_FLAG_SAMPLED, EvaluationTarget
from nexagauge.emit.view import EvaluationView, MetricView
from nexagauge.sdk import conventions as C

log = logging.getLogger(__name__)

INSTRUMENTATION_SCOPE = "nexagauge.emit"
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
    grpc, endpoint, kwargs = otlp_args(emit, "/v1/traces")
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint, **kwargs)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(endpoint=endpoint, **kwargs)


class SpanExportError(RuntimeError):
    """The exporter did not confirm an evaluation span (the evaluation is not durable)."""


class _CountingExporter(SpanExporter):
    """Wraps the real exporter to report each batch's outcome to the writer's ``on_export`` hook."""

    def __init__(self, inner: SpanExporter, writer: EvaluationSpanWriter) -> None:
        self.inner = inner
        self.writer = writer

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            log.exception("evaluation span export raised")
            result = SpanExportResult.FAILURE
        confirm_inline(result == SpanExportResult.SUCCESS)  # synchronous processors only
        hook = self.writer.on_export
        if hook is not None:
            try:
                hook("exported" if result == SpanExportResult.SUCCESS else "failed", len(spans))
            except Exception:
                log.exception("on_export hook failed")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class EvaluationSpanWriter:
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

    def __init__(
        self,
        exporter: SpanExporter | None,
        *,
        service_name: str = "nexagauge-evaluator",
        batch: bool = True,
        max_explanation_chars: int = 1000,
        include_explanation: bool = True,
        resource_attributes: Mapping[str, str] | None = None,
        events: EvaluationEventWriter | None = None,
        span_events: bool = False,
    ) -> None:
        self.exporter = exporter
        self.events = events
        self.span_events = span_events
        #: called with ("exported" | "failed", number of spans) after each export attempt, from
        #: the export thread; the Emitter points it at ``EvaluatorMetrics.evaluation_spans_exported``
        self.on_export: Callable[[str, int], None] | None = None
        self.max_explanation_chars = max_explanation_chars
        self.include_explanation = include_explanation
        resource = Resource.create({**(resource_attributes or {}), SERVICE_NAME: service_name})
        self.provider = TracerProvider(
            resource=resource, sampler=ALWAYS_ON, id_generator=_EvaluationIdGenerator()
        )
        self.processor: SpanProcessor | None = None
        if exporter is not None:
            counted = _CountingExporter(exporter, self)
            self.processor = (
                ConfirmingSpanProcessor(counted) if batch else SimpleSpanProcessor(counted)
            )
            self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer(INSTRUMENTATION_SCOPE)
        self._closed = False

    @property
    def memory(self) -> InMemorySpanExporter:
        """The in-memory exporter (only for writers made by :meth:`in_memory`)."""
        if not isinstance(self.exporter, InMemorySpanExporter):
            raise TypeError("this writer does not export to memory")
        return self.exporter

    @classmethod
    def in_memory(cls, **kwargs: Any) -> EvaluationSpanWriter:
        """A writer that keeps finished spans in memory (``writer.memory.get_finished_spans()``)
        and, unless ``span_events=True`` or ``events`` is given, the result events too
        (``writer.events.memory.get_finished_logs()``)."""
        kwargs.setdefault("batch", False)
        if not kwargs.get("span_events") and "events" not in kwargs:
            kwargs["events"] = EvaluationEventWriter.in_memory(
                **{
                    k: kwargs[k]
                    for k in ("service_name", "max_explanation_chars", "include_explanation")
                    if k in kwargs
                }
            )
        return cls(InMemorySpanExporter(), **kwargs)

    @classmethod
    def from_settings(cls, emit: Any) -> EvaluationSpanWriter:
        """Build from ``EmitSettings``: ``span_exporter`` = ``otlp`` | ``memory`` | ``none``;
        ``result_events`` = ``logs`` (an event writer exporting the same way) | ``span_events``
        | ``none``."""
        kind = getattr(emit, "span_exporter", "otlp")
        results = getattr(emit, "result_events", "logs")
        common: dict[str, Any] = {
            "service_name": getattr(emit, "service_name", "nexagauge-evaluator"),
            "max_explanation_chars": getattr(emit, "max_explanation_chars", 1000),
            "include_explanation": getattr(emit, "include_explanation", True),
            "events": EvaluationEventWriter.from_settings(emit),
            "span_events": results == "span_events",
        }
        if kind == "none":
            return cls(None, **common)
        if kind == "memory":
            return cls.in_memory(**common)
        return cls(build_exporter(emit), **common)

    # -- writing --------------------------------------------------------------------------------
    def write(
        self,
        target: EvaluationTarget,
        view: EvaluationView,
        *,
        start_ns: int | None = None,
        end_ns: int | None = None,
        judge_model: str | None = None,
    ) -> str:
        """Start and end the evaluation span of ``target``; returns its span id (16 hex).

        Non-blocking with the batch processor (the span is queued for the export thread).
        """
        if self._closed:
            raise RuntimeError("EvaluationSpanWriter is shut down")
        end = end_ns if end_ns is not None else time.time_ns()
        start = start_ns if start_ns is not None else end - int(view.elapsed_s * 1e9)
        start = min(start, end)
        sid = evaluation_span_id(target.trace_id, target.span_id, target.config_fingerprint)
        parent = SpanContext(
            trace_id=target.trace_id_int,
            span_id=target.span_id_int,
            is_remote=True,
            trace_flags=TraceFlags(target.trace_flags | TRACE_FLAG_SAMPLED),
        )
        ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        token = _forced_span_id.set(sid)
        try:
            span = self.tracer.start_span(
                C.NG_EVALUATION_SPAN_NAME,
                context=ctx,
                kind=SpanKind.INTERNAL,
                attributes=self._attributes(target, view, judge_model),
                start_time=start,
            )
        finally:
            _forced_span_id.reset(token)
        for m in view.metrics if self.span_events else ():
            attrs = result_attributes(
                m,
                include_explanation=self.include_explanation,
                max_chars=self.max_explanation_chars,
            )
            span.add_event(C.GEN_AI_EVALUATION_RESULT_EVENT, attrs, timestamp=end)
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
        self,
        target: EvaluationTarget,
        view: EvaluationView,
        *,
        start_ns: int | None = None,
        end_ns: int | None = None,
        judge_model: str | None = None,
    ) -> str:
        """:meth:`write`, then wait (off the loop) until the span's export is confirmed.

        Raises :class:`SpanExportError` when the exporter reports a failure (after its own
        retries). Without an exporter (``span_exporter = "none"``) returns after ``write``.
        """
        with confirm_next_end() as done:
            sid = self.write(
                target, view, start_ns=start_ns, end_ns=end_ns, judge_model=judge_model
            )
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

    # -- lifecycle ------------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every queued span and result event now (blocking; call from a thread in async
        code)."""
        ok = self.provider.force_flush(timeout_millis)
        if self.events is not None:
            ok = self.events.force_flush(timeout_millis) and ok
        return ok

    def shutdown(self) -> None:
        """Flush and stop the export thread (blocking). Idempotent."""
        if not self._closed:
            self._closed = True
            self.provider.shutdown()
            if self.events is not None:
                self.events.shutdown()

    async def aflush(self, timeout_millis: int = 30_000) -> bool:
        """:meth:`force_flush` off the event loop."""
        return await asyncio.to_thread(self.force_flush, timeout_millis)

    async def aclose(self) -> None:
        """:meth:`shutdown` off the event loop."""
        await asyncio.to_thread(self.shutdown)
