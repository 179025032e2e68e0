"""The scrubber's lean check (one plan per text shape, :mod:`nexagauge.sdk.scrub_compile`) never
calls a text clean that the full gates would send to a rule that matches it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.sdk.scrub_compile import lean_plans, may_need_rules
from nexagauge.sdk.scrub_gates import CLASS_TABLE
from nexagauge.sdk.scrubbing import CLEAN, PLAIN, Scrubber

from .test_secret_corpus import KINDS

PROSE = [
    "The Eiffel Tower (1889): height 330 m; see https://example.org/tower?id=7.",
    "Exposition Universelle: 61,722 exhibitors and more than 32 million visitors.",
    "Mail me at bob@example.com or call +1 415 555 0100 about order A-1042.",
    "a/b and c+d, key facts: x = 3, my password is",
    "Card 4111 1111 1111 1111 expires 12/29, IBAN GB82 WEST 1234 5698 7654 32.",
]
#: an AWS secret key without a 16-character token run (its "/" break the runs)
AWS_SHORT_RUNS = "wJalrXUtnFEM/K7MDENGbPx/RfiCYEXAMPL/KEY1"
assert len(AWS_SHORT_RUNS) == 40
PIECES = [
    *PROSE,
    AWS_SHORT_RUNS,
    "PASSWORD IS hunter2",
    *(text for _, text, _ in KINDS),
    "pin",
    ":",
    "=",
    " ",
    "\n",
    '"',
    "/",
    "+",
]


def _full_verdict(scrubber: Scrubber, text: str) -> bool:
    """True when the full gates pass some rule whose regex matches ``text``."""
    raw = text.encode()
    return any(rule.regex.search(text) for rule in scrubber._candidates(raw))


@pytest.mark.parametrize("pii", [False, True])
@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6))
def test_the_lean_check_agrees_with_the_full_gates(pii: bool, parts: list[str]) -> None:
    scrubber = Scrubber(pii=pii)
    text = " ".join(parts)
    assert (scrubber.gate([text]) == 0) == _full_verdict(scrubber, text)


@pytest.mark.parametrize("pii", [False, True])
@pytest.mark.parametrize("kind", KINDS, ids=[k for k, _, _ in KINDS])
def test_every_secret_kind_fails_the_gate_and_is_scrubbed(
    pii: bool, kind: tuple[str, str, str]
) -> None:
    _, text, secret = kind
    scrubber = Scrubber(pii=pii)
    assert scrubber.gate(["an ordinary question?", text]) == 0
    assert secret not in scrubber.scrub("input", text)[0]


def test_prose_takes_the_lean_path_and_keeps_its_json_verdict() -> None:
    scrubber = Scrubber()
    prose = PROSE[1]
    raw = prose.encode()
    classes = raw.translate(CLASS_TABLE)
    plan = scrubber._plans[scrubber._shape(raw, classes)]
    assert plan is not None and not may_need_rules(plan, raw)
    assert scrubber.gate([prose]) == CLEAN | PLAIN
    assert scrubber.gate([prose, "tab\there"]) == CLEAN


def test_a_shape_with_a_long_token_or_an_ungated_rule_has_no_plan() -> None:
    scrubber = Scrubber()
    plans = lean_plans([rules for rules, _ in scrubber._by_shape])
    assert all(plan is None for i, plan in enumerate(plans) if i & 1)
    assert all(plan is not None for i, plan in enumerate(plans) if not i & 1)
    from nexagauge.sdk.secret_rules import ScrubRule

    ungated = Scrubber(extra_rules=[ScrubRule("anything", r"order \d+")])
    assert all(plan is None for plan in ungated._plans)
    assert ungated.gate(["order 42 shipped"]) == 0
