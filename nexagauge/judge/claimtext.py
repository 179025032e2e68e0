"""Deterministic helpers for extracted claims: anchoring confidence and near-duplicate merging.

*Anchoring confidence* says how firmly a claim is rooted in the text it was extracted from: the
share of its content words found in its source chunk (words found only elsewhere in the output,
typically a name that replaced a pronoun, count 0.75). A claim the extractor paraphrased away from
or invented scores low. It is computed, not asked of the judge: self-reported LLM confidences are
poorly calibrated and would cost output tokens on every claim.

Example:
    >>> anchoring_confidence("The Eiffel Tower is in Paris.", "It is in Paris.",
    ...                      "The Eiffel Tower is famous. It is in Paris.")
    0.83
    >>> [c for c, _ in merge_near_duplicates([("Paris is in France.", 0.9),
    ...                                        ("Paris is in France", 0.7)])]
    ['Paris is in France.']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from nexagauge.text.stopwords import FUNCTION_WORDS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = FUNCTION_WORDS  # the words that tell two claims apart stay

#: Jaccard similarity of word sets at or above which two claims are the same claim
MERGE_SIMILARITY = 0.85


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


@lru_cache(maxsize=16384)
def _stem(w: str) -> str:
    # memoized: the same words recur in every claim, chunk and passage of a case
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def content_words(text: str) -> list[str]:
    return [_stem(w) for w in words(text) if w not in _STOP]


def anchoring_confidence(claim: str, chunk: str, whole: str) -> float:
    """Share of the claim's content words present in its chunk (0.75 if only elsewhere)."""
    return _anchoring(claim, set(content_words(chunk)), set(content_words(whole)))


class Anchoring:
    """:func:`anchoring_confidence` of many claims against the same chunks: the content words of
    each chunk and of the whole text are read once, not once per claim.

    Example:
        >>> a = Anchoring(["The Eiffel Tower is famous.", "It is in Paris."])
        >>> a.confidence("The Eiffel Tower is in Paris.", 1)
        0.83
    """

    def __init__(self, chunks: Sequence[str]) -> None:
        # a word never spans the newline that joins two chunks: the whole text's words are
        # the union of the chunks' words
        self._sets = [set(content_words(c)) for c in chunks]
        self._whole: set[str] = set().union(*self._sets)

    def confidence(self, claim: str, chunk: int) -> float:
        """The anchoring confidence of ``claim`` extracted from chunk number ``chunk``."""
        return _anchoring(claim, self._sets[chunk], self._whole)


def _anchoring(claim: str, in_chunk: set[str], in_whole: set[str]) -> float:
    cw = content_words(claim)
    if not cw:
        return 0.5  # nothing to anchor (e.g. "It is." ): neither trusted nor dismissed
    score = sum(1.0 if w in in_chunk else 0.75 if w in in_whole else 0.0 for w in cw)
    return round(score / len(cw), 2)


def _similar(a: set[str], b: set[str]) -> bool:
    if not a or not b:
        return a == b
    return len(a & b) / len(a | b) >= MERGE_SIMILARITY


def merge_near_duplicates(
    claims: Sequence[tuple[str, float]],
) -> list[tuple[str, float]]:
    """Drop claims nearly identical to an earlier one, keeping the first text and the highest
    confidence. Returns ``(text, confidence)`` in first-seen order with the index kept by caller.
    """
    return [(claims[i][0], conf) for i, conf in merge_indices(claims)]


def merge_indices(claims: Sequence[tuple[str, float]]) -> list[tuple[int, float]]:
    """Like :func:`merge_near_duplicates` but returns (index of the kept claim, confidence)."""
    kept: list[tuple[int, set[str], float]] = []
    for i, (text, conf) in enumerate(claims):
        ws = set(words(text))
        for j, (k, kws, kconf) in enumerate(kept):
            if _similar(ws, kws):
                kept[j] = (k, kws, max(kconf, conf))
                break
        else:
            kept.append((i, ws, conf))
    return [(i, conf) for i, _, conf in kept]
