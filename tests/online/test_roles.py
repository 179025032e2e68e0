"""The span role table (nexagauge/online/ingest/roles.py), per vocabulary, with spans that look alike,
and what the roles do to cases: only answers become cases, retrieved documents are the context,
retrievals never publish conversation turns (issue 13)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord, TopicPartition

from nexagauge.graph.runtime import Runtime
from nexagauge.online.ingest.extract import build_views, extract_cases
from nexagauge.online.ingest.roles import Role, assign, classify
from nexagauge.online.stage import EvaluatorStage
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

from .otlp import chat_messages, rand_tid, sid, span, tid, traces_request
from .test_extract import trace_of

QUESTION = "When does the shop open?"
ANSWER = "The shop opens at 9 am."
DOCS = ["The shop opens at 9 am on weekdays.", "It is closed on Sundays."]


def role_of(attrs: dict[str, Any], events: list[Any] | None = None) -> tuple[str, str]:
    t = trace_of([span(tid(1), sid(1), "s", attrs, events=events or [])])
    r = classify(build_views(t)[sid(1)])
    return r.role.value, r.kind


def tl_entity(kind: str, output: Any) -> dict[str, Any]:
    return {
        C.TRACELOOP_SPAN_KIND: kind,
        C.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [QUESTION], "kwargs": {}}),
        C.TRACELOOP_ENTITY_OUTPUT: json.dumps(output),
    }


SDK = {C.NG_SDK_VERSION: "0.1.0"}
DOC_EVENT = [(C.DB_QUERY_RESULT_EVENT, {C.DB_QUERY_RESULT_DOCUMENT: "doc"})]


@pytest.mark.parametrize(
    ("attrs", "events", "expected"),
    [
        # nexa-gauge SDK
        ({**SDK, C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_WORKFLOW}, None, ("answer", "traced")),
        ({**SDK, C.GEN_AI_OPERATION_NAME: C.OPERATION_RETRIEVAL}, None, ("retrieval", "retrieval")),
        ({**SDK, C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL}, None, ("other", "tool")),
        ({**SDK, C.GEN_AI_OPERATION_NAME: C.OPERATION_EMBEDDINGS}, None, ("other", "embedding")),
        # a traced call that was *given* documents is still an answer, not a retrieval
        ({**SDK, C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(DOCS)}, None, ("answer", "traced")),
        # OTel GenAI
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT}, None, ("answer", "llm")),
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_TEXT_COMPLETION}, None, ("answer", "llm")),
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_GENERATE_CONTENT}, None, ("answer", "llm")),
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_RETRIEVAL}, None, ("retrieval", "retrieval")),
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_AGENT}, None, ("answer", "workflow")),
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL}, None, ("other", "tool")),
        ({C.GEN_AI_OPERATION_NAME: C.OPERATION_EMBEDDINGS}, None, ("other", "embedding")),
        ({C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(DOCS)}, None, ("retrieval", "retrieval")),
        # a chat call carrying the documents it was given is the answer
        (
            {C.GEN_AI_OPERATION_NAME: "chat", C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(DOCS)},
            None,
            ("answer", "llm"),
        ),
        # OpenInference
        ({C.OI_SPAN_KIND: "LLM"}, None, ("answer", "llm")),
        ({C.OI_SPAN_KIND: "CHAIN"}, None, ("answer", "workflow")),
        ({C.OI_SPAN_KIND: "AGENT"}, None, ("answer", "workflow")),
        ({C.OI_SPAN_KIND: "RETRIEVER"}, None, ("retrieval", "retrieval")),
        ({C.OI_SPAN_KIND: "TOOL"}, None, ("other", "tool")),
        ({C.OI_SPAN_KIND: "EMBEDDING"}, None, ("other", "embedding")),
        ({C.OI_SPAN_KIND: "GUARDRAIL"}, None, ("other", "guardrail")),
        # a reranker carries documents too, but they are the retriever's, re-ordered
        (
            {C.OI_SPAN_KIND: "RERANKER", "reranker.output_documents.0.document.content": "d"},
            None,
            ("other", "reranker"),
        ),
        # an LLM span with db.query.result events is still the LLM call
        ({C.OI_SPAN_KIND: "LLM"}, DOC_EVENT, ("answer", "llm")),
        # an array where a string belongs matches nothing (and does not raise)
        ({C.OI_SPAN_KIND: ["LLM"]}, None, ("other", "other")),
        # Traceloop
        (tl_entity("workflow", ANSWER), None, ("answer", "workflow")),
        (tl_entity("agent", ANSWER), None, ("answer", "workflow")),
        (tl_entity("task", DOCS), None, ("retrieval", "retrieval")),
        (
            tl_entity("task", [{"page_content": d, "metadata": {}} for d in DOCS]),
            None,
            ("retrieval", "retrieval"),
        ),
        (tl_entity("tool", [{"content": d} for d in DOCS]), None, ("retrieval", "retrieval")),
        (tl_entity("task", []), None, ("retrieval", "retrieval")),  # a search that found nothing
        (tl_entity("task", ANSWER), None, ("answer", "workflow")),
        (tl_entity("task", {"answer": ANSWER}), None, ("answer", "workflow")),
        (tl_entity("task", [1, 2, 3]), None, ("answer", "workflow")),  # a list, not documents
        (tl_entity("tool", "42 degrees"), None, ("other", "tool")),
        # legacy GenAI / OpenLLMetry LLM span
        (
            {"gen_ai.prompt.0.content": "q", "gen_ai.completion.0.content": "a"},
            None,
            ("answer", "llm"),
        ),
        # vector-DB instrumentation: documents as events
        ({"db.system": "chroma"}, DOC_EVENT, ("retrieval", "retrieval")),
        # nothing we know
        ({"http.method": "GET"}, None, ("other", "other")),
    ],
)
def test_role_table(attrs: dict[str, Any], events: Any, expected: tuple[str, str]) -> None:
    assert role_of(attrs, events) == expected


def traceloop_rag(t: bytes, conversation: str | None = None) -> list[dict[str, Any]]:
    """A Traceloop ``@workflow`` with a retriever ``@task`` (output = the documents) and an
    answering ``@task`` (same answer as the workflow), as traceloop-sdk writes them."""
    assoc = {C.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + "session_id": conversation}
    wf = tl_entity("workflow", ANSWER) | (assoc if conversation else {})
    return [
        span(t, sid(1), "rag.workflow", wf, start=1_000, end=9_000),
        span(t, sid(2), "retrieve.task", tl_entity("task", DOCS), parent=sid(1), end=3_000),
        span(t, sid(3), "answer.task", tl_entity("task", ANSWER), parent=sid(1), end=8_000),
    ]


def test_traceloop_retriever_task_is_context_not_a_case() -> None:
    """Issue 13 item 1: the retriever task became a case (relevance judged on a JSON list) and
    its documents were not the answer's context."""
    cases = extract_cases(trace_of(traceloop_rag(tid(2))))
    assert [c.span.name for c in cases] == ["rag.workflow"]
    assert cases[0].case.context_documents == tuple(DOCS)
    assert (cases[0].case.input, cases[0].case.output) == (QUESTION, ANSWER)
    for mode in ("root", "all", "llm"):
        assert "retrieve.task" not in [
            c.span.name for c in extract_cases(trace_of(traceloop_rag(tid(2))), mode)
        ]


