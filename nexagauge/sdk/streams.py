"""Streams: generator and async-generator results recorded chunk by chunk.

The span starts at the first iteration (when the body starts running) and ends when the stream is
exhausted, raises, or is closed early (``nexagauge.stream.abandoned = true``); the chunks' text is
joined into the output (kept up to the size limit, counted beyond it; cut then scrubbed like any
recorded text), and the time to the first chunk and the chunk count are recorded. The span is the
current span while the body runs (each resumption), never while the consumer runs between chunks.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Generator
from typing import Any

from opentelemetry import context as otel_context

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import Call
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk.capture import output_message, record_texts
from nexagauge.sdk.documents import get_field
from nexagauge.sdk.serialize import to_text
from nexagauge.sdk.spans import end_error, end_ok

_attach = otel_context.attach
_detach = otel_context.detach


class _Stream:
    """Accumulates the chunks of one stream (text kept up to the size limit)."""

    __slots__ = ("count", "first_ns", "length", "parts", "start_ns")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.count = 0
        self.start_ns = time.perf_counter_ns()
        self.first_ns = 0

    def add(self, call: Call, chunk: Any) -> None:
        if not call.recording:
            return
        try:
            self.count += 1
            if self.count == 1:
                self.first_ns = time.perf_counter_ns()
            if not (call.meta.capture_output and call.state.capture_content):
                return
            text = chunk_text(chunk)
            if not text:
                return
            if self.length <= call.state.max_value_length:
                self.parts.append(text)
            self.length += len(text)
        except Exception as exc:
            internal_error("record stream chunk", exc)

    def finish(self, call: Call, error: BaseException | None, abandoned: bool) -> None:
        if call.recording:
            try:
                self._record(call, error, abandoned)
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
        call.span.set_attributes(attrs)


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
    rec = _Stream()
    sent: Any = None
    pending: BaseException | None = None
    while True:
        token = _attach(call.ctx)
        try:
            if pending is None:
                chunk = gen.send(sent)
            else:
                thrown, pending = pending, None
                chunk = gen.throw(thrown)
        except StopIteration as stop:
            rec.finish(call, None, abandoned=False)
            return stop.value
        except BaseException as exc:
            rec.finish(call, exc, abandoned=False)
            raise
        finally:
            _detach(token)
        rec.add(call, chunk)
        try:
            sent = yield chunk
        except GeneratorExit:
            token = _attach(call.ctx)
            try:
                gen.close()
            except BaseException as exc:
                rec.finish(call, exc, abandoned=True)
                raise
            finally:
                _detach(token)
            rec.finish(call, None, abandoned=True)
            raise
        except BaseException as exc:
            pending = exc
            sent = None


async def async_stream(call: Call, agen: AsyncGenerator[Any, Any]) -> AsyncGenerator[Any, Any]:
    rec = _Stream()
    sent: Any = None
    pending: BaseException | None = None
    while True:
        token = _attach(call.ctx)
        try:
            if pending is None:
                chunk = await agen.asend(sent)
            else:
                thrown, pending = pending, None
                chunk = await agen.athrow(thrown)
        except StopAsyncIteration:
            rec.finish(call, None, abandoned=False)
            return
        except BaseException as exc:
            rec.finish(call, exc, abandoned=False)
            raise
        finally:
            _detach(token)
        rec.add(call, chunk)
        try:
            sent = yield chunk
        except GeneratorExit:
            token = _attach(call.ctx)
            try:
                await agen.aclose()
            except BaseException as exc:
                rec.finish(call, exc, abandoned=True)
                raise
            finally:
                _detach(token)
            rec.finish(call, None, abandoned=True)
            raise
        except BaseException as exc:
            pending = exc
            sent = None
