"""The role table and agent extraction on every agent span shape of issue 30 (unit tests on
hand-built OTLP spans): tool executions in each vocabulary become tool calls, tool-call LLM
steps (with or without preamble) are never answers, one case per agent run whose context is
every tool result and retrieved document before the answer, each with its source label."""

from __future__ import annotations

import json
from typing import Any

import pytest
from online.otlp import span, traces_request

from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.decode import decode_traces
from nexagauge.online.ingest.extract import ExtractedCase, build_views, extract_cases
from nexagauge.online.ingest.roles import classify
from nexagauge.sdk import conventions as C

T = (7).to_bytes(16, "big")
Q = "Where is my order A-1042?"
ORDER = {"order_id": "A-1042", "status": "shipped", "carrier": "PostNord"}
FINAL = "Order A-1042 has shipped with PostNord."
PREAMBLE = "Let me look up your order."


def sid(n: int) -> bytes:
    return n.to_bytes(8, "big")


def trace_of(spans: list[dict[str, Any]]) -> Trace:
    t = Trace(T, 0.0, 0.0)
    for s in decode_traces(traces_request(spans)).spans:
        t.spans[s.span_id] = s
    return t


def role(attrs: dict[str, Any], **kw: Any) -> tuple[str, str]:
    r = classify(build_views(trace_of([span(T, sid(1), "s", attrs, **kw)]))[sid(1)])
    return r.role.value, r.kind


def parts(role: str, *ps: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(ps)}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "content": t}


def tool_call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": cid, "name": name, "arguments": args}


def semconv_chat(inputs: list[Any], outputs: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
        C.GEN_AI_INPUT_MESSAGES: json.dumps(inputs),
        C.GEN_AI_OUTPUT_MESSAGES: json.dumps(outputs),
        **extra,
    }


STEP_OUT = [parts("assistant", tool_call("call_1", "lookup_order", {"order_id": "A-1042"}))]
STEP_OUT_PREAMBLE = [
    parts("assistant", text(PREAMBLE), tool_call("call_1", "lookup_order", {"order_id": "A-1042"}))
]
HISTORY = [
    parts("user", text(Q)),
    *STEP_OUT_PREAMBLE,
    parts("tool", {"type": "tool_call_response", "id": "call_1", "response": json.dumps(ORDER)}),
]


def oi_llm(output: dict[str, Any], inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {
        C.OI_SPAN_KIND: "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": Q,
        **(inputs or {}),
    }
    return {**out, **output}


OI_STEP = {
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup_order",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"order_id": "A-1042"}',
}
OI_RAW_RESPONSE = {  # openai-instrumentation's output.value of a tool-call-only response
    C.OI_OUTPUT_VALUE: json.dumps(
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "lookup_order",
                                    "arguments": '{"order_id": "A-1042"}',
                                },
                            }
                        ],
                    }
                }
            ]
        }
    ),
    C.OI_INPUT_VALUE: json.dumps({"messages": [{"role": "user", "content": Q}]}),
}


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        # GenAI semconv: tool-call-only output, with preamble, the final answer, execute_tool
        (semconv_chat([parts("user", text(Q))], STEP_OUT), ("other", "step")),
        (semconv_chat([parts("user", text(Q))], STEP_OUT_PREAMBLE), ("other", "step")),
        (semconv_chat(HISTORY, [parts("assistant", text(FINAL))]), ("answer", "llm")),
        (
            {C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL, C.GEN_AI_TOOL_NAME: "t"},
            ("other", "tool"),
        ),
        # OpenInference: tool calls in output messages (with and without preamble), the raw
        # response JSON in output.value only, TOOL spans
        (oi_llm(OI_STEP), ("other", "step")),
        (oi_llm({**OI_STEP, "llm.output_messages.0.message.content": PREAMBLE}), ("other", "step")),
        ({C.OI_SPAN_KIND: "LLM", **OI_RAW_RESPONSE}, ("other", "step")),
        (
            oi_llm(
                {
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": FINAL,
                }
            ),
            ("answer", "llm"),
        ),
        ({C.OI_SPAN_KIND: "TOOL", C.OI_TOOL_NAME: "t"}, ("other", "tool")),
        # Traceloop: tool spans, legacy completion tool calls with preamble
        (
            {C.TRACELOOP_SPAN_KIND: "tool", C.TRACELOOP_ENTITY_OUTPUT: json.dumps(ORDER)},
            ("other", "tool"),
        ),
        (
            {
                "gen_ai.prompt.0.role": "user",
                "gen_ai.prompt.0.content": Q,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": PREAMBLE,
                "gen_ai.completion.0.tool_calls.0.id": "call_1",
                "gen_ai.completion.0.tool_calls.0.name": "lookup_order",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"order_id": "A-1042"}',
            },
            ("other", "step"),
        ),
        # agents are answers (workflow kind)
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_AGENT}, ("answer", "workflow")),
        ({C.OI_SPAN_KIND: "AGENT"}, ("answer", "workflow")),
        ({C.TRACELOOP_SPAN_KIND: "agent"}, ("answer", "workflow")),
    ],
)
def test_role_table_agent_shapes(attrs: dict[str, Any], expected: tuple[str, str]) -> None:
    assert role(attrs) == expected


