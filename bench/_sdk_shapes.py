"""The shapes ``bench/sdk_overhead.py`` measures: the RAG function and the agent's tool, their
texts (the same on every call, or never seen before), and the spans a developer writes by hand
around them -- the minimal one, the semconv-shaped one, the generic decorator, the
``execute_tool`` span -- which are the benchmark's baselines."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import nexagauge
from nexagauge.sdk import conventions as C

QUESTION = "What did the 1889 World's Fair commission, and who designed the tower it left"
PASSAGES = [
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It "
    "is named after the engineer Gustave Eiffel, whose company designed and built the tower from "
    "1887 to 1889. Height: 330 m (1,083 ft), about the same as an 81-storey building; it was the "
    "tallest man-made structure in the world until 1930.",
    "Exposition Universelle (1889): a world's fair held in Paris from 6 May to 31 October 1889. "
    "It marked the centennial of the storming of the Bastille. Key facts: 61,722 exhibitors, "
    "more than 32 million visitors; the main symbol of the fair was the Eiffel Tower, which "
    "served as the entrance arch, and the fair's official guide listed it as its first sight.",
    "Gustave Eiffel (1832-1923) was a French civil engineer. His company also built the internal "
    "frame of the Statue of Liberty. Note: the tower's design is credited to Maurice Koechlin and "
    "Emile Nouguier, two senior engineers of the company, with architect Stephen Sauvestre; "
    "Eiffel bought the patent rights and gave the tower his name.",
]
ANSWER = (
    "The 1889 World's Fair (the Exposition Universelle, held in Paris to mark the centennial of "
    "the French Revolution) commissioned the Eiffel Tower as the entrance arch to the fair. The "
    "tower was built by Gustave Eiffel's company between 1887 and 1889; its design is credited "
    "to two of the company's senior engineers, Maurice Koechlin and Emile Nouguier, with the "
    "architect Stephen Sauvestre refining its appearance. Eiffel bought the patent rights and "
    "the tower took his name. At 330 m it remained the tallest structure in the world until "
    "1930, and it is now one of the most visited monuments on Earth."
)[:500]
WORKFLOW = "answer"
ORDER = {
    "order_id": "A-1042",
    "status": "shipped",
    "carrier": "PostNord",
    "eta": "2026-12-03",
    "items": [{"sku": "LAMP-7", "qty": 1, "title": "Oak desk lamp"}],
    "shipping_address": "Storgatan 12, 411 38 Gothenburg",
    "total": {"amount": 749.0, "currency": "SEK"},
}
#: the arguments of every tool call: (order id, the model's tool call id)
TOOL_CALL = ("A-1042", "call_8f3kq1")
TOOL = "lookup_order"


class DropExporter(SpanExporter):
    """Accepts and discards spans (the benchmark measures the call path, not the network)."""

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def answer(question: str, context: list[str]) -> str:
    return ANSWER


async def answer_async(question: str, context: list[str]) -> str:
    return ANSWER


def lookup_order(order_id: str, tool_call_id: str) -> dict[str, Any]:
    return ORDER


async def lookup_order_async(order_id: str, tool_call_id: str) -> dict[str, Any]:
    return ORDER


def hand_written_tool(provider: TracerProvider) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The ``execute_tool`` span a developer writes by hand around the tool (sync, async)."""
    tracer = provider.get_tracer("hand-written")

    def attributes(order_id: str, tool_call_id: str) -> dict[str, Any]:
        return {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
            C.GEN_AI_TOOL_NAME: TOOL,
            C.GEN_AI_TOOL_TYPE: "function",
            C.GEN_AI_TOOL_CALL_ID: tool_call_id,
            C.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"order_id": order_id}),
        }

    def sync(order_id: str, tool_call_id: str) -> dict[str, Any]:
        with tracer.start_as_current_span(f"execute_tool {TOOL}") as span:
            span.set_attributes(attributes(order_id, tool_call_id))
            result = lookup_order(order_id, tool_call_id)
            span.set_attribute(C.GEN_AI_TOOL_CALL_RESULT, json.dumps(result))
            return result

    async def asynchronous(order_id: str, tool_call_id: str) -> dict[str, Any]:
        with tracer.start_as_current_span(f"execute_tool {TOOL}") as span:
            span.set_attributes(attributes(order_id, tool_call_id))
            result = await lookup_order_async(order_id, tool_call_id)
            span.set_attribute(C.GEN_AI_TOOL_CALL_RESULT, json.dumps(result))
            return result

    return sync, asynchronous


#: the answer of each fresh call, by question (filled before a round is timed, see _fresh_calls)
_FRESH_ANSWERS: dict[str, str] = {}


