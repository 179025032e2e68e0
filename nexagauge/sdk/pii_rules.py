"""The personal data the scrubber recognises (``scrub_pii``): one named, gated, checked pattern per kind.

Each rule is a :class:`~nexagauge.sdk.secret_rules.ScrubRule`: cheap gates first (an ``@``, enough
digits), then a regular expression, then (where the kind has one) a checksum, so ordinary numbers
are left alone:

========================  ================================================================================
rule                      recognises
========================  ================================================================================
``email``                 ``local@domain.tld``
``iban``                  IBANs of every SEPA country (length per country, ISO 13616 mod-97 checksum),
                          grouped by spaces or not
``card_number``           payment card numbers of 13-19 digits (blanks/dashes between), Luhn checksum and
                          a known issuer prefix and length (Visa, Mastercard, Amex, Discover, Diners,
                          JCB, UnionPay, Maestro)
``ssn``                   US social security numbers ``123-45-6789`` / ``123 45 6789`` (area, group and
                          serial ranges the SSA never issues are left alone)
``national_id``           Spanish DNI (8 digits + check letter) and NIE (X/Y/Z + 7 digits + check letter),
                          Dutch BSN (9 digits after ``BSN``, 11-test)
``phone``                 international numbers (``+`` country code, 8-15 digits, ``+49 (0)30 ...``),
                          North American ``(555) 123-4567`` / ``555-123-4567`` / ``555.123.4567``,
                          national numbers with a trunk ``0`` and grouping (``020 7946 0958``,
                          ``01 23 45 67 89``, ``030-1234567``), and any 8-15 digits after a word such as
                          ``phone``, ``tel``, ``mobile``, ``call``
``ip_address``            IPv4 (each part 0-255) and IPv6 (validated by :mod:`ipaddress`); not the
                          loopback and unspecified addresses (``127.0.0.1``, ``::1``, ``0.0.0.0``)
========================  ================================================================================

Left alone on purpose: version strings (``v1.2.3``, ``10.0.19045``), dates and times
(``2024-01-15``, ``15/01/2024``), uuids, order and ticket ids (``ORD-555-123-4567``,
``#0123 456 789``), numbers inside words or paths, and numbers whose checksum fails. A phone
number is only recognised in one of the shapes above: a bare run of ten digits without
``+``, grouping or a phone word is an order number as often as a phone number.

Every pattern starts where a value can start (a lookbehind, not ``\\b`` alone), so a search never
restarts inside a long run: the cost stays linear in the text.

Example::

    >>> from nexagauge.sdk.scrubbing import Scrubber
    >>> Scrubber(pii=True).scrub("a", "IBAN DE89 3704 0044 0532 0130 00, call +44 20 7946 0958")[0]
    'IBAN [scrubbed:iban], call [scrubbed:phone]'
"""

from __future__ import annotations

import ipaddress
import re

from nexagauge.sdk.secret_rules import ScrubRule, luhn_ok

__all__ = ["PII_RULES", "bsn_ok", "card_ok", "dni_ok", "iban_ok", "phone_ok"]

# ISO 13616 IBAN lengths of the SEPA countries and a few others commonly seen
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24, "DE": 22, "DK": 18,
    "EE": 20, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GI": 23, "GL": 18, "GR": 27,
    "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24, "SE": 24, "SI": 19,
    "SK": 24, "SM": 27, "VA": 22, "AE": 23, "BR": 29, "IL": 23, "SA": 24, "TR": 26, "UA": 29,
}  # fmt: skip

_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")
_DATE = re.compile(r"\d{1,4}[/\-.]\d{1,2}[/\-.]\d{1,4}(?!\d)")


def iban_ok(text: str) -> bool:
    """ISO 13616: the country's length and the mod-97 checksum.

    Example::

        >>> iban_ok("DE89 3704 0044 0532 0130 00"), iban_ok("DE88 3704 0044 0532 0130 00")
        (True, False)
    """
    s = _NON_ALNUM.sub("", text).upper()
    if IBAN_LENGTHS.get(s[:2]) != len(s):
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def card_ok(text: str) -> bool:
    """A payment card number: Luhn checksum, a known issuer prefix and a length it issues.

    Example::

        >>> card_ok("4111 1111 1111 1111"), card_ok("1234 5678 9012 3452")
        (True, False)
    """
    d = "".join(c for c in text if c.isdigit())
    n = len(d)
    if not luhn_ok(d):
        return False
    p2, p4 = int(d[:2]), int(d[:4])
    if d[0] == "4":  # Visa
        return n in (13, 16, 19)
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:  # Mastercard
        return n == 16
    if p2 in (34, 37):  # Amex
        return n == 15
    if p4 == 6011 or p2 == 65 or 644 <= int(d[:3]) <= 649:  # Discover
        return 16 <= n <= 19
    if p2 in (36, 38, 39) or 300 <= int(d[:3]) <= 305:  # Diners
        return 14 <= n <= 19
    if 3528 <= p4 <= 3589:  # JCB
        return 16 <= n <= 19
    if p2 == 62:  # UnionPay
        return 16 <= n <= 19
    if p2 in (50, 56, 57, 58) or p2 in (63, 67):  # Maestro
        return 12 <= n <= 19
    return False