def only(cases: list[ExtractedCase]) -> ExtractedCase:
    assert len(cases) == 1, [c.case.output for c in cases]
    return cases[0]


def test_semconv_agent_with_execute_tool_spans_result_and_failure() -> None:
    """invoke_agent > chat (step, preamble) > execute_tool (result) + execute_tool (failed:
    error.type, status ERROR, exception event) > chat (final): one case, the agent's, whose
    context is the tool result with its label and whose agent run has both calls."""
    agent = {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_AGENT,
        C.GEN_AI_AGENT_NAME: "support",
        C.GEN_AI_TOOL_DEFINITIONS: json.dumps([{"type": "function", "name": "lookup_order"}]),
        C.GEN_AI_INPUT_MESSAGES: json.dumps([parts("user", text(Q))]),
        C.GEN_AI_OUTPUT_MESSAGES: json.dumps([parts("assistant", text(FINAL))]),
    }
    ok_tool = {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
        C.GEN_AI_TOOL_NAME: "lookup_order",
        C.GEN_AI_TOOL_CALL_ID: "call_1",
        C.GEN_AI_TOOL_CALL_ARGUMENTS: '{"order_id": "A-1042"}',
        C.GEN_AI_TOOL_CALL_RESULT: json.dumps(ORDER),
    }
    bad_tool = {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
        C.GEN_AI_TOOL_NAME: "lookup_order",
        C.GEN_AI_TOOL_CALL_ID: "call_2",
        C.GEN_AI_TOOL_CALL_ARGUMENTS: '{"order_id": "X"}',
        C.ERROR_TYPE: "KeyError",
    }
    exc = [(C.EXCEPTION_EVENT, {C.EXCEPTION_TYPE: "KeyError", C.EXCEPTION_MESSAGE: "no order X"})]
    two_calls = [
        parts(
            "assistant",
            text(PREAMBLE),
            tool_call("call_1", "lookup_order", {"order_id": "A-1042"}),
            tool_call("call_2", "lookup_order", {"order_id": "X"}),
        )
    ]
    spans = [
        span(T, sid(1), "invoke_agent support", agent, start=0, end=100),
        span(
            T,
            sid(2),
            "chat",
            semconv_chat([parts("user", text(Q))], two_calls),
            parent=sid(1),
            start=1,
            end=10,
        ),
        span(T, sid(3), "execute_tool lookup_order", ok_tool, parent=sid(1), start=11, end=20),
        span(
            T,
            sid(4),
            "execute_tool lookup_order",
            bad_tool,
            parent=sid(1),
            start=21,
            end=30,
            error=True,
            events=exc,
        ),
        span(
            T,
            sid(5),
            "chat",
            semconv_chat(HISTORY, [parts("assistant", text(FINAL))]),
            parent=sid(1),
            start=31,
            end=90,
        ),
    ]
    c = only(extract_cases(trace_of(spans)))
    assert c.span.span_id == sid(1) and c.case.output == FINAL and c.case.input == Q
    assert c.case.conversation == ()  # the preamble step is no turn
    run = c.case.agent
    assert run is not None and run.agent == "support" and run.declared_tools == ("lookup_order",)
    assert run.llm_steps == 2
    ok, bad = run.tool_calls
    assert (ok.call_id, ok.result, ok.error) == ("call_1", json.dumps(ORDER), None)
    assert ok.duration_ms == pytest.approx(9e-6)
    assert (bad.call_id, bad.result, bad.error) == ("call_2", None, "KeyError: no order X")
    assert c.case.context_sources == ("tool:lookup_order#call_1", "tool:lookup_order#call_2")
    doc, failure = c.case.context_documents
    assert "status: shipped" in doc and "carrier: PostNord" in doc
    assert failure.startswith("Failure of tool lookup_order (call call_2)")


