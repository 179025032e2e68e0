"""The passage of a grounding claim's source: the part of the labelled document the claim is about.

A short document is shown whole. A long one (a tool result of many fields, a long retrieved
page) is cut to its lines and sentences that share the claim's ids, numbers or content words --
the same tokens :mod:`nexagauge.judge.attribution` names the source by -- in document order, an
ellipsis ``…`` marking every gap, within :data:`PASSAGE_CHARS`; when none shares anything the
document's start is shown, cut with an ellipsis.

Example:
    >>> doc = "carrier: PostNord\\nhistory: " + "scan " * 100 + "\\nstatus: shipped"
    >>> print(excerpt(doc, "The order has shipped with PostNord."))
    carrier: PostNord
    …
    status: shipped
"""

from __future__ import annotations

import re

from nexagauge.judge.claimtext import content_words

#: most characters of a passage shown
PASSAGE_CHARS = 320
_ID = re.compile(r"\w[\w.\-/:]*\w|\w")
#: a line ends at a newline; a sentence at . ! or ? followed by white space
_BREAK = re.compile(r"\n|(?<=[.!?])\s+")


def cut(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters with an ellipsis (``None`` stays ``None``).

    Example:
        >>> cut("abcdef", 4), cut("abc", 4)
        ('abcd…', 'abc')
    """
    if text is None or len(text) <= limit:
        return text
    return text[:limit].rstrip() + "…"


def _tokens(text: str) -> set[str]:
    ids = {t for t in _ID.findall(text.lower()) if any(ch.isdigit() for ch in t)}
    return ids | {w for w in content_words(text) if not any(ch.isdigit() for ch in w)}


def _spans(doc: str) -> list[tuple[int, int]]:
    """(start, end) of each line or sentence of ``doc`` (separators excluded)."""
    out, start = [], 0
    for m in _BREAK.finditer(doc):
        if m.start() > start:
            out.append((start, m.start()))
        start = m.end()
    if start < len(doc):
        out.append((start, len(doc)))
    return out


def excerpt(doc: str, claim: str, limit: int = PASSAGE_CHARS) -> str:
    """The part of ``doc`` that ``claim`` is about (see the module docstring)."""
    if len(doc) <= limit:
        return doc
    want = _tokens(claim)
    scored = [(len(want & _tokens(doc[a:b])), a, b) for a, b in _spans(doc)]
    chosen: list[tuple[int, int]] = []
    room = limit
    for score, a, b in sorted(scored, key=lambda x: (-x[0], x[1])):
        if score == 0 or room <= 0:
            break
        b = min(b, a + room)  # the last span taken may be cut
        chosen.append((a, b))
        room -= b - a + 2
    if not chosen:
        return cut(doc, limit) or ""
    chosen.sort()
    out, prev = "", 0
    for a, b in chosen:
        gap = doc[prev:a]
        if gap.strip():  # text left out: an ellipsis on its own line, or inline in prose
            out += ("\n…\n" if "\n" in gap else " … ") if out else ("…\n" if "\n" in gap else "… ")
        elif out:
            out += gap
        out += doc[a:b].strip()
        prev = b
    rest = doc[prev:]
    if rest.strip():
        out += "…" if not rest[:1].isspace() else "\n…" if "\n" in rest else " …"
    return out
