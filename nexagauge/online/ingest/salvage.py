"""Parse OTLP export requests so that one bad span costs only itself, not its whole message.

Why: a collector batches spans of many traces (and of many apps) into one Kafka message. The
protobuf runtime rejects a request as a whole when a single span in it is unreadable -- a string
field with invalid UTF-8, attributes nested deeper than its recursion limit (~48 levels of
``AnyValue`` inside a request) -- and the whole message used to be dead-lettered with the good
spans of every other trace in it (issue 14 item 6, issue 15 item 6).

How: the fast path parses the request as usual. Only when that fails, the message is re-read
with a *shell* schema that has the same field numbers but keeps every resource, scope and span
as opaque bytes (no UTF-8 check, nesting depth 3); each span is then parsed on its own and the
good ones are put back into a normal request. A span, resource or scope that does not parse is
reported as a :class:`Rejected` item naming it (position and ids, never its content). Both steps
run in the C protobuf runtime: linear in the message size. OTLP/JSON requests are always built
span by span (:func:`json_request`), with the same rejections.

Example:
    >>> from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ...     ExportTraceServiceRequest)
    >>> req = ExportTraceServiceRequest()
    >>> ss = req.resource_spans.add().scope_spans.add()
    >>> ss.spans.add().name, ss.spans.add().name = "good", "BAD-NAME"
    >>> raw = req.SerializeToString().replace(b"BAD-NAME", b"bad\\xff\\xfe...")  # same length
    >>> msg, rejected = salvage_proto(raw, "traces")
    >>> [s.name for s in msg.resource_spans[0].scope_spans[0].spans], len(rejected)
    (['good'], 1)
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from nexagauge.online.ingest.poison import PoisonMessage

Kind = Literal["traces", "logs"]

#: reason of a span (or log record) dropped because its bytes do not parse
INVALID_SPAN = "invalid_span"
#: JSON nesting accepted per span (ParseDict's own guard; deeper = that span is rejected)
JSON_MAX_DEPTH = 64
_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
#: (request, resources field, scopes field, items field, item name, JSON keys)
_LAYOUT: dict[Kind, tuple[type, str, str, str, str, tuple[str, str, str]]] = {
    "traces": (
        ExportTraceServiceRequest,
        "resource_spans",
        "scope_spans",
        "spans",
        "span",
        ("resourceSpans", "scopeSpans", "spans"),
    ),
    "logs": (
        ExportLogsServiceRequest,
        "resource_logs",
        "scope_logs",
        "log_records",
        "log record",
        ("resourceLogs", "scopeLogs", "logRecords"),
    ),
}


@dataclass(frozen=True, slots=True)
class Rejected:
    """One item dropped from a message: ``reason`` is a metric label, ``detail`` names it."""

    reason: str
    detail: str


def _shell_classes() -> tuple[Any, Any, Any]:
    """Request/resource/ids shells: OTLP field numbers, every sub-message kept as bytes.

    ``ResourceSpans`` and ``ResourceLogs`` share one layout (resource = 1, scopes = 2,
    schema_url = 3), as do ``ScopeSpans``/``ScopeLogs`` (scope = 1, items = 2, schema_url = 3).
    """
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="nexagauge_otlp_shell.proto", package="nexagauge.shell", syntax="proto3"
    )

    def msg(name: str, fields: list[tuple[str, int, int, str | None]]) -> None:
        m = fdp.message_type.add(name=name)
        for fname, number, label, type_name in fields:
            fd = m.field.add(name=fname, number=number, label=label)
            if type_name:
                fd.type, fd.type_name = f.TYPE_MESSAGE, type_name
            else:
                fd.type = f.TYPE_BYTES

    opt, rep = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    msg("Scope", [("scope", 1, opt, None), ("items", 2, rep, None), ("schema_url", 3, opt, None)])
    msg(
        "Resource",
        [
            ("resource", 1, opt, None),
            ("scopes", 2, rep, ".nexagauge.shell.Scope"),
            ("schema_url", 3, opt, None),
        ],
    )
    msg("Request", [("resources", 1, rep, ".nexagauge.shell.Resource")])
    # ids of a span (trace_id = 1, span_id = 2) and of a log record (trace_id = 9, span_id = 10)
    msg("SpanIds", [("trace_id", 1, opt, None), ("span_id", 2, opt, None)])
    msg("LogIds", [("trace_id", 9, opt, None), ("span_id", 10, opt, None)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)

    def cls(name: str) -> Any:
        return message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"nexagauge.shell.{name}")
        )

    return cls("Request"), cls("SpanIds"), cls("LogIds")


_Request, _SpanIds, _LogIds = _shell_classes()


def _name_item(kind: Kind, raw: bytes, where: str) -> str:
    """``where`` plus the item's ids when they can still be read (never its content)."""
    try:
        ids = (_SpanIds if kind == "traces" else _LogIds).FromString(raw)
    except Exception:
        return where
    return f"{where} (trace_id {ids.trace_id.hex() or '-'}, span_id {ids.span_id.hex() or '-'})"


