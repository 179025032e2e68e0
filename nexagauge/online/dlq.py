"""The dead-letter topic: poison messages and failed evaluations, never secrets or content.

Poison messages are forwarded byte for byte (same key and value) so they can be inspected and
replayed; the reason travels in headers:

- ``nexagauge.dlq.reason``: a stable token (``undecodable``, ``too_large``, ``invalid_ids``,
  ``not_otlp``, ``decode_error`` (a decoder bug), ``evaluation_failed``, ``emit_failed``),
- ``nexagauge.dlq.detail``: a short explanation (secrets scrubbed, at most 500 characters),
- ``nexagauge.dlq.source``: ``topic/partition/offset`` of the original message.

A failed evaluation has no single original message (a trace spans several), so its record is a
small JSON object naming the trace, span, configuration fingerprint and per-node errors, keyed
by trace id: no input, output, context or judge prompt is ever written, and error texts go
through :func:`scrub` (API keys, bearer tokens, the configured judge key).

Example:
    >>> scrub("401: Incorrect API key provided: sk-abcdefghijklmnop1234")
    '401: Incorrect API key provided: [scrubbed]'
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)

HEADER_REASON = "nexagauge.dlq.reason"
HEADER_DETAIL = "nexagauge.dlq.detail"
HEADER_SOURCE = "nexagauge.dlq.source"
MAX_DETAIL = 500

_SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/=]{8,}"),
    re.compile(
        r"(?i)(api[_-]?key|authorization|password|secret|token)(\"?\s*[:=]\s*\"?)[^\s\",}]+"
    ),
]


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove API keys, bearer tokens and the given literal secrets from an error text."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[scrubbed]")
    for i, pat in enumerate(_SECRET_PATTERNS):
        text = pat.sub(r"\1\2[scrubbed]" if i == 2 else "[scrubbed]", text)
    return text


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

    def __init__(self, producer: _Producer, topic: str, secrets: Iterable[str] = ()) -> None:
        self.producer = producer
        self.topic = topic
        self.secrets = [s for s in secrets if s]

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
        """Forward an unprocessable message as is, with the reason in headers."""
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, self._detail(detail)),
            (HEADER_SOURCE, f"{topic}/{partition}/{offset}".encode()),
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
