"""Decode OTLP trace and log export requests from Kafka messages, lazily.

Why lazy: at a 1% sample rate almost every span is only *assembled* (grouped by trace, watched for
the end of the turn) and never evaluated. Converting every attribute of every span into Python
(``MessageToDict`` or a full walk) costs 5-10x the protobuf parse itself, so the decoder reads only
the span fields assembly needs plus a small set of *wanted* attribute keys (turn end, conversation
id, attributes named by sampling rules), and keeps each buffered span as its own serialized
``Span`` bytes, parsed again only for the few traces that are sampled (:meth:`SpanRecord.parse`).

Why bytes and not the parsed span: a parsed upb message keeps its whole request's arena alive
(every span of the message, ~1.6x the message's bytes), for as long as any one of its spans is
buffered. Measured with 10,000 buffered RAG traces (``bench/memory.py``): 20.3 KiB of RSS per
trace holding parsed spans, 14.0 KiB holding bytes. Re-serializing a kept span costs about what
parsing it did (~0.3 us per KB), and at a 1% sample rate the decode-time discard leaves ~1% of
spans to keep.

Poison messages are reported as :class:`PoisonMessage` (reason + detail), never raised past the
consumer: undecodable bytes, absurd sizes, JSON that is not an OTLP request (``{}`` included), and
requests whose spans all carry invalid ids. One unreadable span (invalid UTF-8, attributes nested
deeper than the protobuf runtime allows) is not poison: it is dropped alone and reported in
:attr:`DecodedBatch.rejected`, the other spans of its message are kept
(:mod:`nexagauge.online.ingest.salvage`).

Example:
    >>> from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    >>> req = ExportTraceServiceRequest()
    >>> s = req.resource_spans.add().scope_spans.add().spans.add()
    >>> s.trace_id, s.span_id, s.name = b"\\x01" * 16, b"\\x02" * 8, "chat"
    >>> batch = decode_traces(req.SerializeToString())
    >>> (batch.spans[0].name, batch.spans[0].trace_hex[:4])
    ('chat', '0101')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from nexagauge.online.ingest.poison import PoisonMessage as PoisonMessage
from nexagauge.online.ingest.salvage import Rejected as Rejected
from nexagauge.online.ingest.salvage import json_request, salvage_proto
from nexagauge.sdk import conventions as C

Encoding = Literal["otlp_proto", "otlp_json"]

#: resource attribute naming the service (OpenTelemetry resource semantic conventions)
SERVICE_NAME = "service.name"
#: OTLP status code of an errored span (``STATUS_CODE_ERROR``)
STATUS_CODE_ERROR = 2
_ZERO_TRACE = b"\x00" * 16
_ZERO_SPAN = b"\x00" * 8

#: attribute keys the assembly and sampling stages always need (read eagerly)
BASE_WANTED: frozenset[str] = frozenset(
    {C.NG_TURN_END, C.GEN_AI_CONVERSATION_ID, C.OI_SESSION_ID, C.NG_SDK_VERSION}
)


@dataclass(slots=True)
class SpanRecord:
    """The assembly view of one span plus the full span as serialized OTLP ``Span`` bytes.

    ``marks`` holds only the *wanted* attributes (decoded to Python); everything else is read
    from :meth:`parse` by :mod:`nexagauge.online.ingest.extract` when the trace is sampled.
    """

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    name: str
    start_ns: int
    end_ns: int
    error: bool
    service: str
    marks: dict[str, Any]
    #: the whole span (an OTLP ``Span`` message), ``None`` for records built without one
    raw: bytes | None = field(repr=False, default=None)

    def parse(self) -> Span | None:
        """The full span parsed from :attr:`raw` (a new message each call; parse once per use)."""
        return Span.FromString(self.raw) if self.raw is not None else None

    @property
    def trace_hex(self) -> str:
        return self.trace_id.hex()

    @property
    def span_hex(self) -> str:
        return self.span_id.hex()

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id or self.parent_span_id == _ZERO_SPAN


@dataclass(slots=True)
class LogRef:
    """One OTLP log record that belongs to a span (GenAI content events of instrumentations)."""

    trace_id: bytes
    span_id: bytes
    event_name: str
    time_ns: int
    #: the whole record (an OTLP ``LogRecord`` message), as for :attr:`SpanRecord.raw`
    raw: bytes | None = field(repr=False, default=None)

    def parse(self) -> LogRecord | None:
        """The full log record parsed from :attr:`raw`."""
        return LogRecord.FromString(self.raw) if self.raw is not None else None


@dataclass(slots=True)
class DecodedBatch:
    """What one message contributed: spans or log records, how many were dropped for invalid
    ids, and the unreadable items dropped on their own (:class:`Rejected`, each naming one)."""

    spans: list[SpanRecord] = field(default_factory=list)
    logs: list[LogRef] = field(default_factory=list)
    invalid: int = 0
    #: valid spans the ``keep`` filter dropped
    skipped: int = 0
    rejected: list[Rejected] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# AnyValue -> Python
# --------------------------------------------------------------------------------------------
def any_value(v: Any, _depth: int = 0) -> Any:
    """Convert an OTLP ``AnyValue`` to Python (str/bool/int/float/bytes/list/dict/None).

    Example:
        >>> from opentelemetry.proto.common.v1.common_pb2 import AnyValue
        >>> any_value(AnyValue(string_value="x"))
        'x'
    """
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind is None:
        return None
    if _depth > 64:  # upb already bounds nesting; this guards hand-built messages
        return None
    if kind == "bool_value":
        return v.bool_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "array_value":
        return [any_value(x, _depth + 1) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value, _depth + 1) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return bytes(v.bytes_value)
    return None


def attributes(kvs: Iterable[Any]) -> dict[str, Any]:
    """All attributes of a span/event/log record as a dict (used only for sampled traces)."""
    return {kv.key: any_value(kv.value) for kv in kvs}


def _wanted(kvs: Iterable[Any], wanted: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        k = kv.key
        if k in wanted:
            out[k] = any_value(kv.value)
    return out


def _service(resource: Any) -> str:
    for kv in resource.attributes:
        if kv.key == SERVICE_NAME:
            v = any_value(kv.value)
            return v if isinstance(v, str) and v else "unknown"
    return "unknown"


def _parse(
    data: bytes, encoding: Encoding, kind: Literal["traces", "logs"], max_bytes: int
) -> tuple[Any, list[Rejected]]:
    """The export request in ``data`` and the items dropped from it as unreadable (one bad span
    costs only itself: :mod:`nexagauge.online.ingest.salvage`); :class:`PoisonMessage` when nothing of
    it can be used."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise PoisonMessage("undecodable", f"message value is {type(data).__name__}, not bytes")
    if len(data) > max_bytes:
        raise PoisonMessage("too_large", f"{len(data)} bytes exceeds the limit of {max_bytes}")
    if encoding == "otlp_json" or (data[:1] == b"{"):
        # a JSON object cannot be a valid OTLP protobuf request (0x7b is field 15, wire type 3)
        try:
            doc = json.loads(bytes(data))
        except (UnicodeDecodeError, ValueError) as e:
            raise PoisonMessage("undecodable", f"invalid JSON: {e}") from None
        except RecursionError:
            raise PoisonMessage("undecodable", "JSON nested too deeply") from None
        return json_request(doc, kind)
    msg = ExportTraceServiceRequest() if kind == "traces" else ExportLogsServiceRequest()
    try:
        msg.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError):
        return salvage_proto(bytes(data), kind)
    return msg, []


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
#: decode-time filter: ``keep(trace_id, service, span_name, marks, error)``; False skips the span
KeepFn = Callable[[bytes, str, str, dict[str, Any], bool], bool]


