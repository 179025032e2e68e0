"""``@nexagauge.tool``: an agent's tool, traced as an ``execute_tool`` span of the GenAI conventions.

Each call of a decorated function (sync or async) records one span named
``execute_tool <tool name>`` with ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``,
``gen_ai.tool.type = function``, ``gen_ai.tool.description`` (when given),
``gen_ai.tool.call.id`` (from the parameter named by ``call_id_arg``, or one named
``tool_call_id`` / ``call_id``; that parameter is not part of the recorded arguments), and, behind
the same switches as a traced call's input and output (``configure(capture_content=...)``, the
size limit and secret scrubbing), ``gen_ai.tool.call.arguments`` (the bound arguments as a JSON
object, ``self``/``cls`` left out) and ``gen_ai.tool.call.result``. A call that raises gets
``error.type``, status ERROR and an ``exception`` event, and no result, as the conventions say;
the exception reaches the caller unchanged.

The span machinery is ``@nexagauge.trace``'s (same guards, same cost when tracing is off: the
function runs plain); this module only adds the tool's attributes. ``@nexagauge.trace(tools=[...])``
records the declared tools of an agent (``gen_ai.tool.definitions``), built by
:func:`tool_definitions` from decorated tools, names or OpenAI-style definitions.

Example::

    @nexagauge.tool(description="Look up an order by id")
    def lookup_order(order_id: str, tool_call_id: str | None = None) -> dict: ...

    @nexagauge.trace(operation="invoke_agent", tools=[lookup_order])
    def support_agent(question: str) -> str: ...
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import CALL_KEY, Call
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk.capture import as_text
from nexagauge.sdk.decorator import trace
from nexagauge.sdk.tooldefs import DEFINITION_ATTR, tool_definitions

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["tool", "tool_definitions"]

#: plain JSON data -> text through the C encoder (one encoder, not one per call as json.dumps
#: with options builds)
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
#: parameters taken as the tool call id when ``call_id_arg`` is not given
_CALL_ID_NAMES = ("tool_call_id", "call_id")


class _Spec:
    """What every call of one tool needs, computed at decoration time."""

    __slots__ = (
        "call_id",
        "call_id_pos",
        "capture_arguments",
        "capture_result",
        "names",
        "params",
        "simple",
        "skip_first",
        "span_name",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        call_id_arg: str | None,
        span_name: str,
        capture_arguments: bool,
        capture_result: bool,
    ) -> None:
        try:
            sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        params = list(sig.parameters.values()) if sig is not None else []
        names = [p.name for p in params]
        if call_id_arg is not None and call_id_arg not in names:
            raise ValueError(f"call_id_arg={call_id_arg!r}: {fn!r} has no such parameter")
        self.call_id = call_id_arg or next((n for n in _CALL_ID_NAMES if n in names), None)
        self.call_id_pos = names.index(self.call_id) if self.call_id in names else None
        self.params = sig
        self.names = names
        #: only plain positional-or-keyword parameters: arguments map to names without binding
        self.simple = sig is not None and all(
            p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params
        )
        self.skip_first = bool(names) and names[0] in ("self", "cls")
        #: the name of the tool's spans (before scrubbing), which tells its own call apart
        self.span_name = span_name
        self.capture_arguments = capture_arguments
        self.capture_result = capture_result

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, without ``self``/``cls`` and the call id."""
        if self.simple and len(args) <= len(self.names):
            out = dict(zip(self.names, args, strict=False))
            out.update(kwargs)
        elif self.params is None:
            return {"args": list(args), **kwargs}
        else:
            try:
                out = dict(self.params.bind_partial(*args, **kwargs).arguments)
            except TypeError:  # the call itself raises; record what was passed
                return {"args": list(args), **kwargs}
        if self.skip_first and args:
            out.pop(self.names[0], None)
        if self.call_id is not None:
            out.pop(self.call_id, None)
        return out

    def call_id_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.call_id is None:
            return None
        if self.call_id in kwargs:
            return kwargs[self.call_id]
        pos = self.call_id_pos
        return args[pos] if pos is not None and pos < len(args) else None


def _current(spec: _Spec) -> Call | None:
    """The tool's own recording span, never an enclosing call's (a span that failed to start
    leaves the function running plain inside its caller's span: nothing is recorded then)."""
    call = otel_context.get_value(CALL_KEY)
    if isinstance(call, Call) and call.recording and call.meta.raw_name == spec.span_name:
        return call
    return None


def _json(call: Call, value: Any) -> str:
    """``value`` as JSON text: plain JSON data through the C encoder, anything else through the
    SDK's converter (secret-looking keys scrubbed there; in plain data the text scrubber's rules
    catch them, as they catch them in any recorded text)."""
    if isinstance(value, str):
        return value
    try:
        return _ENCODE(value)
    except (TypeError, ValueError):
        return as_text(call, value)


