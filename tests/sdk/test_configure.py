"""configure(): idempotence, provider reuse, OTEL_* environment, exporter selection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge
from nexagauge.sdk import config
from nexagauge.sdk import conventions as C

OTEL_VARS = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
]


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    yield
    nexagauge.shutdown()


def _exporter_of(provider: TracerProvider) -> object:
    (processor,) = provider._active_span_processor._span_processors
    assert isinstance(processor, (BatchSpanProcessor, SimpleSpanProcessor))
    inner = getattr(processor, "_batch_processor", processor)
    exporter = getattr(inner, "_exporter", None) or getattr(processor, "span_exporter", None)
    assert isinstance(exporter, config.SafeExporter)
    return exporter.inner


def test_configure_is_idempotent() -> None:
    exporter = InMemorySpanExporter()
    p1 = nexagauge.configure(exporter=exporter, service_name="svc", set_global=False)
    state = config.STATE
    p2 = nexagauge.configure(exporter=exporter, service_name="svc", set_global=False)
    assert p1 is p2 and config.STATE is state
    p3 = nexagauge.configure(exporter=exporter, service_name="other", set_global=False)
    assert p3 is not p1
    assert p3.resource.attributes["service.name"] == "other"


def test_default_is_batch_processor_and_http_exporter() -> None:
    provider = nexagauge.configure(service_name="svc", set_global=False)
    assert isinstance(provider, TracerProvider)
    (processor,) = provider._active_span_processor._span_processors
    assert isinstance(processor, BatchSpanProcessor)
    assert isinstance(_exporter_of(provider), HttpExporter)


def test_protocol_and_endpoint_arguments() -> None:
    provider = nexagauge.configure(
        endpoint="http://127.0.0.1:4317", protocol="grpc", headers="a=1,b=2", set_global=False
    )
    assert isinstance(_exporter_of(provider), GrpcExporter)
    provider = nexagauge.configure(
        endpoint="http://127.0.0.1:4318", protocol="http/protobuf", set_global=False
    )
    exporter = _exporter_of(provider)
    assert isinstance(exporter, HttpExporter)
    assert exporter._endpoint == "http://127.0.0.1:4318/v1/traces"


def test_protocol_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert config.resolve_protocol(None) == "grpc"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    assert config.resolve_protocol(None) == "http/protobuf"  # signal-specific wins
    assert config.resolve_protocol("grpc") == "grpc"  # argument wins
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        config.resolve_protocol(None)


def test_endpoint_and_service_name_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod")
    provider = nexagauge.configure(set_global=False)
    exporter = _exporter_of(provider)
    assert exporter._endpoint == "http://collector:4318/v1/traces"  # type: ignore[attr-defined]
    attrs = provider.resource.attributes
    assert attrs["service.name"] == "from-env"
    assert attrs["deployment.environment"] == "prod"
    # an explicit argument beats the environment
    provider = nexagauge.configure(service_name="from-arg", set_global=False)
    assert provider.resource.attributes["service.name"] == "from-arg"


def test_headers_string_parsing() -> None:
    assert config._parse_headers("api-key=abc, X-Team = ml ") == {"api-key": "abc", "x-team": "ml"}
    with pytest.raises(ValueError, match="key=value"):
        config._parse_headers("broken")


def test_reuse_an_existing_tracer_provider() -> None:
    exporter = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert nexagauge.configure(tracer_provider=app_provider) is app_provider
    tracer = app_provider.get_tracer("app")

    @nexagauge.trace(name="inside")
    def f(question: str) -> str:
        return "a"

    with tracer.start_as_current_span("app-root"):
        f("q")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["inside"].parent.span_id == spans["app-root"].context.span_id  # type: ignore[union-attr]
    assert dict(spans["inside"].attributes or {})[C.NG_SDK_VERSION] == nexagauge.__version__
    nexagauge.shutdown()  # must not shut down a provider the app owns
    with tracer.start_as_current_span("still-alive"):
        pass
    assert "still-alive" in {s.name for s in exporter.get_finished_spans()}


def test_without_configure_the_global_provider_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(otel_trace, "_TRACER_PROVIDER", provider)
    nexagauge.shutdown()  # back to the unconfigured default state

    @nexagauge.trace(name="global")
    def f(question: str) -> str:
        return "a"

    f("q")
    assert [s.name for s in exporter.get_finished_spans()] == ["global"]
    # configure() with no destination reuses the app's SDK provider instead of adding one
    assert nexagauge.configure() is provider


def test_otel_sdk_disabled_turns_tracing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    exporter = InMemorySpanExporter()
    nexagauge.configure(exporter=exporter, batch=False, set_global=False)

    @nexagauge.trace
    def f(question: str) -> str:
        return "a"

    assert f("q") == "a"
    assert exporter.get_finished_spans() == ()
    monkeypatch.delenv("OTEL_SDK_DISABLED")  # (OpenTelemetry's own SDK honours it too)
    nexagauge.configure(exporter=exporter, batch=False, set_global=False)
    f("q")
    assert len(exporter.get_finished_spans()) == 1
