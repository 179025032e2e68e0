"""``nexagauge.configure(...)``: where spans go and how values are recorded.

Two ways to adopt:

* the app has no OpenTelemetry setup: ``configure(service_name="chat-api")`` builds a
  ``TracerProvider`` with a ``BatchSpanProcessor`` and an OTLP exporter (gRPC or HTTP/protobuf,
  honouring the standard ``OTEL_EXPORTER_OTLP_*`` and ``OTEL_SERVICE_NAME`` /
  ``OTEL_RESOURCE_ATTRIBUTES`` variables), and installs it as the global provider when none is set;
* the app already has one: ``configure(tracer_provider=provider)`` (or just ``configure()`` when an
  SDK provider is already global) and nexa-gauge only adds its spans to it.

``configure`` is idempotent: the same arguments return the same provider without side effects;
different arguments replace the previous setup (the provider nexa-gauge created before is flushed
and shut down in the background). Without any ``configure`` call, ``@nexagauge.trace`` uses the
global provider, so an app that set up OpenTelemetry itself needs no call at all.

Nothing here runs on the traced call path except reading :data:`STATE`.

Example::

    import nexagauge
    nexagauge.configure(service_name="chat-api", endpoint="http://collector:4318",
                        protocol="http/protobuf", scrub_pii=True)
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from nexagauge.sdk import _errors
from nexagauge.sdk._version import SDK_VERSION
from nexagauge.sdk.scrubbing import Scrubber, ScrubHook, ScrubRule

Protocol = Literal["grpc", "http/protobuf"]

DEFAULT_MAX_VALUE_LENGTH = 32 * 1024
INSTRUMENTATION_NAME = "nexagauge"


@dataclass(slots=True)
class State:
    """What the hot path reads, swapped atomically by ``configure`` (never mutated in place)."""

    tracer: trace.Tracer
    scrubber: Scrubber
    max_value_length: int = DEFAULT_MAX_VALUE_LENGTH
    capture_content: bool = True
    enabled: bool = True
    provider: trace.TracerProvider | None = None
    owned: bool = False  # nexa-gauge created the provider (so it may shut it down)
    key: tuple[Any, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: set a call's fixed attributes when its span ends (the sampler never reads them:
    #: :mod:`nexagauge.sdk.sampler_view`); None until the tracer is resolved, then set once
    late: bool | None = None


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def _default_state() -> State:
    """Before any ``configure``: the global provider (once the app sets one), honouring
    ``OTEL_SDK_DISABLED``."""
    return State(
        tracer=trace.get_tracer(INSTRUMENTATION_NAME, SDK_VERSION),
        scrubber=Scrubber(),
        enabled=(_env("OTEL_SDK_DISABLED") or "").lower() != "true",
    )


def global_provider_set() -> bool:
    """True once the app (or ``configure``) has set a global tracer provider.

    Without one every span would be a no-op, so a traced call skips all recording work (the
    unconfigured default costs what ``configure(enabled=False)`` costs). Reads OpenTelemetry's
    module global directly -- ``get_tracer_provider()`` reads the environment on every call.
    """
    return getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is not None


_UNKNOWN = object()  # a future OpenTelemetry without the module global: assume a provider


#: The current configuration. Hot path: ``config.STATE`` (one module attribute read).
STATE: State = _default_state()
_lock = threading.Lock()
_CREATED: weakref.WeakSet[TracerProvider] = weakref.WeakSet()  # providers nexa-gauge built


class SafeExporter(SpanExporter):
    """Wraps an exporter so that its failures are logged (once) and never propagate.

    With a ``BatchSpanProcessor`` export runs on a background thread anyway; the wrapper also covers
    ``SimpleSpanProcessor`` (export on the call path) and exporters raising from ``shutdown``.
    """

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        try:
            return self.inner.export(spans)
        except Exception as exc:
            _errors.warn_once(
                f"export:{type(exc).__name__}",
                f"span export failed ({exc!r}); spans of this batch are dropped",
            )
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception as exc:
            _errors.warn_once("exporter shutdown", f"exporter shutdown failed ({exc!r})")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return bool(self.inner.force_flush(timeout_millis))
        except Exception:
            return False


def resolve_protocol(protocol: str | None) -> Protocol:
    """Argument > ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` > ``OTEL_EXPORTER_OTLP_PROTOCOL`` > http."""
    value = (
        protocol
        or _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    value = value.strip().lower()
    if value == "grpc":
        return "grpc"
    if value in {"http/protobuf", "http"}:
        return "http/protobuf"
    raise ValueError(
        f"OTLP protocol {value!r} is not supported; use 'grpc' or 'http/protobuf' "
        "(argument `protocol` or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL)"
    )


def _parse_headers(headers: Mapping[str, str] | str | None) -> dict[str, str] | None:
    if headers is None:
        return None
    if isinstance(headers, str):
        out: dict[str, str] = {}
        for item in headers.split(","):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"OTLP header {item!r} is not of the form key=value")
            out[key.strip().lower()] = value.strip()
        return out
    return {str(k): str(v) for k, v in headers.items()}


def build_exporter(
    protocol: Protocol,
    endpoint: str | None,
    headers: Mapping[str, str] | None,
    timeout: float | None,
) -> SpanExporter:
    """An OTLP span exporter; arguments left ``None`` fall back to the exporter's own ``OTEL_*``.

    ``endpoint`` has ``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics: for HTTP it is the base URL and
    ``/v1/traces`` is appended (unless already there); for gRPC it is ``host:port`` or a URL
    (``http://`` = insecure).
    """
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        insecure = None
        if endpoint is not None and endpoint.startswith("http://"):
            insecure = True
        return GrpcExporter(
            endpoint=endpoint,
            insecure=insecure,
            headers=dict(headers) if headers is not None else None,
            timeout=timeout,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=endpoint, headers=headers, timeout=timeout)


def configure(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | str | None = None,
    timeout: float | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    exporter: SpanExporter | None = None,
    batch: bool = True,
    resource_attributes: Mapping[str, Any] | None = None,
    set_global: bool = True,
    max_value_length: int = DEFAULT_MAX_VALUE_LENGTH,
    capture_content: bool = True,
    scrub: bool = True,
    scrub_pii: bool = False,
    scrub_rules: Sequence[ScrubRule] = (),
    scrub_hook: ScrubHook | None = None,
    enabled: bool | None = None,
) -> trace.TracerProvider:
    """Set up (or reuse) the tracer provider nexa-gauge records to; idempotent.

    Args:
        service_name: ``service.name`` of the resource (default ``OTEL_SERVICE_NAME``).
        endpoint: OTLP endpoint (default ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``, then the
            exporter's default ``localhost``).
        protocol: ``"grpc"`` or ``"http/protobuf"`` (default ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``,
            then ``http/protobuf``).
        headers: dict or ``"k=v,k2=v2"`` (default ``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS``).
        tracer_provider: an existing provider to record to; no exporter is added to it.
        exporter: a span exporter to use instead of OTLP (tests, custom backends).
        batch: ``BatchSpanProcessor`` (default: export never blocks the call) or, if False,
            ``SimpleSpanProcessor`` (tests only: exports on the call path).
        set_global: install the provider nexa-gauge builds as the global one when the app has none.
        max_value_length: characters kept per recorded value; longer values are truncated with a
            marker and ``nexagauge.original_length.<attribute>``.
        capture_content: False records no input/output/document text (metadata only).
        scrub, scrub_pii, scrub_rules, scrub_hook: redaction (see ``nexagauge.sdk.scrubbing``).
        enabled: False turns every ``@trace`` into a plain call (default: True unless the standard
            ``OTEL_SDK_DISABLED=true`` is set).

    Returns:
        The tracer provider in use.

    Example::

        provider = nexagauge.configure(service_name="rag-api", protocol="grpc",
                                       endpoint="http://localhost:4317")
    """
    global STATE
    if enabled is None:
        enabled = (_env("OTEL_SDK_DISABLED") or "").lower() != "true"
    if max_value_length < 64:
        raise ValueError(f"max_value_length must be >= 64, got {max_value_length}")
    key = (
        service_name,
        endpoint,
        protocol,
        repr(headers),
        timeout,
        id(tracer_provider) if tracer_provider is not None else None,
        id(exporter) if exporter is not None else None,
        batch,
        repr(sorted((resource_attributes or {}).items())),
        set_global,
        max_value_length,
        capture_content,
        scrub,
        scrub_pii,
        tuple(scrub_rules),
        id(scrub_hook) if scrub_hook is not None else None,
        enabled,
        _env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
        _env("OTEL_SERVICE_NAME"),
    )
    with _lock:
        current = STATE
        if current.key == key and current.provider is not None:
            return current.provider
        scrubber = Scrubber(secrets=scrub, pii=scrub_pii, extra_rules=scrub_rules, hook=scrub_hook)
        owned = False
        provider: trace.TracerProvider
        if tracer_provider is not None:
            provider = tracer_provider
        elif (
            exporter is None
            and endpoint is None
            and _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") is None
            and isinstance(trace.get_tracer_provider(), TracerProvider)
            and trace.get_tracer_provider() not in _CREATED
        ):
            # the app already set up an SDK provider: record to it, add nothing
            provider = trace.get_tracer_provider()
        else:
            attrs: dict[str, Any] = dict(resource_attributes or {})
            if service_name is not None:
                attrs[SERVICE_NAME] = service_name
            sdk_provider = TracerProvider(resource=Resource.create(attrs))
            span_exporter = exporter or build_exporter(
                resolve_protocol(protocol), endpoint, _parse_headers(headers), timeout
            )
            safe = SafeExporter(span_exporter)
            processor: SpanProcessor = (
                BatchSpanProcessor(safe) if batch else SimpleSpanProcessor(safe)
            )
            sdk_provider.add_span_processor(processor)
            provider = sdk_provider
            _CREATED.add(sdk_provider)
            owned = True
            if set_global:
                _set_global_if_unset(provider)
        STATE = State(
            tracer=provider.get_tracer(INSTRUMENTATION_NAME, SDK_VERSION),
            scrubber=scrubber,
            max_value_length=max_value_length,
            capture_content=capture_content,
            enabled=enabled,
            provider=provider,
            owned=owned,
            key=key,
            extra={"exporter": exporter},
        )
        if current.owned and current.provider is not None and current.provider is not provider:
            # an exporter passed again is shared with the new provider: flush, never shut it down
            shared = exporter is not None and current.extra.get("exporter") is exporter
            _retire(current.provider, flush_only=shared)
        return provider


def _set_global_if_unset(provider: trace.TracerProvider) -> None:
    """OpenTelemetry allows one global provider; set ours only when the app has none yet."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)


def _retire(provider: trace.TracerProvider, flush_only: bool = False) -> None:
    """Flush and shut down a provider nexa-gauge created, off the caller's thread."""
    if provider is trace.get_tracer_provider():
        return  # still the global provider (OpenTelemetry cannot unset it): keep it alive

    def _run() -> None:
        try:
            method = "force_flush" if flush_only else "shutdown"
            call = getattr(provider, method, None)
            if call is not None:
                call()
        except Exception as exc:
            _errors.warn_once("retire provider", f"shutting down the previous provider: {exc!r}")

    threading.Thread(target=_run, name="nexagauge-retire-provider", daemon=True).start()


def _within(timeout_millis: int, site: str, work: Callable[[], Any]) -> tuple[bool, Any]:
    """Run ``work`` on a daemon thread, waiting at most ``timeout_millis``: ``(finished, result)``.

    OpenTelemetry's batch processor does not honour the timeout given to ``force_flush`` and
    ``shutdown`` when the exporter hangs (a 10 s export blocks them for its whole duration, batch
    after batch); the caller of nexa-gauge's ``force_flush`` / ``shutdown`` gets its answer on time
    and the export finishes (or not) in the background.
    """
    result: list[Any] = []

    def _run() -> None:
        try:
            result.append(work())
        except Exception as exc:
            _errors.warn_once(site, f"{site} failed ({exc!r})")
            result.append(False)

    thread = threading.Thread(target=_run, name=f"nexagauge-{site}", daemon=True)
    thread.start()
    thread.join(max(timeout_millis, 0) / 1000)
    if thread.is_alive():
        _errors.warn_once(
            f"{site} timeout",
            f"{site} did not finish within {timeout_millis} ms (the exporter is slow or hangs); "
            "spans not yet exported may be lost",
        )
        return False, None
    return True, result[0] if result else None


def shutdown(timeout_millis: int = 30000) -> None:
    """Flush pending spans and shut down the provider nexa-gauge created (no-op otherwise).

    Returns within ``timeout_millis`` even when the exporter hangs (the flush and shutdown then
    go on in the background; spans not exported by then may be lost). Call it at process exit when
    the process may end before the batch delay (scripts, jobs).

    Example::

        nexagauge.configure(service_name="nightly-batch")
        try:
            run_batch()
        finally:
            nexagauge.shutdown()   # the last spans are exported before the process exits
    """
    global STATE
    with _lock:
        state = STATE
        STATE = _default_state()
    provider = state.provider
    if state.owned and provider is not None:

        def _flush_and_shut_down() -> None:
            force = getattr(provider, "force_flush", None)
            if force is not None:
                force(timeout_millis)
            getattr(provider, "shutdown", lambda: None)()

        _within(timeout_millis, "shutdown", _flush_and_shut_down)


def force_flush(timeout_millis: int = 30000) -> bool:
    """Export every span recorded so far, waiting at most ``timeout_millis``; True on success.

    Returns False when the export did not finish in time, also when the exporter hangs.

    Example::

        answer("What is our refund policy?")
        assert nexagauge.force_flush(5_000)   # e.g. before a serverless function freezes
    """
    provider = STATE.provider or trace.get_tracer_provider()
    force = getattr(provider, "force_flush", None)
    if force is None:
        return True
    finished, ok = _within(timeout_millis, "force_flush", lambda: force(timeout_millis))
    return finished and bool(ok)