def _record(
    call: Call,
    spec: _Spec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    result: Any,
) -> None:
    """Record the call id, arguments and result (``None``: none, or the call failed) on the
    tool's span: one secret gate over the texts (the common case), else each cut and scrubbed."""
    try:
        texts: dict[str, str] = {}
        cid = spec.call_id_of(args, kwargs)
        if cid is not None:
            texts[C.GEN_AI_TOOL_CALL_ID] = str(cid)
        if call.state.capture_content:
            if spec.capture_arguments:
                texts[C.GEN_AI_TOOL_CALL_ARGUMENTS] = _json(call, spec.arguments(args, kwargs))
            if spec.capture_result and result is not None:
                texts[C.GEN_AI_TOOL_CALL_RESULT] = _json(call, result)
        if texts:
            scrubber = call.state.scrubber
            limit = call.state.max_value_length
            # a result found clean is remembered like a retrieved passage (it is the agent's
            # evidence): returned again, it is not scanned again
            remember = None
            gated = []
            fits = True
            for key, value in texts.items():  # (a loop, not genexprs: this runs on every call)
                if len(value) > limit:
                    fits = False
                if key == C.GEN_AI_TOOL_CALL_RESULT:
                    if value in scrubber.known_clean:
                        continue
                    remember = [value]
                gated.append(value)
            if not (fits and scrubber.gate(gated, remember)):
                texts = {k: call.text(k, v) for k, v in texts.items()}
            call.add_late(texts)  # set when the span ends, with the fixed attributes
    except Exception as exc:
        internal_error("record tool call", exc)


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    call_id_arg: str | None = None,
    capture_arguments: bool = True,
    capture_result: bool = True,
) -> Callable[[F], F]: ...


def tool(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    call_id_arg: str | None = None,
    capture_arguments: bool = True,
    capture_result: bool = True,
) -> Any:
    """Trace an agent's tool (a function or coroutine function) as ``execute_tool`` spans.

    Args:
        name: the tool's name (``gen_ai.tool.name``; default: the function's ``__name__``), as
            the model calls it.
        description: ``gen_ai.tool.description`` and the description in its definition.
        call_id_arg: the parameter holding the model's tool call id (default: one named
            ``tool_call_id`` or ``call_id``, if any).
        capture_arguments / capture_result: record the arguments / the result (both also off
            with ``configure(capture_content=False)``; both scrubbed and size-limited).

    Example::

        @nexagauge.tool
        async def lookup_policy(topic: str) -> str: ...
    """

    def decorate(fn: Any) -> Any:
        if isinstance(fn, type) or not callable(fn):
            raise TypeError(f"@nexagauge.tool decorates functions, not {fn!r}")
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"@nexagauge.tool: {fn!r} is a generator; a tool returns its result")
        tool_name = name or getattr(fn, "__name__", None) or "tool"
        span_name = f"{C.OPERATION_EXECUTE_TOOL} {tool_name}"
        spec = _Spec(fn, call_id_arg, span_name, capture_arguments, capture_result)
        static: dict[str, Any] = {C.GEN_AI_TOOL_NAME: tool_name, C.GEN_AI_TOOL_TYPE: "function"}
        if description:
            static[C.GEN_AI_TOOL_DESCRIPTION] = description
        if inspect.iscoroutinefunction(fn):

            async def arun(*args: Any, **kwargs: Any) -> Any:
                call = _current(spec)
                if call is None:
                    return await fn(*args, **kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException:
                    _record(call, spec, args, kwargs, None)
                    raise
                _record(call, spec, args, kwargs, result)
                return result

            inner: Callable[..., Any] = arun
        else:

            def run(*args: Any, **kwargs: Any) -> Any:
                call = _current(spec)
                if call is None:
                    return fn(*args, **kwargs)
                try:
                    result = fn(*args, **kwargs)
                except BaseException:
                    _record(call, spec, args, kwargs, None)
                    raise
                _record(call, spec, args, kwargs, result)
                return result

            inner = run
        traced = trace(
            name=span_name,
            operation=C.OPERATION_EXECUTE_TOOL,
            context_arg=False,
            capture_input=False,  # arguments and result are recorded here, as the tool's
            capture_output=False,
            attributes=static,
        )(functools.wraps(fn)(inner))
        definition: dict[str, Any] = {"type": "function", "name": tool_name}
        if description:
            definition["description"] = description
        setattr(traced, DEFINITION_ATTR, definition)
        return traced

    if func is not None:
        return decorate(func)
    return decorate
