"""Lexical analysis for the local judge: numbers, names, negation and content words (stdlib only).

Everything here is deterministic and self-contained: no lexicon is read from the host (an
optional system WordNet once made verdicts depend on which Debian packages were installed), so
the same text gets the same features on every machine. The word lists below *are* the judge's
lexicon; :data:`LEXICON` names their version and goes into every result's provenance.

Example:
    >>> sorted(numbers("six minutes, 1,332 km")), entities("The tower is in Lyon."), negation_count("not now")
    (['1332', '6'], ['Lyon'], 1)
"""

from __future__ import annotations

import re

from nexagauge.text.stopwords import FUNCTION_WORDS, wordset

#: version of the built-in word lists (stop words: the English function words of
#: :mod:`nexagauge.text.stopwords` plus the additions below, negations, number words, hedges);
#: recorded in results as ``lexicon``
LEXICON = "builtin.v2"


_STOP = (
    FUNCTION_WORDS
    | wordset(  # the lexicon's own additions (v1)
        """
    without within onto above below after before during between among through across per via
    am doing done having must shall it's him us mine each every most more less many much few
    other such same own only too nor never none up down out off again further once both either
    neither one's let lets get gets got make makes made use used using like e.g i.e etc vs
    """
    )
    | wordset(  # discourse and light words that carry no checkable content (lexicon v2)
        """yes yeah okay ok since because while though although still yet even instead rather
    whether however therefore thus already now until unless whichever whenever wherever
    whatever anyway actually really quite around else means mean meaning go goes going"""
    )
)
_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nothing",
        "nobody",
        "nowhere",
        "neither",
        "nor",
        "cannot",
        "n't",
    ]
)
_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "dozen": 12,
}
_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
_HEDGES = frozenset(
    [
        "about",
        "approximately",
        "approx",
        "around",
        "roughly",
        "nearly",
        "almost",
        "some",
        "circa",
        "ca",
        "estimated",
    ]
)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[.,'\u2019][A-Za-z0-9]+)*")
_NUM = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d,]*\d)(?!(?:st|nd|rd|th)\b)")
_AND_A_HALF = re.compile(r"\b(\w+) and a half\b", re.IGNORECASE)


def _canon(x: float) -> str:
    return f"{x:.6g}"


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.replace("\u2019", "'"))


def numbers(text: str) -> set[str]:
    """Canonical numbers mentioned in ``text`` (digits, thousands separators, number words).

    Example:
        >>> sorted(numbers("one and a half cups, 1,332 km, six minutes, 2.50 USD"))
        ['1.5', '1332', '2.5', '6']
    """
    out: set[str] = set()
    consumed: list[tuple[int, int]] = []
    for m in _AND_A_HALF.finditer(text):
        w = m.group(1).lower()
        base = _NUMBER_WORDS.get(w)
        if base is None and w.isdigit():
            base = int(w)
        if base is not None:
            out.add(_canon(base + 0.5))
            consumed.append(m.span())
    for m in _NUM.finditer(text):
        if any(a <= m.start() < b for a, b in consumed):
            continue
        whole = m.group(1).replace(",", "")
        frac = m.group(2) or ""
        out.add(_canon(float(whole + frac)))
    for m in re.finditer(r"[A-Za-z]+", text):
        if any(a <= m.start() < b for a, b in consumed):
            continue
        w = m.group(0).lower()
        if w in _NUMBER_WORDS and w not in {"hundred", "dozen"}:
            # "one" as a pronoun ("the one who") is rare in factual claims; accepted
            out.add(_canon(_NUMBER_WORDS[w]))
        elif w in _ORDINALS:
            out.add(f"#{_ORDINALS[w]}")  # "third-last" vs "second-last"
    for m in re.finditer(r"\b(\d+)(?:st|nd|rd|th)\b", text):
        out.add(f"#{int(m.group(1))}")
    return out


