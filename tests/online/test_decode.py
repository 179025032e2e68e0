"""Decoder: lazy OTLP protobuf/JSON decoding, poison detection, and adversarial payloads."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from nexagauge.online.ingest.decode import (
    BASE_WANTED,
    PoisonMessage,
    any_value,
    attributes,
    decode_logs,
    decode_traces,
)
from nexagauge.sdk import conventions as C

from .otlp import logs_request, sdk_turn, sid, span, tid, traces_request


def test_proto_spans_carry_assembly_fields_and_only_wanted_attributes() -> None:
    spans = sdk_turn(tid(7), "q?", "a.", docs=["d1"], conversation="conv-1")
    spans[0]["attrs"][C.NG_TURN_END] = True
    batch = decode_traces(traces_request(spans, service="svc"))
    assert len(batch.spans) == 2 and batch.invalid == 0
    root = next(s for s in batch.spans if s.name == "answer")
    assert root.trace_hex == tid(7).hex() and root.span_hex == sid(1).hex()
    assert root.is_root and root.service == "svc" and root.end_ns == 5_000
    # only the wanted keys are decoded eagerly; the rest stays in the span's bytes (parse())
    assert set(root.marks) <= BASE_WANTED
    assert root.marks[C.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert root.marks[C.NG_TURN_END] is True
    assert C.GEN_AI_INPUT_MESSAGES in attributes(root.parse().attributes)
    child = next(s for s in batch.spans if s.name == "retrieve")
    assert not child.is_root and child.parent_span_id == sid(1)


def test_error_status_is_read() -> None:
    batch = decode_traces(traces_request([span(tid(1), sid(1), "x", error=True)]))
    assert batch.spans[0].error


def test_otlp_json_with_hex_ids() -> None:
    raw = traces_request(sdk_turn(tid(9), "q", "a"))
    req = ExportTraceServiceRequest.FromString(raw)
    doc = json_format.MessageToDict(req)
    # OTLP/JSON encodes ids as hex, not base64
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in s:
                        s[k] = base64.b64decode(s[k]).hex()
    batch = decode_traces(json.dumps(doc).encode(), "otlp_json")
    assert batch.spans[0].trace_id == tid(9)
    # a JSON payload on a topic configured for protobuf is still understood
    assert decode_traces(json.dumps(doc).encode()).spans[0].trace_id == tid(9)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xff\xff\xff\xff garbage", "undecodable"),
        (b"{not json", "undecodable"),
        (b'{"resourceSpans": 5}', "not_otlp"),
        (b"[1, 2]", "undecodable"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "undecodable"),
    ],
)
def test_poison(payload: bytes, reason: str) -> None:
    with pytest.raises(PoisonMessage) as ei:
        decode_traces(payload)
    assert ei.value.reason in (reason, "not_otlp", "undecodable")


def test_absurd_size_is_poison() -> None:
    raw = traces_request([span(tid(1), sid(1), "x" * 5000)])
    with pytest.raises(PoisonMessage) as ei:
        decode_traces(raw, max_bytes=1024)
    assert ei.value.reason == "too_large"


def test_invalid_ids_dropped_or_poison() -> None:
    good = span(tid(1), sid(1), "ok")
    bad = span(b"\x00" * 16, sid(2), "zero-trace")
    short = span(b"abc", sid(3), "short-trace")
    batch = decode_traces(traces_request([good, bad, short]))
    assert [s.name for s in batch.spans] == ["ok"] and batch.invalid == 2
    with pytest.raises(PoisonMessage) as ei:
        decode_traces(traces_request([bad, short]))
    assert ei.value.reason == "invalid_ids"


def test_empty_request_is_not_poison() -> None:
    assert decode_traces(b"").spans == []


def test_logs_keep_genai_events_with_span_ids() -> None:
    raw = logs_request(
        [
            {
                "trace_id": tid(1),
                "span_id": sid(1),
                "event": C.EVENT_GEN_AI_USER_MESSAGE,
                "body": {"content": "hi"},
            },
            {"trace_id": tid(1), "span_id": sid(1), "event": "app.log", "body": "x"},
            {"trace_id": b"", "span_id": b"", "event": C.EVENT_GEN_AI_CHOICE, "body": {}},
        ]
    )
    batch = decode_logs(raw)
    assert [lg.event_name for lg in batch.logs] == [C.EVENT_GEN_AI_USER_MESSAGE]
    assert any_value(batch.logs[0].parse().body) == {"content": "hi"}


# -- adversarial payloads: the decoder either decodes or raises PoisonMessage, nothing else ------
_GOOD = traces_request(sdk_turn(tid(3), "question", "answer", docs=["doc"], conversation="c"))


def _decode_any(data: bytes) -> None:
    for fn in (decode_traces, decode_logs):
        try:
            out = fn(data)
        except PoisonMessage as p:
            assert p.reason in {"undecodable", "too_large", "invalid_ids", "not_otlp"}
            continue
        for s in out.spans:
            assert len(s.trace_id) == 16 and len(s.span_id) == 8
            attributes(s.parse().attributes)  # the lazy part must not crash either


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_random_bytes_never_crash(data: bytes) -> None:
    _decode_any(data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_valid_messages_never_crash(data: st.DataObject) -> None:
    raw = bytearray(_GOOD)
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        i = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if op == "flip" and raw:
            raw[i] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del raw[i : i + data.draw(st.integers(1, 64))]
        else:
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=16))
    _decode_any(bytes(raw))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["resourceSpans", "resourceLogs", "x"]),
        st.lists(
            st.fixed_dictionaries(
                {"scopeSpans": st.lists(st.fixed_dictionaries({"spans": st.lists(_json_values)}))}
            )
            | _json_values,
            max_size=3,
        ),
    )
)
def test_adversarial_json_never_crashes(doc: dict) -> None:
    _decode_any(json.dumps(doc).encode())


def test_deeply_nested_any_value_is_poison_not_a_crash() -> None:
    depth = 3000  # deeper than Python's JSON recursion limit
    inner = '{"arrayValue": {"values": [' * depth + '{"stringValue": "x"}' + "]}}" * depth
    ids = (tid(1).hex(), sid(1).hex())
    head = '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "%s", "spanId": "%s", ' % ids  # noqa: UP031
    doc = head + '"attributes": [{"key": "k", "value": ' + inner + "}]}]}]}]}"
    _decode_any(doc.encode())
    req = ExportTraceServiceRequest()
    s = req.resource_spans.add().scope_spans.add().spans.add()
    s.trace_id, s.span_id = tid(1), sid(1)
    kv = s.attributes.add()
    kv.key = "k"
    v = kv.value
    for _ in range(300):
        v = v.array_value.values.add()
    v.string_value = "deep"
    try:
        raw = req.SerializeToString()
    except Exception:  # the protobuf runtime may refuse to build it at all
        return
    _decode_any(raw)
