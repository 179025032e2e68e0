"""The personal-data rules (nexagauge/sdk/pii_rules.py): true and false positives, and property
tests (hypothesis) that generated valid values are caught while prose, uuids, version strings,
dates and order ids are left alone. The evaluator's case scrubber uses the same rules."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.sdk.pii_rules import IBAN_LENGTHS, bsn_ok, card_ok, dni_ok, iban_ok
from nexagauge.sdk.scrubbing import Scrubber, scrub_text

PII = Scrubber(pii=True)
SECRETS = Scrubber()


def scrubbed(text: str) -> str:
    return PII.scrub("a", text)[0]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("write to jane.doe+billing@example.co.uk today", "email"),
        ("IBAN DE89 3704 0044 0532 0130 00 please", "iban"),
        ("IBAN GB82WEST12345698765432.", "iban"),
        ("pay to NL91ABNA0417164300", "iban"),
        ("card 4111 1111 1111 1111 expires", "card_number"),
        ("card 5500-0000-0000-0004", "card_number"),
        ("amex 378282246310005", "card_number"),
        ("SSN 123-45-6789 on file", "ssn"),
        ("DNI 12345678Z", "national_id"),
        ("NIE X1234567L", "national_id"),
        ("BSN: 111222333", "national_id"),
        ("call +44 20 7946 0958", "phone"),
        ("reach me at +14155552671.", "phone"),
        ("Berlin office +49 (0)30 1234567", "phone"),
        ("US line (555) 123-4567", "phone"),
        ("US line 555-123-4567", "phone"),
        ("London 020 7946 0958", "phone"),
        ("Paris 01 23 45 67 89", "phone"),
        ("Handy 0151/1234567", "phone"),
        ("phone: 5551234567", "phone"),
        ("from 192.168.1.20 today", "ip_address"),
        ("host 2001:db8::8a2e:370:7334", "ip_address"),
        ("link-local fe80::1%eth0", "ip_address"),
    ],
)
def test_personal_values_are_recognised(text: str, rule: str) -> None:
    out, marks = PII.scrub("a", text)
    assert f"[scrubbed:{rule}]" in out, out
    assert marks is not None and f"a:{rule}" in marks
    assert out.split()[0] == text.split()[0]  # the sentence around the value stays
    assert SECRETS.scrub("a", text)[0] == text  # without scrub_pii nothing changes


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3, v10.0.19045 and 3.11.7 are supported",
        "released 2024-01-15 at 12:30:45; due 15/01/2024 and 15.01.2024",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "order ORD-555-123-4567, ticket #0123 456 789, invoice INV-2024-000123",
        "order 1234567890123 shipped",  # 13 digits, no issuer prefix + Luhn: not a card
        "see std::vector and a::b; ratio 3:2; 10:30-11:45",
        "In 1889 the tower was 330 m tall; 61,722 exhibitors came; call it a day",
        "v1.2.3.4 release notes",
        "card ending 1234 and PIN-less checkout",
        "12345678A is not a DNI (wrong letter); 123456789 is a number",
        "IBAN DE88 3704 0044 0532 0130 00 has a wrong checksum",
        "SSN 000-12-3456 and 666-12-3456 are never issued",
        "user@localhost and an @mention",
        "room 101 101 2024: no area code starts with 1",
        "the judge at 127.0.0.1:8000, bound to 0.0.0.0 and ::1",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert PII.scrub("a", text) == (text, None)


def test_checksums() -> None:
    assert iban_ok("DE89 3704 0044 0532 0130 00") and not iban_ok("DE89 3704 0044 0532 0130 01")
    assert not iban_ok("XX89 3704 0044 0532 0130 00")  # unknown country
    assert card_ok("4111111111111111") and not card_ok("4111111111111112")
    assert not card_ok("9111111111111119")  # Luhn-valid, no issuer uses the prefix
    assert dni_ok("12345678Z") and dni_ok("Y1234567X") and not dni_ok("12345678Y")
    assert bsn_ok("111222333") and not bsn_ok("111222334")


def test_scrub_text_uses_the_same_rules() -> None:
    assert scrub_text("IBAN DE89 3704 0044 0532 0130 00", pii=True) == "IBAN [scrubbed:iban]"
    assert scrub_text("IBAN DE89 3704 0044 0532 0130 00") == "IBAN DE89 3704 0044 0532 0130 00"


# -- property tests ----------------------------------------------------------------------------
def _luhn_digit(body: str) -> str:
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:  # doubled: the check digit will be at position 0
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


@st.composite
def cards(draw: st.DrawFn) -> str:
    prefix, length = draw(
        st.sampled_from([("4", 16), ("4", 13), ("51", 16), ("55", 16), ("2221", 16),
                         ("34", 15), ("37", 15), ("6011", 16), ("65", 16), ("3530", 16)])
    )  # fmt: skip
    body = prefix + "".join(
        draw(st.lists(st.sampled_from(string.digits), min_size=length - len(prefix) - 1,
                      max_size=length - len(prefix) - 1))
    )  # fmt: skip
    number = body + _luhn_digit(body)
    sep = draw(st.sampled_from(["", " ", "-"]))
    return sep.join(number[i : i + 4] for i in range(0, len(number), 4))


@st.composite
def ibans(draw: st.DrawFn) -> str:
    country = draw(st.sampled_from(sorted(IBAN_LENGTHS)))
    n = IBAN_LENGTHS[country] - 4
    bban = "".join(draw(st.lists(st.sampled_from(string.digits), min_size=n, max_size=n)))
    if country in {"GB", "NL", "IE"}:  # a bank code in letters
        bban = "".join(draw(st.lists(st.sampled_from(string.ascii_uppercase), min_size=4,
                                     max_size=4))) + bban[4:]  # fmt: skip
    check = 98 - int("".join(str(int(c, 36)) for c in bban + country + "00")) % 97
    iban = f"{country}{check:02d}{bban}"
    if draw(st.booleans()):
        iban = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    return iban


@st.composite
def dnis(draw: st.DrawFn) -> str:
    n = draw(st.integers(10_000_000, 99_999_999))
    if draw(st.booleans()):
        return f"{n}{'TRWAGMYFPDXBNJZSQVHLCKE'[n % 23]}"
    lead = draw(st.sampled_from("XYZ"))
    m = draw(st.integers(1_000_000, 9_999_999))
    return f"{lead}{m}{'TRWAGMYFPDXBNJZSQVHLCKE'[int(str('XYZ'.index(lead)) + str(m)) % 23]}"


ALNUM = string.ascii_letters + string.digits


@st.composite
def keys(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["openai", "aws", "github", "jwt"]))
    if kind == "openai":
        return "sk-proj-" + "".join(
            draw(st.lists(st.sampled_from(ALNUM), min_size=20, max_size=48))
        )
    if kind == "aws":
        upper = string.ascii_uppercase + string.digits
        return "AKIA" + "".join(draw(st.lists(st.sampled_from(upper), min_size=16, max_size=16)))
    if kind == "github":
        return "ghp_" + "".join(draw(st.lists(st.sampled_from(ALNUM), min_size=36, max_size=36)))
    part = st.lists(st.sampled_from(ALNUM + "_-"), min_size=17, max_size=40)
    return "eyJ" + "".join(draw(part)) + ".eyJ" + "".join(draw(part)) + "." + "".join(draw(part))


PROSE = (
    "the a tower was built in 1889 and is 330 m tall Paris France order shipped on "
    "version release notes capital of ratio 3:2 at 12:30 room 101 page 42 year 2024 "
    "it costs 19.99 euros for 3 items, see section 4.2.1 of the guide"
)
WORDS = st.sampled_from(PROSE.split())
AROUND = st.sampled_from(["", "my ", "value: ", "(", "it is ", "\n"])
AFTER = st.sampled_from(["", ".", " ok", ")", ", thanks", "\n"])


@settings(max_examples=150, deadline=None)
@given(AROUND, st.one_of(cards(), ibans(), dnis()), AFTER)
def test_generated_valid_personal_values_are_caught(before: str, value: str, after: str) -> None:
    out = scrubbed(before + value + after)
    assert value not in out and out.startswith(before) and out.endswith(after), out


@settings(max_examples=100, deadline=None)
@given(AROUND, keys(), AFTER)
def test_generated_keys_are_caught(before: str, key: str, after: str) -> None:
    out = SECRETS.scrub("a", before + key + after)[0]
    assert key not in out and out.startswith(before), out


@settings(max_examples=150, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=30))
def test_prose_is_left_alone(words: list[str]) -> None:
    text = " ".join(words)
    assert PII.scrub("a", text) == (text, None)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.uuids().map(str),
        st.uuids().map(lambda u: str(u).upper()),
        st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 9999)).map(
            lambda t: "v{}.{}.{}".format(*t)
        ),
        st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 99)).map(
            lambda t: "{}.{}.{}".format(*t)
        ),
        st.integers(0, 10**12).map(lambda n: f"ORD-{n}"),
        st.integers(0, 10**12).map(lambda n: f"#{n}"),
        st.integers(100_000, 999_999_999_999).map(lambda n: f"order {n}"),
        st.dates().map(lambda d: d.isoformat()),
        st.dates().map(lambda d: d.strftime("%d/%m/%Y")),
        st.times().map(lambda t: t.strftime("%H:%M:%S")),
    ),
    AROUND,
    AFTER,
)
def test_ids_versions_and_dates_are_left_alone(value: str, before: str, after: str) -> None:
    text = before + value + after
    assert PII.scrub("a", text) == (text, None), text