def _number_supported(n: str, evidence: set[str], hedged: bool) -> bool:
    if n in evidence:
        return True
    if not hedged or n.startswith("#"):
        return False
    x = float(n)
    for e in evidence:
        if e.startswith("#"):
            continue
        y = float(e)
        if y == 0 or x == 0:
            continue
        # a hedged claim may round the evidence ("about 40" for 39, "about 9.5" for 9.46)
        for k in range(-3, 7):
            if round(y, -k) == x and abs(x - y) / abs(y) < 0.1:
                return True
    return False


def _stem(w: str) -> str:
    w = w.lower().replace("'", "")
    for suf, rep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: len(w) - len(suf)] + rep
    return w


def _word_in(w: str, stems: set[str]) -> bool:
    s = _stem(w)
    if s in stems:
        return True
    if len(s) >= 5:
        return any(len(t) >= 5 and (t.startswith(s[:5]) and s.startswith(t[:5])) for t in stems)
    return False


def content_words(text: str) -> list[str]:
    """Words that carry content: not stopwords, not pure numbers, at least 2 characters.

    Example:
        >>> content_words("The tower is 330 metres tall.")
        ['tower', 'metres', 'tall']
    """
    out = []
    for t in _tokens(text):
        lw = t.lower()
        base, _, tail = lw.partition("'")
        if (
            lw in _STOP
            or (tail and (base in _STOP or tail == "t"))  # "you're", "won't": no content
            or lw in _NEGATIONS
            or len(lw) < 2
            or lw.replace(",", "").replace(".", "").isdigit()
        ):
            continue
        if lw in _NUMBER_WORDS or lw in _ORDINALS:
            continue
        out.append(lw)
    return out


_AFTER_NUMBER = re.compile(r"\d\s*°?\s*$")


def entities(text: str) -> list[str]:
    """Capitalised names that are not sentence-initial (``Lyon``, ``Boots``, ``NVMe``).

    Example:
        >>> entities("The tower in Lyon was built by Gustave Eiffel.")
        ['Lyon', 'Gustave', 'Eiffel']
        >>> entities("Keep it below 38 °C and add 4.2 L of oil.")  # unit symbols are no names
        []
    """
    out: list[str] = []
    toks = list(re.finditer(r"[A-Za-z][A-Za-z0-9'\u2019-]*", text))
    for i, m in enumerate(toks):
        t = m.group(0)
        if i == 0:
            continue
        prev_end = text[toks[i - 1].end() : m.start()]
        if re.search(r"[.!?:]\s*$", prev_end):  # sentence-initial after punctuation
            continue
        if len(t) <= 2 and _AFTER_NUMBER.search(text, 0, m.start()):  # a unit: 4.2 L, 38 °C
            continue
        if t[0].isupper() or (any(c.isupper() for c in t[1:]) and t.lower() not in _STOP):
            if t.lower() in _STOP:
                continue
            out.append(t.rstrip("'\u2019-"))
    return out


def negation_count(text: str) -> int:
    """Number of negation markers (``not``, ``never``, ``n't`` ...).

    Example:
        >>> negation_count("It is not open and they don't know.")
        2
    """
    t = text.lower().replace("\u2019", "'")
    n = len(re.findall(r"n't\b", t))
    n += sum(1 for w in re.findall(r"[a-z]+", t.replace("n't", " ")) if w in _NEGATIONS)
    return n


