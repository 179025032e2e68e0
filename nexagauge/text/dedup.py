"""Bounded, deterministic near-duplicate detection for a sequence of texts (the refiner).

Each text is reduced to its comparison form: its lower-cased words (without apostrophes) joined
by single spaces
(:func:`~nexagauge.text.normalize.words`; punctuation, case and spacing differences vanish), or
the normalized text (:func:`~nexagauge.text.normalize.normalize_text`) when it has no words. Then

1. **exact**: texts with the same comparison form are duplicates (similarity 1.0); a hash map
   over *all* kept texts makes this O(1) per text;
2. **near**: the set of character ``SHINGLE``-grams of the comparison form is compared by Jaccard
   similarity with the kept texts; similarity >= ``threshold`` marks a duplicate.

Bounds (so a pathological output cannot make the refiner quadratic):

- each text is compared with at most ``window`` (default :data:`WINDOW` = 128) most recently
  kept texts, so the work is O(n * window) comparisons for n texts;
- each shingle set is reduced to a bottom-``SKETCH`` sketch (the :data:`SKETCH` = 512 smallest
  64-bit shingle hashes). For texts with at most 512 distinct shingles (every chunk within the
  default 128-token budget) the Jaccard similarity is exact; for larger ones it is the standard
  bottom-k estimate. One comparison is therefore O(SKETCH);
- a size filter skips pairs whose sketch sizes alone rule out the threshold.

Deterministic: hashes are blake2b (not Python's salted ``hash``), texts are processed in order,
the first occurrence is kept, and a duplicate points to the kept text with the highest similarity
(earliest on ties).

Example:
    >>> find_duplicates(["Paris is in France.", "PARIS  is in France.", "Rome is in Italy."], 0.9)
    [Duplicate(index=1, duplicate_of=0, similarity=1.0, method='exact')]
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass

from nexagauge.text.normalize import normalize_text, words

#: Character shingle length.
SHINGLE = 5
#: Bottom-k sketch size (exact Jaccard below this many distinct shingles).
SKETCH = 512
#: Maximum number of kept texts a new text is compared with.
WINDOW = 128


@dataclass(frozen=True)
class Duplicate:
    """Text ``index`` duplicates the kept text ``duplicate_of`` (both positions in the input)."""

    index: int
    duplicate_of: int
    similarity: float
    method: str  # "exact" | "shingle_jaccard"


@dataclass(frozen=True)
class _Sketch:
    hashes: frozenset[int]
    top: int  # the largest hash kept (meaningful when truncated)
    truncated: bool


def comparison_form(text: str) -> str:
    """Lower-cased words (apostrophes removed) joined by spaces, or the normalized text when it
    has no words.

    Example:
        >>> comparison_form("The World's Fair -- in PARIS!")
        'the worlds fair in paris'
    """
    return " ".join(w.replace("'", "") for w in words(text)) or normalize_text(text)


def _h64(s: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    )


def sketch(normalized: str, k: int = SHINGLE, size: int = SKETCH) -> _Sketch:
    """Bottom-``size`` sketch of the character ``k``-shingles of a normalized text."""
    if len(normalized) <= k:
        grams = {normalized}
    else:
        grams = {normalized[i : i + k] for i in range(len(normalized) - k + 1)}
    hashes = {_h64(g) for g in grams}
    if len(hashes) > size:
        kept = heapq.nsmallest(size, hashes)
        return _Sketch(frozenset(kept), kept[-1], True)
    return _Sketch(frozenset(hashes), max(hashes), False)


def jaccard(a: _Sketch, b: _Sketch, size: int = SKETCH) -> float:
    """Jaccard similarity of two shingle sets (exact when neither sketch is truncated).

    Example:
        >>> round(jaccard(sketch("abcdef"), sketch("abcdeg")), 3)  # {abcde,bcdef} vs {abcde,bcdeg}
        0.333
    """
    if not a.truncated and not b.truncated:
        inter = len(a.hashes & b.hashes)
        return inter / (len(a.hashes) + len(b.hashes) - inter)
    # bottom-k estimator: the `size` smallest hashes of the union, and how many lie in both sets.
    # Membership is exact from the sketches: a union hash among the `size` smallest that belongs
    # to A is necessarily among A's `size` smallest.
    union = heapq.nsmallest(size, a.hashes | b.hashes)
    both = sum(1 for h in union if h in a.hashes and h in b.hashes)
    return both / len(union)


def find_duplicates(
    texts: list[str], threshold: float, *, window: int = WINDOW, shingle: int = SHINGLE
) -> list[Duplicate]:
    """Near-duplicates among ``texts`` in order; the first occurrence of each group is kept.

    ``threshold`` in (0, 1]: minimum Jaccard similarity of character shingles to call two texts
    duplicates (1.0: only texts whose shingle sets are identical, plus exact normalized matches).

    Example:
        >>> find_duplicates(["a b c", "x y z"], 0.9)
        []
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out: list[Duplicate] = []
    exact: dict[str, int] = {}
    kept: list[tuple[int, _Sketch]] = []  # (input index, sketch), in input order
    for i, text in enumerate(texts):
        norm = comparison_form(text)
        first = exact.get(norm)
        if first is not None:
            out.append(Duplicate(i, first, 1.0, "exact"))
            continue
        sk = sketch(norm, shingle)
        best_j, best_sim = -1, -1.0
        for j, other in kept[-window:]:
            small, large = sorted((len(sk.hashes), len(other.hashes)))
            if not sk.truncated and not other.truncated and small < threshold * large:
                continue  # |A and B| / |A or B| <= min / max < threshold
            sim = jaccard(sk, other)
            if sim >= threshold and sim > best_sim:
                best_j, best_sim = j, sim
        if best_j >= 0:
            out.append(Duplicate(i, best_j, round(best_sim, 6), "shingle_jaccard"))
            continue
        exact[norm] = i
        kept.append((i, sk))
    return out
