"""Grounding cues of the local judge for contradictions that share almost every word with the
evidence (stdlib only, built-in word lists).

Embedding similarity cannot tell "prices rose" from "prices fell": the two sentences are nearly
the same vector. :func:`antonym_conflicts` finds a word of the claim whose antonym stands in the
evidence where the word itself does not ("faster"/"slower", "allowed"/"banned");
:func:`overgeneralises` finds a claim that turns a qualified statement into a universal one
("every" where the evidence says "usually").

Example:
    >>> antonym_conflicts("The new engine is faster.", "The new engine is slower than the old one.")
    ['faster']
    >>> overgeneralises("Every shop opens at 8.", "Most shops usually open at 8.")
    True
"""

from __future__ import annotations

import re

from nexagauge.judge.local.cues import _words

_ANTONYMS: tuple[tuple[str, str], ...] = (
    ("increase", "decrease"), ("increases", "decreases"), ("more", "less"), ("more", "fewer"),
    ("faster", "slower"), ("quickly", "slowly"), ("higher", "lower"), ("before", "after"),
    ("above", "below"), ("over", "under"), ("allowed", "prohibited"), ("allowed", "forbidden"),
    ("allowed", "banned"), ("required", "optional"), ("always", "never"), ("warmer", "colder"),
    ("warm", "cold"), ("hot", "cold"), ("larger", "smaller"), ("bigger", "smaller"),
    ("longer", "shorter"), ("inside", "outside"), ("accepted", "rejected"), ("open", "closed"),
    ("first", "last"), ("minimum", "maximum"), ("north", "south"), ("east", "west"),
    ("sour", "mild"), ("stronger", "weaker"), ("up", "down"), ("rises", "falls"),
    ("rise", "fall"), ("gain", "lose"), ("gains", "loses"), ("early", "late"),
    ("earlier", "later"), ("cheaper", "dearer"), ("cheaper", "more expensive"),
    ("safe", "dangerous"), ("legal", "illegal"), ("outer", "central"), ("outer", "inner"),
    ("atlantic", "pacific"), ("end", "start"), ("beginning", "end"), ("top", "bottom"),
    ("mandatory", "optional"), ("with", "without"), ("plus", "minus"), ("win", "lose"),
    ("won", "lost"), ("add", "remove"), ("heavier", "lighter"), ("wet", "dry"),
    ("sooner", "later"), ("same", "different"), ("odd", "even"), ("down", "up"),
)  # fmt: skip
_ANTONYM_OF: dict[str, set[str]] = {}
for _a, _b in _ANTONYMS:
    _ANTONYM_OF.setdefault(_a, set()).add(_b)
    _ANTONYM_OF.setdefault(_b, set()).add(_a)


def antonym_conflicts(claim: str, evidence: str) -> list[str]:
    """Claim words whose opposite is in the evidence while they are not ("slower" vs "faster").

    Example:
        >>> antonym_conflicts("Sound is slower in steel.", "Sound is faster in steel.")
        ['slower']
    """
    ev = set(_words(evidence))
    cw = set(_words(claim))
    return [w for w in dict.fromkeys(_words(claim))
            if w in _ANTONYM_OF and w not in ev and _ANTONYM_OF[w] & ev - cw]  # fmt: skip


_UNIVERSAL = frozenset(
    [
        "every",
        "everyone",
        "everybody",
        "everything",
        "all",
        "always",
        "never",
        "any",
        "none",
        "only",
        "completely",
        "entirely",
        "guaranteed",
        "certainly",
        "definitely",
        "whatever",
        "however",
    ]
)
_QUALIFIED = re.compile(
    r"\b(?:usually|often|may|might|can|some|common|commonly|many|most|typically|generally"
    r"|sometimes|if|unless|where|likely|unlikely|above|over|only|up to|at most|at least)\b",
    re.I,
)


def overgeneralises(claim: str, evidence: str) -> bool:
    """The claim makes a universal statement ("every", "always") the evidence does not make,
    and the evidence is qualified ("usually", "if", "above 500 euros").

    Example:
        >>> overgeneralises("Every claim needs a director.", "Claims above 500 euros need a director.")
        True
    """
    ev = set(_words(evidence))
    added = {w for w in _words(claim) if w in _UNIVERSAL} - ev
    return bool(added) and bool(_QUALIFIED.search(evidence))
