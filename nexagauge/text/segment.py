"""Token-aware chunking of a text into spans of the original string.

:func:`chunk_spans` splits a text into ``(start, end)`` character spans such that

1. every non-whitespace character lies in exactly one span (nothing is dropped); what lies
   between two spans (and before the first / after the last) is whitespace only;
2. each span is trimmed (starts and ends with a non-whitespace character), spans are in order
   and do not overlap;
3. no span has more than ``max_tokens`` cl100k tokens, unless it is a single unsplittable word;
4. spans never end inside a word.

Boundaries are preferred from coarse to fine, like a recursive text splitter: paragraphs (blank
lines), then lines, then sentences, then words (whitespace), and as a last resort the boundary
next to an East Asian wide character (CJK scripts are written without spaces). At each level, consecutive pieces
are packed greedily into one chunk while the packed text stays within the budget; a piece that
alone exceeds the budget is split at the next finer level. Packing never crosses the boundary
of a coarser piece that had to be split, so a chunk never straddles a paragraph that was too long.

Token counts are exact: candidate chunks are estimated from their pieces' counts and then
verified by counting the chunk text itself (cl100k BPE is not exactly additive across pieces).

Example:
    >>> text = "First sentence here. Second one follows.\\n\\nA new paragraph."
    >>> [text[s:e] for s, e in chunk_spans(text, max_tokens=8)]
    ['First sentence here. Second one follows.', 'A new paragraph.']
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable

from nexagauge.text.sentences import MONTHS, sentence_cuts
from nexagauge.text.tokens import count_tokens

Span = tuple[int, int]

_PARAGRAPH_SEP = re.compile(r"[^\S\n]*\n[^\S\n]*\n\s*")
_LINE_SEP = re.compile(r"[^\S\n]*\n\s*")
_WORD_SEP = re.compile(r"\s+")
# a sentence ends with terminal punctuation, optional closing quotes/brackets, then whitespace
# (Latin) or nothing (CJK full-width terminators).
_SENTENCE_END = re.compile(
    r"(?P<term>[.!?\u2026]+|[\u3002\uff01\uff1f]+)"
    r"[\"'\u2019\u201d)\]\u300d\u300f]*"
    r"(?P<ws>\s*)"
)
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "cf",
        "fig",
        "no",
        "nos",
        "inc",
        "ltd",
        "co",
        "corp",
        "approx",
        "dept",
        "est",
        "al",
    ]
).union(MONTHS)


def _wide(c: str) -> bool:
    """East Asian wide/full-width characters (CJK ideographs, kana, Hangul, CJK punctuation,
    emoji): scripts written without spaces, where a cut next to the character is not inside a
    word."""
    return unicodedata.east_asian_width(c) in ("W", "F")


def _trimmed(text: str, s: int, e: int) -> Span | None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return (s, e) if s < e else None


def _pieces(text: str, s: int, e: int, cuts: Iterable[Span]) -> list[Span]:
    """Trimmed, non-empty pieces of ``text[s:e]`` between the separator spans ``cuts``."""
    out: list[Span] = []
    pos = s
    for cs, ce in cuts:
        p = _trimmed(text, pos, cs)
        if p is not None:
            out.append(p)
        pos = ce
    p = _trimmed(text, pos, e)
    if p is not None:
        out.append(p)
    return out


def _split_regex(sep: re.Pattern[str]) -> Callable[[str, int, int], list[Span]]:
    def split(text: str, s: int, e: int) -> list[Span]:
        return _pieces(text, s, e, (m.span() for m in sep.finditer(text, s, e)))

    return split


def _is_abbreviation(text: str, s: int, term_start: int) -> bool:
    """Whether the period at ``term_start`` ends an abbreviation/initial ("Dr.", "U.S.", "e.g.")."""
    i = term_start
    while i > s and not text[i - 1].isspace():
        i -= 1
    word = text[i:term_start].lstrip("\"'(\u201c\u2018[").casefold()
    if not word:
        return False
    if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return True
    # dotted abbreviations such as "u.s" or "e.g" (the final period is the terminator)
    return "." in word and all(len(p) <= 2 for p in word.split("."))


def _split_sentences(text: str, s: int, e: int) -> list[Span]:
    def ends_sentence(m: re.Match[str]) -> bool:
        term = m.group("term")
        if term[0] not in "\u3002\uff01\uff1f" and not m.group("ws"):
            return False  # "3.14", "example.com": no whitespace after the period
        return not (term == "." and _is_abbreviation(text, s, m.start("term")))

    return _pieces(text, s, e, sentence_cuts(text, s, e, _SENTENCE_END, ends_sentence))


def _split_cjk(text: str, s: int, e: int) -> list[Span]:
    """Cut between two characters when either is wide (CJK scripts have no spaces)."""
    cuts: list[Span] = []
    for i in range(s + 1, e):
        a, b = text[i - 1], text[i]
        if a.isspace() or b.isspace():
            continue
        if _wide(a) or _wide(b):
            cuts.append((i, i))
    return _pieces(text, s, e, cuts)


#: Boundary levels, coarse to fine.
LEVELS: tuple[tuple[str, Callable[[str, int, int], list[Span]]], ...] = (
    ("paragraph", _split_regex(_PARAGRAPH_SEP)),
    ("line", _split_regex(_LINE_SEP)),
    ("sentence", _split_sentences),
    ("word", _split_regex(_WORD_SEP)),
    ("cjk", _split_cjk),
)


def _gap_estimate(text: str, a: Span, b: Span) -> int:
    # spaces attach to the next word in cl100k; newlines are tokens of their own
    return 1 if "\n" in text[a[1] : b[0]] else 0


def _pack(text: str, parts: list[Span], max_tokens: int) -> list[tuple[int, int, int]]:
    """Greedy packing of consecutive parts: ``(first, last, tokens)`` per group.

    A group of one part may exceed the budget (the caller splits it further); a group of two or
    more parts never does (verified by counting the group's own text).
    """
    counts = [count_tokens(text[ps:pe]) for ps, pe in parts]
    groups: list[tuple[int, int, int]] = []
    n = len(parts)
    i = 0
    while i < n:
        if counts[i] > max_tokens:
            groups.append((i, i, counts[i]))
            i += 1
            continue
        j, est = i, counts[i]
        while j + 1 < n:
            nxt = est + _gap_estimate(text, parts[j], parts[j + 1]) + counts[j + 1]
            if counts[j + 1] > max_tokens or nxt > max_tokens:
                break
            j, est = j + 1, nxt
        exact = counts[i] if j == i else count_tokens(text[parts[i][0] : parts[j][1]])
        while exact > max_tokens and j > i:  # estimate was optimistic: back off
            j -= 1
            exact = counts[i] if j == i else count_tokens(text[parts[i][0] : parts[j][1]])
        groups.append((i, j, exact))
        i = j + 1
    return groups


def _split(text: str, span: Span, level: int, max_tokens: int, out: list[Span]) -> None:
    s, e = span
    while level < len(LEVELS):
        parts = LEVELS[level][1](text, s, e)
        if len(parts) > 1:
            break
        level += 1
    else:
        out.append(span)  # a single unsplittable word: allowed to exceed the budget
        return
    for first, last, tokens in _pack(text, parts, max_tokens):
        group = (parts[first][0], parts[last][1])
        if tokens > max_tokens:  # only a single part can be over budget
            _split(text, group, level + 1, max_tokens, out)
        else:
            out.append(group)


def chunk_spans(text: str, max_tokens: int) -> list[Span]:
    """Split ``text`` into trimmed ``(start, end)`` spans of at most ``max_tokens`` tokens.

    See the module docstring for the guarantees. Whitespace-only text gives ``[]``.

    Example:
        >>> chunk_spans("  Paris.  ", max_tokens=128)
        [(2, 8)]
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    whole = _trimmed(text, 0, len(text))
    if whole is None:
        return []
    if count_tokens(text[whole[0] : whole[1]]) <= max_tokens:
        return [whole]
    out: list[Span] = []
    _split(text, whole, 0, max_tokens, out)
    return out
