"""The api_key rule is searched only in long tokens that one of its literals begins (at the token's
start or after a ``-``): every kind of key is still found, and a long token no key begins with --
an agent's tool call id -- costs no regex."""

from __future__ import annotations

import re
from re import _constants, _parser  # type: ignore[attr-defined]

import pytest

from nexagauge.sdk.scrubbing import Scrubber
from nexagauge.sdk.secret_rules import SECRET_RULES

_API_KEY = next(r for r in SECRET_RULES if r.name == "api_key" and r.token_only)

#: one key per alternative of the api_key pattern, in its order
EXAMPLES = [
    "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0",
    "sk_live_" + "a1B2c3D4e5F6g7H8i9J0",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "ghp_" + "a" * 36,
    "github_pat_" + "11ABCDEFG0" * 4,
    "xoxb-" + "1234567890-abc",
    "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
    "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "glpat-" + "abcdefghij0123456789",
    "npm_" + "A" * 36,
    "pypi-AgE" + "Ib3B5cHkub3JnAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "dop_v1_" + "0123456789abcdef" * 4,
    "shpat_" + "0123456789abcdef" * 2,
    "dapi" + "0123456789abcdef" * 2,
    "gsk_" + "A1b2C3d4" * 6,
    "r8_" + "A" * 37,
]


def _alternatives(pattern: str) -> int:
    """The number of top-level alternatives of the pattern (``\\b(?:a|b|...)``)."""
    for op, arg in _parser.parse(pattern):
        if op is _constants.BRANCH:
            return len(arg[1])
    raise AssertionError("no alternatives found")


def test_every_alternative_has_an_example_that_the_pattern_matches_whole() -> None:
    assert _alternatives(_API_KEY.pattern) == len(EXAMPLES)
    regex = re.compile(_API_KEY.pattern)
    for key in EXAMPLES:
        assert regex.fullmatch(key), key
        assert _API_KEY.token_starts is not None and key.startswith(_API_KEY.token_starts), key


@pytest.mark.parametrize("key", EXAMPLES)
@pytest.mark.parametrize("where", ["{}", "my key is {} ok", "x-{}", "prefix-v2-{}", '{{"k":"{}"}}'])
def test_every_kind_of_key_is_scrubbed_wherever_a_boundary_lets_it_start(
    key: str, where: str
) -> None:
    text = where.format(key)
    scrubbed, marks = Scrubber().scrub("input", text)
    assert key not in scrubbed and key[-12:] not in scrubbed, scrubbed
    assert marks


@pytest.mark.parametrize(
    "call_id",
    ["call_8f3kq1c0ffee4242", "toolu_01A2B3C4D5E6F7G8H9", "fc_0123456789abcdefABCDEF"],
)
def test_a_long_token_no_key_begins_with_is_not_searched(call_id: str) -> None:
    scrubber = Scrubber()
    raw = call_id.encode()
    assert [r.name for r in scrubber._candidates(raw) if r.name == "api_key"] == []
    assert scrubber.scrub("gen_ai.tool.call.id", call_id) == (call_id, None)
