"""``@nexagauge.trace``, ``add_context``, ``session`` and evaluation knobs: what the app calls.

Each traced call becomes one span carrying what the online evaluator needs to build an evaluation
case: the input (``gen_ai.input.messages``), the output (``gen_ai.output.messages``), the retrieved
context (``gen_ai.retrieval.documents``), the conversation (``gen_ai.conversation.id``) and the
per-call evaluation knobs (``nexagauge.eval.*``). Names come from :mod:`nexagauge.sdk.conventions`.

Never break the app:

* the user's exception is recorded (scrubbed) and re-raised unchanged (same object, same traceback);
* any failure inside the SDK goes to :func:`nexagauge.sdk._errors.internal_error` (logged once,
  swallowed; re-raised under ``NEXAGAUGE_SDK_STRICT=1``) and the call runs as if untraced;
* serialization never raises (:mod:`nexagauge.sdk.serialize`); secrets are scrubbed before the span
  is handed to the exporter (:mod:`nexagauge.sdk.scrubbing`); export runs on the batch processor's
  thread.

Streams (generator and async-generator functions): the span starts at the first iteration (when
the body starts running) and ends when the stream is exhausted, raises, or is closed early
(``nexagauge.stream.abandoned = true``); the chunks' text is joined into the output, and the time to
the first chunk and the chunk count are recorded. The span is the current span while the body runs
(each resumption), never while the consumer runs between chunks.

Example::

    import nexagauge

    @nexagauge.trace(relevance={"scoring_mode": "scale_1_5", "include_reasoning": True})
    def answer(question: str) -> str:
        docs = search(question)
        nexagauge.add_context(docs)
        return llm(question, docs)

    with nexagauge.session(session_id="conv-42", user_id="u-7"):
        answer("What is the capital of France?")
"""

from __future__ import annotations

import functools
import inspect
import time
import traceback
import types
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Mapping
from contextvars import ContextVar, Token
from json.encoder import encode_basestring as _enc  # C-accelerated, keeps non-ASCII
from typing import Any, Literal, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Status, StatusCode

from nexagauge.sdk import config as _config
from nexagauge.sdk import conventions as C
from nexagauge.sdk._errors import internal_error, warn_once
from nexagauge.sdk._version import SDK_VERSION
from nexagauge.sdk.serialize import dumps, safe_repr, to_jsonable, to_text

F = TypeVar("F", bound=Callable[..., Any])

_MISSING: Any = object()
_CALL_KEY = otel_context.create_key("nexagauge-call")
_INPUT_NAMES = ("question", "query", "prompt", "input", "messages")
_CONTEXT_NAMES = ("context", "contexts", "documents")
KNOB_BLOCKS = {
    "relevance": C.NG_EVAL_RELEVANCE,
    "grounding": C.NG_EVAL_GROUNDING,
    "geval": C.NG_EVAL_GEVAL,
    "redteam": C.NG_EVAL_REDTEAM,
}
SCORING_MODES = ("binary_yes_no", "scale_1_5")
MAX_DOCUMENTS = 256

_IN_HEAD = '[{"role":"user","parts":[{"type":"text","content":'
_IN_TAIL = "}]}]"
_OUT_HEAD = '[{"role":"assistant","parts":[{"type":"text","content":'
_OUT_TAIL = '}],"finish_reason":'
_attach = otel_context.attach
_detach = otel_context.detach
_set_value = otel_context.set_value
_get_value = otel_context.get_value
_get_current = otel_context.get_current
_set_span_in_context = otel_trace.set_span_in_context
_SPAN_KEY: str | None
try:  # the key OpenTelemetry stores the current span under (lets us build the context in one copy)
    from opentelemetry.trace.propagation import _SPAN_KEY
except ImportError:  # pragma: no cover - a future OpenTelemetry without it: two copies instead
    _SPAN_KEY = None
_OUT_TAILS = {
    reason: f'}}],"finish_reason":{_enc(reason)}}}]'
    for reason in (C.FINISH_REASON_STOP, C.FINISH_REASON_ERROR, C.FINISH_REASON_ABANDONED)
}


# ---------------------------------------------------------------------------------------------
# per-call state


class _Call:
    """State of one traced call, reachable from code inside it through the OpenTelemetry context."""

    __slots__ = (
        "ctx",
        "docs",
        "input_text",
        "knobs",
        "marks",
        "meta",
        "original",
        "parent",
        "span",
        "state",
        "turn_end",
    )

    def __init__(self, meta: _Meta, state: _config.State) -> None:
        self.meta = meta
        self.state = state
        self.span: Any = None
        self.ctx: Any = None
        self.docs: list[dict[str, Any]] | None = None
        self.input_text: str | None = None  # str input, recorded at the end (see _end_ok)
        self.knobs: dict[str, str] | None = None
        self.marks: list[str] | None = None
        self.original: dict[str, int] | None = None
        self.parent: _Call | None = None
        self.turn_end = False

    # -- recording helpers (never called with the context of another call)
    def text(self, attribute: str, text: str, original: int = -1, clean: bool = False) -> str:
        """Scrub then truncate one recorded text, noting what was changed.

        ``original``: the length before the caller already dropped a tail (streams keep only what
        fits); the marker and ``nexagauge.original_length.*`` then report that length.
        ``clean``: the caller already established (``Scrubber.is_clean``) that scrubbing would not
        change the text.
        """
        st = self.state
        if clean:
            scrubbed = text
        else:
            scrubbed, marks = st.scrubber.scrub(attribute, text)
            if marks is not None:
                if self.marks is None:
                    self.marks = marks
                else:
                    self.marks.extend(m for m in marks if m not in self.marks)
        limit = st.max_value_length
        if len(scrubbed) > limit or original > len(text):
            scrubbed = self.truncate(attribute, scrubbed, max(original, len(text)), limit)
        return scrubbed

    def truncate(self, attribute: str, text: str, original: int, limit: int) -> str:
        if self.original is None:
            self.original = {}
        self.original[attribute] = self.original.get(attribute, 0) + original
        return text[:limit] + C.TRUNCATION_MARKER_TEMPLATE.format(original=original)

    def add_docs(self, docs: list[dict[str, Any]]) -> None:
        if self.docs is None:
            self.docs = []
        room = MAX_DOCUMENTS - len(self.docs)
        if len(docs) > room:
            self.note_truncated(C.GEN_AI_RETRIEVAL_DOCUMENTS, 0)
            docs = docs[: max(room, 0)]
        limit = self.state.max_value_length
        for doc in docs:
            content = doc.get(C.DOC_CONTENT)
            if isinstance(content, str):
                scrubbed, marks = self.state.scrubber.scrub(C.GEN_AI_RETRIEVAL_DOCUMENTS, content)
                if marks is not None:
                    self.marks = [
                        *(self.marks or ()),
                        *(m for m in marks if m not in (self.marks or ())),
                    ]
                if len(scrubbed) > limit:
                    scrubbed = self.truncate(
                        C.GEN_AI_RETRIEVAL_DOCUMENTS, scrubbed, len(scrubbed), limit
                    )
                doc[C.DOC_CONTENT] = scrubbed
            self.docs.append(doc)

    def note_truncated(self, attribute: str, original: int) -> None:
        if self.original is None:
            self.original = {}
        self.original[attribute] = self.original.get(attribute, 0) + original


