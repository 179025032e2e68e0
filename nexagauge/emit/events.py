"""``gen_ai.evaluation.result`` as log-based events (OTel Logs API), in the evaluated span's context.

The GenAI semantic conventions define the evaluation result as an **event**, which OpenTelemetry
now records as a log record with an ``event_name`` (span events are being deprecated). For every
metric of an evaluated span, :class:`EvaluationEventWriter` emits one log record:

* ``event_name`` = ``gen_ai.evaluation.result``; severity ``INFO``; no body;
* trace id and span id = **the evaluated span's** (the convention: "parented to the GenAI
  operation span being evaluated"), so a backend shows it on the application's own span;
* attributes (:func:`~nexagauge.emit.attributes.result_attributes`): ``gen_ai.evaluation.name`` (always),
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

import time
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)

from nexagauge.emit import otlp
from nexagauge.emit.target import EvaluationTarget
from nexagauge.emit.view import MetricView
from nexagauge.sdk import conventions as C


def build_log_exporter(emit: Any) -> LogRecordExporter:
    """The OTLP log exporter described by ``EmitSettings`` (gRPC or HTTP/protobuf).

    ``otlp_endpoint=None`` leaves the endpoint to ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (then the OTLP default); an HTTP base URL gets ``/v1/logs``.
    """
    exporter: LogRecordExporter = otlp.otlp_exporter(emit, "/v1/logs")
    return exporter


class _CountingExporter(otlp.CountingExporter, LogRecordExporter):
    """Wraps the real exporter to report each batch's outcome to the writer's ``on_export``."""

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return otlp.counted_export(
            lambda: self.inner.export(batch),
            LogRecordExportResult.SUCCESS,
            LogRecordExportResult.FAILURE,
            len(batch),
            self.writer.on_export,
            "evaluation event",
        )


class EvaluationEventWriter(otlp.ExportingWriter[InMemoryLogRecordExporter]):
    """Emits one ``gen_ai.evaluation.result`` log record per metric (see module docstring).

    Args:
        exporter: where records go; ``None`` disables them (``write`` returns 0).
        service_name: ``service.name`` of the evaluator's resource (merged with
            ``OTEL_RESOURCE_ATTRIBUTES``).
        batch: ``True`` (production): a ``BatchLogRecordProcessor`` exports on a background
            thread; ``False``: synchronously in ``write`` (in-memory exporters in tests).
        max_explanation_chars / include_explanation / resource_attributes: see
            :class:`~nexagauge.emit.otlp.ExportingWriter`.

    ``EvaluationEventWriter.in_memory()`` keeps records in memory
    (``writer.memory.get_finished_logs()``).
    """

    MEMORY = InMemoryLogRecordExporter

    def __init__(
        self,
        exporter: LogRecordExporter | None,
        *,
        batch: bool = True,
        **settings: Unpack[otlp.WriterSettings],
    ) -> None:
        super().__init__(exporter, **settings)
        self.provider = LoggerProvider(resource=self.resource)
        if exporter is not None:
            counted = _CountingExporter(exporter, self)
            self.provider.add_log_record_processor(
                BatchLogRecordProcessor(counted) if batch else SimpleLogRecordProcessor(counted)
            )
        self.logger = self.provider.get_logger(otlp.INSTRUMENTATION_SCOPE)

    @classmethod
    def from_settings(cls, emit: Any) -> EvaluationEventWriter | None:
        """The writer ``EmitSettings`` asks for: ``None`` unless ``result_events = "logs"``;
        exported like the spans (``span_exporter`` = ``otlp`` | ``memory`` | ``none``)."""
        if getattr(emit, "result_events", "logs") != "logs":
            return None
        return cls._per_settings(emit, build_log_exporter)

    def write(
        self, target: EvaluationTarget, metrics: Sequence[MetricView], *, at_ns: int | None = None
    ) -> int:
        """Emit the results of ``metrics`` in the context of ``target``'s span; returns how many.

        Non-blocking with the batch processor (records are queued for the export thread).
        """
        return self.write_attributes(target, [self.result_attributes(m) for m in metrics], at_ns)

    def write_attributes(
        self,
        target: EvaluationTarget,
        records: Sequence[Mapping[str, Any]],
        at_ns: int | None = None,
    ) -> int:
        """Emit one ``gen_ai.evaluation.result`` record per attribute set in ``records`` (built
        by the caller: metrics above, agent signals in :mod:`nexagauge.emit.agent_records`) in
        the context of ``target``'s span; returns how many."""
        self._check_open()
        if self.exporter is None or not records:
            return 0
        when = at_ns if at_ns is not None else time.time_ns()
        ctx = otlp.evaluated_context(target)
        for attrs in records:
            self.logger.emit(
                LogRecord(
                    timestamp=when,
                    observed_timestamp=when,
                    context=ctx,
                    severity_number=SeverityNumber.INFO,
                    severity_text="INFO",
                    event_name=C.GEN_AI_EVALUATION_RESULT_EVENT,
                    attributes=dict(attrs),
                )
            )
        return len(records)
