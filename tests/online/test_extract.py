"""Case extraction from spans of each instrumentation style (hand-built spans; the real
instrumentations are exercised in test_instrumentations.py)."""

from __future__ import annotations

import json

from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.decode import decode_logs, decode_traces
from nexagauge.online.ingest.extract import extract_cases
from nexagauge.sdk import conventions as C

from .otlp import chat_messages, logs_request, sdk_turn, sid, span, tid, traces_request


def trace_of(spans, logs=None) -> Trace:  # type: ignore[no-untyped-def]
    t = Trace(spans[0]["trace_id"], 0.0, 0.0)
    for s in decode_traces(traces_request(spans)).spans:
        t.spans[s.span_id] = s
    if logs:
        t.logs.extend(decode_logs(logs_request(logs)).logs)
    return t


def test_sdk_span_with_retrieval_context_and_conversation_id() -> None:
    t = trace_of(
        sdk_turn(
            tid(1),
            "Where is the tower?",
            "In Paris.",
            docs=["The tower is in Paris."],
            conversation="c-1",
        )
    )
    [c] = extract_cases(t)
    assert (c.case.input, c.case.output) == ("Where is the tower?", "In Paris.")
    assert c.case.context == "The tower is in Paris."
    assert c.conversation_id == "c-1" and c.span.name == "answer"
    assert c.case.case_id == f"{tid(1).hex()}:{sid(1).hex()}"


def test_genai_structured_messages_and_history_turns() -> None:
    attrs = {
        C.GEN_AI_OPERATION_NAME: "chat",
        C.GEN_AI_REQUEST_MODEL: "gpt-4o",
        C.GEN_AI_INPUT_MESSAGES: [  # structured OTLP value, not a JSON string
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Hi"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "Hello! How can I help?"}]},
            {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]},
        ],
        C.GEN_AI_OUTPUT_MESSAGES: [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Paris."}],
                "finish_reason": "stop",
            }
        ],
    }
    [c] = extract_cases(trace_of([span(tid(2), sid(1), "chat gpt-4o", attrs)]))
    assert c.case.output == "Paris."  # the reply, never the history assistant message
    assert c.case.input == "Capital of France?"
    assert c.case.context == "Be brief."  # system message is the context when no retrieval
    assert [(x.input, x.output) for x in c.case.conversation] == [
        ("Hi", "Hello! How can I help?"),
        ("Capital of France?", "Paris."),
    ]
    assert c.model == "gpt-4o"


def test_legacy_prompt_completion_attributes() -> None:
    attrs = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "What is 2+2?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "4",
    }
    [c] = extract_cases(trace_of([span(tid(3), sid(1), "openai.chat", attrs)]))
    assert (c.case.input, c.case.output) == ("What is 2+2?", "4")


def test_openinference_llm_and_retriever_spans() -> None:
    root = span(
        tid(4),
        sid(1),
        "rag",
        {
            C.OI_SPAN_KIND: "CHAIN",
            C.OI_INPUT_VALUE: "Who wrote Hamlet?",
            C.OI_OUTPUT_VALUE: "Shakespeare wrote Hamlet.",
            C.OI_SESSION_ID: "s-9",
        },
        end=9000,
    )
    retr = span(
        tid(4),
        sid(2),
        "retrieve",
        {
            C.OI_SPAN_KIND: "RETRIEVER",
            "retrieval.documents.0.document.content": "Hamlet is a tragedy by William Shakespeare.",
            "retrieval.documents.1.document.content": "It was written around 1600.",
        },
        parent=sid(1),
        end=3000,
    )
    llm = span(
        tid(4),
        sid(3),
        "ChatCompletion",
        {
            C.OI_SPAN_KIND: "LLM",
            C.OI_LLM_MODEL_NAME: "gpt-4o-mini",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Use the context.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Who wrote Hamlet?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Shakespeare wrote Hamlet.",
            C.OI_INPUT_VALUE: json.dumps(
                {"messages": [{"role": "user", "content": "Who wrote Hamlet?"}]}
            ),
            C.OI_OUTPUT_VALUE: json.dumps(
                {
                    "choices": [
                        {"message": {"role": "assistant", "content": "Shakespeare wrote Hamlet."}}
                    ]
                }
            ),
        },
        parent=sid(1),
        end=8000,
    )
    cases = extract_cases(trace_of([root, retr, llm]))
    # the chain wraps the LLM call with the same answer: evaluated once, as the outer span
    assert [c.span.name for c in cases] == ["rag"]
    c = cases[0]
    assert c.case.context_documents == (
        "Hamlet is a tragedy by William Shakespeare.",
        "It was written around 1600.",
    )
    assert c.model == "gpt-4o-mini" and c.conversation_id == "s-9"
    # llm mode evaluates the inner LLM call instead
    [c2] = extract_cases(trace_of([root, retr, llm]), "llm")
    assert c2.span.name == "ChatCompletion" and c2.case.input == "Who wrote Hamlet?"
    assert len(extract_cases(trace_of([root, retr, llm]), "all")) == 2


