"""Real OTLP export (gRPC and HTTP/protobuf) from @nexagauge.trace to a loopback receiver."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from support.otlp_receiver import OtlpReceiver, ReceivedSpan

import nexagauge
from nexagauge.sdk import conventions as C

pytestmark = pytest.mark.integration

ENV = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_SERVICE_NAME",
]


@pytest.fixture
def rx(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    receiver = OtlpReceiver().start()
    try:
        yield receiver
    finally:
        nexagauge.shutdown(timeout_millis=2000)
        receiver.stop()


def _app() -> tuple[Any, Any, Any]:
    @nexagauge.retriever(name="search")
    def search(query: str) -> list[dict[str, object]]:
        return [{"id": "eiffel", "content": "The Eiffel Tower is in Paris.", "score": 0.93}]

    @nexagauge.trace(name="answer", grounding={"scoring_mode": "scale_1_5"}, turn_end=True)
    def answer(question: str) -> str:
        search(question)
        return "It is in Paris. token=abcd1234efgh"

    @nexagauge.trace(name="stream")
    async def stream(prompt: str) -> AsyncIterator[str]:
        for part in ("Par", "is"):
            await asyncio.sleep(0)
            yield part

    return search, answer, stream


def _check(spans: list[ReceivedSpan], transport: str) -> None:
    by_name = {s.name: s for s in spans}
    ans, ret, st = by_name["answer"], by_name["search"], by_name["stream"]
    assert {s.transport for s in spans} == {transport}
    assert ans.resource["service.name"] == f"svc-{transport}"
    assert ans.scope_name == "nexagauge"
    assert ret.parent_span_id == ans.span_id and ret.trace_id == ans.trace_id
    assert ans.parent_span_id == ""
    a = ans.attributes
    assert a[C.GEN_AI_CONVERSATION_ID] == "conv-1" and a[C.NG_USER_ID] == "u-1"
    assert json.loads(a[C.GEN_AI_INPUT_MESSAGES])[0]["parts"][0]["content"] == "Where is it?"
    out = json.loads(a[C.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"]
    assert out == "It is in Paris. token=[scrubbed:secret]"
    assert a[C.NG_SCRUBBED] == [f"{C.GEN_AI_OUTPUT_MESSAGES}:secret"]
    assert json.loads(a[C.GEN_AI_RETRIEVAL_DOCUMENTS]) == [
        {"id": "eiffel", "content": "The Eiffel Tower is in Paris.", "score": 0.93}
    ]
    assert json.loads(a[C.NG_EVAL_GROUNDING]) == {"scoring_mode": "scale_1_5"}
    assert a[C.NG_TURN_END] is True
    assert a[C.NG_SDK_VERSION] == nexagauge.__version__
    assert st.attributes[C.NG_STREAM_CHUNK_COUNT] == 2
    assert json.loads(st.attributes[C.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "Paris"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_export_over_real_otlp(rx: OtlpReceiver, protocol: str) -> None:
    transport = "grpc" if protocol == "grpc" else "http"
    endpoint = rx.endpoint_grpc if protocol == "grpc" else rx.endpoint_http
    nexagauge.configure(
        service_name=f"svc-{transport}",
        endpoint=endpoint,
        protocol=protocol,
        headers={"x-tenant": "acme"},
        set_global=False,
    )
    _, answer, stream = _app()
    with nexagauge.session(session_id="conv-1", user_id="u-1"):
        start = time.perf_counter()
        assert answer("Where is it?") == "It is in Paris. token=abcd1234efgh"
        elapsed = time.perf_counter() - start

        async def consume() -> list[str]:
            return [c async for c in stream("p")]

        assert asyncio.run(consume()) == ["Par", "is"]
    assert elapsed < 0.5  # export is asynchronous (batch processor)
    assert nexagauge.force_flush(10_000)
    spans = rx.wait_for_spans(count=3, timeout=15)
    _check(spans, transport)
    assert all(s.headers.get("x-tenant") == "acme" for s in spans)


def test_endpoint_and_protocol_from_otel_environment(
    rx: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint_grpc)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-from-env=yes")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "svc-env")
    nexagauge.configure(set_global=False)

    @nexagauge.trace(name="env")
    def f(question: str) -> str:
        return "a"

    f("q")
    nexagauge.force_flush(10_000)
    (span,) = rx.wait_for_spans(lambda s: s.name == "env", timeout=15)
    assert span.transport == "grpc"
    assert span.resource["service.name"] == "svc-env"
    assert span.headers.get("x-from-env") == "yes"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_receiver_failures_never_reach_the_caller(rx: OtlpReceiver, protocol: str) -> None:
    endpoint = rx.endpoint_grpc if protocol == "grpc" else rx.endpoint_http
    nexagauge.configure(endpoint=endpoint, protocol=protocol, set_global=False, timeout=5)
    rx.fail_next(1)  # the first export is refused (503 / UNAVAILABLE); the exporter retries

    @nexagauge.trace(name="flaky")
    def f(question: str) -> str:
        return "still works"

    assert [f("q") for _ in range(3)] == ["still works"] * 3
    nexagauge.force_flush(15_000)
    spans = rx.wait_for_spans(lambda s: s.name == "flaky", count=3, timeout=20)
    assert len(spans) == 3
    # receiver gone: calls still succeed, quickly
    rx.stop()
    start = time.perf_counter()
    assert [f("q") for _ in range(3)] == ["still works"] * 3
    assert time.perf_counter() - start < 0.5
