"""The one error a decoder may raise: a message that can never be processed (dead-lettered).

Example:
    >>> p = PoisonMessage("not_otlp", "expected a JSON object with 'resourceSpans'")
    >>> (p.reason, str(p))
    ('not_otlp', "not_otlp: expected a JSON object with 'resourceSpans'")
"""

from __future__ import annotations


class PoisonMessage(Exception):
    """A message that can never be processed; it goes to the dead-letter topic.

    ``reason`` is a short stable token (``undecodable``, ``too_large``, ``invalid_ids``,
    ``not_otlp``) used as a metric label and DLQ header; ``detail`` is a human explanation.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
