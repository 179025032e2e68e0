"""The dead-letter topic: poison messages and failed evaluations, never secrets.

Poison messages are forwarded byte for byte (same key and value) so they can be inspected and
replayed. **The value is then the app's raw message, with every secret the app sent in it**: the
DLQ topic needs the same access control and retention as the collector's topics. Operators who
cannot keep such a copy set ``kafka.dlq_payload = "reference"``: the record's value is then a
small JSON reference (``source`` topic/partition/offset, ``size``, ``sha256``) to the original,
which stays in its topic for that topic's retention. A message too large for the producer
(``too_large`` poison: more than ``kafka.max_message_bytes``) is always referenced so. The reason
travels in headers:

- ``nexagauge.dlq.reason``: a stable token (``undecodable``, ``too_large``, ``invalid_ids``,
  ``not_otlp``, ``decode_error`` (a decoder bug), ``evaluation_failed``, ``emit_failed``),
- ``nexagauge.dlq.detail``: a short explanation (redacted with the SDK's secret rules and the
  configured secrets by :func:`nexagauge.online.delivery.redact.redact`, at most 500 characters),
- ``nexagauge.dlq.source``: ``topic/partition/offset`` of the original message,
- ``nexagauge.dlq.payload``: ``raw`` or ``reference`` (what the value holds),
- ``nexagauge.dlq.replayable``: ``1`` on a failed evaluation that carries its case.

A failed evaluation (a *permanent* failure: the judge rejected the request with a 4xx other than
429, its answer stayed invalid after the re-ask, a node raised) has no single original message (a
trace spans several), so its record is a JSON object keyed by trace id (:data:`RECORD_VERSION`):
the trace, span, configuration fingerprint, per-node errors (through :func:`scrub`), the
evaluated span's identity (service, span name, end time, model, conversation id, sampling rule,
node set), the ``sources`` (topic, partition, offset) its spans came from, and the **case**
itself - the input, output and context the graph evaluated, scrubbed by the evaluator when the
case was extracted (``online.scrub`` / ``online.scrub_pii``, :mod:`nexagauge.schema.scrub`: third-party
instrumentations record text verbatim, so the SDK's scrubbing cannot be relied on) - so that ``nexagauge dlq replay`` can evaluate it again after a fix
(:mod:`nexagauge.online.replay`). A case larger than ``online.dlq_max_case_bytes`` is left out
(``case_omitted`` says why; not replayable), and so is every case under
``kafka.dlq_payload = "reference"`` (no app content in the DLQ). No judge prompt or answer is
ever written.

Example:
    >>> scrub("401: Incorrect API key provided: sk-abcdefghijklmnop1234")
    '401: Incorrect API key provided: [scrubbed:api_key]'
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from nexagauge.online.delivery.redact import redact, register_secret
from nexagauge.online.ingest.poison import PoisonMessage

log = logging.getLogger(__name__)

HEADER_REASON = "nexagauge.dlq.reason"
HEADER_DETAIL = "nexagauge.dlq.detail"
HEADER_SOURCE = "nexagauge.dlq.source"
HEADER_PAYLOAD = "nexagauge.dlq.payload"
HEADER_REPLAYABLE = "nexagauge.dlq.replayable"
#: on a record a replay dead-lettered again: the id of that replay run (it stops there)
HEADER_REPLAY_RUN = "nexagauge.dlq.replay_run"
#: layout of a failed-evaluation record (1: ids and errors only; 2: with the case and its target)
RECORD_VERSION = 2
#: at most this many (topic, partition, offset) sources are listed per record
MAX_SOURCES = 64
MAX_DETAIL = 500


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove every secret the SDK recognises and the given literal secrets from a text."""
    register_secret(*secrets)
    return redact(text, limit=4 * MAX_DETAIL)


