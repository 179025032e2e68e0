"""Span lifecycle of a traced call: start, end with a result, end with an exception.

Everything here is guarded by its callers: an exception is an SDK bug, never the user's, and the
call then runs as if untraced (:func:`nexagauge.sdk._errors.internal_error`).

Off costs nothing: with tracing disabled (``configure(enabled=False)``, ``OTEL_SDK_DISABLED=true``)
or no tracer provider anywhere (no ``configure`` and none set globally), :func:`start` returns
None after two attribute reads and the function runs plain. A span that is not recording (sampled
out, a no-op provider) is still started and made current -- its context must reach the spans and
requests inside the call -- but nothing is captured for it.
"""

from __future__ import annotations

import traceback
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Status, StatusCode

from nexagauge.sdk import config as _config
from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import CALL_KEY, MAX_DOCUMENTS, MISSING, Call, Meta
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk.capture import input_attrs, output_attrs, pick, pick_input, record_texts
from nexagauge.sdk.documents import all_str, normalize_documents
from nexagauge.sdk.sampler_view import attributes_at_end
from nexagauge.sdk.serialize import safe_repr
from nexagauge.sdk.session import SESSION
from nexagauge.sdk.span_attrs import set_all

_get_value = otel_context.get_value
_get_current = otel_context.get_current
_SPAN_KEY: str | None
try:  # the key OpenTelemetry stores the current span under (lets us build the context in one copy)
    from opentelemetry.trace.propagation import _SPAN_KEY
except ImportError:  # pragma: no cover - a future OpenTelemetry without it: two copies instead
    _SPAN_KEY = None


def start(meta: Meta, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call | None:
    """Start the span of one call, or None when tracing is off (hot path: keep it lean)."""
    st = _config.STATE
    if not st.enabled or (st.provider is None and not _config.global_provider_set()):
        return None
    if meta.scrubber is not st.scrubber:
        meta.scrubbed_for(st.scrubber)
    attrs = meta.static  # passed read-only; copied only when something is added
    sess = SESSION.get()
    if sess is not None:
        attrs = {**attrs, **sess.attrs}
    call = Call(meta, st)
    late = st.late
    if late is None:
        late = st.late = attributes_at_end(st.tracer)
    if late:  # the sampler does not read them: set with the content when the span ends
        span = st.tracer.start_span(meta.name)
        call.late = attrs
    else:
        span = st.tracer.start_span(meta.name, attributes=attrs)
    call.span = span
    if _SPAN_KEY is not None:  # the current context + our span + the call state, one copy
        values = dict(_get_current())
        values[_SPAN_KEY] = span
        values[CALL_KEY] = call
        call.ctx = otel_context.Context(values)
    else:  # pragma: no cover
        call.ctx = otel_context.set_value(CALL_KEY, call, otel_trace.set_span_in_context(span))
    if not span.is_recording():
        call.recording = False
        return call
    if meta.static_marks is not None:
        call.mark(meta.static_marks)
    if sess is not None and sess.marks is not None:
        call.mark(sess.marks)
    if meta.is_retrieval:
        parent = _get_value(CALL_KEY)
        call.parent = parent if isinstance(parent, Call) and parent.recording else None
    if st.capture_content:
        if meta.capture_input:
            pos = meta.input_pos
            value = (
                args[pos]  # positional, the common case: no function call
                if not kwargs and pos is not None and pos < len(args)
                else pick_input(meta, args, kwargs)
            )
            if type(value) is str and not meta.is_retrieval:
                call.input_text = value  # recorded at the end, gated with the output
            elif value is not MISSING and value is not None:
                extra: dict[str, Any] = {}
                input_attrs(call, extra, value)
                if extra:
                    set_all(span, extra)
        if meta.context_name is not None:
            pos = meta.context_pos
            docs = (
                args[pos]  # positional, the common case: no function call
                if not kwargs and pos is not None and pos < len(args)
                else pick(args, kwargs, meta.context_name, pos, meta.context_default)
            )
            if type(docs) is list and len(docs) <= MAX_DOCUMENTS and all_str(docs):
                call.strs = tuple(docs)  # the common case: recorded as they are, no dict each
            elif docs is not MISSING and docs is not None:
                call.add_docs(normalize_documents(docs))
    return call


def _common_end_attrs(call: Call, attrs: dict[str, Any]) -> None:
    if call.knobs:
        attrs.update(call.knobs)
    if call.turn_end:
        attrs[C.NG_TURN_END] = True
    if call.marks:
        attrs[C.NG_SCRUBBED] = tuple(call.marks)
    if call.original:
        attrs[C.NG_TRUNCATED] = tuple(call.original)
        for name, length in call.original.items():
            attrs[C.NG_ORIGINAL_LENGTH_PREFIX + name] = length


def end_ok(call: Call, result: Any, capture: bool) -> None:
    """End the span of a call that returned ``result`` (recorded when ``capture``)."""
    try:
        span = call.span
        call.ctx = None  # break the call <-> context cycle: freed by refcount, not by the GC
        if not call.recording:
            span.end()
            return
        late = call.late
        attrs: dict[str, Any] = {**late} if late else {}
        meta = call.meta
        capture = capture and meta.capture_output and call.state.capture_content
        output: str | None = None
        if capture and result is not None:
            if meta.is_retrieval:
                docs = normalize_documents(result)
                call.add_docs(docs)
                if call.parent is not None:
                    call.parent.add_docs(docs)
            elif type(result) is str:
                output = result
            else:
                output_attrs(call, attrs, result)
        if call.input_text is not None or output is not None or call.docs or call.strs:
            record_texts(call, attrs, output)
        if call.knobs or call.marks or call.original or call.turn_end:
            _common_end_attrs(call, attrs)
        if attrs:
            set_all(span, attrs)
        span.end()
    except Exception as exc:
        end_quietly(call)
        internal_error("end span", exc)


def _error_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _str_fails(exc: BaseException) -> bool:
    try:
        str(exc)
        return False
    except Exception:
        return True


def end_error(call: Call, exc: BaseException) -> None:
    """End the span of a call that raised ``exc`` (message and stack trace cut and scrubbed)."""
    try:
        span = call.span
        call.ctx = None  # break the call <-> context cycle
        etype = _error_type(exc)
        if not call.recording:
            span.end()
            return
        message = call.text(C.EXCEPTION_MESSAGE, safe_repr(exc) if _str_fails(exc) else str(exc))
        stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        span.add_event(
            C.EXCEPTION_EVENT,
            {
                C.EXCEPTION_TYPE: etype,
                C.EXCEPTION_MESSAGE: message,
                C.EXCEPTION_STACKTRACE: call.text(C.EXCEPTION_STACKTRACE, stack),
                C.EXCEPTION_ESCAPED: True,
            },
        )
        span.set_status(Status(StatusCode.ERROR, f"{etype}: {message}"))
        late = call.late
        attrs: dict[str, Any] = {**late, C.ERROR_TYPE: etype} if late else {C.ERROR_TYPE: etype}
        if call.input_text is not None or call.docs or call.strs:
            record_texts(call, attrs, None)
        _common_end_attrs(call, attrs)
        set_all(span, attrs)
        span.end()
    except Exception as inner:
        end_quietly(call)
        internal_error("record exception", inner)


def end_quietly(call: Call) -> None:
    """End the span whatever state the recording is in (after an SDK failure)."""
    call.ctx = None
    try:
        if call.span is not None and call.span.is_recording():
            if call.late:
                call.span.set_attributes(call.late)
            call.span.end()
    except Exception:
        pass
