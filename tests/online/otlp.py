"""Builders of OTLP export requests for the online tests (protobuf, as a collector writes them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from nexagauge.sdk import conventions as C


def av(v: Any) -> AnyValue:
    out = AnyValue()
    if isinstance(v, bool):
        out.bool_value = v
    elif isinstance(v, int):
        out.int_value = v
    elif isinstance(v, float):
        out.double_value = v
    elif isinstance(v, str):
        out.string_value = v
    elif isinstance(v, bytes):
        out.bytes_value = v
    elif isinstance(v, list | tuple):
        out.array_value.values.extend(av(x) for x in v)
    elif isinstance(v, Mapping):
        out.kvlist_value.values.extend(KeyValue(key=k, value=av(x)) for k, x in v.items())
    return out


def kvs(attrs: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=av(v)) for k, v in attrs.items()]


def tid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def sid(n: int) -> bytes:
    return n.to_bytes(8, "big")


def rand_tid() -> bytes:
    return os.urandom(16)


def span(
    trace_id: bytes,
    span_id: bytes,
    name: str,
    attrs: Mapping[str, Any] | None = None,
    *,
    parent: bytes = b"",
    start: int = 1_000,
    end: int = 2_000,
    error: bool = False,
    events: Iterable[tuple[str, Mapping[str, Any]]] = (),
) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent": parent,
        "name": name,
        "attrs": dict(attrs or {}),
        "start": start,
        "end": end,
        "error": error,
        "events": list(events),
    }


def traces_request(spans: Iterable[Mapping[str, Any]], service: str = "shop-bot") -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(kvs({"service.name": service}))
    ss = rs.scope_spans.add()
    ss.scope.name = "tests"
    for s in spans:
        p = ss.spans.add()
        p.trace_id, p.span_id, p.parent_span_id = s["trace_id"], s["span_id"], s["parent"]
        p.name = s["name"]
        p.start_time_unix_nano, p.end_time_unix_nano = s["start"], s["end"]
        p.attributes.extend(kvs(s["attrs"]))
        if s["error"]:
            p.status.code = 2
        for ename, eattrs in s["events"]:
            e = p.events.add()
            e.name = ename
            e.attributes.extend(kvs(eattrs))
    return req.SerializeToString()


def logs_request(records: Iterable[Mapping[str, Any]], service: str = "shop-bot") -> bytes:
    """records: {trace_id, span_id, event, body, attrs?, time?}."""
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.extend(kvs({"service.name": service}))
    sl = rl.scope_logs.add()
    for r in records:
        lr = sl.log_records.add()
        lr.trace_id, lr.span_id = r["trace_id"], r["span_id"]
        lr.time_unix_nano = r.get("time", 0)
        lr.event_name = r["event"]
        if r.get("body") is not None:
            lr.body.CopyFrom(av(r["body"]))
        lr.attributes.extend(kvs(r.get("attrs", {})))
    return req.SerializeToString()


def chat_messages(*pairs: tuple[str, str]) -> str:
    """GenAI parts-layout messages as the JSON string the SDK writes."""
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in pairs])


def sdk_turn(
    trace_id: bytes,
    question: str,
    answer: str,
    *,
    docs: list[str] | None = None,
    conversation: str | None = None,
    root_span: int = 1,
    end: int = 5_000,
) -> list[dict[str, Any]]:
    """A trace as ``@nexagauge.trace`` writes it: the root turn span (+ a retrieval child)."""
    attrs: dict[str, Any] = {
        C.NG_SDK_VERSION: "0.1.0",
        C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_WORKFLOW,
        C.GEN_AI_INPUT_MESSAGES: chat_messages(("user", question)),
        C.GEN_AI_OUTPUT_MESSAGES: chat_messages(("assistant", answer)),
    }
    if conversation:
        attrs[C.GEN_AI_CONVERSATION_ID] = conversation
    out = [span(trace_id, sid(root_span), "answer", attrs, end=end)]
    if docs is not None:
        out.append(
            span(
                trace_id,
                sid(root_span + 100),
                "retrieve",
                {
                    C.NG_SDK_VERSION: "0.1.0",
                    C.GEN_AI_OPERATION_NAME: C.OPERATION_RETRIEVAL,
                    C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(
                        [{"id": f"d{i}", "content": d} for i, d in enumerate(docs)]
                    ),
                },
                parent=sid(root_span),
                end=end - 1_000,
            )
        )
    return out
