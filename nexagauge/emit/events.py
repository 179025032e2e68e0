"""``gen_ai.evaluation.result`` as log-based events (OTel Logs API), in the evaluated span's context.

The GenAI semantic conventions define the evaluation result as an **event**, which OpenTelemetry
now records as a log record with an ``event_name`` (span events are being deprecated). For every
metric of an evaluated span, :class:`EvaluationEventWriter` emits one log record:

* ``event_name`` = ``gen_ai.evaluation.result``; severity ``INFO``; no body;
* trace id and span id = **the evaluated span's** (the convention: "parented to the GenAI
  operation span being evaluated"), so a backend shows it on the application's own span;
* attributes (:func:`result_attributes`): ``gen_ai.evaluation.name`` (always),
  ``gen_ai.evaluation.score.value`` (when scored; never a fake 0), ``gen_ai.evaluation.score.label``
  (``pass``/``fail`` or the claim ratio), ``gen_ai.evaluation.explanation`` (bounded; the judge's
  reasoning or the failure message) and ``error.type`` when the metric could not be computed;
* timestamp = when the scores were emitted (the evaluation span's end).

Each result is emitted once: the emitter writes the records of the metrics it counts, after the
evaluation span's export was confirmed and the evaluation's keys were recorded (a retried or
redelivered evaluation sends nothing again), and the evaluation span then carries only its
``nexagauge.evaluation.*`` attributes, no span events: a backend counting
``gen_ai.evaluation.result`` sees each evaluation once (``emit.result_events = "span_events"``
switches to span events instead, for a trace backend without logs; never both).

Export runs on a dedicated ``LoggerProvider`` (never the global one) with a
``BatchLogRecordProcessor``; the OTLP log exporter (gRPC or HTTP/protobuf, ``/v1/logs``) follows
``emit.otlp_*`` and the standard ``OTEL_EXPORTER_OTLP_(LOGS_)*`` variables.

Example:
    >>> from nexagauge.emit.target import EvaluationTarget
    >>> from nexagauge.emit.view import MetricView
    >>> w = EvaluationEventWriter.in_memory()
    >>> t = EvaluationTarget("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "svc", "chat", 0)
    >>> w.write(t, [MetricView("answer_relevancy", "relevance", 0.8, passed=True)])
    1
    >>> rec = w.memory.get_finished_logs()[0].log_record
    >>> rec.event_name, f"{rec.span_id:016x}", rec.attributes["gen_ai.evaluation.score.label"]
    ('gen_ai.evaluation.result', 'b7ad6b7169203331', 'pass')
    >>> w.shutdown()
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.trace import SpanContext, TraceFlags

from nexagauge.emit.otlp import otlp_args
from nexagauge.emit.target import TRACE_FLAG_SAMPLED, EvaluationTarget
from nexagauge.emit.view import MetricView
from nexagauge.sdk import conventions as C

log = logging.getLogger(__name__)

INSTRUMENTATION_SCOPE = "nexagauge.emit"
_ELLIPSIS = "…"


def bounded(text: str | None, limit: int) -> str | None:
    """``text`` cut to at most ``limit`` characters (an ellipsis marks the cut).

    Example:
        >>> bounded("abcdef", 4), bounded("abc", 4), bounded("abc", 0)
        ('abc…', 'abc', None)
    """
    if text is None or limit <= 0:
        return None
    return text if len(text) <= limit else text[: max(0, limit - 1)] + _ELLIPSIS


def result_attributes(
    m: MetricView, *, include_explanation: bool = True, max_chars: int = 1000
) -> dict[str, Any]:
    """The ``gen_ai.evaluation.result`` attributes of one metric (one definition for the log
    event and the span event).

    Example:
        >>> result_attributes(MetricView("grounding", "grounding", None, error="TimeoutError: x"))
        {'gen_ai.evaluation.name': 'grounding', 'gen_ai.evaluation.explanation': 'TimeoutError: x', 'error.type': 'TimeoutError'}
    """
    attrs: dict[str, Any] = {C.GEN_AI_EVALUATION_NAME: m.name}
    if m.score is not None:
        attrs[C.GEN_AI_EVALUATION_SCORE_VALUE] = float(m.score)
    if m.label is not None:
        attrs[C.GEN_AI_EVALUATION_SCORE_LABEL] = m.label
    why = m.explanation if m.score is not None else (m.explanation or m.error)
    if include_explanation or m.score is None:
        text = bounded(why, max_chars)
        if text:
            attrs[C.GEN_AI_EVALUATION_EXPLANATION] = text
    if m.failed:
        attrs[C.ERROR_TYPE] = m.error_type or "_OTHER"
    return attrs


def build_log_exporter(emit: Any) -> LogRecordExporter:
    """The OTLP log exporter described by ``EmitSettings`` (gRPC or HTTP/protobuf).

    ``otlp_endpoint=None`` leaves the endpoint to ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (then the OTLP default); an HTTP base URL gets ``/v1/logs``.
    """
    grpc, endpoint, kwargs = otlp_args(emit, "/v1/logs")
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
            OTLPLogExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint, **kwargs)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpExporter,
    )

    return HttpExporter(endpoint=endpoint, **kwargs)


class _CountingExporter(LogRecordExporter):
    """Wraps the real exporter to report each batch's outcome to the writer's ``on_export``."""

    def __init__(self, inner: LogRecordExporter, writer: EvaluationEventWriter) -> None:
        self.inner = inner
        self.writer = writer

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            result = self.inner.export(batch)
        except Exception:
            log.exception("evaluation event export raised")
            result = LogRecordExportResult.FAILURE
        hook = self.writer.on_export
        if hook is not None:
            try:
                ok = result == LogRecordExportResult.SUCCESS
                hook("exported" if ok else "failed", len(batch))
            except Exception:
                log.exception("on_export hook failed")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class EvaluationEventWriter:
    """Emits one ``gen_ai.evaluation.result`` log record per metric (see module docstring).

    Args:
        exporter: where records go; ``None`` disables them (``write`` returns 0).
        service_name: ``service.name`` of the evaluator's resource (merged with
            ``OTEL_RESOURCE_ATTRIBUTES``).
        batch: ``True`` (production): a ``BatchLogRecordProcessor`` exports on a background
            thread; ``False``: synchronously in ``write`` (in-memory exporters in tests).
        max_explanation_chars / include_explanation: as for the evaluation span.
    """

    def __init__(
        self,
        exporter: LogRecordExporter | None,
        *,
        service_name: str = "nexagauge-evaluator",
        batch: bool = True,
        max_explanation_chars: int = 1000,
        include_explanation: bool = True,
        resource_attributes: Mapping[str, str] | None = None,
    ) -> None:
        self.exporter = exporter
        #: called with ("exported" | "failed", number of records) after each export attempt
        self.on_export: Callable[[str, int], None] | None = None
        self.max_explanation_chars = max_explanation_chars
        self.include_explanation = include_explanation
        resource = Resource.create({**(resource_attributes or {}), SERVICE_NAME: service_name})
        self.provider = LoggerProvider(resource=resource)
        if exporter is not None:
            counted = _CountingExporter(exporter, self)
            self.provider.add_log_record_processor(
                BatchLogRecordProcessor(counted) if batch else SimpleLogRecordProcessor(counted)
            )
        self.logger = self.provider.get_logger(INSTRUMENTATION_SCOPE)
        self._closed = False

    @property
    def memory(self) -> InMemoryLogRecordExporter:
        """The in-memory exporter (only for writers made by :meth:`in_memory`)."""
        if not isinstance(self.exporter, InMemoryLogRecordExporter):
            raise TypeError("this writer does not export to memory")
        return self.exporter

    @classmethod
    def in_memory(cls, **kwargs: Any) -> EvaluationEventWriter:
        """A writer keeping records in memory (``writer.memory.get_finished_logs()``)."""
        kwargs.setdefault("batch", False)
        return cls(InMemoryLogRecordExporter(), **kwargs)

    @classmethod
    def from_settings(cls, emit: Any) -> EvaluationEventWriter | None:
        """The writer ``EmitSettings`` asks for: ``None`` unless ``result_events = "logs"``;
        exported like the spans (``span_exporter`` = ``otlp`` | ``memory`` | ``none``)."""
        if getattr(emit, "result_events", "logs") != "logs":
            return None
        kind = getattr(emit, "span_exporter", "otlp")
        common: dict[str, Any] = {
            "service_name": getattr(emit, "service_name", "nexagauge-evaluator"),
            "max_explanation_chars": getattr(emit, "max_explanation_chars", 1000),
            "include_explanation": getattr(emit, "include_explanation", True),
        }
        if kind == "none":
            return cls(None, **common)
        if kind == "memory":
            return cls.in_memory(**common)
        return cls(build_log_exporter(emit), **common)

    def write(
        self, target: EvaluationTarget, metrics: Sequence[MetricView], *, at_ns: int | None = None
    ) -> int:
        """Emit the results of ``metrics`` in the context of ``target``'s span; returns how many.

        Non-blocking with the batch processor (records are queued for the export thread).
        """
        if self._closed:
            raise RuntimeError("EvaluationEventWriter is shut down")
        if self.exporter is None or not metrics:
            return 0
        when = at_ns if at_ns is not None else time.time_ns()
        evaluated = SpanContext(
            trace_id=target.trace_id_int,
            span_id=target.span_id_int,
            is_remote=True,
            trace_flags=TraceFlags(target.trace_flags | TRACE_FLAG_SAMPLED),
        )
        ctx = trace.set_span_in_context(trace.NonRecordingSpan(evaluated))
        for m in metrics:
            attrs = result_attributes(
                m,
                include_explanation=self.include_explanation,
                max_chars=self.max_explanation_chars,
            )
            self.logger.emit(
                LogRecord(
                    timestamp=when,
                    observed_timestamp=when,
                    context=ctx,
                    severity_number=SeverityNumber.INFO,
                    severity_text="INFO",
                    event_name=C.GEN_AI_EVALUATION_RESULT_EVENT,
                    attributes=attrs,
                )
            )
        return len(metrics)

    # -- lifecycle ------------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every queued record now (blocking; call from a thread in async code)."""
        return self.provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and stop the export thread (blocking). Idempotent."""
        if not self._closed:
            self._closed = True
            self.provider.shutdown()

    async def aclose(self) -> None:
        """:meth:`shutdown` off the event loop."""
        await asyncio.to_thread(self.shutdown)