def dni_ok(text: str) -> bool:
    """Spanish DNI / NIE: the check letter is ``TRWAGMYFPDXBNJZSQVHLCKE[number % 23]``.

    Example::

        >>> dni_ok("12345678Z"), dni_ok("X1234567L"), dni_ok("12345678A")
        (True, True, False)
    """
    s = _NON_ALNUM.sub("", text).upper()
    if s[0] in "XYZ":
        s = str("XYZ".index(s[0])) + s[1:]
    return s[:-1].isdigit() and _DNI_LETTERS[int(s[:-1]) % 23] == s[-1]


def bsn_ok(text: str) -> bool:
    """Dutch BSN: 9 digits passing the 11-test (weights 9..2 and -1).

    Example::

        >>> bsn_ok("BSN 111222333"), bsn_ok("BSN 111222334")
        (True, False)
    """
    d = [int(c) for c in text if c.isdigit()]
    if len(d) != 9 or (d[0] == 0 and d[1] == 0):
        return False
    total = sum(w * x for w, x in zip(range(9, 1, -1), d[:8], strict=True)) - d[8]
    return total % 11 == 0


def phone_ok(text: str) -> bool:
    """8 to 15 digits (E.164 allows 15), not a date.

    Example::

        >>> phone_ok("+44 20 7946 0958"), phone_ok("01/02/2024 1030")
        (True, False)
    """
    digits = sum(c.isdigit() for c in text)
    if not 8 <= digits <= 15:
        return False
    start = text.lstrip("(+ ")
    return _DATE.match(start) is None


def _ipv4_ok(text: str) -> bool:
    """Not this machine's own (loopback, unspecified): a service's address, nobody's data."""
    address = ipaddress.IPv4Address(text)
    return not (address.is_loopback or address.is_unspecified)


def _ipv6_ok(text: str) -> bool:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return False
    groups = [g for g in text.split(":") if g]
    # two real groups at least and a digit: "a::b", "dead::beef" or a C++ scope are not addresses
    return len(groups) >= 2 and any(c.isdigit() for c in text)


# where a number may start: not inside a word, a number, a version, a path or an id
_NUM_START = r"(?<![\w.+/#:\-])"
# where it must end: no word character, dash or digit group follows
_NUM_END = r"(?![\w\-]|[.,/:]\d)"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"

#: Personal data, scrubbed only with ``scrub_pii`` (the SDK's ``configure(scrub_pii=True)``, the
#: evaluator's ``online.scrub_pii`` / ``run.scrub_pii``). Order matters: the longer kinds first
#: (an IBAN or a card is never half-eaten by the phone rule).
PII_RULES: tuple[ScrubRule, ...] = (
    ScrubRule(
        "email",
        r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
        r"\.[A-Za-z]{2,}\b",
        separators="@",
    ),
    ScrubRule(
        "iban",
        r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])",
        check=iban_ok,
        min_digits=10,
    ),
    ScrubRule(
        "card_number",
        _NUM_START + r"\d(?:[ \-]?\d){12,18}" + _NUM_END,
        check=card_ok,
        min_digits=13,
    ),
    ScrubRule(
        "ssn",
        _NUM_START
        + r"(?!000|666|9\d\d)\d{3}(?:-(?!00)\d{2}-| (?!00)\d{2} )(?!0000)\d{4}"
        + _NUM_END,
        min_digits=9,
    ),
    ScrubRule(
        "national_id",
        r"(?<![A-Za-z0-9])(?:\d{8}|[XYZ]-?\d{7})-?[A-Z](?![A-Za-z0-9])",  # Spanish DNI / NIE
        check=dni_ok,
        min_digits=7,
    ),
    ScrubRule(
        "national_id",
        r"(?i:\b(?:bsn|burgerservicenummer)\b)[^\w\n]{0,3}(?P<v>\d{9})(?!\d)",  # Dutch BSN
        check=bsn_ok,
        min_digits=9,
        triggers=("bsn", "burgerservicenummer"),
    ),
    ScrubRule(
        "phone",
        _NUM_START
        + r"(?<!\d )(?:\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}"  # +CC and groups, "(0)" allowed
        # North American: an area code never starts with 0 or 1 ("101 101 2024" is no phone)
        r"|\([2-9]\d{2}\) ?\d{3}[ .\-]\d{4}"  # (555) 123-4567
        r"|[2-9]\d{2}([ .\-])\d{3}\1\d{4}"  # 555-123-4567, 555.123.4567
        r"|0\d{1,4}(?:[ \-/]\d{2,8}){1,4})"  # 020 7946 0958, 01 23 45 67 89, 0151/1234567
         + _NUM_END,
        check=phone_ok,
        min_digits=8,
    ),
    ScrubRule(
        "phone",
        # any digits after a phone word ("phone: 5551234567", "call me on 0044 20 7946 0958")
        r"(?i:\b(?:phone|tel|telephone|mobile|cell|call|fax|whatsapp|sms)\b)[^\d\n]{0,16}"
        r"(?P<v>\+?\d(?:[ .\-]?\d){7,14})" + _NUM_END,
        check=phone_ok,
        min_digits=8,
        triggers=("phone", "tel", "mobile", "cell", "call", "fax", "whatsapp", "sms"),
    ),
    ScrubRule(
        "ip_address",
        r"(?<![\w.:])(?<![vV])(?:" + _OCTET + r"\.){3}" + _OCTET + r"(?![\w.]|\.\d)",
        check=_ipv4_ok,
        min_digits=4,
        raw_triggers=(".",),
    ),
    ScrubRule(
        "ip_address",
        r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])",
        check=_ipv6_ok,
        separators=":",
        min_digits=1,
    ),
)
