"""``@nexagauge.trace`` and ``@nexagauge.retriever``: the decorator and the wrappers it installs.

One wrapper per kind of callable -- function, coroutine function, generator function, async
generator function -- each made of the same three steps written once here: :func:`_begin` (start
the span, guarded), :func:`_run` / :func:`_await_in` (run the call inside it: the user's exception
is recorded and re-raised unchanged, same object, same traceback) and :func:`_finish` (end the
span, or hand it to a stream when the call returned a generator or a coroutine). Streams are
recorded by :mod:`nexagauge.sdk.streams`.

Example::

    @nexagauge.trace(relevance={"scoring_mode": "scale_1_5", "include_reasoning": True})
    def answer(question: str) -> str: ...
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, overload

from opentelemetry import context as otel_context

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import MISSING, Call, Meta
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk._version import SDK_VERSION
from nexagauge.sdk.knobs import knob_blocks
from nexagauge.sdk.serialize import dumps, safe_repr, to_jsonable
from nexagauge.sdk.spans import end_error, end_ok, start
from nexagauge.sdk.streams import async_stream, sync_stream, traced_async_gen, traced_gen
from nexagauge.sdk.tooldefs import tool_definitions

F = TypeVar("F", bound=Callable[..., Any])

_INPUT_NAMES = ("question", "query", "prompt", "input", "messages")
_CONTEXT_NAMES = ("context", "contexts", "documents")
_attach = otel_context.attach
_detach = otel_context.detach


def _param_index(sig: inspect.Signature | None, name: str) -> tuple[int | None, Any, bool]:
    """(positional index or None, default or MISSING, known) of parameter ``name``."""
    if sig is None:
        return None, MISSING, False
    for i, p in enumerate(sig.parameters.values()):
        if p.name == name:
            pos = i if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else None
            default = p.default if p.default is not p.empty else MISSING
            return pos, default, True
    return None, MISSING, False


def build_meta(
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
    knobs: dict[str, dict[str, Any]],
    stream: bool,
) -> Meta:
    """What every call of ``fn`` needs (argument positions, static attributes), computed once."""
    meta = Meta()
    meta.name = meta.raw_name = name or getattr(fn, "__qualname__", None) or safe_repr(fn, 100)
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
            data = to_jsonable(value, scrub_keys=True)
            static[key] = data if isinstance(data, (dict, list)) else dumps(data)
    meta.raw_static = static
    meta.static = static  # scrubbed on the first call (Meta.scrubbed_for)
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
    tools: Iterable[Any] | None = None,
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
    tools: Iterable[Any] | None = None,
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
        tools: the tools an agent may call (``@nexagauge.tool`` functions, names or definitions),
            recorded as ``gen_ai.tool.definitions`` (:func:`nexagauge.sdk.tooldefs.tool_definitions`)
            so the evaluator can tell calls to undeclared tools.

    Example::

        @nexagauge.trace
        def answer(question: str) -> str: ...

        @nexagauge.trace(name="chat", geval={"metrics": [{"name": "polite", "criteria": "..."}]})
        async def chat(messages: list[dict]) -> AsyncIterator[str]: ...
    """
    knobs = knob_blocks(relevance, grounding, geval, redteam)
    if tools is not None:
        attributes = {**(attributes or {}), C.GEN_AI_TOOL_DEFINITIONS: tool_definitions(tools)}

    def decorate(fn: Any) -> Any:
        if isinstance(fn, (classmethod, staticmethod)):
            return type(fn)(decorate(fn.__func__))
        if isinstance(fn, type) or not callable(fn):
            raise TypeError(f"@nexagauge.trace decorates functions and methods, not {fn!r}")
        is_agen = inspect.isasyncgenfunction(fn)
        is_gen = inspect.isgeneratorfunction(fn)
        meta = build_meta(
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
        wrapper: Callable[..., Any]
        if is_agen:
            wrapper = traced_async_gen(_streaming(fn, meta))
        elif is_gen:
            wrapper = traced_gen(_streaming(fn, meta))
        elif inspect.iscoroutinefunction(fn):
            wrapper = _wrap_async(fn, meta)
        else:
            wrapper = _wrap_sync(fn, meta)
        wrapper = functools.wraps(fn)(wrapper)
        wrapper.__nexagauge_traced__ = True  # type: ignore[attr-defined]
        return wrapper

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


# ---------------------------------------------------------------------------------------------
# the three steps of every wrapper


def _begin(meta: Meta, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call | None:
    """Start the call's span; None when tracing is off or starting failed (then run untraced)."""
    try:
        return start(meta, args, kwargs)
    except Exception as exc:
        internal_error("start span", exc)
        return None


def _run(call: Call, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` with the call's span current; an exception ends the span."""
    token = _attach(call.ctx)
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        _detach(token)
        end_error(call, exc)
        raise
    _detach(token)
    return result


async def _await_in(
    call: Call, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``await fn(*args, **kwargs)`` with the call's span current, then :func:`_finish`."""
    token = _attach(call.ctx)
    try:
        result = await fn(*args, **kwargs)
    except BaseException as exc:
        _detach(token)
        end_error(call, exc)
        raise
    _detach(token)
    return _finish(call, result)


def _finish(call: Call, result: Any) -> Any:
    """End the span with ``result``; a returned coroutine or generator carries the span on."""
    if type(result) is types.CoroutineType:  # e.g. a callable object with async __call__
        return _await_in(call, lambda: result, (), {})
    if type(result) is types.GeneratorType or isinstance(result, types.AsyncGeneratorType):
        try:
            call.span.set_attribute(C.NG_STREAM, True)
            if type(result) is types.GeneratorType:
                return sync_stream(call, result)
            return async_stream(call, result)
        except Exception as exc:
            internal_error("wrap returned generator", exc)
            return result
    end_ok(call, result, capture=True)
    return result


# ---------------------------------------------------------------------------------------------
# the wrappers


def _wrap_sync(fn: Callable[..., Any], meta: Meta) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _begin(meta, args, kwargs)
        if call is None:
            return fn(*args, **kwargs)
        return _finish(call, _run(call, fn, args, kwargs))

    return wrapper


def _wrap_async(fn: Callable[..., Any], meta: Meta) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _begin(meta, args, kwargs)
        if call is None:
            return await fn(*args, **kwargs)
        return await _await_in(call, fn, args, kwargs)

    return wrapper


def _streaming(fn: Callable[..., Any], meta: Meta) -> Callable[..., Any]:
    """What a traced generator function does at its first iteration: start the call's span
    and the body; the call (``None``: untraced) and the body's generator, for
    :func:`~nexagauge.sdk.streams.traced_gen` / :func:`~nexagauge.sdk.streams.traced_async_gen`."""

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Call | None, Any]:
        call = _begin(meta, args, kwargs)
        return call, fn(*args, **kwargs) if call is None else _run(call, fn, args, kwargs)

    return start