def test_semconv_without_tool_spans_reads_tool_call_parts_and_responses() -> None:
    """No execute_tool span: tool_call parts of one output + tool_call_response parts of the
    next input are the tool call; the final LLM call is the one answer."""
    spans = [
        span(
            T,
            sid(1),
            "chat",
            semconv_chat([parts("user", text(Q))], STEP_OUT_PREAMBLE),
            start=1,
            end=10,
        ),
        span(
            T,
            sid(2),
            "chat",
            semconv_chat(HISTORY, [parts("assistant", text(FINAL))]),
            start=20,
            end=30,
        ),
    ]
    c = only(extract_cases(trace_of(spans)))
    assert c.span.span_id == sid(2) and c.case.input == Q and c.case.conversation == ()
    assert c.case.agent is not None and c.case.agent.declared_tools is None
    [call] = c.case.agent.tool_calls
    assert (call.call_id, call.arguments, call.result) == (
        "call_1",
        '{"order_id": "A-1042"}',
        json.dumps(ORDER),
    )
    assert c.case.context_sources == ("tool:lookup_order#call_1",)


def test_execute_tool_without_captured_result_is_a_call_without_result() -> None:
    """Results are opt-in in semconv: a call whose result was not captured anywhere stays
    ``result=None`` (grounding then skips; see the grounding tests) and adds no context."""
    tool = {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
        C.GEN_AI_TOOL_NAME: "lookup_order",
        C.GEN_AI_TOOL_CALL_ID: "call_1",
    }
    spans = [
        span(T, sid(1), "chat", semconv_chat([parts("user", text(Q))], STEP_OUT), start=1, end=5),
        span(T, sid(2), "execute_tool", tool, start=6, end=9),
        span(
            T,
            sid(3),
            "chat",
            semconv_chat(
                [parts("system", text("Be brief.")), parts("user", text(Q))],
                [parts("assistant", text(FINAL))],
            ),
            start=10,
            end=20,
        ),
    ]
    c = only(extract_cases(trace_of(spans)))
    assert c.case.agent is not None
    [call] = c.case.agent.tool_calls
    assert call.result is None and not call.result_captured
    assert c.case.context_sources == ("system",)  # no evidence at all: the system message


def test_openinference_agent_tool_retriever_and_role_tool_messages() -> None:
    """AGENT > RETRIEVER, LLM (tool calls only, raw response JSON), TOOL (no call id), LLM
    (role ``tool`` input message with tool_call_id) with llm.tools definitions."""
    tools = {
        "llm.tools.0.tool.json_schema": json.dumps(
            {"type": "function", "function": {"name": "lookup_order"}}
        )
    }
    final_in = {
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "call_1",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "lookup_order",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": '{"order_id": "A-1042"}',
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.tool_call_id": "call_1",
        "llm.input_messages.2.message.content": json.dumps(ORDER),
    }
    spans = [
        span(
            T,
            sid(1),
            "support",
            {C.OI_SPAN_KIND: "AGENT", C.OI_INPUT_VALUE: Q, C.OI_OUTPUT_VALUE: FINAL},
            start=0,
            end=100,
        ),
        span(
            T,
            sid(2),
            "kb",
            {
                C.OI_SPAN_KIND: "RETRIEVER",
                "retrieval.documents.0.document.id": "kb-7",
                "retrieval.documents.0.document.content": "Rugs: 60 days.",
            },
            parent=sid(1),
            start=1,
            end=2,
        ),
        span(
            T,
            sid(3),
            "ChatCompletion",
            {C.OI_SPAN_KIND: "LLM", **OI_RAW_RESPONSE, **OI_STEP, **tools},
            parent=sid(1),
            start=3,
            end=10,
        ),
        span(
            T,
            sid(4),
            "lookup_order",
            {
                C.OI_SPAN_KIND: "TOOL",
                C.OI_TOOL_NAME: "lookup_order",
                C.OI_INPUT_VALUE: '{"order_id":"A-1042"}',
                C.OI_OUTPUT_VALUE: json.dumps(ORDER),
            },
            parent=sid(1),
            start=11,
            end=20,
        ),
        span(
            T,
            sid(5),
            "ChatCompletion",
            oi_llm(
                {
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": FINAL,
                },
                {**final_in, **tools},
            ),
            parent=sid(1),
            start=21,
            end=90,
        ),
    ]
    c = only(extract_cases(trace_of(spans)))
    assert c.span.span_id == sid(1) and c.case.input == Q
    run = c.case.agent
    assert run is not None and run.agent == "support" and run.declared_tools == ("lookup_order",)
    [call] = run.tool_calls  # the TOOL span matched to the model's call by name + arguments
    assert call.call_id == "call_1" and call.result == json.dumps(ORDER)
    assert c.case.context_sources == ("doc:kb-7", "tool:lookup_order#call_1")
    assert c.case.context_documents[0] == "Rugs: 60 days."


