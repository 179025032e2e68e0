"""What the report embeds is scrubbed first: the SDK's secret rules plus configured secrets.

Every string the report reads from a results directory (record text, claims, reasons, metadata
keys and values, case ids, error messages) passes through :class:`Redactor` as it is loaded, so
nothing downstream (the HTML, the charts' labels, any copy of the data) can hold an unscrubbed
value. The rules are the SDK's (:class:`nexagauge.sdk.scrubbing.Scrubber`, the same as
``@nexagauge.trace`` and the evaluator's logs); literal secrets of the configuration (the judge's
API key, which need not look like a key) are replaced as well.

Example:
    >>> r = Redactor(literals=["judge-key-0000"])
    >>> r.text("key sk-proj-abcdefghijklmnopqrstuvwx and judge-key-0000")
    'key [scrubbed:api_key] and [scrubbed:configured_secret]'
    >>> r.data({"note": "AWS AKIAIOSFODNN7EXAMPLE"})
    {'note': 'AWS [scrubbed:api_key]'}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, SecretStr

from nexagauge.sdk.scrubbing import Scrubber

#: what a configured secret is replaced with (the scrubber's own marks name their rule)
LITERAL_MARK = "[scrubbed:configured_secret]"
#: a configured secret shorter than this is not replaced literally (it would hit ordinary text)
MIN_LITERAL = 6


class Redactor:
    """Scrubs strings and JSON-compatible data for the report (see the module docstring).

    ``pii``: also scrub personal data (emails, phone and card numbers), as the SDK's ``pii``
    option does.
    """

    def __init__(self, literals: Iterable[str] = (), *, pii: bool = False) -> None:
        keep = {s for s in literals if s and len(s) >= MIN_LITERAL}
        self._literals = tuple(sorted(keep, key=len, reverse=True))
        self._scrubber = Scrubber(secrets=True, pii=pii)
        self._memo: dict[str, str] = {}

    def text(self, value: str) -> str:
        """``value`` with configured secrets and every secret the SDK recognises replaced."""
        done = self._memo.get(value)
        if done is not None:
            return done
        out = value
        for secret in self._literals:
            if secret in out:
                out = out.replace(secret, LITERAL_MARK)
        out = self._scrubber.scrub("report", out)[0]
        if len(value) <= 200:  # ids, labels and metric names repeat across cases
            self._memo[value] = out
        return out

    def data(self, value: Any) -> Any:
        """A copy of JSON-compatible ``value`` with every string (keys included) scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def settings_secrets(settings: BaseModel) -> list[str]:
    """Every ``SecretStr`` value of a settings object, at any depth (judge and embedding API keys,
    the Kafka SASL password, per-node judge keys), for :class:`Redactor`'s ``literals``.

    Example:
        >>> from nexagauge.settings import Settings
        >>> s = Settings()
        >>> s.judge.api_key = SecretStr("judge-key-1234")
        >>> "judge-key-1234" in settings_secrets(s)
        True
    """
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name))
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)

    walk(settings)
    return found