def decode_traces(
    data: bytes,
    encoding: Encoding = "otlp_proto",
    *,
    wanted: frozenset[str] = BASE_WANTED,
    max_bytes: int = 8 * 1024 * 1024,
    keep: KeepFn | None = None,
) -> DecodedBatch:
    """Decode one ``ExportTraceServiceRequest`` into :class:`SpanRecord` s.

    Raises :class:`PoisonMessage` when the message can never be processed. Spans with invalid
    ids (wrong length or all zeros) are dropped and counted in ``invalid``; when every span of a
    non-empty request is invalid the message is poison (``invalid_ids``). An unreadable span
    (invalid UTF-8, nested too deeply) is dropped alone and listed in ``rejected``. ``keep`` filters spans
    before a record is built (the evaluator drops spans of traces it can never sample).
    """
    req, rejected = _parse(data, encoding, "traces", max_bytes)
    out = DecodedBatch(rejected=rejected)
    spans = out.spans
    for rs in req.resource_spans:
        service = _service(rs.resource)
        for ss in rs.scope_spans:
            for s in ss.spans:
                tid, sid = s.trace_id, s.span_id
                if len(tid) != 16 or len(sid) != 8 or tid == _ZERO_TRACE or sid == _ZERO_SPAN:
                    out.invalid += 1
                    continue
                marks = _wanted(s.attributes, wanted)
                name = s.name
                error = s.status.code == STATUS_CODE_ERROR
                if keep is not None and not keep(tid, service, name, marks, error):
                    out.skipped += 1
                    continue
                spans.append(
                    SpanRecord(
                        tid,
                        sid,
                        s.parent_span_id,
                        name,
                        s.start_time_unix_nano,
                        s.end_time_unix_nano,
                        error,
                        service,
                        marks,
                        s.SerializeToString(),
                    )
                )
    if out.invalid and not spans:
        raise PoisonMessage("invalid_ids", f"all {out.invalid} spans have invalid trace/span ids")
    return out


def log_event_name(rec: Any) -> str:
    """The event name of a log record: the ``event_name`` field, else the ``event.name`` attribute."""
    name = getattr(rec, "event_name", "")
    if name:
        return str(name)
    for kv in rec.attributes:
        if kv.key == C.EVENT_NAME:
            v = any_value(kv.value)
            return v if isinstance(v, str) else ""
    return ""


#: log events that carry GenAI message content (joined to their spans by the assembly)
GENAI_LOG_EVENTS: frozenset[str] = frozenset(
    {
        C.EVENT_GEN_AI_USER_MESSAGE,
        C.EVENT_GEN_AI_SYSTEM_MESSAGE,
        C.EVENT_GEN_AI_ASSISTANT_MESSAGE,
        C.EVENT_GEN_AI_TOOL_MESSAGE,
        C.EVENT_GEN_AI_CHOICE,
        C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS,
    }
)


def decode_logs(
    data: bytes,
    encoding: Encoding = "otlp_proto",
    *,
    max_bytes: int = 8 * 1024 * 1024,
) -> DecodedBatch:
    """Decode one ``ExportLogsServiceRequest``, keeping only GenAI event records tied to a span.

    Log records without a trace/span id or with an unrelated event name are ignored (they are
    ordinary application logs, not poison).
    """
    req, rejected = _parse(data, encoding, "logs", max_bytes)
    out = DecodedBatch(rejected=rejected)
    for rl in req.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                tid, sid = r.trace_id, r.span_id
                if len(tid) != 16 or len(sid) != 8 or tid == _ZERO_TRACE or sid == _ZERO_SPAN:
                    continue
                name = log_event_name(r)
                if name not in GENAI_LOG_EVENTS:
                    continue
                out.logs.append(LogRef(tid, sid, name, r.time_unix_nano, r.SerializeToString()))
    return out
