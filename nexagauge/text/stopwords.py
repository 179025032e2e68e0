"""English function words: the one stop-word list the judges build on (stdlib only).

:data:`FUNCTION_WORDS` are the articles, pronouns, auxiliaries, prepositions, conjunctions and
question words that carry no claim of their own. Claim anchoring and merging
(:mod:`nexagauge.judge.claimtext`) ignore exactly these; the local judge's lexicon
(:mod:`nexagauge.judge.local.lexical`) extends them with its own, versioned additions
(quantifiers, light verbs, discourse words), which is a different purpose: a word such as "more"
or "never" is no checkable content for the local judge, but it tells two claims apart.

Example:
    >>> sorted(wordset(" the  a an ")), "the" in FUNCTION_WORDS, "tower" in FUNCTION_WORDS
    (['a', 'an', 'the'], True, False)
"""

from __future__ import annotations

__all__ = ["FUNCTION_WORDS", "wordset"]


def wordset(text: str) -> frozenset[str]:
    """A word list written as whitespace-separated text (easier to read and review)."""
    return frozenset(text.split())


FUNCTION_WORDS = wordset(
    """
    a an the and or but if then than so of in on at to for from by with into over under about
    as is are was were be been being do does did has have had can could may might will would
    should it its this that these those there here he she his her they them their we our you
    your i me my what which who whom whose when where why how all any some not no very also just
    """
)
