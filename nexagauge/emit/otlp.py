"""The OTLP plumbing shared by the evaluation span writer (:mod:`.spans`) and the result event
writer (:mod:`.events`): exporter arguments and construction, the evaluator's resource, the
evaluated span as a parent context, export counting and the writers' common settings and lifecycle.

Example:
    >>> from types import SimpleNamespace
    >>> otlp_args(SimpleNamespace(otlp_endpoint="collector:4318", otlp_protocol="http"), "/v1/logs")
    (False, 'http://collector:4318/v1/logs', {})
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, Self, TypedDict, TypeVar, cast
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.trace import SpanContext, TraceFlags

from nexagauge.emit.attributes import result_attributes
from nexagauge.emit.target import TRACE_FLAG_SAMPLED, EvaluationTarget
from nexagauge.emit.view import MetricView

log = logging.getLogger(__name__)

#: the instrumentation scope of evaluation spans and result events
INSTRUMENTATION_SCOPE = "nexagauge.emit"

R = TypeVar("R")
M = TypeVar("M")

#: OTLP HTTP path -> (gRPC exporter module, HTTP exporter module, class name); imported on use.
_EXPORTERS: dict[str, tuple[str, str, str]] = {
    "/v1/traces": (
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "OTLPSpanExporter",
    ),
    "/v1/logs": (
        "opentelemetry.exporter.otlp.proto.grpc._log_exporter",
        "opentelemetry.exporter.otlp.proto.http._log_exporter",
        "OTLPLogExporter",
    ),
}


def otlp_args(emit: Any, http_path: str) -> tuple[bool, str | None, dict[str, Any]]:
    """``(grpc?, endpoint, kwargs)`` for an OTLP exporter from ``EmitSettings``.

    ``otlp_endpoint=None`` leaves the endpoint to the standard ``OTEL_EXPORTER_OTLP_*``
    variables; an HTTP base URL gets ``http_path`` (``/v1/traces``, ``/v1/logs``).
    """
    endpoint: str | None = getattr(emit, "otlp_endpoint", None)
    grpc = getattr(emit, "otlp_protocol", "grpc") == "grpc"
    insecure = getattr(emit, "otlp_insecure", None)
    timeout = getattr(emit, "otlp_timeout_s", None)
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if grpc:
        if insecure is not None:
            kwargs["insecure"] = insecure
    elif endpoint is not None:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        if parts.path in ("", "/"):
            endpoint = parts._replace(path=http_path).geturl()
    return grpc, endpoint, kwargs


def otlp_exporter(emit: Any, http_path: str) -> Any:
    """The OTLP exporter (gRPC or HTTP/protobuf, per ``emit.otlp_protocol``) for the signal of
    ``http_path`` (``/v1/traces`` spans, ``/v1/logs`` log records), its module imported only now.

    Example:
        >>> from types import SimpleNamespace
        >>> e = otlp_exporter(SimpleNamespace(otlp_endpoint="h:4318", otlp_protocol="http"), "/v1/logs")
        >>> type(e).__name__, e._endpoint
        ('OTLPLogExporter', 'http://h:4318/v1/logs')
    """
    grpc, endpoint, kwargs = otlp_args(emit, http_path)
    grpc_module, http_module, name = _EXPORTERS[http_path]
    cls = getattr(importlib.import_module(grpc_module if grpc else http_module), name)
    if not grpc:
        from nexagauge.emit.otlp_session import http_session  # requests: the HTTP path only

        session = http_session(http_path)
        if session is not None:
            kwargs["session"] = session
    return cls(endpoint=endpoint, **kwargs)


def evaluator_resource(service_name: str, attributes: Mapping[str, str] | None = None) -> Resource:
    """The evaluator's resource: ``attributes`` (and ``OTEL_RESOURCE_ATTRIBUTES``) with
    ``service.name`` = ``service_name``."""
    return Resource.create({**(attributes or {}), SERVICE_NAME: service_name})


def evaluated_context(target: EvaluationTarget) -> Context:
    """A context whose current span is ``target``'s evaluated span (remote, sampled): evaluation
    spans are its children, result events are recorded in it."""
    evaluated = SpanContext(
        trace_id=target.trace_id_int,
        span_id=target.span_id_int,
        is_remote=True,
        trace_flags=TraceFlags(target.trace_flags | TRACE_FLAG_SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(evaluated))


def counted_export(
    export: Callable[[], R],
    success: R,
    failure: R,
    size: int,
    hook: Callable[[str, int], None] | None,
    what: str,
    then: Callable[[bool], None] | None = None,
) -> R:
    """Run one export batch for a writer: an exporter that raises counts as ``failure``;
    ``then(ok)`` runs next (span confirmations), then ``hook("exported" | "failed", size)``.
    A failing hook is logged, never raised into the export thread."""
    try:
        result = export()
    except Exception:
        log.exception("%s export raised", what)
        result = failure
    ok = result == success
    if then is not None:
        then(ok)
    if hook is not None:
        try:
            hook("exported" if ok else "failed", size)
        except Exception:
            log.exception("on_export hook failed")
    return result


class WriterSettings(TypedDict, total=False):
    """The keyword arguments every writer takes (see :class:`ExportingWriter`)."""

    service_name: str
    max_explanation_chars: int
    include_explanation: bool
    resource_attributes: Mapping[str, str] | None


def writer_settings(emit: Any) -> WriterSettings:
    """The ``EmitSettings`` both writers are built from (service name, explanation bounds)."""
    return {
        "service_name": getattr(emit, "service_name", "nexagauge-evaluator"),
        "max_explanation_chars": getattr(emit, "max_explanation_chars", 1000),
        "include_explanation": getattr(emit, "include_explanation", True),
    }


class ExportingWriter(Generic[M]):
    """What the span and event writers share: the exporter (``None``: nothing is exported), the
    ``on_export`` hook, the explanation bounds, a dedicated provider and its lifecycle.

    ``M`` is the in-memory exporter type the writer's :meth:`in_memory` constructor uses.

    Args:
        exporter: where records go; ``None``: nowhere.
        service_name: ``service.name`` of the evaluator's resource (merged with
            ``resource_attributes`` and ``OTEL_RESOURCE_ATTRIBUTES``): :attr:`resource`.
        max_explanation_chars: bound of ``gen_ai.evaluation.explanation`` and error texts.
        include_explanation: whether scored results carry the judge's explanation.
    """

    MEMORY: ClassVar[type]
    provider: Any  # a TracerProvider or LoggerProvider (the subclass creates it)

    def __init__(
        self,
        exporter: Any,
        *,
        service_name: str = "nexagauge-evaluator",
        max_explanation_chars: int = 1000,
        include_explanation: bool = True,
        resource_attributes: Mapping[str, str] | None = None,
    ) -> None:
        self.exporter = exporter
        self.resource = evaluator_resource(service_name, resource_attributes)
        #: called with ("exported" | "failed", batch size) after each export attempt, from the
        #: export thread; the Emitter points it at its Prometheus counters
        self.on_export: Callable[[str, int], None] | None = None
        self.max_explanation_chars = max_explanation_chars
        self.include_explanation = include_explanation
        self.followers: tuple[ExportingWriter[Any], ...] = ()
        self._closed = False

    @classmethod
    def in_memory(cls, **kwargs: Any) -> Self:
        """A writer exporting synchronously into a new in-memory exporter (:attr:`memory`)."""
        kwargs.setdefault("batch", False)
        return cls(cls.MEMORY(), **kwargs)

    @classmethod
    def _per_settings(cls, emit: Any, build: Callable[[Any], Any], **extra: Any) -> Self:
        """The writer ``emit.span_exporter`` asks for: ``none`` (no exporter), ``memory``
        (:meth:`in_memory`) or ``otlp`` (``build(emit)``); ``extra`` goes to the constructor."""
        kind = getattr(emit, "span_exporter", "otlp")
        kwargs = {**writer_settings(emit), **extra}
        if kind == "none":
            return cls(None, **kwargs)
        if kind == "memory":
            return cls.in_memory(**kwargs)
        return cls(build(emit), **kwargs)

    @property
    def memory(self) -> M:
        """The in-memory exporter (only for writers made by ``in_memory``)."""
        if not isinstance(self.exporter, self.MEMORY):
            raise TypeError("this writer does not export to memory")
        return cast(M, self.exporter)

    def result_attributes(self, m: MetricView) -> dict[str, Any]:
        """``m``'s ``gen_ai.evaluation.result`` attributes under this writer's explanation bounds."""
        return result_attributes(
            m, include_explanation=self.include_explanation, max_chars=self.max_explanation_chars
        )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is shut down")

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued now, followers too (blocking; call from a thread in async
        code)."""
        ok = bool(self.provider.force_flush(timeout_millis))
        for w in self.followers:
            ok = w.force_flush(timeout_millis) and ok
        return ok

    def shutdown(self) -> None:
        """Flush and stop the export thread, followers too (blocking). Idempotent."""
        if not self._closed:
            self._closed = True
            self.provider.shutdown()
            for w in self.followers:
                w.shutdown()

    async def aflush(self, timeout_millis: int = 30_000) -> bool:
        """:meth:`force_flush` off the event loop."""
        return await asyncio.to_thread(self.force_flush, timeout_millis)

    async def aclose(self) -> None:
        """:meth:`shutdown` off the event loop."""
        await asyncio.to_thread(self.shutdown)


class CountingExporter:
    """Mixin of the writers' exporter wrappers: holds the real exporter ``inner`` and the
    ``writer`` whose ``on_export`` hook counts each batch (see :func:`counted_export`); shutdown
    and flush pass straight through."""

    def __init__(self, inner: Any, writer: ExportingWriter[Any]) -> None:
        self.inner = inner
        self.writer = writer

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))