def test_nested_workflows_are_steps_and_an_outer_span_without_output_hides_nothing() -> None:
    t = tid(3)
    root = span(
        t,
        sid(1),
        "chain",
        {C.OI_SPAN_KIND: "CHAIN", C.OI_INPUT_VALUE: QUESTION, C.OI_OUTPUT_VALUE: ANSWER},
        end=9_000,
    )
    prompt = span(
        t,
        sid(2),
        "ChatPromptTemplate",
        {
            C.OI_SPAN_KIND: "CHAIN",
            C.OI_INPUT_VALUE: QUESTION,
            C.OI_OUTPUT_VALUE: "System: answer. Human: ...",
        },
        parent=sid(1),
        end=2_000,
    )
    tr = assign(build_views(trace_of([root, prompt])))
    assert tr.roles[sid(2)].role is Role.OTHER and tr.roles[sid(2)].kind == "step"
    assert [c.span.name for c in extract_cases(trace_of([root, prompt]))] == ["chain"]
    # an HTTP root and a CHAIN without output above it: the inner CHAIN is the answer
    http = span(t, sid(5), "POST /chat", {"http.method": "POST"}, end=10_000)
    empty = span(t, sid(6), "outer", {C.OI_SPAN_KIND: "CHAIN"}, parent=sid(5), end=9_500)
    inner = span(
        t,
        sid(7),
        "inner",
        {C.OI_SPAN_KIND: "CHAIN", C.OI_INPUT_VALUE: QUESTION, C.OI_OUTPUT_VALUE: ANSWER},
        parent=sid(6),
        end=9_000,
    )
    assert [c.span.name for c in extract_cases(trace_of([http, empty, inner]))] == ["inner"]


def test_context_is_what_was_retrieved_before_and_system_prompt_only_without_retrieval() -> None:
    t = tid(4)
    chat = {
        C.GEN_AI_OPERATION_NAME: "chat",
        C.GEN_AI_INPUT_MESSAGES: chat_messages(("system", "Be brief."), ("user", QUESTION)),
        C.GEN_AI_OUTPUT_MESSAGES: chat_messages(("assistant", ANSWER)),
    }
    answer = span(t, sid(1), "chat", chat, end=5_000)
    before = span(
        t,
        sid(2),
        "search",
        {C.OI_SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOCS[0]},
        end=4_000,
    )
    after = span(
        t,
        sid(3),
        "search-later",
        {C.OI_SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOCS[1]},
        end=6_000,
    )
    [c] = extract_cases(trace_of([answer, before, after]))
    assert c.case.context_documents == (DOCS[0],)
    # a retrieval that found nothing (or came later) still means "no system-prompt fallback"
    [c] = extract_cases(trace_of([answer, after]))
    assert c.case.context is None
    [c] = extract_cases(trace_of([answer]))
    assert c.case.context == "Be brief."


class _Turns:
    def __init__(self) -> None:
        self.published: list[str] = []

    async def publish(self, ec: Any, nodes: Any) -> bool:
        self.published.append(ec.span.name)
        return True


class _Emitter:
    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        return None


async def test_only_answers_publish_conversation_turns() -> None:
    """The evaluator stage publishes one turn for the Traceloop RAG trace, the workflow's: the
    retriever task no longer joins the conversation as a turn of its own."""
    s = Settings(
        kafka={"traces_topic": "spans"},
        online={"nodes": ["relevance"], "trace_grace_s": 0.0},
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    stage = EvaluatorStage(s, Runtime.create(s, use_cache=False), _Emitter())
    stage.turns = turns = _Turns()
    v = traces_request(traceloop_rag(rand_tid(), conversation="conv-1"))
    rec = ConsumerRecord("spans", 0, 0, 0, 0, None, v, None, 0, len(v), [])
    await stage.handle(TopicPartition("spans", 0), [rec])
    for _ in range(100):
        await stage.tick()
        if stage.stats.traces_done == 1:
            break
        await asyncio.sleep(0.02)
    assert turns.published == ["rag.workflow"]
    assert stage.stats.evaluated == 1