def _error(e: BaseException) -> str:
    return str(e).rsplit(":", 1)[-1].strip() or type(e).__name__


def _add_parsed(dst: Any, fill: Callable[..., None], *args: Any) -> Any:
    """Append an entry to the repeated field ``dst`` and ``fill(entry, *args)`` it; the entry,
    or the exception ``fill`` raised (then nothing is appended). Resources and scopes, in
    protobuf and in JSON, are copied through here."""
    new = dst.add()
    try:
        fill(new, *args)
    except Exception as e:
        del dst[-1]
        return e
    return new


def _merge_header(new: Any, header: str, raw: bytes, schema_url: bytes) -> None:
    """Protobuf: ``new``'s ``header`` (``resource``/``scope``) from ``raw``, and its schema URL."""
    getattr(new, header).MergeFromString(raw)
    new.schema_url = schema_url.decode("utf-8", "replace")


def _dropped(where: str, e: Exception, n: int, noun: str) -> list[Rejected]:
    """One rejection per item of an unreadable resource or scope."""
    return [Rejected(INVALID_SPAN, f"{where}: {_error(e)}; its {n} {noun}(s) dropped")] * n


def salvage_proto(data: bytes, kind: Kind) -> tuple[Any, list[Rejected]]:
    """The request in ``data`` without its unreadable resources, scopes and items.

    Raises :class:`PoisonMessage` (``undecodable``) when even the shell does not parse (the
    message is not OTLP) or when nothing readable is left.
    """
    req_cls, resources, scopes, items, noun, _ = _LAYOUT[kind]
    try:
        shell = _Request.FromString(data)
    except Exception as e:
        raise PoisonMessage("undecodable", f"not an OTLP protobuf {kind} request: {e}") from None
    out = req_cls()
    rejected: list[Rejected] = []
    kept = 0
    for i, rs in enumerate(shell.resources):
        new_rs = _add_parsed(
            getattr(out, resources), _merge_header, "resource", rs.resource, rs.schema_url
        )
        if isinstance(new_rs, Exception):
            rejected += _dropped(
                f"resource {i}", new_rs, sum(len(sc.items) for sc in rs.scopes), noun
            )
            continue
        for j, sc in enumerate(rs.scopes):
            new_sc = _add_parsed(
                getattr(new_rs, scopes), _merge_header, "scope", sc.scope, sc.schema_url
            )
            if isinstance(new_sc, Exception):
                rejected += _dropped(f"resource {i} scope {j}", new_sc, len(sc.items), noun)
                continue
            dst = getattr(new_sc, items)
            for k, raw in enumerate(sc.items):
                try:
                    dst.add().MergeFromString(raw)
                    kept += 1
                except Exception as e:
                    del dst[-1]
                    where = _name_item(kind, raw, f"{noun} {k} of resource {i} scope {j}")
                    rejected.append(Rejected(INVALID_SPAN, f"{where}: {_error(e)}"))
    if rejected and not kept:
        raise PoisonMessage("undecodable", f"no readable {noun}: {rejected[0].detail}")
    return out, rejected


