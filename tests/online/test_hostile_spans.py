"""Hostile spans cost only themselves (issue 15 items 1-6, issue 14 item 6): every input below
used to raise in extraction (the stage then dropped the whole trace) or poison the whole message.
Now the bad span is rejected with a reason naming it and the good spans still yield their cases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from nexagauge.online.ingest.decode import PoisonMessage, decode_logs, decode_traces
from nexagauge.online.ingest.extract import extract_cases, extract_cases_with_errors
from nexagauge.online.rekey import split_traces
from nexagauge.sdk import conventions as C

from .otlp import chat_messages, kvs, sdk_turn, sid, span, tid, traces_request
from .test_extract import trace_of

GOOD_Q, GOOD_A = "Where is the tower?", "In Paris."


def chat(t: bytes, n: int, inputs: Any, parent: bytes = b"", **kw: Any) -> dict[str, Any]:
    attrs = {
        C.GEN_AI_OPERATION_NAME: "chat",
        C.GEN_AI_INPUT_MESSAGES: inputs,
        C.GEN_AI_OUTPUT_MESSAGES: chat_messages(("assistant", f"reply {n}")),
        **kw,
    }
    return span(t, sid(n), f"chat-{n}", attrs, parent=parent, end=2_000 + n)


def good_and(bad: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """Cases and errors of a trace holding a good SDK turn and ``bad``."""
    t = bad["trace_id"]
    return extract_cases_with_errors(trace_of([*sdk_turn(t, GOOD_Q, GOOD_A), bad]))


def deep_parts(depth: int) -> str:
    part: Any = {"type": "text", "content": "deep"}
    for _ in range(depth):
        part = [part]
    return json.dumps([{"role": "user", "parts": part}])


@pytest.mark.parametrize(
    "inputs",
    [
        "[" * 2000 + "]" * 2000,  # issue 15 item 1: RecursionError in the JSON reader
        deep_parts(900),  # item 2: parts nested 900 deep in valid JSON
        deep_parts(40),  # valid for json, too deep for a chat message
    ],
    ids=["brackets-2000", "parts-900", "parts-40"],
)
def test_deep_messages_reject_only_their_span(inputs: str) -> None:
    cases, errors = good_and(chat(tid(1), 7, inputs))
    assert [c.case.output for c in cases] == [GOOD_A]
    [err] = errors
    assert err.reason == "invalid_span" and err.span.span_id == sid(7)
    assert sid(7).hex() in err.detail and C.GEN_AI_INPUT_MESSAGES in err.detail
    assert "[[[" not in err.detail  # names the span and the field, not the value


def test_span_kind_array_is_no_role_and_no_error() -> None:
    """Item 3: ``openinference.span.kind = ["LLM"]`` raised TypeError (unhashable)."""
    bad = span(tid(2), sid(7), "odd", {C.OI_SPAN_KIND: ["LLM"], C.TRACELOOP_SPAN_KIND: [1]})
    cases, errors = good_and(bad)
    assert [c.case.output for c in cases] == [GOOD_A] and errors == []


def test_long_parent_chain_yields_every_answer() -> None:
    """Item 4: a 3,000-span parent chain (the time is measured in bench/hostile.py)."""
    t = tid(3)
    spans = [
        chat(t, i + 1, chat_messages(("user", f"q{i}")), parent=sid(i) if i else b"")
        for i in range(3000)
    ]
    cases = extract_cases(trace_of(spans))
    assert len(cases) == 3000 and {c.case.output for c in cases} == {
        f"reply {i + 1}" for i in range(3000)
    }
    # root mode: only the outermost answer; parent cycles do not hang the walk
    assert [c.span.span_id for c in extract_cases(trace_of(spans), "root")] == [sid(1)]
    spans[0]["parent"] = sid(3000)
    assert len(extract_cases(trace_of(spans))) == 3000


def test_retrieval_documents_are_deduplicated_in_order() -> None:
    """Item 4 (de-dup): many retrievals with repeated documents, each answer's context bounded."""
    t = tid(4)
    docs = [f"doc {i % 50}" for i in range(2000)]
    retr = [
        span(
            t,
            sid(100 + i),
            "search",
            {C.OI_SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.content": d},
            end=1_000 + i,
        )
        for i, d in enumerate(docs)
    ]
    answer = chat(t, 1, chat_messages(("user", "q")))
    answer["end"] = 10_000
    [c] = extract_cases(trace_of([answer, *retr]))
    assert c.case.context_documents == tuple(f"doc {i}" for i in range(50))


def test_lone_surrogate_does_not_break_the_fingerprint() -> None:
    """Item 5: a JSON-escaped lone surrogate reached case.fingerprint(), which raised."""
    msgs = '[{"role": "user", "parts": [{"type": "text", "content": "caf\\ud800 ok"}]}]'
    [c] = extract_cases(trace_of([chat(tid(5), 1, msgs)]))
    assert c.case.input == "caf\ufffd ok"
    assert len(c.case.fingerprint()) == 32


def test_eval_block_nested_too_deeply_rejects_its_span() -> None:
    block = json.dumps({"scoring_mode": "scale_1_5", "x": json.loads("[" * 200 + "]" * 200)})
    cases, errors = good_and(
        chat(tid(6), 7, chat_messages(("user", "q")), **{C.NG_EVAL_RELEVANCE: block})
    )
    assert [c.case.output for c in cases] == [GOOD_A]
    assert [e.reason for e in errors] == ["invalid_span"]


@pytest.mark.parametrize("doc", [b"{}", b'{"api_key": "sk-live-1234"}', b'{"resourceLogs": []}'])
def test_json_without_otlp_fields_is_poison(doc: bytes) -> None:
    """Item 6: ``{}`` was accepted as an empty request although the decoder calls it poison."""
    with pytest.raises(PoisonMessage) as ei:
        decode_traces(doc)
    assert ei.value.reason == "not_otlp" and "sk-live" not in ei.value.detail
    assert decode_traces(b'{"resourceSpans": []}').spans == []  # an empty request is fine
    assert decode_logs(b'{"resourceLogs": []}').logs == []


def _request(bad: str) -> bytes:
    """Two good spans (traces 1 and 2) around one bad span (trace 3): ``deep`` attributes nested
    60 levels, or ``utf8`` (invalid UTF-8 in its name)."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(kvs({"service.name": "shop-bot"}))
    ss = rs.scope_spans.add()
    for n in (1, 3, 2):
        s = ss.spans.add()
        s.trace_id, s.span_id, s.name = tid(n), sid(n), f"span-{n}"
        s.end_time_unix_nano = 5
    s = ss.spans[1]
    if bad == "deep":
        kv = s.attributes.add()
        kv.key = "k"
        v = kv.value
        for _ in range(60):
            v = v.array_value.values.add()
        v.string_value = "x"
    else:
        s.name = "BADNAME"
    raw = req.SerializeToString()
    return raw.replace(b"BADNAME", b"bad\xff\xfeXY") if bad == "utf8" else raw  # same length


@pytest.mark.parametrize("bad", ["deep", "utf8"])
def test_one_unreadable_span_costs_only_itself(bad: str) -> None:
    """Item 6 and issue 14 item 6: the whole message was dead-lettered for one span."""
    raw = _request(bad)
    with pytest.raises(Exception):  # noqa: B017 - the protobuf runtime refuses the request whole
        ExportTraceServiceRequest.FromString(raw)
    batch = decode_traces(raw)
    assert sorted(s.name for s in batch.spans) == ["span-1", "span-2"]
    [r] = batch.rejected
    assert r.reason == "invalid_span" and "span 1 of resource 0 scope 0" in r.detail
    assert tid(3).hex() in r.detail and sid(3).hex() in r.detail
    assert batch.spans[0].service == "shop-bot"
    # the re-key stage's split keeps the good spans too
    from nexagauge.online.ingest.decode import _parse

    req, rejected = _parse(raw, "otlp_proto", "traces", 8 << 20)
    assert sorted(split_traces(req)) == [tid(1), tid(2)] and len(rejected) == 1


def test_a_message_of_only_unreadable_spans_is_still_poison() -> None:
    req = ExportTraceServiceRequest()
    s = req.resource_spans.add().scope_spans.add().spans.add()
    s.trace_id, s.span_id, s.name = tid(1), sid(1), "BADNAME"
    raw = req.SerializeToString().replace(b"BADNAME", b"bad\xff\xfeXY")
    with pytest.raises(PoisonMessage) as ei:
        decode_traces(raw)
    assert ei.value.reason == "undecodable" and sid(1).hex() in ei.value.detail


def test_json_span_with_bad_id_or_depth_costs_only_itself() -> None:
    good = {"traceId": tid(1).hex(), "spanId": sid(1).hex(), "name": "good"}
    bad_id = {"traceId": "zz", "spanId": sid(2).hex(), "name": "bad-id"}
    deep: Any = {"stringValue": "x"}
    for _ in range(60):
        deep = {"arrayValue": {"values": [deep]}}
    bad_deep = {**good, "spanId": sid(3).hex(), "attributes": [{"key": "k", "value": deep}]}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [bad_id, good, bad_deep]}]}]}
    batch = decode_traces(json.dumps(doc).encode(), "otlp_json")
    assert [s.name for s in batch.spans] == ["good"]
    assert [r.detail.split(":")[0] for r in batch.rejected] == [
        "resourceSpans[0].scopeSpans[0].spans[0] (span)",
        "resourceSpans[0].scopeSpans[0].spans[2] (span)",
    ]
    assert traces_request  # the protobuf builders above share the same span shapes


async def test_large_trace_is_extracted_off_the_loop_and_fully_evaluated() -> None:
    """A trace above INLINE_EXTRACT_MAX spans goes through the worker-thread path of the stage:
    every answer is still evaluated, the unreadable span is counted, the offset is released."""
    import asyncio

    from aiokafka.structs import ConsumerRecord, TopicPartition

    from nexagauge.graph.runtime import Runtime
    from nexagauge.online.stage import INLINE_EXTRACT_MAX, EvaluatorStage
    from nexagauge.settings import Settings

    class Emitter:
        def __init__(self) -> None:
            self.n = 0

        async def emit(self, target: Any, result: Any, *, started_ns: int | None = None) -> None:
            self.n += 1

    s = Settings(
        kafka={"traces_topic": "spans"},
        online={"nodes": ["relevance"], "trace_grace_s": 0.0, "max_in_flight": 1000},
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    em = Emitter()
    stage = EvaluatorStage(s, Runtime.create(s, use_cache=False), em)
    t, n = tid(8), INLINE_EXTRACT_MAX + 50
    spans = [
        chat(t, i + 1, chat_messages(("user", f"q{i}")), parent=sid(i) if i else b"")
        for i in range(n)
    ]
    spans.append(chat(t, n + 1, "[" * 2000 + "]" * 2000, parent=sid(1)))
    v = traces_request(spans)
    await stage.handle(
        TopicPartition("spans", 0),
        [ConsumerRecord("spans", 0, 0, 0, 0, None, v, None, 0, len(v), [])],
    )
    await stage.tick()
    assert stage._active  # handed to the worker thread, registered for revocation
    for _ in range(500):
        await asyncio.sleep(0.02)
        await stage.tick()
        if stage.stats.traces_done == 1:
            break
    assert em.n == n and stage.stats.skipped.get("invalid_span") == 1
    assert stage.tracker.committable(("spans", 0)) == 1


async def test_tick_yields_between_slices_and_revocation_reaches_waiting_traces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many traces completing at once are started in slices (the loop runs in between); a
    revocation in between strips the waiting traces' sources, so they never release offsets of
    a partition this member no longer owns."""
    import asyncio

    from aiokafka.structs import ConsumerRecord, TopicPartition

    from nexagauge.graph.runtime import Runtime
    from nexagauge.online import stage as service_mod
    from nexagauge.online.stage import EvaluatorStage
    from nexagauge.settings import Settings

    class Emitter:
        async def emit(self, target: Any, result: Any, *, started_ns: int | None = None) -> None:
            return None

    monkeypatch.setattr(service_mod, "TICK_SLICE_S", 0.0)  # yield after every trace
    s = Settings(
        kafka={"traces_topic": "spans"},
        online={"nodes": ["relevance"], "trace_grace_s": 0.0},
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    stage = EvaluatorStage(s, Runtime.create(s, use_cache=False), Emitter())
    tp = TopicPartition("spans", 0)
    v = traces_request([sp for i in range(20) for sp in sdk_turn(tid(100 + i), "q", "a")])
    await stage.handle(tp, [ConsumerRecord("spans", 0, 0, 0, 0, None, v, None, 0, len(v), [])])
    started: list[int] = []
    first = asyncio.Event()
    start = stage._start

    def record(trace: Any) -> None:
        started.append(len(trace.sources))
        first.set()
        start(trace)

    monkeypatch.setattr(stage, "_start", record)
    tick = asyncio.ensure_future(stage.tick())
    await first.wait()
    assert not tick.done()  # the tick yielded the loop after its first trace
    stage.revoked([tp])
    await tick
    assert len(started) == 20 and started[0] == 1 and set(started[1:]) == {0}
