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
  CRC-32 shingle hashes). For texts with at most 512 distinct shingles (every chunk within the
  default 128-token budget) the Jaccard similarity is exact; for larger ones it is the standard
  bottom-k estimate. One comparison is therefore O(SKETCH);
- candidates are found with a prefix filter (an inverted index over each kept text's smallest
  ``|A| - ceil(t * |A|) + 1`` shingle hashes; exact: a pair at or above the threshold always
  shares one), and a size filter skips pairs whose sizes alone rule out the threshold; texts
  with truncated sketches are always compared (within the window).

Deterministic: hashes are CRC-32 (not Python's salted ``hash``), texts are processed in order,
the first occurrence is kept, and a duplicate points to the kept text with the highest similarity
(earliest on ties).

Example:
    >>> find_duplicates(["Paris is in France.", "PARIS  is in France.", "Rome is in Italy."], 0.9)
    [Duplicate(index=1, duplicate_of=0, similarity=1.0, method='exact')]
"""

from __future__ import annotations

import heapq
import math
import zlib
from collections.abc import Iterable
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


def _h32(s: str) -> int:
    # CRC-32: deterministic across processes (unlike the salted built-in hash) and ~7x faster
    # than a cryptographic hash; a spurious collision between two 500-shingle sets has
    # probability ~6e-5 and can only nudge a similarity up by 1/|A or B|.
    return zlib.crc32(s.encode("utf-8", "surrogatepass"))


def sketch(normalized: str, k: int = SHINGLE, size: int = SKETCH) -> _Sketch:
    """Bottom-``size`` sketch of the character ``k``-shingles of a normalized text."""
    if len(normalized) <= k:
        hashes = {_h32(normalized)}
    elif normalized.isascii():
        # one byte per character: the byte k-grams are the character k-grams' UTF-8 encodings,
        # so each hash is _h32 of the shingle, without a str slice and an encode per shingle
        b = normalized.encode("ascii")
        crc = zlib.crc32
        hashes = {crc(b[i : i + k]) for i in range(len(b) - k + 1)}
    else:
        grams = {normalized[i : i + k] for i in range(len(normalized) - k + 1)}
        hashes = {_h32(g) for g in grams}
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


def _prefix(sk: _Sketch, threshold: float) -> list[int]:
    """The prefix-filter tokens of an exact (untruncated) shingle set.

    If J(A, B) >= t then |A & B| >= ceil(t * max(|A|, |B|)) = alpha, and under one global order
    of hashes the first |A| - alpha + 1 elements of A and the first |B| - alpha + 1 of B must
    share an element (prefix filtering, as in set-similarity joins). Using each set's own
    ``ceil(t * |X|)`` gives prefixes at least that long, so no pair above the threshold is missed.
    """
    n = len(sk.hashes)
    alpha = max(1, math.ceil(threshold * n - 1e-9))
    return sorted(sk.hashes)[: n - alpha + 1]


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
    prefix_index: dict[int, list[int]] = {}  # shingle hash -> positions in `kept`
    truncated: list[int] = []  # positions in `kept` of truncated sketches (not prefix-indexed)
    for i, text in enumerate(texts):
        norm = comparison_form(text)
        first = exact.get(norm)
        if first is not None:
            out.append(Duplicate(i, first, 1.0, "exact"))
            continue
        sk = sketch(norm, shingle)
        lo = max(0, len(kept) - window)  # only the last `window` kept texts are candidates
        if sk.truncated:
            candidates: Iterable[int] = range(lo, len(kept))
        else:
            found = {pos for h in _prefix(sk, threshold) for pos in prefix_index.get(h, ())}
            found.update(truncated)
            candidates = sorted(pos for pos in found if pos >= lo)
        best_j, best_sim = -1, -1.0
        for pos in candidates:
            j, other = kept[pos]
            a_n, b_n = len(sk.hashes), len(other.hashes)
            if (
                not sk.truncated
                and not other.truncated
                and min(a_n, b_n) < threshold * max(a_n, b_n)
            ):
                continue  # |A and B| / |A or B| <= min / max < threshold
            sim = jaccard(sk, other)
            if sim >= threshold and sim > best_sim:
                best_j, best_sim = j, sim
        if best_j >= 0:
            out.append(Duplicate(i, best_j, round(best_sim, 6), "shingle_jaccard"))
            continue
        exact[norm] = i
        if sk.truncated:
            truncated.append(len(kept))
        else:
            for h in _prefix(sk, threshold):
                prefix_index.setdefault(h, []).append(len(kept))
        kept.append((i, sk))
    return out