def test_traceloop_agent_tool_and_definitions() -> None:
    """@agent > openai.chat (tool_call parts + gen_ai.tool.definitions) > @tool (no call id,
    no operation name) > openai.chat final: the tool span takes the model's call id."""
    defs = json.dumps(
        [
            {"type": "function", "name": "lookup_order"},
            {"type": "function", "name": "lookup_policy"},
        ]
    )
    spans = [
        span(
            T,
            sid(1),
            "support.agent",
            {
                C.TRACELOOP_SPAN_KIND: "agent",
                C.TRACELOOP_ENTITY_NAME: "support",
                C.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [Q], "kwargs": {}}),
                C.TRACELOOP_ENTITY_OUTPUT: json.dumps(FINAL),
            },
            start=0,
            end=100,
        ),
        span(
            T,
            sid(2),
            "openai.chat",
            semconv_chat(
                [parts("user", text(Q))], STEP_OUT_PREAMBLE, **{C.GEN_AI_TOOL_DEFINITIONS: defs}
            ),
            parent=sid(1),
            start=1,
            end=10,
        ),
        span(
            T,
            sid(3),
            "lookup_order.tool",
            {
                C.TRACELOOP_SPAN_KIND: "tool",
                C.GEN_AI_TOOL_NAME: "lookup_order",
                C.TRACELOOP_ENTITY_INPUT: json.dumps(
                    {"args": [], "kwargs": {"order_id": "A-1042"}}
                ),
                C.TRACELOOP_ENTITY_OUTPUT: json.dumps(json.dumps(ORDER)),
            },
            parent=sid(1),
            start=11,
            end=20,
        ),
        span(
            T,
            sid(4),
            "openai.chat",
            semconv_chat(
                HISTORY, [parts("assistant", text(FINAL))], **{C.GEN_AI_TOOL_DEFINITIONS: defs}
            ),
            parent=sid(1),
            start=21,
            end=90,
        ),
    ]
    c = only(extract_cases(trace_of(spans)))
    assert c.span.span_id == sid(1) and c.case.input == Q and c.case.output == FINAL
    run = c.case.agent
    assert run is not None and run.agent == "support"
    assert run.declared_tools == ("lookup_order", "lookup_policy") and run.llm_steps == 2
    [call] = run.tool_calls
    assert (call.call_id, call.arguments, call.result) == (
        "call_1",
        '{"order_id": "A-1042"}',
        json.dumps(ORDER),
    )


def test_repeated_calls_without_ids_get_stable_distinct_substitutes() -> None:
    """Tool calls without ids (messages only) get ``<name>-<n>`` in call order."""
    out = [parts("assistant", {"type": "tool_call", "name": "ping", "arguments": {}})]
    spans = [
        span(T, sid(i), "chat", semconv_chat([parts("user", text(Q))], out), start=i, end=i + 1)
        for i in (1, 3)
    ] + [
        span(
            T,
            sid(9),
            "chat",
            semconv_chat([parts("user", text(Q))], [parts("assistant", text(FINAL))]),
            start=9,
            end=10,
        )
    ]
    c = only(extract_cases(trace_of(spans)))
    assert c.case.agent is not None
    assert [t.call_id for t in c.case.agent.tool_calls] == ["ping-1", "ping-2"]


