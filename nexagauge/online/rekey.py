"""First stage: re-key spans and GenAI log records by trace id into the evaluator's own topic.

Why: collectors that cannot key Kafka messages by trace id (rotel, the official collector
without ``partition_traces_by_id``) write batches holding spans of many traces to random
partitions, so spans of one trace reach different consumers and no consumer sees the whole
trace. This stage consumes the collector's topics in its own consumer group, splits every
export request by trace id, and produces one request per trace (resource and scope preserved)
to ``KafkaSettings.rekeyed_topic`` keyed by the 16-byte trace id; Kafka's key partitioner then
sends every span and log record of a trace to the same partition, hence to one evaluator.
The header ``nexagauge.signal`` (``traces``/``logs``) tells the evaluator how to decode it.

When to skip it (``OnlineSettings.rekey = false``): when the producer already keys messages by
trace id into the topic the evaluator reads, e.g. the official OpenTelemetry collector's Kafka
exporter with ``partition_traces_by_id: true`` (and ``partition_logs_by_trace_id: true`` for
logs). Then the evaluator reads the collector's topics directly.

Delivery: a source message is committed only after every request produced from it is acknowledged
by the broker (at-least-once; a crash re-produces, and the evaluator deduplicates spans by id).

Bad input: a message that is not OTLP goes to the DLQ; so does a trace message none of whose spans
has a 16-byte trace id (``invalid_ids``). A span without one in an otherwise good message, or an
unreadable span (invalid UTF-8, nested too deeply: ``invalid_span``), is dropped alone, logged with
its position and counted in ``nexagauge_skipped_total{reason}``; the other spans go on.

Example:
    >>> from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    >>> req = ExportTraceServiceRequest()
    >>> ss = req.resource_spans.add().scope_spans.add()
    >>> for t in (b"a" * 16, b"b" * 16, b"a" * 16):
    ...     s = ss.spans.add(); s.trace_id = t; s.span_id = b"s" * 8
    >>> sorted((k[:1], len(ExportTraceServiceRequest.FromString(v).resource_spans[0]
    ...     .scope_spans[0].spans)) for k, v in split_traces(req).items())
    [(b'a', 2), (b'b', 1)]
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRecord, TopicPartition
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from nexagauge.online.delivery.consumer import LagHooks
from nexagauge.online.delivery.dlq import DeadLetters
from nexagauge.online.delivery.offsets import OffsetTracker
from nexagauge.online.ingest.decode import PoisonMessage, _parse
from nexagauge.online.ingest.salvage import INVALID_SPAN
from nexagauge.settings import Settings

log = logging.getLogger(__name__)

SIGNAL_HEADER = "nexagauge.signal"
SIGNAL_TRACES = b"traces"
SIGNAL_LOGS = b"logs"
#: reason of spans dropped for their ids (``nexagauge_skipped_total``; DLQ when all are)
INVALID_IDS = "invalid_ids"


def _split(
    req: Any, request_type: type, resources: str, scopes: str, items: str
) -> tuple[dict[bytes, bytes], int]:
    """Split an OTLP export request into one serialized request per trace id, keeping each
    item's resource and scope; also returns how many items had no 16-byte trace id (dropped)."""
    out: dict[bytes, Any] = {}
    dropped = 0
    for res in getattr(req, resources):
        for scope in getattr(res, scopes):
            per: dict[bytes, Any] = {}
            for item in getattr(scope, items):
                tid = item.trace_id
                if len(tid) != 16:
                    dropped += 1
                    continue
                dst = per.get(tid)
                if dst is None:
                    r = out.get(tid)
                    if r is None:
                        r = out[tid] = request_type()
                    nres = getattr(r, resources).add()
                    nres.resource.CopyFrom(res.resource)
                    nres.schema_url = res.schema_url
                    dst = per[tid] = getattr(nres, scopes).add()
                    dst.scope.CopyFrom(scope.scope)
                    dst.schema_url = scope.schema_url
                getattr(dst, items).add().CopyFrom(item)
    return {k: v.SerializeToString() for k, v in out.items()}, dropped


def _split_traces(req: Any) -> tuple[dict[bytes, bytes], int]:
    return _split(req, ExportTraceServiceRequest, "resource_spans", "scope_spans", "spans")


def _split_logs(req: Any) -> tuple[dict[bytes, bytes], int]:
    return _split(req, ExportLogsServiceRequest, "resource_logs", "scope_logs", "log_records")


def split_traces(req: Any) -> dict[bytes, bytes]:
    """Split an ``ExportTraceServiceRequest`` into one serialized request per trace id."""
    return _split_traces(req)[0]


def split_logs(req: Any) -> dict[bytes, bytes]:
    """Split an ``ExportLogsServiceRequest`` by trace id (records without one are dropped)."""
    return _split_logs(req)[0]


def _unexpected(e: Exception) -> PoisonMessage:
    log.exception("unexpected error decoding a message; dead-lettering it")
    return PoisonMessage("decode_error", f"{type(e).__name__}: {e}")


