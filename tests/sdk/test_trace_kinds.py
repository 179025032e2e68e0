"""@nexagauge.trace on every kind of callable: results unchanged, one span each, right content."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
from opentelemetry import trace as otel_trace

import nexagauge
from nexagauge.sdk import conventions as C

from .conftest import Recorder


def _in(span: Any) -> str:
    msgs = json.loads(span.attributes[C.GEN_AI_INPUT_MESSAGES])
    assert msgs[0]["role"] == "user"
    return "".join(p["content"] for p in msgs[0]["parts"])


def _out(span: Any) -> tuple[str, str]:
    msgs = json.loads(span.attributes[C.GEN_AI_OUTPUT_MESSAGES])
    assert msgs[0]["role"] == "assistant"
    return "".join(p["content"] for p in msgs[0]["parts"]), msgs[0]["finish_reason"]


def test_sync_function_bare_decorator(rec: Recorder) -> None:
    @nexagauge.trace
    def answer(question: str) -> str:
        return "Paris is the capital."

    assert answer("Capital of France?") == "Paris is the capital."
    span = rec.one("test_sync_function_bare_decorator.<locals>.answer")
    assert _in(span) == "Capital of France?"
    assert _out(span) == ("Paris is the capital.", "stop")
    assert span.attributes[C.GEN_AI_OPERATION_NAME] == C.OPERATION_INVOKE_WORKFLOW
    assert span.attributes[C.NG_SDK_VERSION] == nexagauge.__version__
    assert span.status.status_code == otel_trace.StatusCode.UNSET
    assert C.NG_STREAM not in span.attributes


def test_sync_function_with_options_and_metadata_preserved(rec: Recorder) -> None:
    def answer(question: str, n: int = 1) -> str:
        """Doc."""
        return question * n

    traced = nexagauge.trace(name="qa")(answer)
    assert traced.__name__ == "answer" and traced.__doc__ == "Doc."
    assert inspect.signature(traced) == inspect.signature(answer)
    assert traced("ab", n=2) == "abab"
    assert rec.one("qa").attributes[C.GEN_AI_WORKFLOW_NAME] == "qa"


async def test_async_function(rec: Recorder) -> None:
    @nexagauge.trace(name="aanswer")
    async def answer(question: str) -> str:
        await asyncio.sleep(0)
        return "async " + question

    assert inspect.iscoroutinefunction(answer)
    assert await answer("q") == "async q"
    span = rec.one("aanswer")
    assert _in(span) == "q" and _out(span) == ("async q", "stop")


def test_generator_function_joins_chunks(rec: Recorder) -> None:
    @nexagauge.trace(name="gen")
    def stream(prompt: str) -> Iterator[str]:
        yield "Hel"
        yield "lo"
        yield "!"

    assert inspect.isgeneratorfunction(stream)
    assert list(stream("hi")) == ["Hel", "lo", "!"]
    span = rec.one("gen")
    assert _in(span) == "hi"
    assert _out(span) == ("Hello!", "stop")
    assert span.attributes[C.NG_STREAM] is True
    assert span.attributes[C.NG_STREAM_CHUNK_COUNT] == 3
    assert span.attributes[C.NG_STREAM_ABANDONED] is False
    assert span.attributes[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0


def test_generator_send_throw_and_return_value(rec: Recorder) -> None:
    @nexagauge.trace(name="echo")
    def echo(prompt: str) -> Generator[str, str, str]:
        received = yield "start"
        while received != "stop":
            try:
                received = yield f"got {received}"
            except KeyError:
                received = yield "recovered"
        return "finished"

    gen = echo("p")
    assert next(gen) == "start"
    assert gen.send("a") == "got a"
    assert gen.throw(KeyError("k")) == "recovered"
    with pytest.raises(StopIteration) as stop:
        gen.send("stop")
    assert stop.value.value == "finished"
    span = rec.one("echo")
    assert _out(span) == ("startgot arecovered", "stop")
    assert span.attributes[C.NG_STREAM_CHUNK_COUNT] == 3


async def test_async_generator_function(rec: Recorder) -> None:
    @nexagauge.trace(name="agen")
    async def stream(prompt: str) -> AsyncIterator[str]:
        for part in ("a", "b", "c"):
            await asyncio.sleep(0)
            yield part

    assert inspect.isasyncgenfunction(stream)
    assert [c async for c in stream("x")] == ["a", "b", "c"]
    span = rec.one("agen")
    assert _out(span) == ("abc", "stop")
    assert span.attributes[C.NG_STREAM_CHUNK_COUNT] == 3
    assert span.attributes[C.NG_STREAM_ABANDONED] is False


async def test_async_generator_asend_athrow(rec: Recorder) -> None:
    @nexagauge.trace(name="aecho")
    async def echo(prompt: str) -> Any:
        got = yield "ready"
        try:
            yield f"got {got}"
        except ValueError:
            yield "handled"

    agen = echo("p")
    assert await agen.asend(None) == "ready"
    assert await agen.asend("x") == "got x"
    assert await agen.athrow(ValueError("v")) == "handled"
    with pytest.raises(StopAsyncIteration):
        await agen.asend(None)
    assert _out(rec.one("aecho")) == ("readygot xhandled", "stop")


def test_instance_class_and_static_methods(rec: Recorder) -> None:
    class Bot:
        prefix = "bot:"

        @nexagauge.trace(name="inst")
        def reply(self, question: str) -> str:
            return self.prefix + question

        @nexagauge.trace(name="cls")
        @classmethod
        def make(cls, prompt: str) -> str:
            return cls.prefix + prompt

        @classmethod
        @nexagauge.trace(name="cls2")
        def make2(cls, prompt: str) -> str:
            return cls.prefix + prompt

        @nexagauge.trace(name="static")
        @staticmethod
        def util(query: str) -> str:
            return query.upper()

    bot = Bot()
    assert bot.reply("hi") == "bot:hi"
    assert Bot.make("p") == "bot:p"
    assert Bot.make2("p2") == "bot:p2"
    assert Bot.util("q") == "Q"
    assert bot.util("q2") == "Q2"
    assert _in(rec.one("inst")) == "hi"
    assert _in(rec.one("cls")) == "p"
    assert _in(rec.one("cls2")) == "p2"
    assert sorted(_in(s) for s in rec.named("static")) == ["q", "q2"]


async def test_async_method(rec: Recorder) -> None:
    class Svc:
        @nexagauge.trace(name="am")
        async def ask(self, prompt: str) -> str:
            return prompt[::-1]

    assert await Svc().ask("abc") == "cba"
    assert _out(rec.one("am")) == ("cba", "stop")


def test_nested_calls_are_parent_and_child(rec: Recorder) -> None:
    @nexagauge.trace(name="inner")
    def inner(query: str) -> str:
        return query + "!"

    @nexagauge.trace(name="outer")
    def outer(question: str) -> str:
        return inner(question)

    outer("q")
    parent, child = rec.one("outer"), rec.one("inner")
    assert child.parent is not None and child.parent.span_id == parent.context.span_id
    assert child.context.trace_id == parent.context.trace_id


def test_plain_function_returning_generator_is_streamed(rec: Recorder) -> None:
    @nexagauge.trace(name="ret-gen")
    def make(prompt: str) -> Iterator[str]:
        return (c for c in "xyz")

    assert list(make("p")) == ["x", "y", "z"]
    span = rec.one("ret-gen")
    assert span.attributes[C.NG_STREAM] is True
    assert _out(span) == ("xyz", "stop")


async def test_async_function_returning_async_generator_is_streamed(rec: Recorder) -> None:
    async def chunks() -> AsyncIterator[str]:
        yield "1"
        yield "2"

    @nexagauge.trace(name="ret-agen")
    async def make(prompt: str) -> AsyncIterator[str]:
        return chunks()

    stream = await make("p")
    assert [c async for c in stream] == ["1", "2"]
    assert _out(rec.one("ret-agen")) == ("12", "stop")


async def test_concurrent_async_calls_get_separate_spans(rec: Recorder) -> None:
    @nexagauge.trace(name="conc")
    async def answer(question: str) -> str:
        await asyncio.sleep(0.01)
        nexagauge.add_context(f"doc for {question}")
        return question.upper()

    results = await asyncio.gather(*(answer(f"q{i}") for i in range(10)))
    assert results == [f"Q{i}" for i in range(10)]
    spans = rec.named("conc")
    assert len(spans) == 10
    for span in spans:
        q = _in(span)
        docs = json.loads(span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS])
        assert docs == [{"content": f"doc for {q}"}]
        assert _out(span)[0] == q.upper()


def test_decorating_a_class_is_rejected() -> None:
    with pytest.raises(TypeError, match="functions and methods"):
        nexagauge.trace(type("K", (), {}))


def test_untraced_when_disabled() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    nexagauge.configure(exporter=exporter, batch=False, set_global=False, enabled=False)
    try:

        @nexagauge.trace
        def f(q: str) -> str:
            return q

        @nexagauge.trace
        def g(q: str) -> Iterator[str]:
            yield q

        assert f("x") == "x" and list(g("y")) == ["y"]
        assert exporter.get_finished_spans() == ()
    finally:
        nexagauge.shutdown()


async def test_callable_object_with_async_call(rec: Recorder) -> None:
    class Agent:
        async def __call__(self, question: str) -> str:
            await asyncio.sleep(0.01)
            nexagauge.add_context("agent doc")
            return "agent answer"

    traced = nexagauge.trace(name="agent")(Agent())
    assert await traced("q") == "agent answer"
    span = rec.one("agent")
    assert _out(span) == ("agent answer", "stop")
    assert json.loads(span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS]) == [{"content": "agent doc"}]
    assert (span.end_time - span.start_time) >= 10_000_000  # ended after the await, not before


def test_lone_surrogates_never_reach_the_exporter(rec: Recorder) -> None:
    @nexagauge.trace(name="sur")
    def f(question: str) -> dict[str, str]:
        nexagauge.add_context({"content": "doc \udcff", "metadata": {"k": "v\udcff"}})
        return {"a": "\udcff"}

    f("bad \udcff input")
    span = rec.one("sur")
    for value in span.attributes.values():
        if isinstance(value, str):
            value.encode("utf-8")  # would raise on a lone surrogate
