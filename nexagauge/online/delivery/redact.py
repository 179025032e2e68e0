"""Redaction of the evaluator's own output channels: log lines and dead-letter headers.

The evaluator handles untrusted text (span attributes an app sent, judge error bodies) and its own
secrets (the judge API key, the SASL password). Whatever it writes outside the evaluation results
— a log line, a dead-letter header — goes through the SDK's scrubber
(:class:`nexagauge.sdk.scrubbing.Scrubber`, the same rules as the spans an app exports; personal
data too after :func:`configure_redaction` with ``pii``, as ``online.scrub_pii`` sets) plus the
literal secrets registered at start-up, and is cut to a bounded length *before* scrubbing (so a
megabyte-long attribute costs no more than the part that is kept).

:class:`RedactingFilter` is a ``logging.Filter`` for handlers: it renders the record (message,
arguments, exception and stack text), redacts it and stores the result, so no formatter
downstream ever sees the raw text. :func:`install_log_redaction` adds it to the root handlers
(``nexagauge`` CLI commands and :class:`~nexagauge.online.service.OnlineService` call it): every
record that reaches them passes it, at every level and from every logger (aiokafka's debug lines
print each produced record at ``-vv``).

Example:
    >>> register_secret("judge-key-1234567")
    >>> redact("401 for judge-key-1234567; token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB")
    ... # doctest: +ELLIPSIS
    '401 for [scrubbed:configured_secret]; token [scrubbed:...]'
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from nexagauge.sdk.scrubbing import Scrubber

#: longest text a log line or header keeps (cut before scrubbing: bounded cost)
MAX_TEXT = 2000
_LITERAL = "[scrubbed:configured_secret]"

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_scrubber: Scrubber | None = None


def configure_redaction(*, pii: bool) -> None:
    """Whether log lines and headers also lose personal data (``online.scrub_pii`` /
    ``run.scrub_pii``: the same rules as the case scrubber); secrets are always redacted."""
    global _scrubber
    with _lock:
        _scrubber = Scrubber(secrets=True, pii=pii)


def register_secret(*secrets: str | None) -> None:
    """Add literal secrets (>= 6 characters) that must never appear in logs or headers."""
    global _secrets
    new = {s for s in secrets if s and len(s) >= 6}
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | new, key=len, reverse=True))


def redact(text: object, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, with registered secrets and every secret the SDK
    recognises replaced (see docs/sdk.md for the list)."""
    global _scrubber
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit:
        s = s[:limit] + f"... [{len(s) - limit} more characters]"
    for secret in _secrets:
        if secret in s:
            s = s.replace(secret, _LITERAL)
    if _scrubber is None:
        _scrubber = Scrubber(secrets=True)
    return _scrubber.scrub("log", s)[0]


class RedactingFilter(logging.Filter):
    """Renders and redacts a record in place (message, arguments, exception, stack)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_nexagauge_redacted", False):
            return True
        try:
            msg = record.getMessage()
        except Exception:  # a broken format string: keep the template only
            msg = str(record.msg)
        record.msg = redact(msg, limit=MAX_TEXT * 4)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, limit=MAX_TEXT * 8)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, limit=MAX_TEXT * 8)
        record._nexagauge_redacted = True
        return True


def install_log_redaction(handlers: Iterable[logging.Handler] | None = None) -> None:
    """Add :class:`RedactingFilter` to ``handlers`` (default: the root logger's), once each."""
    for h in handlers if handlers is not None else logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in h.filters):
            h.addFilter(RedactingFilter())