class RekeyStage(LagHooks):
    """The consumer-loop handler of the re-key stage (see module docstring)."""

    def __init__(
        self,
        settings: Settings,
        producer: AIOKafkaProducer,
        dlq: DeadLetters,
        metrics: Any = None,
        *,
        max_pending: int = 2000,
    ) -> None:
        self.settings = settings
        self.k = settings.kafka
        self.producer = producer
        self.dlq = dlq
        self.metrics = metrics
        self.tracker = OffsetTracker()
        self._pending: set[asyncio.Future[Any]] = set()
        self.max_pending = max_pending
        self.produced = 0
        self.poison = 0
        #: items dropped from otherwise good messages, by reason (``invalid_ids``, ``invalid_span``)
        self.dropped: dict[str, int] = {}

    def _signal(self, topic: str) -> bytes:
        return SIGNAL_LOGS if topic == self.k.logs_topic else SIGNAL_TRACES

    async def handle(self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        key = (tp.topic, tp.partition)
        signal = self._signal(tp.topic)
        n_spans = 0
        if self.metrics is not None:  # every topic any stage reads is counted (collector's too)
            self.metrics.messages_consumed(tp.topic, len(records))
        for rec in records:
            self.tracker.begin(key, rec.offset)
            try:
                if signal == SIGNAL_LOGS:
                    req, rejected = _parse(
                        rec.value, self.k.encoding, "logs", self.k.max_message_bytes
                    )
                    parts, _ = _split_logs(req)  # a log record without a trace is an app log
                else:
                    req, rejected = _parse(
                        rec.value, self.k.encoding, "traces", self.k.max_message_bytes
                    )
                    parts, invalid = _split_traces(req)
                    n_spans += sum(
                        len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans
                    )
                    if invalid and not parts:
                        raise PoisonMessage(
                            "invalid_ids", f"all {invalid} spans lack a 16-byte trace id"
                        )
                    self._dropped(rec, INVALID_IDS, invalid, "span(s) without a 16-byte trace id")
                if rejected:  # one log line per message, however many spans it lost
                    self._dropped(rec, INVALID_SPAN, len(rejected), rejected[0].detail)
            except Exception as e:  # one bad message never stops the stage
                p = e if isinstance(e, PoisonMessage) else _unexpected(e)
                self.poison += 1
                self._track(key, rec.offset, self._dead_letter(rec, p))
                self.tracker.release(key, rec.offset)
                continue
            for tid, payload in parts.items():
                fut = await self.producer.send(
                    self.k.rekeyed_topic,
                    value=payload,
                    key=tid,
                    headers=[(SIGNAL_HEADER, signal)],
                )
                self.produced += 1
                self._track(key, rec.offset, fut)
            self.tracker.release(key, rec.offset)
        if n_spans and self.metrics is not None:
            self.metrics.spans_consumed(tp.topic, n_spans)

    def _dropped(self, rec: ConsumerRecord[Any, Any], reason: str, n: int, detail: str) -> None:
        """Count ``n`` items of a message dropped on their own (the rest of it goes on)."""
        if not n:
            return
        self.dropped[reason] = self.dropped.get(reason, 0) + n
        if self.metrics is not None:
            self.metrics.skip(reason, n)
        log.warning("%s/%d@%d: %d dropped: %s", rec.topic, rec.partition, rec.offset, n, detail)

    async def _dead_letter(self, rec: ConsumerRecord[Any, Any], p: PoisonMessage) -> None:
        log.warning("poison message %s/%d@%d: %s", rec.topic, rec.partition, rec.offset, p)
        if self.metrics is not None:
            self.metrics.dead_lettered(p.reason)
        await self.dlq.poison_record(rec, p)

    def _track(self, key: tuple[str, int], offset: int, aw: Any) -> None:
        fut = asyncio.ensure_future(aw)
        self.tracker.acquire(key, offset)
        epoch = self.tracker.epoch(key)
        self._pending.add(fut)

        def done(f: asyncio.Future[Any]) -> None:
            self._pending.discard(f)
            if f.cancelled():
                return
            if f.exception() is not None:
                # not released: the offset never commits, and the message is re-read after a
                # restart or rebalance (at-least-once); the producer already retried internally
                log.error("re-key produce failed for %s@%d: %s", key, offset, f.exception())
                return
            self.tracker.release(key, offset, epoch)

        fut.add_done_callback(done)

    async def tick(self) -> None:
        return None

    def wakeup_s(self) -> float:
        """No timers here: the loop only needs to come round for commits."""
        return 1.0

    def saturated(self) -> bool:
        return len(self._pending) >= self.max_pending

    def revoked(self, tps: Sequence[TopicPartition]) -> None:
        return None  # pending sends still complete; their releases hit dropped partitions

    async def drain(self, timeout_s: float) -> None:
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=timeout_s)
