"""Where the text of an evaluation case goes, in words: the start-up line of ``serve`` and ``run``.

An operator must know, before any case is read, what is removed from case text and which third
party receives the rest: the judge's host (every node override's too) and a remote embeddings
host; a local judge and local embeddings keep the text in the process.

Example::

    >>> from nexagauge.settings import Settings
    >>> s = Settings(judge={"base_url": "https://api.example.com/v1"})
    >>> scrub_notice(s, "llm", secrets=True, pii=False)
    'scrubbing secrets (PII off) from case text before judge, cache and outputs; case text goes \
to the judge at api.example.com'
    >>> scrub_notice(Settings(), "local", secrets=True, pii=True)
    'scrubbing secrets and personal data (PII on) from case text before judge, cache and \
outputs; case text goes to the local judge: stays in this process'
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from nexagauge.schema.scrub import describe

__all__ = ["scrub_notice", "text_destinations"]

_OPENAI_HOST = "api.openai.com"


def _host(base_url: str | None) -> str:
    if not base_url:
        return _OPENAI_HOST
    return urlsplit(base_url).hostname or base_url


def text_destinations(settings: Any, judge_kind: str | None) -> str:
    """Where case text goes: ``the judge at <host>[, <host>]`` (node overrides included),
    ``the local judge: stays in this process`` or ``no judge: stays in this process``, plus a
    remote embeddings host."""
    if judge_kind == "llm":
        j = settings.judge
        hosts = [_host(j.base_url)]
        for o in j.nodes.values():
            if o.base_url and _host(o.base_url) not in hosts:
                hosts.append(_host(o.base_url))
        out = "the judge at " + ", ".join(hosts)
    elif judge_kind == "local":
        out = "the local judge: stays in this process"
    else:
        out = "no judge: stays in this process"
    e = settings.embeddings
    if e.provider == "openai":
        out += f"; embeddings at {_host(e.base_url)}"
    return out


def scrub_notice(settings: Any, judge_kind: str | None, *, secrets: bool, pii: bool) -> str:
    """The one start-up line: what is scrubbed and where case text goes (see module docstring)."""
    return (
        f"scrubbing {describe(secrets, pii)} from case text before judge, cache and outputs; "
        f"case text goes to {text_destinations(settings, judge_kind)}"
    )
