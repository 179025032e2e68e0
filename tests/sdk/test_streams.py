"""Streams: abandonment, errors mid-stream, time to first chunk, provider chunk shapes, context."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import trace as otel_trace

import nexagauge
from nexagauge.sdk import conventions as C

from .conftest import Recorder


def _out(span: Any) -> tuple[str, str]:
    msgs = json.loads(span.attributes[C.GEN_AI_OUTPUT_MESSAGES])
    return "".join(p["content"] for p in msgs[0]["parts"]), msgs[0]["finish_reason"]


def test_abandoned_sync_stream_is_recorded_and_inner_generator_closed(rec: Recorder) -> None:
    closed: list[bool] = []

    @nexagauge.trace(name="s")
    def stream(prompt: str) -> Iterator[str]:
        try:
            for i in range(100):
                yield f"c{i} "
        finally:
            closed.append(True)

    gen = stream("p")
    assert next(gen) == "c0 "
    assert next(gen) == "c1 "
    gen.close()
    assert closed == [True]
    span = rec.one("s")
    assert span.attributes[C.NG_STREAM_ABANDONED] is True
    assert span.attributes[C.NG_STREAM_CHUNK_COUNT] == 2
    assert _out(span) == ("c0 c1 ", C.FINISH_REASON_ABANDONED)


def test_stream_dropped_without_close_is_finished_by_gc(rec: Recorder) -> None:
    @nexagauge.trace(name="gc")
    def stream(prompt: str) -> Iterator[str]:
        yield "a"
        yield "b"

    gen = stream("p")
    next(gen)
    del gen
    gc.collect()
    assert rec.one("gc").attributes[C.NG_STREAM_ABANDONED] is True


def test_break_out_of_for_loop_is_abandoned(rec: Recorder) -> None:
    @nexagauge.trace(name="brk")
    def stream(prompt: str) -> Iterator[int]:
        yield from range(10)

    for i in (g := stream("p")):
        if i == 3:
            break
    g.close()
    span = rec.one("brk")
    assert span.attributes[C.NG_STREAM_ABANDONED] is True
    assert span.attributes[C.NG_STREAM_CHUNK_COUNT] == 4


async def test_abandoned_async_stream(rec: Recorder) -> None:
    closed: list[bool] = []

    @nexagauge.trace(name="as")
    async def stream(prompt: str) -> AsyncIterator[str]:
        try:
            for i in range(100):
                yield str(i)
        finally:
            closed.append(True)

    agen = stream("p")
    assert await agen.__anext__() == "0"
    await agen.aclose()
    assert closed == [True]
    span = rec.one("as")
    assert span.attributes[C.NG_STREAM_ABANDONED] is True
    assert _out(span) == ("0", C.FINISH_REASON_ABANDONED)


def test_exception_mid_stream_keeps_partial_output_and_reraises(rec: Recorder) -> None:
    class Boom(Exception):
        pass

    @nexagauge.trace(name="err")
    def stream(prompt: str) -> Iterator[str]:
        yield "partial"
        raise Boom("model died")

    gen = stream("p")
    assert next(gen) == "partial"
    with pytest.raises(Boom, match="model died"):
        next(gen)
    span = rec.one("err")
    assert span.status.status_code == otel_trace.StatusCode.ERROR
    assert span.attributes[C.ERROR_TYPE].endswith("Boom")
    assert _out(span) == ("partial", C.FINISH_REASON_ERROR)
    assert span.attributes[C.NG_STREAM_ABANDONED] is False


async def test_exception_mid_async_stream(rec: Recorder) -> None:
    @nexagauge.trace(name="aerr")
    async def stream(prompt: str) -> AsyncIterator[str]:
        yield "x"
        raise RuntimeError("broken pipe")

    got = []
    with pytest.raises(RuntimeError, match="broken pipe"):
        async for chunk in stream("p"):
            got.append(chunk)
    assert got == ["x"]
    assert rec.one("aerr").attributes[C.ERROR_TYPE] == "RuntimeError"


def test_time_to_first_chunk_is_measured(rec: Recorder) -> None:
    @nexagauge.trace(name="ttfc")
    def stream(prompt: str) -> Iterator[str]:
        time.sleep(0.05)
        yield "first"
        time.sleep(0.05)
        yield "second"

    assert list(stream("p")) == ["first", "second"]
    span = rec.one("ttfc")
    ttfc = span.attributes[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert 0.04 <= ttfc < 1.0
    duration = (span.end_time - span.start_time) / 1e9
    assert duration >= ttfc + 0.04


async def test_async_time_to_first_chunk(rec: Recorder) -> None:
    @nexagauge.trace(name="attfc")
    async def stream(prompt: str) -> AsyncIterator[str]:
        await asyncio.sleep(0.05)
        yield "a"

    assert [c async for c in stream("p")] == ["a"]
    assert rec.one("attfc").attributes[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0.04


def test_openai_and_anthropic_chunk_shapes_are_joined(rec: Recorder) -> None:
    def oa(text: str | None) -> Any:
        return SimpleNamespace(choices=[SimpleNamespace(delta=SimpleNamespace(content=text))])

    @nexagauge.trace(name="oa")
    def openai_stream(prompt: str) -> Iterator[Any]:
        yield oa(None)  # role-only first chunk
        yield oa("Hello")
        yield oa(" world")
        yield SimpleNamespace(choices=[])  # usage-only last chunk

    @nexagauge.trace(name="an")
    def anthropic_stream(prompt: str) -> Iterator[Any]:
        yield SimpleNamespace(type="message_start")
        yield SimpleNamespace(type="content_block_delta", delta=SimpleNamespace(text="Bon"))
        yield {"type": "content_block_delta", "delta": {"text": "jour"}}

    @nexagauge.trace(name="dicts")
    def dict_stream(prompt: str) -> Iterator[Any]:
        yield {"content": "a"}
        yield {"text": "b"}
        yield b"c"

    list(openai_stream("p"))
    list(anthropic_stream("p"))
    list(dict_stream("p"))
    assert _out(rec.one("oa"))[0] == "Hello world"
    assert rec.one("oa").attributes[C.NG_STREAM_CHUNK_COUNT] == 4
    assert _out(rec.one("an"))[0].endswith("Bonjour")
    assert _out(rec.one("dicts"))[0] == "abc"


def test_span_is_current_inside_the_body_not_between_chunks(rec: Recorder) -> None:
    seen: list[Any] = []

    @nexagauge.trace(name="ctx")
    def stream(prompt: str) -> Iterator[int]:
        for i in range(2):
            seen.append(otel_trace.get_current_span().get_span_context().span_id)
            nexagauge.add_context(f"doc{i}")
            yield i

    outside: list[Any] = []
    for _ in stream("p"):
        outside.append(otel_trace.get_current_span())
    span = rec.one("ctx")
    assert seen == [span.context.span_id] * 2
    assert all(not s.get_span_context().is_valid for s in outside)
    docs = json.loads(span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert [d["content"] for d in docs] == ["doc0", "doc1"]


async def test_async_stream_consumed_across_tasks(rec: Recorder) -> None:
    @nexagauge.trace(name="tasks")
    async def stream(prompt: str) -> AsyncIterator[int]:
        for i in range(3):
            await asyncio.sleep(0)
            yield i

    agen = stream("p")
    first = await asyncio.create_task(agen.__anext__())
    rest = [c async for c in agen]
    assert [first, *rest] == [0, 1, 2]
    assert rec.one("tasks").attributes[C.NG_STREAM_CHUNK_COUNT] == 3


def test_long_stream_is_truncated_but_counted(rec: Recorder) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .conftest import configure_with

    r = configure_with(InMemorySpanExporter(), max_value_length=100)

    @nexagauge.trace(name="long")
    def stream(prompt: str) -> Iterator[str]:
        for _ in range(50):
            yield "0123456789"

    assert len(list(stream("p"))) == 50
    span = r.one("long")
    text, _ = _out(span)
    assert text.startswith("0123456789" * 10)
    assert text.endswith(C.TRUNCATION_MARKER_TEMPLATE.format(original=500))
    assert span.attributes[C.NG_ORIGINAL_LENGTH_PREFIX + C.GEN_AI_OUTPUT_MESSAGES] == 500
    assert C.GEN_AI_OUTPUT_MESSAGES in span.attributes[C.NG_TRUNCATED]
    assert span.attributes[C.NG_STREAM_CHUNK_COUNT] == 50
