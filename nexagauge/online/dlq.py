"""The dead-letter topic: poison messages and failed evaluations, never secrets or content.

Poison messages are forwarded byte for byte (same key and value) so they can be inspected and
replayed. **The value is then the app's raw message, with every secret the app sent in it**: the
DLQ topic needs the same access control and retention as the collector's topics. Operators who
cannot keep such a copy set ``kafka.dlq_payload = "reference"``: the record's value is then a
small JSON reference (``source`` topic/partition/offset, ``size``, ``sha256``) to the original,
which stays in its topic for that topic's retention. The reason travels in headers:

- ``nexagauge.dlq.reason``: a stable token (``undecodable``, ``too_large``, ``invalid_ids``,
  ``not_otlp``, ``decode_error`` (a decoder bug), ``evaluation_failed``, ``emit_failed``),
- ``nexagauge.dlq.detail``: a short explanation (redacted with the SDK's secret rules and the
  configured secrets by :func:`nexagauge.online.redact.redact`, at most 500 characters),
- ``nexagauge.dlq.source``: ``topic/partition/offset`` of the original message,
- ``nexagauge.dlq.payload``: ``raw`` or ``reference`` (what the value holds).

A failed evaluation has no single original message (a trace spans several), so its record is a
small JSON object naming the trace, span, configuration fingerprint and per-node errors, keyed
by trace id: no input, output, context or judge prompt is ever written, and error texts go
through :func:`scrub` (API keys, bearer tokens, the configured judge key).

Example:
    >>> scrub("401: Incorrect API key provided: sk-abcdefghijklmnop1234")
    '401: Incorrect API key provided: [scrubbed:api_key]'
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol

from nexagauge.online.redact import redact, register_secret

log = logging.getLogger(__name__)

HEADER_REASON = "nexagauge.dlq.reason"
HEADER_DETAIL = "nexagauge.dlq.detail"
HEADER_SOURCE = "nexagauge.dlq.source"
HEADER_PAYLOAD = "nexagauge.dlq.payload"
MAX_DETAIL = 500


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove every secret the SDK recognises and the given literal secrets from a text."""
    register_secret(*secrets)
    return redact(text, limit=4 * MAX_DETAIL)


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
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.secrets = [s for s in secrets if s]
        register_secret(*self.secrets)
        self.payload = payload

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
        if self.payload == "reference":
            raw = value or b""
            ref = {"source": source, "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
            value = json.dumps(ref, sort_keys=True).encode()
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, self._detail(detail)),
            (HEADER_SOURCE, source.encode()),
            (HEADER_PAYLOAD, self.payload.encode()),
        ]
        await self.producer.send_and_wait(self.topic, value=value, key=key, headers=headers)

    async def failed_evaluation(
        self,
        *,
        trace_id: str,
        span_id: str,
        config_fingerprint: str,
        errors: Mapping[str, str],
        reason: str = "evaluation_failed",
    ) -> None:
        """Record an evaluation that failed after retries (ids and scrubbed errors only)."""
        clean = {k: scrub(v, self.secrets)[:MAX_DETAIL] for k, v in errors.items()}
        body = {
            "trace_id": trace_id,
            "span_id": span_id,
            "config_fingerprint": config_fingerprint,
            "errors": clean,
        }
        detail = "; ".join(f"{k}: {v}" for k, v in clean.items())
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, self._detail(detail)),
            (HEADER_SOURCE, f"trace/{trace_id}/{span_id}".encode()),
        ]
        await self.producer.send_and_wait(
            self.topic,
            value=json.dumps(body, sort_keys=True).encode(),
            key=trace_id.encode(),
            headers=headers,
        )
