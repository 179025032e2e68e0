"""What a traced call records: input selection, context, retrieval, session, knobs, options."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge
from nexagauge.sdk import conventions as C

from .conftest import Recorder, configure_with


def _msgs(span: Any, attr: str = C.GEN_AI_INPUT_MESSAGES) -> list[dict[str, Any]]:
    return json.loads(span.attributes[attr])


def _in(span: Any) -> str:
    return "".join(p["content"] for p in _msgs(span)[0]["parts"])


def _docs(span: Any) -> list[dict[str, Any]]:
    return json.loads(span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS])


# -- input selection ---------------------------------------------------------------------------


@pytest.mark.parametrize("param", ["question", "query", "prompt", "input"])
def test_input_defaults_to_a_well_known_parameter_name(rec: Recorder, param: str) -> None:
    ns: dict[str, Any] = {}
    exec(f"def f(user_id, {param}, style='x'):\n    return 'ok'", ns)
    traced = nexagauge.trace(name=f"n-{param}")(ns["f"])
    traced("u-1", "the real input")
    traced(user_id="u-2", **{param: "by keyword"})
    assert sorted(_in(s) for s in rec.named(f"n-{param}")) == ["by keyword", "the real input"]


def test_input_defaults_to_first_string_argument(rec: Recorder) -> None:
    @nexagauge.trace(name="f")
    def f(n: int, text: str, other: str) -> str:
        return text

    f(3, "first string", "second")
    assert _in(rec.one("f")) == "first string"


def test_input_first_string_from_keywords(rec: Recorder) -> None:
    @nexagauge.trace(name="kw")
    def f(n: int = 0, *, text: str = "") -> str:
        return text

    f(n=1, text="kw text")
    assert _in(rec.one("kw")) == "kw text"


def test_explicit_input_arg_positional_keyword_and_default(rec: Recorder) -> None:
    @nexagauge.trace(name="e", input_arg="body")
    def f(title: str, body: str = "default body") -> str:
        return "r"

    f("t1", "b1")
    f("t2", body="b2")
    f("t3")
    assert sorted(_in(s) for s in rec.named("e")) == ["b1", "b2", "default body"]


def test_unknown_input_arg_is_rejected_at_decoration() -> None:
    with pytest.raises(ValueError, match="no such parameter"):

        @nexagauge.trace(input_arg="nope")
        def f(question: str) -> str:
            return question


def test_chat_messages_are_recorded_as_parts(rec: Recorder) -> None:
    @nexagauge.trace(name="chat")
    def chat(messages: list[dict[str, Any]]) -> str:
        return "hi"

    chat(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image_url"}]},
            SimpleNamespace(role="assistant", content="earlier answer"),
        ]
    )
    msgs = _msgs(rec.one("chat"))
    assert msgs == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Look:"}, {"type": "image_url"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "earlier answer"}]},
    ]


def test_structured_input_is_serialized_with_secret_keys_scrubbed(rec: Recorder) -> None:
    @dataclass
    class Req:
        question: str
        api_key: str

    @nexagauge.trace(name="s", input_arg="req")
    def f(req: Req) -> str:
        return "ok"

    f(Req("why?", "abc123"))
    span = rec.one("s")
    assert json.loads(_in(span)) == {"question": "why?", "api_key": "[scrubbed:sensitive_key]"}
    assert span.attributes[C.NG_SCRUBBED]


def test_capture_input_and_output_off(rec: Recorder) -> None:
    @nexagauge.trace(name="off", capture_input=False, capture_output=False)
    def f(question: str) -> str:
        return "secret answer"

    assert f("secret question") == "secret answer"
    span = rec.one("off")
    assert C.GEN_AI_INPUT_MESSAGES not in span.attributes
    assert C.GEN_AI_OUTPUT_MESSAGES not in span.attributes


def test_capture_content_false_records_metadata_only() -> None:
    r = configure_with(InMemorySpanExporter(), capture_content=False)
    try:

        @nexagauge.trace(name="meta", relevance={"scoring_mode": "scale_1_5"})
        def f(question: str, context: str) -> str:
            nexagauge.add_context("doc")
            return "answer"

        with nexagauge.session(session_id="s"):
            f("q", "ctx")
        span = r.one("meta")
        for attr in (
            C.GEN_AI_INPUT_MESSAGES,
            C.GEN_AI_OUTPUT_MESSAGES,
            C.GEN_AI_RETRIEVAL_DOCUMENTS,
        ):
            assert attr not in span.attributes
        assert span.attributes[C.GEN_AI_CONVERSATION_ID] == "s"
        assert C.NG_EVAL_RELEVANCE in span.attributes
    finally:
        nexagauge.shutdown()


def test_none_output_is_not_recorded(rec: Recorder) -> None:
    @nexagauge.trace(name="none")
    def f(question: str) -> None:
        return None

    f("q")
    assert C.GEN_AI_OUTPUT_MESSAGES not in rec.one("none").attributes


def test_structured_output_is_json_text(rec: Recorder) -> None:
    @nexagauge.trace(name="dict")
    def f(question: str) -> dict[str, Any]:
        return {"answer": "Paris", "confidence": 0.9, "tags": {"geo"}}

    assert f("q")["answer"] == "Paris"
    text = _msgs(rec.one("dict"), C.GEN_AI_OUTPUT_MESSAGES)[0]["parts"][0]["content"]
    assert json.loads(text) == {"answer": "Paris", "confidence": 0.9, "tags": ["geo"]}


def test_openai_like_response_records_output_model_and_usage(rec: Recorder) -> None:
    completion = SimpleNamespace(
        id="chatcmpl-1",
        model="gpt-4o-mini-2024",
        choices=[
            SimpleNamespace(
                message=SimpleNamespace(role="assistant", content="Paris."), finish_reason="stop"
            )
        ],
        usage=SimpleNamespace(prompt_tokens=12, completion_tokens=3),
    )

    @nexagauge.trace(name="oa")
    def f(prompt: str) -> Any:
        return completion

    assert f("q") is completion
    span = rec.one("oa")
    out = _msgs(span, C.GEN_AI_OUTPUT_MESSAGES)
    assert out == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Paris."}],
            "finish_reason": "stop",
        }
    ]
    assert span.attributes[C.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024"
    assert span.attributes[C.GEN_AI_RESPONSE_ID] == "chatcmpl-1"
    assert span.attributes[C.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert span.attributes[C.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert tuple(span.attributes[C.GEN_AI_RESPONSE_FINISH_REASONS]) == ("stop",)


def test_anthropic_like_message_records_output(rec: Recorder) -> None:
    msg = {
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "Bonjour"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }

    @nexagauge.trace(name="an")
    def f(prompt: str) -> Any:
        return msg

    f("q")
    span = rec.one("an")
    out = _msgs(span, C.GEN_AI_OUTPUT_MESSAGES)
    assert out[0]["parts"] == [{"type": "text", "content": "Bonjour"}]
    assert out[0]["finish_reason"] == "end_turn"
    assert span.attributes[C.GEN_AI_USAGE_OUTPUT_TOKENS] == 2


def test_static_attributes_option(rec: Recorder) -> None:
    @nexagauge.trace(
        name="attrs",
        attributes={C.GEN_AI_REQUEST_MODEL: "gpt-4o", C.GEN_AI_PROVIDER_NAME: "openai", "x": [1]},
    )
    def f(question: str) -> str:
        return "a"

    f("q")
    span = rec.one("attrs")
    assert span.attributes[C.GEN_AI_REQUEST_MODEL] == "gpt-4o"
    assert span.attributes["x"] == "[1]"


# -- context / retrieval -----------------------------------------------------------------------


class LcDocument:  # shape of langchain_core.documents.Document
    def __init__(self, page_content: str, metadata: dict[str, Any], id: str | None = None) -> None:
        self.page_content = page_content
        self.metadata = metadata
        self.id = id


class LlamaNode:  # shape of llama_index TextNode / NodeWithScore
    def __init__(self, text: str, node_id: str) -> None:
        self.node_id = node_id
        self._text = text

    def get_content(self) -> str:
        return self._text


def test_add_context_accepts_common_document_shapes(rec: Recorder) -> None:
    @nexagauge.trace(name="rag")
    def f(question: str) -> str:
        nexagauge.add_context("plain text")
        nexagauge.add_context({"id": 7, "text": "dict doc", "score": 0.5})
        nexagauge.add_context([(LcDocument("lc doc", {"source": "wiki"}, id="lc1"), 0.8)])
        nexagauge.add_context(SimpleNamespace(node=LlamaNode("llama doc", "n1"), score=0.7))
        return "a"

    f("q")
    assert _docs(rec.one("rag")) == [
        {"content": "plain text"},
        {"id": "7", "score": 0.5, "content": "dict doc"},
        {"id": "lc1", "metadata": {"source": "wiki"}, "content": "lc doc", "score": 0.8},
        {"id": "n1", "content": "llama doc", "score": 0.7},
    ]


def test_context_argument_default_and_explicit(rec: Recorder) -> None:
    @nexagauge.trace(name="d")
    def with_default(question: str, context: list[str]) -> str:
        return "a"

    @nexagauge.trace(name="x", context_arg="passages")
    def explicit(question: str, passages: list[dict[str, Any]]) -> str:
        return "a"

    @nexagauge.trace(name="off", context_arg=False)
    def disabled(question: str, context: str) -> str:
        return "a"

    with_default("q", ["c1", "c2"])
    explicit("q", passages=[{"id": "p", "content": "pc"}])
    disabled("q", "ignored")
    assert [d["content"] for d in _docs(rec.one("d"))] == ["c1", "c2"]
    assert _docs(rec.one("x")) == [{"id": "p", "content": "pc"}]
    assert C.GEN_AI_RETRIEVAL_DOCUMENTS not in rec.one("off").attributes


def test_add_context_outside_a_traced_call_is_ignored(rec: Recorder) -> None:
    nexagauge.add_context("nobody listens")  # no exception, no span
    assert rec.spans == []


def test_retriever_records_documents_and_feeds_enclosing_call(rec: Recorder) -> None:
    @nexagauge.retriever
    def search(query: str) -> list[dict[str, Any]]:
        return [{"id": "a", "content": "Paris is in France.", "score": 0.9}]

    @nexagauge.trace(name="answer")
    def answer(question: str) -> str:
        search("capital of France")
        return "Paris"

    answer("What is the capital of France?")
    ret = rec.one("test_retriever_records_documents_and_feeds_enclosing_call.<locals>.search")
    assert ret.attributes[C.GEN_AI_OPERATION_NAME] == C.OPERATION_RETRIEVAL
    assert ret.attributes[C.GEN_AI_RETRIEVAL_QUERY_TEXT] == "capital of France"
    assert _docs(ret) == [{"id": "a", "content": "Paris is in France.", "score": 0.9}]
    assert _docs(rec.one("answer")) == _docs(ret)


async def test_async_retriever(rec: Recorder) -> None:
    @nexagauge.retriever(name="aret")
    async def search(query: str) -> list[str]:
        return ["d1"]

    @nexagauge.trace(name="outer")
    async def answer(question: str) -> str:
        await search("q")
        return "a"

    await answer("q")
    assert _docs(rec.one("outer")) == [{"content": "d1"}]


# -- session -----------------------------------------------------------------------------------


def test_session_sets_conversation_and_user_and_nests(rec: Recorder) -> None:
    @nexagauge.trace(name="t")
    def f(question: str) -> str:
        return "a"

    with nexagauge.session(session_id="conv-1", user_id="u-1"):
        f("1")
        with nexagauge.session(session_id="conv-2"):
            f("2")
            assert nexagauge.current_session() == ("conv-2", "u-1")
        f("3")
    f("4")
    by_input = {_in(s): s.attributes for s in rec.named("t")}
    assert by_input["1"][C.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert by_input["2"][C.GEN_AI_CONVERSATION_ID] == "conv-2"
    assert by_input["2"][C.NG_USER_ID] == "u-1"
    assert by_input["3"][C.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert C.GEN_AI_CONVERSATION_ID not in by_input["4"]
    assert nexagauge.current_session() == (None, None)


async def test_session_is_isolated_per_task(rec: Recorder) -> None:
    @nexagauge.trace(name="t")
    async def f(question: str) -> str:
        await asyncio.sleep(0.01)
        return "a"

    async def user(i: int) -> None:
        async with nexagauge.session(session_id=f"s{i}", user_id=i):
            await f(f"q{i}")

    await asyncio.gather(*(user(i) for i in range(5)))
    for span in rec.named("t"):
        i = _in(span)[1:]
        assert span.attributes[C.GEN_AI_CONVERSATION_ID] == f"s{i}"
        assert span.attributes[C.NG_USER_ID] == i


def test_session_is_isolated_per_thread(rec: Recorder) -> None:
    @nexagauge.trace(name="t")
    def f(question: str) -> str:
        return "a"

    def worker(i: int) -> None:
        with nexagauge.session(session_id=f"s{i}"):
            f(f"q{i}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for span in rec.named("t"):
        assert span.attributes[C.GEN_AI_CONVERSATION_ID] == "s" + _in(span)[1:]


def test_session_rejects_bad_types() -> None:
    with pytest.raises(TypeError, match="session_id"):
        nexagauge.session(session_id=["x"])


# -- knobs / turn end ----------------------------------------------------------------------------


def test_knobs_on_decorator_and_per_call_override(rec: Recorder) -> None:
    geval = {
        "scoring_mode": "scale_1_5",
        "include_reasoning": True,
        "metrics": [{"name": "polite", "criteria": "Is the answer polite?"}],
    }

    @nexagauge.trace(name="k", relevance={"scoring_mode": "scale_1_5"}, geval=geval)
    def f(question: str, strict: bool = False) -> str:
        if strict:
            nexagauge.set_eval_knobs(
                relevance={"scoring_mode": "binary_yes_no", "include_reasoning": True},
                grounding={"include_reasoning": True},
            )
        return "a"

    f("q1")
    f("q2", strict=True)
    spans = {_in(s): s.attributes for s in rec.named("k")}
    assert json.loads(spans["q1"][C.NG_EVAL_RELEVANCE]) == {"scoring_mode": "scale_1_5"}
    assert json.loads(spans["q1"][C.NG_EVAL_GEVAL]) == geval
    assert C.NG_EVAL_GROUNDING not in spans["q1"]
    assert json.loads(spans["q2"][C.NG_EVAL_RELEVANCE]) == {
        "scoring_mode": "binary_yes_no",
        "include_reasoning": True,
    }
    assert json.loads(spans["q2"][C.NG_EVAL_GROUNDING]) == {"include_reasoning": True}
    assert json.loads(spans["q2"][C.NG_EVAL_GEVAL]) == geval


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"relevance": {"scoring_mode": "scale_1_10"}}, "relevance.scoring_mode"),
        ({"grounding": {"include_reasoning": "yes"}}, "grounding.include_reasoning"),
        ({"relevance": {"metrics": []}}, "relevance takes no metrics"),
        ({"geval": {"metrics": [{"criteria": "x"}]}}, r"geval.metrics\[0\]"),
        ({"redteam": ["not", "a", "mapping"]}, "redteam: evaluation knobs must be a mapping"),
    ],
)
def test_malformed_knobs_are_rejected_at_decoration(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        nexagauge.trace(**kwargs)


def test_malformed_per_call_knobs_raise_under_strict_mode(rec: Recorder) -> None:
    from nexagauge.sdk._errors import SDKInternalError

    @nexagauge.trace(name="bad")
    def f(question: str) -> str:
        nexagauge.set_eval_knobs(relevance={"scoring_mode": "nope"})
        return "a"

    with pytest.raises(SDKInternalError):
        f("q")


def test_turn_end_option_and_function(rec: Recorder) -> None:
    @nexagauge.trace(name="turn", turn_end=True)
    def reply(question: str) -> str:
        return "a"

    @nexagauge.trace(name="dyn")
    def maybe(question: str) -> str:
        if question == "bye":
            nexagauge.mark_turn_end()
        return "a"

    reply("q")
    maybe("hi")
    maybe("bye")
    assert rec.one("turn").attributes[C.NG_TURN_END] is True
    flags = {_in(s): s.attributes.get(C.NG_TURN_END) for s in rec.named("dyn")}
    assert flags == {"hi": None, "bye": True}


def test_retrieval_context_manager(rec: Recorder) -> None:
    @nexagauge.trace(name="rag")
    def answer(question: str) -> str:
        with nexagauge.retrieval(query="capital?") as r:
            r.add([{"id": "d1", "content": "Paris is the capital. password=hunter2"}])
        return "Paris"

    answer("q")
    ret = rec.one("retrieval")
    assert ret.attributes[C.GEN_AI_OPERATION_NAME] == C.OPERATION_RETRIEVAL
    assert ret.attributes[C.GEN_AI_RETRIEVAL_QUERY_TEXT] == "capital?"
    expected = [{"id": "d1", "content": "Paris is the capital. password=[scrubbed:password]"}]
    assert _docs(ret) == expected
    assert _docs(rec.one("rag")) == expected
    assert ret.parent.span_id == rec.one("rag").context.span_id


async def test_retrieval_context_manager_async_and_error(rec: Recorder) -> None:
    with pytest.raises(LookupError):
        async with nexagauge.retrieval(query="q", name="vec") as r:
            r.add("partial")
            raise LookupError("index down")
    span = rec.one("vec")
    assert span.attributes[C.ERROR_TYPE] == "LookupError"
    assert _docs(span) == [{"content": "partial"}]


def test_long_retrieved_documents_are_truncated_once_in_parent() -> None:
    r = configure_with(InMemorySpanExporter(), max_value_length=100)
    try:

        @nexagauge.retriever(name="ret")
        def search(query: str) -> list[str]:
            return ["x" * 300]

        @nexagauge.trace(name="outer")
        def answer(question: str) -> str:
            search("q")
            return "a"

        answer("q")
        for name in ("ret", "outer"):
            (doc,) = _docs(r.one(name))
            assert doc["content"] == "x" * 100 + C.TRUNCATION_MARKER_TEMPLATE.format(original=300)
    finally:
        nexagauge.shutdown()