def test_wrapper_with_a_different_answer_is_evaluated_separately() -> None:
    outer = sdk_turn(tid(5), "Summarize", "Final: short summary.")[0]
    inner = span(
        tid(5),
        sid(7),
        "chat",
        {
            C.GEN_AI_OPERATION_NAME: "chat",
            C.GEN_AI_INPUT_MESSAGES: chat_messages(("user", "Draft a summary")),
            C.GEN_AI_OUTPUT_MESSAGES: chat_messages(("assistant", "A long draft.")),
        },
        parent=sid(1),
        end=4000,
    )
    assert sorted(c.span.name for c in extract_cases(trace_of([outer, inner]))) == [
        "answer",
        "chat",
    ]
    assert [c.span.name for c in extract_cases(trace_of([outer, inner]), "root")] == ["answer"]


def test_openllmetry_entities_db_query_events_and_association_session() -> None:
    wf = span(
        tid(6),
        sid(1),
        "qa.workflow",
        {
            C.TRACELOOP_SPAN_KIND: "workflow",
            C.TRACELOOP_ENTITY_INPUT: json.dumps({"args": ["How tall is Everest?"], "kwargs": {}}),
            C.TRACELOOP_ENTITY_OUTPUT: json.dumps("Everest is 8,849 m tall."),
            C.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + "session_id": "sess-3",
        },
        end=9000,
    )
    db = span(
        tid(6),
        sid(2),
        "chroma.query",
        {},
        parent=sid(1),
        end=2000,
        events=[
            (
                C.DB_QUERY_RESULT_EVENT,
                {
                    C.DB_QUERY_RESULT_ID: "a",
                    C.DB_QUERY_RESULT_DOCUMENT: "Mount Everest is 8,849 metres high.",
                },
            ),
        ],
    )
    [c] = extract_cases(trace_of([wf, db]))
    assert (c.case.input, c.case.output) == ("How tall is Everest?", "Everest is 8,849 m tall.")
    assert c.case.context == "Mount Everest is 8,849 metres high."
    assert c.conversation_id == "sess-3"


def test_official_openai_log_events_joined_to_span() -> None:
    s = span(
        tid(7),
        sid(1),
        "chat gpt-4o",
        {C.GEN_AI_OPERATION_NAME: "chat", C.GEN_AI_REQUEST_MODEL: "gpt-4o"},
    )
    logs = [
        {
            "trace_id": tid(7),
            "span_id": sid(1),
            "event": C.EVENT_GEN_AI_SYSTEM_MESSAGE,
            "body": {"content": "Context: the shop opens at 9."},
            "time": 1,
        },
        {
            "trace_id": tid(7),
            "span_id": sid(1),
            "event": C.EVENT_GEN_AI_USER_MESSAGE,
            "body": {"content": "When do you open?"},
            "time": 2,
        },
        {
            "trace_id": tid(7),
            "span_id": sid(1),
            "event": C.EVENT_GEN_AI_CHOICE,
            "body": {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "At 9 am."},
            },
            "time": 3,
        },
    ]
    [c] = extract_cases(trace_of([s], logs))
    assert (c.case.input, c.case.output, c.case.context) == (
        "When do you open?",
        "At 9 am.",
        "Context: the shop opens at 9.",
    )


def test_inference_operation_details_log_record() -> None:
    s = span(tid(8), sid(1), "chat", {C.GEN_AI_OPERATION_NAME: "chat"})
    logs = [
        {
            "trace_id": tid(8),
            "span_id": sid(1),
            "event": C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS,
            "attrs": {
                C.GEN_AI_INPUT_MESSAGES: chat_messages(("user", "Ping?")),
                C.GEN_AI_OUTPUT_MESSAGES: chat_messages(("assistant", "Pong.")),
            },
        }
    ]
    [c] = extract_cases(trace_of([s], logs))
    assert (c.case.input, c.case.output) == ("Ping?", "Pong.")


def test_spans_without_content_or_non_llm_give_no_case() -> None:
    no_content = span(
        tid(9), sid(1), "chat", {C.GEN_AI_OPERATION_NAME: "chat"}
    )  # content capture off
    http = span(tid(9), sid(2), "GET /", {"http.method": "GET"}, parent=sid(1))
    assert extract_cases(trace_of([no_content, http])) == []


def test_invalid_eval_block_is_reported_not_raised() -> None:
    from nexagauge.online.ingest.extract import extract_cases_with_errors

    spans = sdk_turn(tid(10), "q", "a")
    spans[0]["attrs"][C.NG_EVAL_RELEVANCE] = json.dumps({"scoring_mode": "bogus"})
    cases, errors = extract_cases_with_errors(trace_of(spans))
    assert cases == [] and len(errors) == 1 and "relevance" in errors[0][1]
    spans[0]["attrs"][C.NG_EVAL_RELEVANCE] = json.dumps({"scoring_mode": "scale_1_5"})
    [c] = extract_cases(trace_of(spans))
    assert c.case.relevance.scoring_mode.value == "scale_1_5"


def test_documents_on_the_traced_call_itself_are_its_context() -> None:
    spans = sdk_turn(tid(11), "Where?", "Paris.")
    spans[0]["attrs"][C.GEN_AI_RETRIEVAL_DOCUMENTS] = json.dumps(
        [{"id": "1", "content": "It is in Paris."}]
    )
    [c] = extract_cases(trace_of(spans))
    assert c.case.context == "It is in Paris." and c.span.name == "answer"