class _Meta:
    """What is known about a traced function at decoration time (computed once)."""

    __slots__ = (
        "capture_input",
        "capture_output",
        "context_default",
        "context_name",
        "context_pos",
        "input_auto",
        "input_default",
        "input_name",
        "input_pos",
        "is_retrieval",
        "name",
        "static",
    )

    def __init__(self) -> None:
        self.name = ""
        self.static: dict[str, Any] = {}
        self.capture_input = True
        self.capture_output = True
        self.input_name: str | None = None
        self.input_pos: int | None = None
        self.input_default: Any = _MISSING
        self.input_auto = False
        self.context_name: str | None = None
        self.context_pos: int | None = None
        self.context_default: Any = _MISSING
        self.is_retrieval = False


def _pick(
    args: tuple[Any, ...], kwargs: dict[str, Any], name: str, pos: int | None, default: Any
) -> Any:
    if kwargs:
        value = kwargs.get(name, _MISSING)
        if value is not _MISSING:
            return value
    if pos is not None and pos < len(args):
        return args[pos]
    return default


def _first_str(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The first ``str`` argument (positional, then keyword), else a chat message list, else none."""
    for a in args:
        if isinstance(a, str):
            return a
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, str):
                return v
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, list) and a and _get(a[0], "role") is not None:
            return a
    return _MISSING


# ---------------------------------------------------------------------------------------------
# input / output / documents -> attributes


def _messages_from_list(call: _Call, value: list[Any] | tuple[Any, ...]) -> str | None:
    """Chat-style ``[{"role":..., "content":...}]`` -> parts-layout JSON, or None if not chat."""
    out: list[dict[str, Any]] = []
    for m in value:
        role = _get(m, "role")
        if not isinstance(role, str):
            return None
        content = _get(m, "content")
        parts: list[dict[str, Any]] = []
        if isinstance(content, str):
            parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: content})
        elif isinstance(content, (list, tuple)):
            for p in content:
                if isinstance(p, str):
                    parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: p})
                    continue
                ptype = _get(p, "type")
                text = _get(p, "text")
                if text is None:
                    text = _get(p, "content")
                if isinstance(text, str):
                    parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: text})
                else:
                    parts.append({C.PART_TYPE: str(ptype) if ptype is not None else "unknown"})
        elif content is not None:
            parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: to_text(content)})
        out.append({C.MSG_ROLE: role, C.MSG_PARTS: parts})
    if not out:
        return None
    for msg in out:
        for part in msg[C.MSG_PARTS]:
            if C.PART_CONTENT in part:
                part[C.PART_CONTENT] = call.text(C.GEN_AI_INPUT_MESSAGES, part[C.PART_CONTENT])
    return dumps(out)


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _input_attrs(call: _Call, attrs: dict[str, Any], value: Any) -> None:
    if call.meta.is_retrieval:
        attrs[C.GEN_AI_RETRIEVAL_QUERY_TEXT] = call.text(
            C.GEN_AI_RETRIEVAL_QUERY_TEXT, _as_text(call, value)
        )
        return
    if type(value) is str:
        # immutable: recorded when the call ends, scrubbed together with the output (one pass)
        call.input_text = value
        return
    if isinstance(value, (list, tuple)) and value:
        messages = _messages_from_list(call, value)
        if messages is not None:
            attrs[C.GEN_AI_INPUT_MESSAGES] = messages
            return
    attrs[C.GEN_AI_INPUT_MESSAGES] = (
        _IN_HEAD + _enc(call.text(C.GEN_AI_INPUT_MESSAGES, _as_text(call, value))) + _IN_TAIL
    )


def _as_text(call: _Call, value: Any) -> str:
    """Any value as text; structured values have secret-looking keys scrubbed."""
    if isinstance(value, str):
        return value
    hits: list[bool] = []
    scrub_keys = call.state.scrubber.scrub_keys
    text = to_text(value, scrub_keys=scrub_keys, on_sensitive_key=lambda: hits.append(True))
    if hits:
        mark = "nexagauge.value:sensitive_key"
        call.marks = [*(call.marks or ()), mark] if mark not in (call.marks or ()) else call.marks
    return text


def _flush_input(call: _Call, attrs: dict[str, Any], clean: bool = False) -> None:
    """Record the deferred ``str`` input (see ``_input_attrs``)."""
    text = call.input_text
    if text is not None:
        call.input_text = None
        attrs[C.GEN_AI_INPUT_MESSAGES] = (
            _IN_HEAD + _enc(call.text(C.GEN_AI_INPUT_MESSAGES, text, clean=clean)) + _IN_TAIL
        )


def _output_message(call: _Call, text: str, finish_reason: str, original: int = -1) -> str:
    tail = _OUT_TAILS.get(finish_reason) or _OUT_TAIL + _enc(finish_reason) + "}]"
    return _OUT_HEAD + _enc(call.text(C.GEN_AI_OUTPUT_MESSAGES, text, original)) + tail


def _output_attrs(call: _Call, attrs: dict[str, Any], result: Any) -> None:
    if result is None:
        return
    if call.meta.is_retrieval:
        docs = normalize_documents(result)
        copies = [dict(d) for d in docs]  # add_docs scrubs/truncates in place
        call.add_docs(docs)
        parent = call.parent
        if parent is not None:
            parent.add_docs(copies)
        return
    if type(result) is str:
        attrs[C.GEN_AI_OUTPUT_MESSAGES] = _output_message(call, result, C.FINISH_REASON_STOP)
        return
    if _llm_response_attrs(call, attrs, result):
        return
    attrs[C.GEN_AI_OUTPUT_MESSAGES] = _output_message(
        call, _as_text(call, result), C.FINISH_REASON_STOP
    )


def _llm_response_attrs(call: _Call, attrs: dict[str, Any], result: Any) -> bool:
    """Duck-typed OpenAI ChatCompletion / Anthropic Message: output, model, usage, finish."""
    choices = _get(result, "choices")
    messages: list[dict[str, Any]] = []
    finish: list[str] = []
    if isinstance(choices, (list, tuple)) and choices:
        for ch in choices:
            msg = _get(ch, "message")
            content = _get(msg, "content") if msg is not None else _get(ch, "text")
            reason = _get(ch, "finish_reason")
            reason = reason if isinstance(reason, str) else C.FINISH_REASON_STOP
            finish.append(reason)
            parts = []
            if isinstance(content, str):
                parts.append(
                    {
                        C.PART_TYPE: C.PART_TYPE_TEXT,
                        C.PART_CONTENT: call.text(C.GEN_AI_OUTPUT_MESSAGES, content),
                    }
                )
            messages.append(
                {C.MSG_ROLE: C.ROLE_ASSISTANT, C.MSG_PARTS: parts, C.MSG_FINISH_REASON: reason}
            )
    elif _get(result, "role") == C.ROLE_ASSISTANT and isinstance(
        _get(result, "content"), (list, tuple)
    ):
        parts = []
        for block in _get(result, "content"):
            text = _get(block, "text")
            if isinstance(text, str):
                parts.append(
                    {
                        C.PART_TYPE: C.PART_TYPE_TEXT,
                        C.PART_CONTENT: call.text(C.GEN_AI_OUTPUT_MESSAGES, text),
                    }
                )
        reason = _get(result, "stop_reason")
        reason = reason if isinstance(reason, str) else C.FINISH_REASON_STOP
        finish.append(reason)
        messages.append(
            {C.MSG_ROLE: C.ROLE_ASSISTANT, C.MSG_PARTS: parts, C.MSG_FINISH_REASON: reason}
        )
    else:
        return False
    attrs[C.GEN_AI_OUTPUT_MESSAGES] = dumps(messages)
    attrs[C.GEN_AI_RESPONSE_FINISH_REASONS] = finish
    model = _get(result, "model")
    if isinstance(model, str):
        attrs[C.GEN_AI_RESPONSE_MODEL] = model
    rid = _get(result, "id")
    if isinstance(rid, str):
        attrs[C.GEN_AI_RESPONSE_ID] = rid
    usage = _get(result, "usage")
    if usage is not None:
        tin = _get(usage, "prompt_tokens")
        tin = _get(usage, "input_tokens") if tin is None else tin
        tout = _get(usage, "completion_tokens")
        tout = _get(usage, "output_tokens") if tout is None else tout
        if isinstance(tin, int):
            attrs[C.GEN_AI_USAGE_INPUT_TOKENS] = tin
        if isinstance(tout, int):
            attrs[C.GEN_AI_USAGE_OUTPUT_TOKENS] = tout
    return True


_DOC_CONTENT_KEYS = ("content", "text", "page_content", "document", "chunk", "body")
_DOC_ID_KEYS = ("id", "doc_id", "document_id", "node_id", "id_", "_id")
_DOC_SCORE_KEYS = ("score", "relevance_score", "similarity", "distance")


def _doc(item: Any) -> dict[str, Any]:
    """One retrieved document in any common shape -> ``{"id", "score", "content", "metadata"}``."""
    if isinstance(item, str):
        return {C.DOC_CONTENT: item}
    if isinstance(item, (bytes, bytearray)):
        return {C.DOC_CONTENT: to_text(item)}
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], (int, float)):
        scored = _doc(item[0])  # (Document, score) as returned by similarity_search_with_score
        scored.setdefault(C.DOC_SCORE, float(item[1]))
        return scored
    node = _get(item, "node")  # LlamaIndex NodeWithScore
    if node is not None and not isinstance(item, Mapping):
        wrapped = _doc(node)
        score = _get(item, "score")
        if isinstance(score, (int, float)):
            wrapped[C.DOC_SCORE] = float(score)
        return wrapped
    doc: dict[str, Any] = {}
    content: Any = None
    for key in _DOC_CONTENT_KEYS:
        content = _get(item, key)
        if content is not None:
            break
    if content is None and not isinstance(item, Mapping):
        get_content = getattr(item, "get_content", None)
        if callable(get_content):
            content = get_content()
    for key in _DOC_ID_KEYS:
        ident = _get(item, key)
        if isinstance(ident, (str, int)) and not isinstance(ident, bool):
            doc[C.DOC_ID] = str(ident)
            break
    for key in _DOC_SCORE_KEYS:
        score = _get(item, key)
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            doc[C.DOC_SCORE] = float(score)
            break
    metadata = _get(item, "metadata")
    if isinstance(metadata, Mapping) and metadata:
        doc[C.DOC_METADATA] = to_jsonable(metadata, scrub_keys=True)
    if content is None:
        content = item  # an unknown object: its serialized form is the content
    doc[C.DOC_CONTENT] = content if isinstance(content, str) else to_text(content, scrub_keys=True)
    return doc


def normalize_documents(docs: Any) -> list[dict[str, Any]]:
    """Documents in the shapes apps use -> list of ``{"id", "score", "content", "metadata"}``.

    Accepts a string, a mapping, an object (LangChain ``Document``, LlamaIndex node /
    ``NodeWithScore``, anything with ``text``/``content``/``page_content``), ``(doc, score)`` tuples,
    or a list of any of these. Never raises: an unreadable item becomes its safe repr.

    Example::

        >>> normalize_documents([{"id": 1, "text": "Paris", "score": 0.9}, "Lyon"])
        [{'id': '1', 'score': 0.9, 'content': 'Paris'}, {'content': 'Lyon'}]
    """
    if docs is None:
        return []
    if isinstance(docs, (str, bytes, bytearray, Mapping)) or (
        isinstance(docs, tuple) and len(docs) == 2 and isinstance(docs[1], (int, float))
    ):
        items: Iterable[Any] = [docs]
    elif isinstance(docs, (list, tuple, set, frozenset)):
        items = docs
    elif isinstance(docs, (Generator, AsyncGenerator, types.GeneratorType)):
        return [{C.DOC_CONTENT: safe_repr(docs)}]  # never consume a user's iterator
    else:
        items = [docs]
    out = []
    for item in items:
        try:
            out.append(_doc(item))
        except Exception:
            out.append({C.DOC_CONTENT: safe_repr(item)})
    return out


# ---------------------------------------------------------------------------------------------
# span lifecycle (all guarded: an exception here is an SDK bug, never the user's)


def _start(meta: _Meta, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call | None:
    """Start the span of one call (hot path: keep it lean; everything else happens at the end)."""
    st = _config.STATE
    if not st.enabled:
        return None
    call = _Call(meta, st)
    attrs = meta.static  # passed read-only; copied only when something is added
    sess = _SESSION.get()
    if sess is not None:
        attrs = {**attrs, **sess.attrs}
    if meta.is_retrieval:
        parent = _get_value(_CALL_KEY)
        call.parent = parent if isinstance(parent, _Call) else None
    if st.capture_content:
        if meta.capture_input:
            if meta.input_auto:
                value = args[0] if args and type(args[0]) is str else _first_str(args, kwargs)
            elif meta.input_name is not None:
                value = _pick(args, kwargs, meta.input_name, meta.input_pos, meta.input_default)
            else:
                value = _MISSING
            if type(value) is str and not meta.is_retrieval:
                call.input_text = value  # recorded at the end, scrubbed with the output
            elif value is not _MISSING and value is not None:
                attrs = dict(attrs)
                _input_attrs(call, attrs, value)
        if meta.context_name is not None:
            docs = _pick(args, kwargs, meta.context_name, meta.context_pos, meta.context_default)
            if docs is not _MISSING and docs is not None:
                call.add_docs(normalize_documents(docs))
    span = st.tracer.start_span(meta.name, attributes=attrs)
    call.span = span
    if _SPAN_KEY is not None:  # the current context + our span + the call state, one copy
        values = dict(_get_current())
        values[_SPAN_KEY] = span
        values[_CALL_KEY] = call
        call.ctx = otel_context.Context(values)
    else:  # pragma: no cover
        call.ctx = _set_value(_CALL_KEY, call, _set_span_in_context(span))
    return call


def _common_end_attrs(call: _Call, attrs: dict[str, Any]) -> None:
    if call.docs:
        attrs[C.GEN_AI_RETRIEVAL_DOCUMENTS] = dumps(call.docs)
    if call.knobs:
        attrs.update(call.knobs)
    if call.turn_end:
        attrs[C.NG_TURN_END] = True
    if call.marks:
        attrs[C.NG_SCRUBBED] = list(call.marks)
    if call.original:
        attrs[C.NG_TRUNCATED] = list(call.original)
        for name, length in call.original.items():
            attrs[C.NG_ORIGINAL_LENGTH_PREFIX + name] = length


def _end_ok(call: _Call, result: Any, capture: bool) -> None:
    try:
        attrs: dict[str, Any] = {}
        capture = capture and call.meta.capture_output and call.state.capture_content
        text_in = call.input_text
        if capture and type(result) is str and text_in is not None:
            # the common case, text in and text out: one scrubbing gate over both texts
            limit = call.state.max_value_length
            if (
                len(text_in) <= limit
                and len(result) <= limit
                and call.state.scrubber.is_clean(text_in + "\n" + result)
            ):
                call.input_text = None
                attrs[C.GEN_AI_INPUT_MESSAGES] = _IN_HEAD + _enc(text_in) + _IN_TAIL
                attrs[C.GEN_AI_OUTPUT_MESSAGES] = (
                    _OUT_HEAD + _enc(result) + _OUT_TAILS[C.FINISH_REASON_STOP]
                )
            else:
                _flush_input(call, attrs)
                attrs[C.GEN_AI_OUTPUT_MESSAGES] = _output_message(
                    call, result, C.FINISH_REASON_STOP
                )
        else:
            if capture:
                _output_attrs(call, attrs, result)
            _flush_input(call, attrs)
        if call.docs or call.knobs or call.marks or call.original or call.turn_end:
            _common_end_attrs(call, attrs)
        span = call.span
        call.ctx = None  # break the call <-> context cycle: freed by refcount, not by the GC
        if attrs:
            span.set_attributes(attrs)
        span.end()
    except Exception as exc:
        _end_quietly(call)
        internal_error("end span", exc)


def _error_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _end_error(call: _Call, exc: BaseException) -> None:
    try:
        span = call.span
        etype = _error_type(exc)
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
        attrs: dict[str, Any] = {C.ERROR_TYPE: etype}
        _flush_input(call, attrs)
        _common_end_attrs(call, attrs)
        call.ctx = None  # break the call <-> context cycle
        span.set_attributes(attrs)
        span.end()
    except Exception as inner:
        _end_quietly(call)
        internal_error("record exception", inner)


def _str_fails(exc: BaseException) -> bool:
    try:
        str(exc)
        return False
    except Exception:
        return True


def _end_quietly(call: _Call) -> None:
    call.ctx = None
    try:
        if call.span is not None and call.span.is_recording():
            call.span.end()
    except Exception:
        pass


# ---------------------------------------------------------------------------------------------
# streams


class _Stream:
    """Accumulates the chunks of one stream (text kept up to the size limit)."""

    __slots__ = ("count", "first_ns", "length", "parts", "start_ns")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.count = 0
        self.start_ns = time.perf_counter_ns()
        self.first_ns = 0

    def add(self, call: _Call, chunk: Any) -> None:
        try:
            self.count += 1
            if self.count == 1:
                self.first_ns = time.perf_counter_ns()
            if not (call.meta.capture_output and call.state.capture_content):
                return
            text = _chunk_text(chunk)
            if not text:
                return
            if self.length <= call.state.max_value_length:
                self.parts.append(text)
            self.length += len(text)
        except Exception as exc:
            internal_error("record stream chunk", exc)

    def finish(self, call: _Call, error: BaseException | None, abandoned: bool) -> None:
        try:
            attrs: dict[str, Any] = {
                C.NG_STREAM_CHUNK_COUNT: self.count,
                C.NG_STREAM_ABANDONED: abandoned,
            }
            _flush_input(call, attrs)
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
                attrs[C.GEN_AI_OUTPUT_MESSAGES] = _output_message(call, text, reason, self.length)
            call.span.set_attributes(attrs)
        except Exception as exc:
            internal_error("finish stream", exc)
        if error is not None:
            _end_error(call, error)
        else:
            _end_ok(call, None, capture=False)


def _chunk_text(chunk: Any) -> str:
    if type(chunk) is str:
        return chunk
    if isinstance(chunk, (bytes, bytearray)):
        return to_text(chunk)
    choices = _get(chunk, "choices")  # OpenAI ChatCompletionChunk
    if isinstance(choices, (list, tuple)):
        out = []
        for ch in choices[:1]:
            delta = _get(ch, "delta")
            content = _get(delta, "content") if delta is not None else _get(ch, "text")
            if isinstance(content, str):
                out.append(content)
        return "".join(out)
    delta = _get(chunk, "delta")  # Anthropic content_block_delta
    if delta is not None:
        text = _get(delta, "text")
        return text if isinstance(text, str) else ""
    for key in ("content", "text"):
        value = _get(chunk, key)
        if isinstance(value, str):
            return value
    if chunk is None:
        return ""
    return to_text(chunk, scrub_keys=True)


def _sync_stream(call: _Call, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
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


async def _async_stream(call: _Call, agen: AsyncGenerator[Any, Any]) -> AsyncGenerator[Any, Any]:
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


# ---------------------------------------------------------------------------------------------
# decorator


def _validate_knobs(block: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{block}: evaluation knobs must be a mapping, got {type(value).__name__}")
    mode = value.get("scoring_mode")
    if mode is not None and mode not in SCORING_MODES:
        raise ValueError(f"{block}.scoring_mode must be one of {SCORING_MODES}, got {mode!r}")
    reasoning = value.get("include_reasoning")
    if reasoning is not None and not isinstance(reasoning, bool):
        raise ValueError(f"{block}.include_reasoning must be a bool, got {reasoning!r}")
    metrics = value.get("metrics")
    if metrics is not None:
        if block not in ("geval", "redteam"):
            raise ValueError(f"{block} takes no metrics (only geval and redteam do)")
        if not isinstance(metrics, (list, tuple)):
            raise ValueError(f"{block}.metrics must be a list, got {type(metrics).__name__}")
        for i, m in enumerate(metrics):
            if not isinstance(m, Mapping) or not isinstance(m.get("name"), str) or not m["name"]:
                raise ValueError(f"{block}.metrics[{i}] must be a mapping with a non-empty name")
    data = to_jsonable(value)
    assert isinstance(data, dict)
    return data


def knob_attributes(
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Validate knob blocks and return their span attributes (``nexagauge.eval.<block>`` -> JSON).

    Raises ``TypeError``/``ValueError`` naming the block and field for a malformed block.

    Example::

        >>> knob_attributes(relevance={"scoring_mode": "scale_1_5"})
        {'nexagauge.eval.relevance': '{"scoring_mode":"scale_1_5"}'}
    """
    out: dict[str, str] = {}
    for block, value in (
        ("relevance", relevance),
        ("grounding", grounding),
        ("geval", geval),
        ("redteam", redteam),
    ):
        if value is not None:
            out[KNOB_BLOCKS[block]] = dumps(_validate_knobs(block, value))
    return out


def _param_index(sig: inspect.Signature | None, name: str) -> tuple[int | None, Any, bool]:
    """(positional index or None, default or _MISSING, known) of parameter ``name``."""
    if sig is None:
        return None, _MISSING, False
    for i, p in enumerate(sig.parameters.values()):
        if p.name == name:
            pos = i if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else None
            default = p.default if p.default is not p.empty else _MISSING
            return pos, default, True
    return None, _MISSING, False


def _build_meta(
    fn: Callable[..., Any],
    *,
    name: str | None,
    input_arg: str | None,
    context_arg: str | Literal[False] | None,
    capture_input: bool,
    capture_output: bool,
    operation: str | None,
    turn_end: bool,
    attributes: Mapping[str, Any] | None,
    knobs: dict[str, str],
    stream: bool,
) -> _Meta:
    meta = _Meta()
    meta.name = name or getattr(fn, "__qualname__", None) or safe_repr(fn, 100)
    try:
        sig: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    has_var_kw = sig is not None and any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    meta.capture_input = capture_input
    meta.capture_output = capture_output
    if input_arg is not None:
        pos, default, known = _param_index(sig, input_arg)
        if not known and not has_var_kw and sig is not None:
            raise ValueError(f"input_arg={input_arg!r}: {meta.name} has no such parameter")
        meta.input_name, meta.input_pos, meta.input_default = input_arg, pos, default
    else:
        for candidate in _INPUT_NAMES:
            pos, default, known = _param_index(sig, candidate)
            if known:
                meta.input_name, meta.input_pos, meta.input_default = candidate, pos, default
                break
        else:
            meta.input_auto = True
    if context_arg:
        pos, default, known = _param_index(sig, context_arg)
        if not known and not has_var_kw and sig is not None:
            raise ValueError(f"context_arg={context_arg!r}: {meta.name} has no such parameter")
        meta.context_name, meta.context_pos, meta.context_default = context_arg, pos, default
    elif context_arg is None:
        for candidate in _CONTEXT_NAMES:
            pos, default, known = _param_index(sig, candidate)
            if known:
                meta.context_name, meta.context_pos, meta.context_default = candidate, pos, default
                break
    op = operation or C.OPERATION_INVOKE_WORKFLOW
    meta.is_retrieval = op == C.OPERATION_RETRIEVAL
    static: dict[str, Any] = {
        C.GEN_AI_OPERATION_NAME: op,
        C.NG_SDK_VERSION: SDK_VERSION,
    }
    if op == C.OPERATION_INVOKE_WORKFLOW:
        static[C.GEN_AI_WORKFLOW_NAME] = meta.name
    if stream:
        static[C.NG_STREAM] = True
    if turn_end:
        static[C.NG_TURN_END] = True
    static.update(knobs)
    for key, value in (attributes or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"attributes: keys must be str, got {key!r}")
        if isinstance(value, (str, bool, int, float)):
            static[key] = value
        else:
            static[key] = dumps(to_jsonable(value))
    meta.static = static
    return meta


@overload
def trace(func: F, /) -> F: ...


@overload
def trace(
    func: None = None,
    /,
    *,
    name: str | None = None,
    input_arg: str | None = None,
    context_arg: str | Literal[False] | None = None,
    capture_input: bool = True,
    capture_output: bool = True,
    operation: str | None = None,
    turn_end: bool = False,
    attributes: Mapping[str, Any] | None = None,
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...


def trace(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    input_arg: str | None = None,
    context_arg: str | Literal[False] | None = None,
    capture_input: bool = True,
    capture_output: bool = True,
    operation: str | None = None,
    turn_end: bool = False,
    attributes: Mapping[str, Any] | None = None,
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> Any:
    """Trace a function, method, coroutine function, generator or async generator.

    Args:
        name: span name (default: the function's ``__qualname__``).
        input_arg: parameter holding the input (default: a parameter named question, query, prompt
            or input, else the first ``str`` argument). Chat message lists are recorded as messages.
        context_arg: parameter holding retrieved documents (default: one named context, contexts or
            documents; ``False`` disables).
        capture_input / capture_output: record the input / the return value (or joined stream).
        operation: ``gen_ai.operation.name`` (default ``invoke_workflow``; ``"retrieval"`` records
            the return value as documents and adds them to the enclosing traced call's context).
        turn_end: mark this span as the end of a conversation turn (``nexagauge.turn.end``).
        attributes: extra static span attributes (e.g. ``{"gen_ai.request.model": "gpt-4o"}``).
        relevance, grounding, geval, redteam: evaluation knob blocks of the data schema, validated
            now and recorded as ``nexagauge.eval.<block>`` JSON on every call.

    Example::

        @nexagauge.trace
        def answer(question: str) -> str: ...

        @nexagauge.trace(name="chat", geval={"metrics": [{"name": "polite", "criteria": "..."}]})
        async def chat(messages: list[dict]) -> AsyncIterator[str]: ...
    """
    knobs = knob_attributes(relevance, grounding, geval, redteam)

    def decorate(fn: Any) -> Any:
        if isinstance(fn, (classmethod, staticmethod)):
            return type(fn)(decorate(fn.__func__))
        if isinstance(fn, type) or not callable(fn):
            raise TypeError(f"@nexagauge.trace decorates functions and methods, not {fn!r}")
        is_agen = inspect.isasyncgenfunction(fn)
        is_gen = inspect.isgeneratorfunction(fn)
        meta = _build_meta(
            fn,
            name=name,
            input_arg=input_arg,
            context_arg=context_arg,
            capture_input=capture_input,
            capture_output=capture_output,
            operation=operation,
            turn_end=turn_end,
            attributes=attributes,
            knobs=knobs,
            stream=is_gen or is_agen,
        )
        if is_agen:
            return _wrap_async_gen(fn, meta)
        if is_gen:
            return _wrap_gen(fn, meta)
        if inspect.iscoroutinefunction(fn):
            return _wrap_async(fn, meta)
        return _wrap_sync(fn, meta)

    if func is not None:
        return decorate(func)
    return decorate


def retriever(func: Any = None, /, *, name: str | None = None, query_arg: str | None = None) -> Any:
    """Trace a retrieval function: its return value is recorded as documents.

    The documents go to ``gen_ai.retrieval.documents`` on the retrieval span
    (``gen_ai.operation.name = "retrieval"``, query in ``gen_ai.retrieval.query.text``) and are added
    to the context of the enclosing traced call, which is what the grounding metric evaluates.

    Example::

        @nexagauge.retriever
        def search(query: str) -> list[Document]: ...
    """
    return trace(
        func, name=name, input_arg=query_arg, operation=C.OPERATION_RETRIEVAL, context_arg=False
    )


class retrieval:
    """A retrieval span around inline code (when the retrieval is not a function to decorate).

    Documents passed to :meth:`add` are recorded on the retrieval span and added to the enclosing
    traced call's context, exactly like :func:`retriever`. Works with ``with`` and ``async with``;
    an exception inside the block is recorded on the span and propagates unchanged.

    Example::

        with nexagauge.retrieval(query=question) as r:
            hits = index.search(question, k=4)
            r.add(hits)
    """

    __slots__ = ("_call", "_meta", "_query", "_token")
    _metas: dict[str, _Meta] = {}

    def __init__(self, query: str | None = None, *, name: str = "retrieval") -> None:
        meta = retrieval._metas.get(name)
        if meta is None:
            meta = _build_meta(
                _retrieval_signature,
                name=name,
                input_arg="query",
                context_arg=False,
                capture_input=True,
                capture_output=False,
                operation=C.OPERATION_RETRIEVAL,
                turn_end=False,
                attributes=None,
                knobs={},
                stream=False,
            )
            retrieval._metas[name] = meta
        self._meta = meta
        self._query = query
        self._call: _Call | None = None
        self._token: Any = None

    def __enter__(self) -> retrieval:
        try:
            self._call = _start(self._meta, (self._query,), {})
            if self._call is not None:
                self._token = _attach(self._call.ctx)
        except Exception as exc:
            internal_error("start retrieval span", exc)
        return self

    def add(self, docs: Any) -> None:
        """Record retrieved documents (any shape :func:`normalize_documents` accepts)."""
        try:
            call = self._call
            if call is None or not call.state.capture_content:
                return
            normalized = normalize_documents(docs)
            copies = [dict(d) for d in normalized]  # add_docs scrubs/truncates in place
            call.add_docs(normalized)
            if call.parent is not None:
                call.parent.add_docs(copies)
        except Exception as exc:
            internal_error("retrieval.add", exc)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        call, self._call = self._call, None
        if call is None:
            return
        if self._token is not None:
            _detach(self._token)
            self._token = None
        if exc is not None:
            _end_error(call, exc)
        else:
            _end_ok(call, None, capture=False)

    async def __aenter__(self) -> retrieval:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)


def _retrieval_signature(query: str | None = None) -> None:
    """Signature template of ``nexagauge.retrieval`` (its input is the query)."""


def _wrap_sync(fn: Callable[..., Any], meta: _Meta) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            call = _start(meta, args, kwargs)
        except Exception as exc:
            internal_error("start span", exc)
            call = None
        if call is None:
            return fn(*args, **kwargs)
        token = _attach(call.ctx)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _end_error(call, exc)
            raise
        _detach(token)
        if type(result) is types.CoroutineType:  # e.g. a callable object with async __call__
            return _finish_awaited(call, result)
        if type(result) is types.GeneratorType:  # a plain function returning a generator
            try:
                call.span.set_attribute(C.NG_STREAM, True)
                return _sync_stream(call, result)
            except Exception as exc:
                internal_error("wrap returned generator", exc)
                return result
        _end_ok(call, result, capture=True)
        return result

    wrapper.__nexagauge_traced__ = True  # type: ignore[attr-defined]
    return wrapper


async def _finish_awaited(call: _Call, coro: Any) -> Any:
    """Await a coroutine returned by a sync callable inside its span, then end the span."""
    token = _attach(call.ctx)
    try:
        result = await coro
    except BaseException as exc:
        _detach(token)
        _end_error(call, exc)
        raise
    _detach(token)
    _end_ok(call, result, capture=True)
    return result


def _wrap_async(fn: Callable[..., Any], meta: _Meta) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            call = _start(meta, args, kwargs)
        except Exception as exc:
            internal_error("start span", exc)
            call = None
        if call is None:
            return await fn(*args, **kwargs)
        token = _attach(call.ctx)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _end_error(call, exc)
            raise
        _detach(token)
        if isinstance(result, types.AsyncGeneratorType):
            try:
                call.span.set_attribute(C.NG_STREAM, True)
                return _async_stream(call, result)
            except Exception as exc:
                internal_error("wrap returned async generator", exc)
                return result
        _end_ok(call, result, capture=True)
        return result

    wrapper.__nexagauge_traced__ = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_gen(fn: Callable[..., Any], meta: _Meta) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        try:
            call = _start(meta, args, kwargs)
        except Exception as exc:
            internal_error("start span", exc)
            call = None
        if call is None:
            return (yield from fn(*args, **kwargs))
        token = _attach(call.ctx)
        try:
            gen = fn(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _end_error(call, exc)
            raise
        _detach(token)
        return (yield from _sync_stream(call, gen))

    wrapper.__nexagauge_traced__ = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_async_gen(fn: Callable[..., Any], meta: _Meta) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        try:
            call = _start(meta, args, kwargs)
        except Exception as exc:
            internal_error("start span", exc)
            call = None
        if call is None:
            async for item in _passthrough(fn(*args, **kwargs)):
                yield item
            return
        token = _attach(call.ctx)
        try:
            agen = fn(*args, **kwargs)
        except BaseException as exc:
            _detach(token)
            _end_error(call, exc)
            raise
        _detach(token)
        inner = _async_stream(call, agen)
        sent: Any = None
        pending: BaseException | None = None
        try:
            while True:
                try:
                    if pending is None:
                        chunk = await inner.asend(sent)
                    else:
                        thrown, pending = pending, None
                        chunk = await inner.athrow(thrown)
                except StopAsyncIteration:
                    return
                try:
                    sent = yield chunk
                except GeneratorExit:
                    raise
                except BaseException as exc:
                    pending = exc
                    sent = None
        finally:
            await inner.aclose()

    wrapper.__nexagauge_traced__ = True  # type: ignore[attr-defined]
    return wrapper


async def _passthrough(agen: AsyncGenerator[Any, Any]) -> AsyncGenerator[Any, Any]:
    async for item in agen:
        yield item


# ---------------------------------------------------------------------------------------------
# helpers used inside traced calls


def _current_call(site: str) -> _Call | None:
    call = _get_value(_CALL_KEY)
    if call is None:
        warn_once(site, f"nexagauge.{site}() called outside a @nexagauge.trace call; ignored")
    return call  # type: ignore[return-value]


def add_context(docs: Any) -> None:
    """Attach retrieved documents (text, id, score) to the current traced call.

    Accepts what :func:`normalize_documents` accepts. The documents are recorded (scrubbed,
    truncated) in ``gen_ai.retrieval.documents`` when the call ends; several calls accumulate.
    Outside a traced call it logs a warning once and does nothing.

    Example::

        @nexagauge.trace
        def answer(question: str) -> str:
            hits = store.similarity_search_with_score(question)
            nexagauge.add_context(hits)
            ...
    """
    try:
        call = _current_call("add_context")
        if call is None or not call.state.capture_content:
            return
        call.add_docs(normalize_documents(docs))
    except Exception as exc:
        internal_error("add_context", exc)


def set_eval_knobs(
    *,
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> None:
    """Set evaluation knobs for the current traced call only (overrides the decorator's blocks).

    A malformed block is a programming error: it is logged (raised under strict mode) and ignored,
    the call itself continues.

    Example::

        nexagauge.set_eval_knobs(grounding={"scoring_mode": "scale_1_5", "include_reasoning": True})
    """
    try:
        call = _current_call("set_eval_knobs")
        if call is None:
            return
        knobs = knob_attributes(relevance, grounding, geval, redteam)
        call.knobs = {**(call.knobs or {}), **knobs}
    except Exception as exc:
        internal_error("set_eval_knobs", exc)


def mark_turn_end() -> None:
    """Mark the current traced call as the end of a conversation turn (``nexagauge.turn.end``).

    The evaluator then scores the turn as soon as this span ends instead of waiting out the
    trace grace period. Outside a traced call it does nothing.

    Example::

        @nexagauge.trace
        def handle(message: str) -> str:
            reply = agent.run(message)   # inner traced calls: retrieval, LLM, tools
            nexagauge.mark_turn_end()    # this span closes the user's turn
            return reply
    """
    try:
        call = _current_call("mark_turn_end")
        if call is not None:
            call.turn_end = True
    except Exception as exc:
        internal_error("mark_turn_end", exc)


# ---------------------------------------------------------------------------------------------
# session


class _Session:
    __slots__ = ("attrs", "session_id", "user_id")

    def __init__(self, session_id: str | None, user_id: str | None) -> None:
        self.session_id = session_id
        self.user_id = user_id
        attrs: dict[str, Any] = {}
        if session_id is not None:
            attrs[C.GEN_AI_CONVERSATION_ID] = session_id
        if user_id is not None:
            attrs[C.NG_USER_ID] = user_id
        self.attrs = attrs


_SESSION: ContextVar[_Session | None] = ContextVar("nexagauge_session", default=None)


class session:
    """Set the conversation (and user) of every traced call inside the block.

    Works with ``with`` and ``async with``; nests (an inner block inherits the ids it does not
    set); isolated per thread and per asyncio task (contextvars).

    Example::

        with nexagauge.session(session_id="conv-42", user_id="user-7"):
            answer("hi")       # gen_ai.conversation.id = conv-42, nexagauge.user.id = user-7
    """

    __slots__ = ("_tokens", "session_id", "user_id")

    def __init__(self, session_id: str | int | None = None, user_id: str | int | None = None):
        for label, value in (("session_id", session_id), ("user_id", user_id)):
            if value is not None and not isinstance(value, (str, int)):
                raise TypeError(f"{label} must be str or int, got {type(value).__name__}")
        self.session_id = None if session_id is None else str(session_id)
        self.user_id = None if user_id is None else str(user_id)
        self._tokens: list[Token[_Session | None]] = []

    def __enter__(self) -> session:
        outer = _SESSION.get()
        sid = self.session_id
        uid = self.user_id
        if outer is not None:
            sid = sid if sid is not None else outer.session_id
            uid = uid if uid is not None else outer.user_id
        self._tokens.append(_SESSION.set(_Session(sid, uid)))
        return self

    def __exit__(self, *exc: object) -> None:
        _SESSION.reset(self._tokens.pop())

    async def __aenter__(self) -> session:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__(*exc)


def current_session() -> tuple[str | None, str | None]:
    """``(session_id, user_id)`` of the innermost ``nexagauge.session`` block, or ``(None, None)``.

    Example:
        >>> with session("conv-42", user_id="user-7"):
        ...     current_session()
        ('conv-42', 'user-7')
        >>> current_session()
        (None, None)
    """
    s = _SESSION.get()
    return (s.session_id, s.user_id) if s is not None else (None, None)
