"""Sentence segmentation for the local judge (claims) and refalign (units); stdlib only.

Rules, in order:

1. **Blocks.** The text is cut into blocks at blank lines, headings (``# ...``) and list items
   (``-``, ``*``, ``+``, ``•``, ``1.``, ``1)``, ``a)``, ``(iv)``): every list item is its own block
   and its marker is not part of the unit. Other consecutive lines are one paragraph (soft wraps
   are joined), unless a line already ends a sentence or with ``:``.
2. **Sentences.** Inside a block a boundary is ``.``, ``!``, ``?``, ``…`` (repeats allowed, then
   optional closing quotes/brackets), followed by whitespace and a character that is not
   lower-case. No boundary after

   - a title or Latin abbreviation (``Dr.``, ``Mr.``, ``e.g.``, ``i.e.``, ``vs.``, ``approx.``,
     ``Fig.``, ``St.``), or ``No.``/month abbreviations followed by a number;
   - a single initial (``J. K. Rowling``), or an ambiguous abbreviation (``Inc.``, ``etc.``,
     ``U.S.``, ``a.m.``) unless the next word is a common sentence opener (``The``, ``It``, ...);
   - a number inside a decimal (``3.14`` has no space) or a version, URL or e-mail (no space).

Every unit keeps ``start``/``end`` offsets into the original text.

Example:
    >>> [s.text for s in split_sentences("Dr. Smith paid $3.50 at 9 a.m. on Jan. 5. It rained!")]
    ['Dr. Smith paid $3.50 at 9 a.m. on Jan. 5.', 'It rained!']
    >>> sentences("Steps:\\n1. Preheat the oven.\\n2. Bake for 20 min.")
    ['Steps:', 'Preheat the oven.', 'Bake for 20 min.']
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MONTHS", "Span", "sentence_cuts", "sentences", "split_sentences"]


@dataclass(frozen=True)
class Span:
    """One unit of text with its character offsets in the source string."""

    text: str
    start: int
    end: int


# Titles and Latin abbreviations that (almost) never end a sentence.
_ALWAYS_ABBREV = {
    "mr",
    "mrs",
    "ms",
    "mx",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "mt",
    "ft",
    "gen",
    "col",
    "capt",
    "lt",
    "sgt",
    "cmdr",
    "adm",
    "rev",
    "hon",
    "pres",
    "gov",
    "sen",
    "rep",
    "supt",
    "vs",
    "e.g",
    "i.e",
    "cf",
    "viz",
    "al",
    "fig",
    "figs",
    "eq",
    "eqs",
    "approx",
    "ca",
    "resp",
    "dept",
    "univ",
    "assn",
    "bros",
    "vols",
    "ed",
    "eds",
    "est",
    "min",
    "max",
    "avg",
    "incl",
    "excl",
    "ref",
    "refs",
    "tel",
    "ext",
    "op",
    "cit",
    "ibid",
    "ave",
    "blvd",
    "rd",
    "apt",
    "mme",
    "mlle",
}
# Abbreviations that need a following number to be non-terminal ("No. 5", "Jan. 12").
#: Month abbreviations ("Jan. 5"): the sentence splitter and the chunker (:mod:`.segment`) share them.
MONTHS = frozenset(
    ["jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"]
)
_NUMERIC_ABBREV = MONTHS | {
    "no",
    "nos",
    "art",
    "vol",
    "ch",
    "sec",
    "pg",
    "para",
    "p",
    "pp",
}
# Abbreviations that often end a sentence: boundary only before a common sentence opener.
_AMBIGUOUS_ABBREV = {
    "etc",
    "inc",
    "ltd",
    "co",
    "corp",
    "llc",
    "plc",
    "u.s",
    "u.k",
    "u.n",
    "e.u",
    "a.m",
    "p.m",
    "b.c",
    "a.d",
    "ph.d",
    "m.d",
    "b.a",
    "m.a",
    "b.sc",
    "m.sc",
    "d.c",
    "n.y",
    "l.a",
}
_OPENERS = {
    "the",
    "a",
    "an",
    "this",
    "that",
    "these",
    "those",
    "it",
    "its",
    "he",
    "she",
    "they",
    "we",
    "i",
    "you",
    "there",
    "here",
    "in",
    "on",
    "at",
    "for",
    "from",
    "by",
    "with",
    "after",
    "before",
    "during",
    "when",
    "while",
    "if",
    "as",
    "but",
    "and",
    "so",
    "however",
    "also",
    "moreover",
    "furthermore",
    "therefore",
    "thus",
    "then",
    "finally",
    "first",
    "second",
    "today",
    "his",
    "her",
    "their",
    "our",
    "my",
    "your",
    "some",
    "many",
    "most",
    "all",
    "each",
    "every",
    "no",
    "not",
    "to",
    "what",
    "why",
    "how",
    "where",
    "who",
    "which",
}

_LIST_MARKER = re.compile(
    r"""^[ \t]*(?:
        [-*+•‣◦▪\u2013\u2014]                 # bullets
      | \(?\d{1,3}[.)]               # 1.  1)  (1)
      | \(?[a-zA-Z][)]               # a)  (a)
      | \([ivxlcdm]{1,5}\)           # (iv)
      | [ivxlcdm]{1,5}[.)](?=\s)     # iv.  iv)
    )[ \t]+""",
    re.VERBOSE | re.IGNORECASE,
)
_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]+")
_TERMINAL = re.compile(r"""(?P<term>[.!?…]+)["'\u201d\u2019\u00bb)\]]*(?P<ws>\s+)""")
_WORD_BEFORE = re.compile(r"([A-Za-z](?:[A-Za-z.]*[A-Za-z])?)$")
_HAS_ALNUM = re.compile(r"\w")
_WS = re.compile(r"\s+")