def answer_fresh(question: str, context: list[str]) -> str:
    return _FRESH_ANSWERS[question]


async def answer_fresh_async(question: str, context: list[str]) -> str:
    return _FRESH_ANSWERS[question]


def _rotated(text: str, k: int) -> str:
    """``text`` with its words rotated by ``k`` and the call number ``k`` appended: a text never
    seen before with the same length and characters (every position differs)."""
    words = text.split(" ")
    k1 = k % len(words)
    return " ".join(words[k1:] + words[:k1]) + f" #{k}"


_FRESH_SEQ = 0


def fresh_calls(n: int) -> list[tuple[str, list[str]]]:
    """``n`` (question, passages) never seen before, their answers in _FRESH_ANSWERS."""
    global _FRESH_SEQ
    calls = []
    _FRESH_ANSWERS.clear()
    for k in range(_FRESH_SEQ, _FRESH_SEQ + n):
        question = _rotated(QUESTION, k)
        _FRESH_ANSWERS[question] = _rotated(ANSWER, k)
        calls.append((question, [_rotated(p, k) for p in PASSAGES]))
    _FRESH_SEQ += n
    return calls


def _span_attributes(question: str, context: list[str]) -> dict[str, Any]:
    return {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_WORKFLOW,
        C.NG_SDK_VERSION: nexagauge.__version__,
        C.GEN_AI_WORKFLOW_NAME: WORKFLOW,
        C.GEN_AI_INPUT_MESSAGES: json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": question}]}]
        ),
        C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"content": p} for p in context]),
    }


def _output_attribute(result: str) -> str:
    return json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": result}],
                "finish_reason": "stop",
            }
        ]
    )


def hand_written(
    provider: TracerProvider,
    fn: Callable[..., Any] = answer,
    afn: Callable[..., Any] = answer_async,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The span a developer writes by hand around ``fn`` / ``afn``, recording the same content
    (sync, async)."""
    tracer = provider.get_tracer("hand-written")

    def sync(question: str, context: list[str]) -> str:
        with tracer.start_as_current_span(WORKFLOW) as span:
            span.set_attributes(_span_attributes(question, context))
            result = fn(question, context)
            span.set_attribute(C.GEN_AI_OUTPUT_MESSAGES, _output_attribute(result))
            return result

    async def asynchronous(question: str, context: list[str]) -> str:
        with tracer.start_as_current_span(WORKFLOW) as span:
            span.set_attributes(_span_attributes(question, context))
            result = await afn(question, context)
            span.set_attribute(C.GEN_AI_OUTPUT_MESSAGES, _output_attribute(result))
            return result

    return sync, asynchronous


def minimal(
    provider: TracerProvider,
    fn: Callable[..., Any] = answer,
    afn: Callable[..., Any] = answer_async,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The least a developer writes by hand around ``fn`` / ``afn`` (sync, async): one span, the
    question and passages as one JSON ``input.value``, the answer as ``output.value`` -- no
    scrubbing, no size limit, no conventions (the target's baseline, = 1.00)."""
    tracer = provider.get_tracer("minimal")

    def sync(question: str, context: list[str]) -> str:
        with tracer.start_as_current_span(WORKFLOW) as span:
            span.set_attribute(
                "input.value", json.dumps({"question": question, "context": context})
            )
            result = fn(question, context)
            span.set_attribute("output.value", result)
            return result

    async def asynchronous(question: str, context: list[str]) -> str:
        with tracer.start_as_current_span(WORKFLOW) as span:
            span.set_attribute(
                "input.value", json.dumps({"question": question, "context": context})
            )
            result = await afn(question, context)
            span.set_attribute("output.value", result)
            return result

    return sync, asynchronous


def generic_decorator(provider: TracerProvider) -> Callable[[Callable[..., Any]], Any]:
    """The 20-line decorator an app would write: arguments and result as JSON attributes."""
    tracer = provider.get_tracer("generic")

    def traced(fn: Callable[..., Any]) -> Any:
        if asyncio.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                with tracer.start_as_current_span(fn.__name__) as span:
                    span.set_attribute("input", json.dumps({"args": args, "kwargs": kwargs}))
                    result = await fn(*args, **kwargs)
                    span.set_attribute("output", json.dumps(result))
                    return result

            return awrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with tracer.start_as_current_span(fn.__name__) as span:
                span.set_attribute("input", json.dumps({"args": args, "kwargs": kwargs}))
                result = fn(*args, **kwargs)
                span.set_attribute("output", json.dumps(result))
                return result

        return wrapper

    return traced
