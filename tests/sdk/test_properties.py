"""Property tests: serialization never raises, the scrubbing fast path is sound, limits hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.sdk.scrubbing import PII_RULES, SECRET_RULES, Scrubber
from nexagauge.sdk.serialize import to_text

_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary(max_size=64)
    | st.decimals(allow_nan=False)
    | st.datetimes()
    | st.uuids()
)
_values = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.frozensets(st.integers() | st.text(max_size=5), max_size=5)
        | st.dictionaries(st.text(max_size=10) | st.integers(), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(_values)
def test_to_text_always_returns_valid_json_or_text(value: Any) -> None:
    text = to_text(value, scrub_keys=True)
    assert isinstance(text, str)
    text.encode("utf-8")  # never a lone surrogate (the exporter would fail)
    if not isinstance(value, (str, bytes)):
        json.loads(text)


_SECRETS = [
    "sk-proj-Abcdefghijklmnop1234",
    "AKIAIOSFODNN7EXAMPLE",
    "password=hunter2",
    "Bearer abcdefghij0123456789",
    "client_secret: zzzz9999",
    "postgres://u:pw123@host/db",
    "my password is hunter2",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig_abcdefghij",
    "jane@example.com",
    "4111 1111 1111 1111",
    "OPENAI_API_KEY=q8Vn2Lx7Rt4K",
    "DB_PASSWORD=Tr0ub4dor3x",
    "db_pass=hunter2",
    '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "ASIAY34FZKBOKMUTVV7A",
    "ya29.a0AfH6SMCexampleTokenValue",
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2",
    "Bearer abcdefghijklmnopqrstuvwxyz",
    "pin: 4821",
]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.sampled_from([*_SECRETS, ""]), st.text(max_size=200))
def test_fast_path_gate_is_sound(before: str, secret: str, after: str) -> None:
    """Whenever scrubbing changes a text, the gate used by the hot path says it is not clean."""
    scrubber = Scrubber(pii=True)
    text = before + " " + secret + " " + after
    scrubbed, marks = scrubber.scrub("a", text)
    if marks is not None or scrubbed != text:
        assert not scrubber.is_clean(text)
    # the joined form the hot path gates must not be cleaner than its parts
    if not scrubber.is_clean(before) or not scrubber.is_clean(after):
        assert not scrubber.is_clean(before + "\n" + after)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(max_size=80), max_size=4),
    st.sampled_from([*_SECRETS, ""]),
    st.lists(st.text(max_size=80), max_size=4),
)
def test_all_clean_is_sound(before: list[str], secret: str, after: list[str]) -> None:
    """``all_clean`` over several texts (one joined pass) never calls a text clean that is not."""
    scrubber = Scrubber(pii=True)
    texts = [*before, f"x {secret} y", *after]
    if scrubber.all_clean(texts):
        for text in texts:
            assert scrubber.scrub("a", text) == (text, None), text


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_scrub_never_raises_and_is_idempotent(text: str) -> None:
    scrubber = Scrubber(pii=True)
    once, _ = scrubber.scrub("a", text)
    once.encode("utf-8")
    twice, marks = scrubber.scrub("a", once)
    assert twice == once and marks is None


def test_every_default_rule_has_a_gate() -> None:
    for rule in (*SECRET_RULES, *PII_RULES):
        gated = (rule.separators or rule.long_token or rule.min_digits or rule.raw_triggers) or (
            rule.base64_run or rule.keys
        )
        assert gated or rule.triggers, rule.name


@pytest.mark.parametrize(
    "text",
    [
        "Height: 330 m (1,083 ft). Key facts: 61,722 exhibitors. Note: the token count is 12.",
        "Passage 2: the key test passed; tokens: 512; secrets of the trade: none.",
        '{"title": "Eiffel Tower", "year": 1889, "tags": ["Paris", "iron"]}',
        "Ratio = 3:2, temperature=0.2, max_tokens: 256, the bearer of the keys.",
    ],
)
def test_ordinary_text_with_colons_runs_no_regex(text: str) -> None:
    """The gates alone clear ordinary text with ':' and '=' (issue 16: a ':' sent every passage
    through the regexes); no rule is a candidate, so no regex runs."""
    scrubber = Scrubber()
    assert scrubber._candidates(text.encode()) == []
    assert scrubber.all_clean([text, text.upper()]) is True


_KEYISH = st.sampled_from(
    ["password", "DB_PASS", "pin", "token", "api_key", "Authorization", "sig", "Height", "note"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=12),
            _KEYISH,
            st.text(alphabet="\"'\\ \t", max_size=4),
            st.sampled_from(["=", ":", "", "@"]),
        ),
        max_size=6,
    )
)
def test_key_gate_shortcut_is_sound(pieces: list[tuple[str, str, str, str]]) -> None:
    """The one-slice-per-separator key check never says "no key" where the exact one finds one."""
    from nexagauge.sdk.scrub_gates import key_ends, may_follow_key

    scrubber = Scrubber()
    raw = "".join(a + b + c + d for a, b, c, d in pieces).encode("utf-8", "replace")
    mask = (raw.find(b"=") >= 0) | (raw.find(b":") >= 0) << 1
    exact = key_ends(raw, scrubber._key_tails, scrubber._all_keys)
    if exact is None or exact:
        assert may_follow_key(raw, mask, scrubber._key_windows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60) | st.sampled_from(['say "hi"', "a\\b", "x\ny", "t\tz"])))
def test_plain_verdict_means_no_json_escaping(texts: list[str]) -> None:
    """When the gate says PLAIN, a text's JSON string is ``'"' + text + '"'`` with its newlines
    and quotes escaped (the recorder then skips the escaping pass); texts with a backslash or
    another control character never get PLAIN."""
    from json.encoder import encode_basestring

    from nexagauge.sdk.scrub_gates import plain_json_body
    from nexagauge.sdk.scrubbing import CLEAN, PLAIN

    verdict = Scrubber().gate(texts)

    def plain(t: str) -> str:
        return '"' + plain_json_body(t) + '"'

    if verdict == CLEAN | PLAIN:
        for text in texts:
            assert encode_basestring(text) == plain(text), text
    if any(encode_basestring(t) != plain(t) for t in texts):
        assert verdict != CLEAN | PLAIN
