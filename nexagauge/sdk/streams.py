"""Streams: generator and async-generator results recorded chunk by chunk.

The span starts at the first iteration (when the body starts running) and ends when the stream is
exhausted, raises, or is closed early (``nexagauge.stream.abandoned = true``); the chunks' text is
joined into the output (kept up to the size limit, counted beyond it; cut then scrubbed like any
recorded text), and the time to the first chunk and the chunk count are recorded. The span is the
current span while the body runs (each resumption), never while the consumer runs between chunks.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from opentelemetry import context as otel_context

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import Call
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk.capture import output_message, record_texts
from nexagauge.sdk.documents import get_field
from nexagauge.sdk.serialize import to_text
from nexagauge.sdk.span_attrs import set_all
from nexagauge.sdk.spans import end_error, end_ok

_attach = otel_context.attach
_detach = otel_context.detach


class _Stream:
    """One stream of a call: what the sync and async loops (:func:`traced_gen`,
    :func:`traced_async_gen`) share. Accumulates the chunks (text kept up to the size limit),
    ends the span when the body ends or raises (:meth:`ended`) or is closed early
    (``with stream.abandoning():``, the span ends as abandoned). ``call=None`` (tracing off):
    records nothing, still sees the end.
    """

    __slots__ = (
        "abandoned",
        "call",
        "capture",
        "count",
        "first_ns",
        "length",
        "limit",
        "parts",
        "recording",
        "start_ns",
        "token",
        "value",
    )

    def __init__(self, call: Call | None) -> None:
        self.call = call
        self.parts: list[str] = []
        self.length = 0
        self.count = 0
        self.start_ns = time.perf_counter_ns()
        self.first_ns = 0
        self.abandoned = False
        self.token: Any = None
        #: what the generator returned (``StopIteration.value``)
        self.value: Any = None
        # read once: a call's meta and state do not change while it streams
        self.recording = self.capture = False
        self.limit = 0
        if call is not None:
            self.recording = call.recording
            self.capture = (
                call.recording and call.meta.capture_output and call.state.capture_content
            )
            self.limit = call.state.max_value_length

    def ended(self, exc: BaseException, token: Any) -> bool:
        """The body raised ``exc`` during the resumption of ``token``: end the span, restore the
        context; ``True`` when it is the end of the body (its return value in :attr:`value`)."""
        done = isinstance(exc, (StopIteration, StopAsyncIteration))
        if token is not None:
            self.finish(None if done else exc)
            _detach(token)
        if isinstance(exc, StopIteration):
            self.value = exc.value
        return done

    def got(self, chunk: Any, token: Any) -> None:
        """The body yielded ``chunk`` during the resumption of ``token``: restore the context,
        record the chunk."""
        if token is not None:
            _detach(token)
        if self.recording:
            self.add(chunk)

    def abandoning(self) -> _Stream:
        """This stream, about to close its body early: ``with`` it around the close."""
        self.abandoned = True
        return self

    def __enter__(self) -> None:
        self.token = None if self.call is None else _attach(self.call.ctx)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        token = self.token
        if token is None:
            return
        if exc is None:
            _detach(token)
            self.finish(None)
        else:
            self.finish(exc)
            _detach(token)

    def add(self, chunk: Any) -> None:
        try:
            self.count += 1
            if self.count == 1:
                self.first_ns = time.perf_counter_ns()
            if not self.capture:
                return
            text = chunk if type(chunk) is str else chunk_text(chunk)
            if not text:
                return
            if self.length <= self.limit:
                self.parts.append(text)
            self.length += len(text)
        except Exception as exc:
            internal_error("record stream chunk", exc)

    def finish(self, error: BaseException | None) -> None:
        call = self.call
        assert call is not None
        if call.recording:
            try:
                self._record(call, error, self.abandoned)
            except Exception as exc:
                internal_error("finish stream", exc)
        if error is not None:
            end_error(call, error)
        else:
            end_ok(call, None, capture=False)

    def _record(self, call: Call, error: BaseException | None, abandoned: bool) -> None:
        attrs: dict[str, Any] = {
            C.NG_STREAM_CHUNK_COUNT: self.count,
            C.NG_STREAM_ABANDONED: abandoned,
        }
        if self.count:
            attrs[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (self.first_ns - self.start_ns) / 1e9
        if self.parts and call.meta.capture_output and call.state.capture_content:
            text = "".join(self.parts)
            reason = (
                C.FINISH_REASON_ERROR
                if error is not None
                else C.FINISH_REASON_ABANDONED
                if abandoned
                else C.FINISH_REASON_STOP
            )
            # chunks past the size limit were counted, not kept: report the full length
            attrs[C.GEN_AI_OUTPUT_MESSAGES] = output_message(call, text, reason, self.length)
        record_texts(call, attrs, None)  # the input and the documents
        set_all(call.span, attrs)


def chunk_text(chunk: Any) -> str:
    """The text of one streamed chunk (str, bytes, OpenAI / Anthropic chunk objects, else JSON)."""
    if type(chunk) is str:
        return chunk
    if isinstance(chunk, (bytes, bytearray)):
        return to_text(chunk)
    choices = get_field(chunk, "choices")  # OpenAI ChatCompletionChunk
    if isinstance(choices, (list, tuple)):
        out = []
        for ch in choices[:1]:
            delta = get_field(ch, "delta")
            content = get_field(delta, "content") if delta is not None else get_field(ch, "text")
            if isinstance(content, str):
                out.append(content)
        return "".join(out)
    delta = get_field(chunk, "delta")  # Anthropic content_block_delta
    if delta is not None:
        text = get_field(delta, "text")
        return text if isinstance(text, str) else ""
    for key in ("content", "text"):
        value = get_field(chunk, key)
        if isinstance(value, str):
            return value
    if chunk is None:
        return ""
    return to_text(chunk, scrub_keys=True)


def sync_stream(call: Call, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """``gen`` recorded as the stream of ``call``: values sent and exceptions thrown in are
    passed on, closing it early closes ``gen`` (the span ends as abandoned)."""
    return traced_gen(lambda _args, _kwargs: (call, gen))()


def traced_gen(
    start: Callable[
        [tuple[Any, ...], dict[str, Any]], tuple[Call | None, Generator[Any, Any, Any]]
    ],
) -> Callable[..., Generator[Any, Any, Any]]:
    """A generator function whose calls run ``start(args, kwargs)`` at the first iteration (the
    call, ``None`` when untraced, and the inner generator), then pass the inner generator's
    chunks, ``send``/``throw`` and ``close`` through, recorded (see :class:`_Stream`)."""

    def stream_of(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        call, gen = start(args, kwargs)
        if call is None:
            return (yield from gen)
        stream = _Stream(call)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            token = _attach(call.ctx)
            try:
                chunk = gen.send(sent) if thrown is None else gen.throw(thrown)
            except BaseException as exc:
                if stream.ended(exc, token):
                    return stream.value
                raise
            stream.got(chunk, token)
            try:
                sent, thrown = (yield chunk), None
            except GeneratorExit:
                with stream.abandoning():
                    gen.close()
                raise
            except BaseException as exc:
                sent, thrown = None, exc

    return stream_of


def async_stream(call: Call, agen: AsyncGenerator[Any, Any]) -> AsyncGenerator[Any, Any]:
    """``agen`` recorded as the stream of ``call`` (like :func:`sync_stream`)."""
    return traced_async_gen(lambda _args, _kwargs: (call, agen))()


def traced_async_gen(
    start: Callable[
        [tuple[Any, ...], dict[str, Any]], tuple[Call | None, AsyncGenerator[Any, Any]]
    ],
) -> Callable[..., AsyncGenerator[Any, Any]]:
    """An async generator function whose calls run ``start(args, kwargs)`` at the first
    iteration (the call, ``None`` when untraced, and the inner generator) and then pass the
    inner generator's chunks, ``asend``/``athrow`` and ``aclose`` through, recorded like
    :func:`traced_gen` (an async generator cannot ``yield from``: untraced calls take the same
    loop, which then records nothing)."""

    async def stream_of(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        call, agen = start(args, kwargs)
        stream = _Stream(call)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            token = None if call is None else _attach(call.ctx)
            try:
                chunk = await (agen.asend(sent) if thrown is None else agen.athrow(thrown))
            except BaseException as exc:
                if stream.ended(exc, token):
                    return
                raise
            if token is not None:  # untraced: nothing to restore or record
                stream.got(chunk, token)
            try:
                sent, thrown = (yield chunk), None
            except GeneratorExit:
                with stream.abandoning():
                    await agen.aclose()
                raise
            except BaseException as exc:
                sent, thrown = None, exc

    return stream_of