def dlq_value_limit(max_message_bytes: int) -> int:
    """Largest raw value a producer of ``max_request_size = max_message_bytes`` can forward
    (record and header overhead kept aside).

    Example:
        >>> dlq_value_limit(8 * 1024 * 1024)
        8384512
    """
    return max(max_message_bytes // 2, max_message_bytes - 4096)


class _Producer(Protocol):
    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Any: ...


class DeadLetters:
    """Writes dead-letter records with a shared aiokafka producer (see module docstring)."""

    def __init__(
        self,
        producer: _Producer,
        topic: str,
        secrets: Iterable[str] = (),
        payload: Literal["raw", "reference"] = "raw",
        max_value_bytes: int | None = None,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.secrets = [s for s in secrets if s]
        register_secret(*self.secrets)
        self.payload = payload
        #: a raw poison message larger than this (what the producer can send) is referenced
        #: instead: a ``too_large`` message could otherwise never be dead-lettered, and its
        #: partition would never commit past it
        self.max_value_bytes = max_value_bytes

    def _detail(self, detail: str) -> bytes:
        return scrub(detail, self.secrets)[:MAX_DETAIL].encode("utf-8", "replace")

    async def poison(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        reason: str,
        detail: str,
    ) -> None:
        """Forward an unprocessable message (as is, or a reference to it), reason in headers."""
        source = f"{topic}/{partition}/{offset}"
        mode = self.payload
        if self.max_value_bytes is not None and len(value or b"") > self.max_value_bytes:
            mode = "reference"
        if mode == "reference":
            raw = value or b""
            ref = {"source": source, "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
            value = json.dumps(ref, sort_keys=True).encode()
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, self._detail(detail)),
            (HEADER_SOURCE, source.encode()),
            (HEADER_PAYLOAD, mode.encode()),
        ]
        await self.producer.send_and_wait(self.topic, value=value, key=key, headers=headers)

    async def poison_record(self, rec: Any, p: PoisonMessage) -> None:
        """:meth:`poison` for a consumed record (``ConsumerRecord``) that decoding rejected.

        Example (not run: needs a producer): ``await dlq.poison_record(rec, poison)``.
        """
        await self.poison(
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
            key=rec.key,
            value=rec.value,
            reason=p.reason,
            detail=p.detail,
        )

    async def failed_evaluation(
        self,
        *,
        trace_id: str,
        span_id: str,
        config_fingerprint: str,
        errors: Mapping[str, str],
        reason: str = "evaluation_failed",
        payload: FailedCase | None = None,
        extra_headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Record an evaluation that failed for good: ids, scrubbed errors and, with
        ``payload``, what ``nexagauge dlq replay`` needs to evaluate it again."""
        clean = {k: scrub(v, self.secrets)[:MAX_DETAIL] for k, v in errors.items()}
        body: dict[str, Any] = {
            "version": RECORD_VERSION,
            "trace_id": trace_id,
            "span_id": span_id,
            "config_fingerprint": config_fingerprint,
            "errors": clean,
        }
        if payload is not None:
            body.update(payload.body(with_case=self.payload == "raw"))
        replayable = body.get("case") is not None
        detail = "; ".join(f"{k}: {v}" for k, v in clean.items())
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, self._detail(detail)),
            (HEADER_SOURCE, f"trace/{trace_id}/{span_id}".encode()),
            (HEADER_REPLAYABLE, b"1" if replayable else b"0"),
            *extra_headers,
        ]
        await self.producer.send_and_wait(
            self.topic,
            value=json.dumps(body, sort_keys=True, separators=(",", ":")).encode(),
            key=trace_id.encode(),
            headers=headers,
        )


@dataclass
class FailedCase:
    """What a failed-evaluation dead letter carries to be evaluated again (see module docstring).

    ``case``: the evaluated ``EvalCase`` as JSON (``model_dump(mode="json")``); ``target``: the
    evaluated span's identity (``EvaluationTarget`` fields but the ids and fingerprint, which the
    record holds already); ``nodes``: the node set the sampling rule chose (``None``: the
    configured default); ``sources``: (topic, partition, offset) of the messages of the trace.

    Example:
        >>> fc = FailedCase(case={"output": "hi"}, target={"service": "s"}, max_case_bytes=8)
        >>> fc.body()["case"], fc.body()["case_omitted"]
        (None, 'case of 15 bytes > online.dlq_max_case_bytes (8)')
    """

    case: Mapping[str, Any]
    target: Mapping[str, Any]
    nodes: Sequence[str] | None = None
    sources: Iterable[tuple[str, int, int]] = ()
    max_case_bytes: int = 1024 * 1024

    def body(self, with_case: bool = True) -> dict[str, Any]:
        """The record fields; ``with_case=False`` (``kafka.dlq_payload = "reference"``) leaves
        the case out."""
        out: dict[str, Any] = {
            "target": dict(self.target),
            "nodes": list(self.nodes) if self.nodes is not None else None,
            "sources": [list(s) for s in sorted(self.sources)[:MAX_SOURCES]],
            "case": None,
        }
        size = len(json.dumps(self.case, separators=(",", ":")).encode())
        if not with_case:
            out["case_omitted"] = 'kafka.dlq_payload = "reference" (no app content in the DLQ)'
        elif size <= self.max_case_bytes:
            out["case"] = dict(self.case)
        else:
            out["case_omitted"] = (
                f"case of {size} bytes > online.dlq_max_case_bytes ({self.max_case_bytes})"
            )
        return out