# --------------------------------------------------------------------------------------------
# Quantities with units ("25 mm" = "2.5 cm", "three days" = "72 hours")
# --------------------------------------------------------------------------------------------
_UNITS: dict[str, tuple[str, float]] = {}
for _names, _dim, _factor in (
    ("mm millimetre millimetres millimeter millimeters", "length", 1e-3),
    ("cm centimetre centimetres centimeter centimeters", "length", 1e-2),
    ("m metre metres meter meters", "length", 1.0),
    ("km kilometre kilometres kilometer kilometers", "length", 1e3),
    ("mile miles", "length", 1609.344),
    ("mg milligram milligrams", "mass", 1e-3),
    ("g gram grams", "mass", 1.0),
    ("kg kilogram kilograms kilo kilos", "mass", 1e3),
    ("s sec secs second seconds", "time", 1.0),
    ("min mins minute minutes", "time", 60.0),
    ("h hr hrs hour hours", "time", 3600.0),
    ("day days", "time", 86400.0),
    ("week weeks", "time", 604800.0),
    ("fortnight fortnights", "time", 1209600.0),
    ("month months", "time", 2629800.0),
    ("year years", "time", 31557600.0),
    ("% percent", "percent", 1.0),
    ("ml millilitre millilitres milliliter milliliters", "volume", 1e-3),
    ("l litre litres liter liters", "volume", 1.0),
):
    for _n in _names.split():
        _UNITS[_n] = (_dim, _factor)
_PER_TIME = {"s": 1.0, "sec": 1.0, "second": 1.0, "h": 3600.0, "hr": 3600.0, "hour": 3600.0}
_QNUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|" + "|".join(
    sorted([*_NUMBER_WORDS, "a", "an", "half"], key=len, reverse=True)
)
_QUANTITY = re.compile(
    rf"(?<![\w.])({_QNUM})(?:\s+and\s+a\s+half)?[\s-]*(per\s*cent|%|(?:"
    + "|".join(sorted((u for u in _UNITS if u != "%"), key=len, reverse=True))
    + r")\b)"
    r"(?:\s*(?:/|per|each|every|a|an)\s*(s|sec|second|h|hr|hour)\b)?",
    re.IGNORECASE,
)


def _qvalue(tok: str) -> float | None:
    t = tok.lower().replace(",", "")
    if t in ("a", "an"):
        return 1.0
    if t == "half":
        return 0.5
    if t in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[t])
    try:
        return float(t)
    except ValueError:
        return None


def quantities(text: str) -> list[tuple[str, float, str]]:
    """``(number as written, value in base units, dimension)`` for every number with a unit.

    Base units: metres, grams, seconds, litres, percent; ``km each second`` is a speed.

    Example:
        >>> [(n, round(v, 3), d) for n, v, d in quantities("2.5 cm deep, for three days")]
        [('2.5', 0.025, 'length'), ('three', 259200.0, 'time')]
    """
    out: list[tuple[str, float, str]] = []
    for m in _QUANTITY.finditer(text):
        raw, unit, per = m.group(1), m.group(2).lower().replace(" ", ""), m.group(3)
        value = _qvalue(raw)
        if unit == "percent" or unit == "%":
            unit = "%"
        if value is None or unit not in _UNITS:
            continue
        if "and a half" in m.group(0).lower():
            value += 0.5
        dim, factor = _UNITS[unit]
        v = value * factor
        if per is not None and dim == "length":
            dim, v = "speed", v / _PER_TIME[per.lower()]
        out.append((raw, v, dim))
    return out


def quantity_supported(raw: str, claim: str, evidence: str, hedged: bool) -> bool:
    """Whether the claim's number ``raw`` is, with its unit, a quantity of the evidence after
    unit conversion (1% tolerance; 10% when the claim is hedged).

    Example:
        >>> quantity_supported("25", "Set it 25 mm deep.", "Plant it 2.5 cm deep.", False)
        True
    """
    mine = [(v, d) for r, v, d in quantities(claim) if _canon_raw(r) == _canon_raw(raw)]
    if not mine:
        return False
    tol = 0.1 if hedged else 0.01
    theirs = quantities(evidence)
    return any(
        d == d2 and v2 != 0 and abs(v - v2) / abs(v2) <= tol
        for v, d in mine
        for _, v2, d2 in theirs
    )


def _canon_raw(raw: str) -> str:
    v = _qvalue(raw)
    return _canon(v) if v is not None else raw.lower()
