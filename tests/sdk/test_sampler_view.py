"""Fixed attributes of a traced call: given at span start when the sampler may read them, set with
the content at the end when it cannot (OpenTelemetry's own samplers), and on the span either way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, ProxyTracer, SpanKind
from opentelemetry.util.types import Attributes

import nexagauge
from nexagauge.sdk import conventions as C
from nexagauge.sdk.sampler_view import attributes_at_end


class SeeingSampler(Sampler):
    """Samples everything and keeps the attributes each decision was given."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        self.seen.append(dict(attributes or {}))
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "SeeingSampler"


class RootOnly(ParentBased):
    """A subclass of a built-in sampler: it may read attributes, so it is not trusted blind."""


@pytest.mark.parametrize(
    ("sampler", "blind"),
    [
        (ALWAYS_ON, True),
        (ALWAYS_OFF, True),
        (TraceIdRatioBased(0.5), True),
        (ParentBased(ALWAYS_ON), True),
        (ParentBasedTraceIdRatio(0.25), True),
        (ParentBased(SeeingSampler()), False),
        (ParentBased(ALWAYS_ON, local_parent_sampled=SeeingSampler()), False),
        (RootOnly(ALWAYS_ON), False),
        (SeeingSampler(), False),
    ],
)
def test_which_samplers_never_read_attributes(sampler: Sampler, blind: bool) -> None:
    tracer = TracerProvider(sampler=sampler).get_tracer("t")
    assert attributes_at_end(tracer) is blind


def test_a_tracer_that_is_not_the_sdks_is_not_trusted() -> None:
    assert attributes_at_end(trace.NoOpTracer()) is False
    assert attributes_at_end(object()) is False


def test_the_global_proxy_is_resolved_to_the_provider_it_points_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = ProxyTracer("t")
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert attributes_at_end(proxy) is False  # nothing to resolve yet: a no-op tracer
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider(sampler=SeeingSampler()))
    assert attributes_at_end(ProxyTracer("t")) is False
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider())
    assert attributes_at_end(ProxyTracer("t")) is True


def _configure(sampler: Sampler | None) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nexagauge.configure(tracer_provider=provider)
    yield exporter
    nexagauge.configure(enabled=False)


@pytest.fixture
def seeing() -> Iterator[tuple[SeeingSampler, InMemorySpanExporter]]:
    sampler = SeeingSampler()
    for exporter in _configure(sampler):
        yield sampler, exporter


@pytest.fixture
def default_sampler() -> Iterator[InMemorySpanExporter]:
    yield from _configure(None)


def _answer(question: str, context: list[str]) -> str:
    return "Paris."


def test_a_sampler_that_may_read_attributes_sees_the_fixed_ones_at_start(
    seeing: tuple[SeeingSampler, InMemorySpanExporter],
) -> None:
    sampler, exporter = seeing
    traced = nexagauge.trace(name="answer", attributes={"app.tier": "gold"})(_answer)
    with nexagauge.session("s-1", user_id="u-7"):
        traced("Capital of France?", ["Paris is the capital."])
    (given,) = sampler.seen
    assert given[C.GEN_AI_OPERATION_NAME] == C.OPERATION_INVOKE_WORKFLOW
    assert given[C.GEN_AI_WORKFLOW_NAME] == "answer"
    assert given["app.tier"] == "gold"
    assert given[C.GEN_AI_CONVERSATION_ID] == "s-1"
    assert C.GEN_AI_INPUT_MESSAGES not in given  # content is recorded at the end
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert {k: span.attributes[k] for k in given} == given


@pytest.mark.parametrize("fails", [False, True])
def test_with_a_blind_sampler_the_fixed_attributes_arrive_with_the_content(
    default_sampler: InMemorySpanExporter, fails: bool
) -> None:
    @nexagauge.trace(name="answer", attributes={"app.tier": "gold"})
    def answer(question: str, context: list[str]) -> str:
        if fails:
            raise KeyError("index")
        return "Paris."

    with nexagauge.session("s-1", user_id="u-7"):
        if fails:
            with pytest.raises(KeyError):
                answer("Capital of France?", ["Paris is the capital."])
        else:
            answer("Capital of France?", ["Paris is the capital."])
    (span,) = default_sampler.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs[C.GEN_AI_OPERATION_NAME] == C.OPERATION_INVOKE_WORKFLOW
    assert attrs[C.GEN_AI_WORKFLOW_NAME] == "answer"
    assert attrs["app.tier"] == "gold"
    assert C.GEN_AI_INPUT_MESSAGES in attrs
    assert attrs[C.GEN_AI_CONVERSATION_ID] == "s-1"
    assert attrs[C.NG_USER_ID] == "u-7"
    assert (C.ERROR_TYPE in attrs) is fails


def test_a_tool_records_its_call_once_with_the_fixed_attributes(
    default_sampler: InMemorySpanExporter,
) -> None:
    @nexagauge.tool
    def lookup_order(order_id: str, tool_call_id: str) -> dict[str, str]:
        return {"order_id": order_id, "status": "shipped"}

    lookup_order("A-1", "call_1")
    (span,) = default_sampler.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs[C.GEN_AI_OPERATION_NAME] == C.OPERATION_EXECUTE_TOOL
    assert attrs[C.GEN_AI_TOOL_NAME] == "lookup_order"
    assert attrs[C.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert '"shipped"' in str(attrs[C.GEN_AI_TOOL_CALL_RESULT])