def test_long_json_results_are_readable_and_cut_with_a_note() -> None:
    from nexagauge.schema.tools import MAX_EVIDENCE_CHARS, ToolCall

    big = json.dumps({"rows": [{"id": i, "name": f"item {i}"} for i in range(2000)]})
    ev = ToolCall(name="search", call_id="c", result=big).evidence()
    assert ev is not None and "rows:" in ev and "  -\n    id: 0\n    name: item 0" in ev
    assert ev.endswith("characters shown]") and len(ev) < MAX_EVIDENCE_CHARS + 300


def test_openai_v2_log_events_tool_calls_and_tool_messages() -> None:
    """openai-v2's default content mode: messages as log records. A ``gen_ai.choice`` whose
    message asks for tool calls (with preamble text) is a step; the ``gen_ai.tool.message`` of
    the next call carries the result; the final chat call is the one answer."""
    from online.otlp import logs_request

    from nexagauge.online.ingest.decode import decode_logs

    step_choice = {
        "index": 0,
        "finish_reason": "tool_calls",
        "message": {
            "role": "assistant",
            "content": PREAMBLE,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1042"}'},
                }
            ],
        },
    }
    chat = {C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT}
    spans = [
        span(T, sid(1), "chat", chat, start=1, end=10),
        span(T, sid(2), "chat", chat, start=20, end=30),
    ]
    logs = [
        {
            "trace_id": T,
            "span_id": sid(1),
            "event": C.EVENT_GEN_AI_USER_MESSAGE,
            "body": {"content": Q},
        },
        {"trace_id": T, "span_id": sid(1), "event": C.EVENT_GEN_AI_CHOICE, "body": step_choice},
        {
            "trace_id": T,
            "span_id": sid(2),
            "event": C.EVENT_GEN_AI_USER_MESSAGE,
            "body": {"content": Q},
        },
        {
            "trace_id": T,
            "span_id": sid(2),
            "event": C.EVENT_GEN_AI_ASSISTANT_MESSAGE,
            "body": {"content": PREAMBLE, "tool_calls": step_choice["message"]["tool_calls"]},
        },
        {
            "trace_id": T,
            "span_id": sid(2),
            "event": C.EVENT_GEN_AI_TOOL_MESSAGE,
            "body": {"content": json.dumps(ORDER), "id": "call_1"},
        },
        {
            "trace_id": T,
            "span_id": sid(2),
            "event": C.EVENT_GEN_AI_CHOICE,
            "body": {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": FINAL},
            },
        },
    ]
    t = trace_of(spans)
    t.logs.extend(decode_logs(logs_request(logs)).logs)
    c = only(extract_cases(t))
    assert c.span.span_id == sid(2) and c.case.output == FINAL and c.case.input == Q
    assert c.case.agent is not None
    [call] = c.case.agent.tool_calls
    assert (call.call_id, call.result) == ("call_1", json.dumps(ORDER))


def test_nexagauge_sdk_traced_agent_with_declared_tools_and_tool_spans() -> None:
    """``@nexagauge.trace(tools=[...])`` around ``@nexagauge.tool`` spans: the traced call is the
    answer, its ``gen_ai.tool.definitions`` are the declared tools, the tool spans the calls."""
    sdk = {C.NG_SDK_VERSION: "0.1.0"}
    root = {
        **sdk,
        C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_AGENT,
        C.GEN_AI_AGENT_NAME: "bot",
        C.GEN_AI_TOOL_DEFINITIONS: json.dumps([{"type": "function", "name": "lookup_order"}]),
        C.GEN_AI_INPUT_MESSAGES: json.dumps([parts("user", text(Q))]),
        C.GEN_AI_OUTPUT_MESSAGES: json.dumps([parts("assistant", text(FINAL))]),
    }
    tool = {
        **sdk,
        C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
        C.GEN_AI_TOOL_NAME: "escalate",
        C.GEN_AI_TOOL_CALL_ID: "t1",
        C.GEN_AI_TOOL_CALL_ARGUMENTS: "{}",
        C.GEN_AI_TOOL_CALL_RESULT: "Ticket T-1 opened.",
    }
    spans = [
        span(T, sid(1), "bot", root, start=0, end=100),
        span(T, sid(2), "escalate", tool, parent=sid(1), start=10, end=20),
    ]
    c = only(extract_cases(trace_of(spans)))
    run = c.case.agent
    assert run is not None and run.agent == "bot" and run.declared_tools == ("lookup_order",)
    assert [t.source_label for t in run.tool_calls] == ["tool:escalate#t1"]
    assert c.case.context_sources == ("tool:escalate#t1",)
