"""When the judge client retries an HTTP attempt, and how long it waits before the next one.

Transient failures - HTTP 429, 408/409/425, 5xx, timeouts, connection errors and malformed
2xx bodies - are retried with exponential backoff and equal jitter, or after the endpoint's
``Retry-After`` / ``retry-after-ms`` (capped at :data:`MAX_RETRY_AFTER_S`). Any other 4xx is
permanent: the call fails at once with :class:`CallFailed`. The retry loop itself lives in
:meth:`nexagauge.judge.llm.client.LLMJudge._request`; this module decides the policy once.

Example:
    >>> retry_after({"retry-after-ms": "1500"})
    1.5
    >>> is_transient(503), is_transient(400)
    (True, False)
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

import openai

from nexagauge.settings import JudgeSettings

#: HTTP statuses below 500 that are worth another attempt
RETRY_STATUS = {408, 409, 425, 429}
#: when no Retry-After is given we still never wait longer than this per attempt
MAX_RETRY_AFTER_S = 300.0
_SCHEMA_HINTS = ("response_format", "json_schema", "schema", "strict")


class CallFailed(Exception):
    """A transport-level failure after retries (message is the user-facing error)."""

    def __init__(self, message: str, calls: int) -> None:
        super().__init__(message)
        self.calls = calls


def is_transient(status: int) -> bool:
    """Whether an HTTP status means "try again later" (429, 408/409/425, any 5xx)."""
    return status in RETRY_STATUS or status >= 500


def retry_delay(s: JudgeSettings, attempt: int, retry_after_s: float | None) -> float:
    """Seconds before retry number ``attempt + 1``: the endpoint's ``Retry-After`` (capped, plus
    a little jitter) when it sent one, else exponential backoff with equal jitter."""
    if retry_after_s is None:
        # exponent capped: behind the online circuit breaker attempts never stop, and 2**1100
        # no longer converts to a float
        base = min(s.backoff_max_s, s.backoff_base_s * (2 ** min(attempt, 32)))
        return base / 2 + random.random() * base / 2  # equal jitter
    return min(retry_after_s, MAX_RETRY_AFTER_S) + random.random() * s.backoff_base_s * 0.1


def error_text(e: openai.APIStatusError) -> str:
    """The error's message and body, lower-cased, for matching what the endpoint rejected."""
    return (str(e.message) + " " + str(e.body)).lower()


def mentions_schema(e: openai.APIStatusError) -> bool:
    """Whether a 4xx rejects the JSON-schema ``response_format`` (not the logprobs request)."""
    text = error_text(e)
    return any(h in text for h in _SCHEMA_HINTS) and "logprob" not in text


def short(e: Exception) -> str:
    """An error's message on one line, at most 200 characters."""
    msg = getattr(e, "message", None) or str(e) or type(e).__name__
    return " ".join(str(msg).split())[:200]


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