def _blocks(text: str) -> list[tuple[int, int]]:
    """Character ranges of paragraphs / list items / headings (markers excluded)."""
    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        body = text[start:end]
        if not body.strip():
            if cur is not None:
                out.append(cur)
                cur = None
            continue
        m = _LIST_MARKER.match(body) or _HEADING.match(body)
        if m:
            if cur is not None:
                out.append(cur)
            cur = (start + m.end(), end)
            if _HEADING.match(body):
                out.append(cur)
                cur = None
            continue
        if cur is not None:
            prev = text[cur[0] : cur[1]].rstrip()
            is_list_item = _LIST_MARKER.match(text[_line_start(text, cur[0]) : cur[1]]) is not None
            if prev.endswith(":") or (is_list_item and prev.endswith((".", "!", "?"))):
                out.append(cur)
                cur = (start, end)
            else:
                cur = (cur[0], end)  # soft wrap: the paragraph continues
        else:
            cur = (start, end)
    if cur is not None:
        out.append(cur)
    return out


def _line_start(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


def _is_boundary(text: str, dot_start: int, punct: str, after: int) -> bool:
    """Whether the terminal punctuation at ``dot_start`` ends a sentence."""
    nxt = text[after] if after < len(text) else ""
    if not nxt:
        return True
    # the next unit must not start in lower case ("e.g. this", "wait... what")
    first = nxt
    if first in "\"'\u201c\u2018\u00ab([" and after + 1 < len(text):
        first = text[after + 1]
    if first.islower():
        return False
    if punct != ".":
        return True
    m = _WORD_BEFORE.search(text, 0, dot_start)
    if not m:
        return True
    word = m.group(1).lower()
    next_word = re.match(r"[\"'\u201c\u2018\u00ab(\[]*([A-Za-z0-9]+)", text[after:])
    nw = next_word.group(1) if next_word else ""
    opener = nw.lower() in _OPENERS
    if word in _ALWAYS_ABBREV:
        return False
    if word in _NUMERIC_ABBREV and nw[:1].isdigit():
        return False
    if word in _AMBIGUOUS_ABBREV or (len(word) == 1 and word.isalpha()):
        # a single initial ("J. K. Rowling") or ambiguous abbreviation
        return opener
    if "." in word and word.replace(".", "").isalpha() and len(word) <= 6:
        # unknown dotted abbreviation like "U.S.A" or "e.g"
        return opener
    return True


def split_sentences(text: str) -> list[Span]:
    """Split ``text`` into sentence :class:`Span` s (see module docstring for the rules).

    Example:
        >>> [s.text for s in split_sentences("Pi is approx. 3.14. J. K. Rowling wrote it.")]
        ['Pi is approx. 3.14.', 'J. K. Rowling wrote it.']
    """
    spans: list[Span] = []

    def ends_sentence(m: re.Match[str]) -> bool:
        return _is_boundary(text, m.start("term"), m.group("term")[-1], m.end())

    for b0, b1 in _blocks(text):
        seg_start = b0
        for cut_start, cut_end in sentence_cuts(text, b0, b1, _TERMINAL, ends_sentence):
            _emit(text, seg_start, cut_start, spans)
            seg_start = cut_end
        _emit(text, seg_start, b1, spans)
    return spans


def sentence_cuts(
    text: str,
    start: int,
    end: int,
    terminal: re.Pattern[str],
    ends_sentence: Callable[[re.Match[str]], bool],
) -> list[tuple[int, int]]:
    """The one sentence-boundary loop: the whitespace between sentences of ``text[start:end]``.

    ``terminal`` finds candidate ends (terminal punctuation with a named group ``ws`` for the
    whitespace after it); ``ends_sentence`` decides each candidate (abbreviations, decimals...).
    A candidate that reaches ``end`` is not a cut. :func:`split_sentences` and the chunker's
    sentence level (:mod:`nexagauge.text.segment`) both cut here, each with its own policy.

    Example:
        >>> pat = re.compile(r"(?P<term>[.!?]+)(?P<ws>\\s+)")
        >>> sentence_cuts("One. Two. Three.", 0, 16, pat, lambda m: True)
        [(4, 5), (9, 10)]
    """
    cuts: list[tuple[int, int]] = []
    for m in terminal.finditer(text, start, end):
        if m.end() >= end:
            break
        if ends_sentence(m):
            cuts.append(m.span("ws"))
    return cuts


def _emit(text: str, start: int, end: int, out: list[Span]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start and _HAS_ALNUM.search(text, start, end):
        out.append(Span(text=text[start:end], start=start, end=end))


def sentences(text: str) -> list[str]:
    """The sentence texts of ``text``, inner whitespace collapsed (see :func:`split_sentences`).

    Example:
        >>> sentences("It costs 2.5 USD, i.e. cheap. Buy it!")
        ['It costs 2.5 USD, i.e. cheap.', 'Buy it!']
    """
    return [_WS.sub(" ", s.text) for s in split_sentences(text)]