# --------------------------------------------------------------------------------------------
# OTLP/JSON: hex ids (base64 in protobuf's canonical JSON), parsed span by span
# --------------------------------------------------------------------------------------------
def _b64_ids(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` with its hex ids in base64 (ValueError naming a bad id key)."""
    out = dict(obj)
    for k in _ID_KEYS:
        v = out.get(k)
        if isinstance(v, str) and v:
            try:
                out[k] = base64.b64encode(bytes.fromhex(v)).decode()
            except ValueError:
                raise ValueError(f"{k} is not hex") from None
    return out


def _json_item(item: Any) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise ValueError("not a JSON object")
    out = _b64_ids(item)
    links = out.get("links")
    if isinstance(links, list):
        out["links"] = [_b64_ids(x) if isinstance(x, Mapping) else x for x in links]
    return out


def _parse_into(src: Any, dst: Any) -> None:
    if not isinstance(src, Mapping):
        raise ValueError("not a JSON object")
    json_format.ParseDict(src, dst, ignore_unknown_fields=True, max_recursion_depth=JSON_MAX_DEPTH)


def _json_header(new: Any, obj: Mapping[str, Any], header: str, schema: bool) -> None:
    """OTLP/JSON: ``new``'s ``header`` (``resource``/``scope``) from ``obj``, and its
    ``schemaUrl`` when ``schema`` (resources)."""
    _parse_into(obj.get(header) or {}, getattr(new, header))
    if schema and isinstance(obj.get("schemaUrl"), str):
        new.schema_url = obj["schemaUrl"]


def _list(doc: Mapping[str, Any], camel: str, what: str) -> list[Any]:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    v = doc.get(camel, doc.get(snake))
    if v is None:
        return []
    if not isinstance(v, list):
        raise PoisonMessage("not_otlp", f"{what}: {camel!r} is not a list")
    return v


def json_request(doc: Any, kind: Kind) -> tuple[Any, list[Rejected]]:
    """An OTLP request from a decoded OTLP/JSON document, span by span.

    A document that is not an object with the request's top-level key (``resourceSpans`` /
    ``resourceLogs``, or its snake_case form) is :class:`PoisonMessage` ``not_otlp`` -- ``{}``
    or ``{"api_key": ...}`` is not an empty request. An item (span or log record) that does not
    parse, or has an id that is not hex, is rejected on its own.
    """
    req_cls, resources, scopes, items, noun, (outer, mid, inner) = _LAYOUT[kind]
    snake_outer = resources
    if not isinstance(doc, Mapping) or (outer not in doc and snake_outer not in doc):
        raise PoisonMessage("not_otlp", f"expected a JSON object with {outer!r}")
    out = req_cls()
    rejected: list[Rejected] = []
    kept = 0

    def reject(where: str, e: Exception, n: int = 1) -> None:
        if isinstance(e, RecursionError):
            why = "nested too deeply"
        elif isinstance(e, json_format.ParseError):
            why = f"not a valid OTLP {noun}"  # its message may quote the value: not repeated
        else:
            why = str(e)[:80] or type(e).__name__
        rejected.extend([Rejected(INVALID_SPAN, f"{where}: {why}")] * n)

    for i, rs in enumerate(_list(doc, outer, "request")):
        if not isinstance(rs, Mapping):
            raise PoisonMessage("not_otlp", f"{outer}[{i}] is not an object")
        scope_list = _list(rs, mid, f"{outer}[{i}]")
        new_rs = _add_parsed(getattr(out, resources), _json_header, rs, "resource", True)
        if isinstance(new_rs, Exception):
            n = sum(len(_list(s, inner, "")) for s in scope_list if isinstance(s, Mapping))
            reject(f"{outer}[{i}].resource", new_rs, n)
            continue
        for j, ss in enumerate(scope_list):
            if not isinstance(ss, Mapping):
                raise PoisonMessage("not_otlp", f"{outer}[{i}].{mid}[{j}] is not an object")
            item_list = _list(ss, inner, f"{outer}[{i}].{mid}[{j}]")
            new_ss = _add_parsed(getattr(new_rs, scopes), _json_header, ss, "scope", False)
            if isinstance(new_ss, Exception):
                reject(f"{outer}[{i}].{mid}[{j}].scope", new_ss, len(item_list))
                continue
            dst = getattr(new_ss, items)
            for k, item in enumerate(item_list):
                added = False
                try:
                    src = _json_item(item)
                    target = dst.add()
                    added = True
                    _parse_into(src, target)
                    kept += 1
                except Exception as e:  # ParseError, ValueError, RecursionError, TypeError
                    if added:
                        del dst[-1]
                    reject(f"{outer}[{i}].{mid}[{j}].{inner}[{k}] ({noun})", e)
    if rejected and not kept:
        raise PoisonMessage("not_otlp", f"no readable {noun}: {rejected[0].detail}")
    return out, rejected
