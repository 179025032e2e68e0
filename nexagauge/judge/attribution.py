"""Which context source a judged claim rests on: the document that supports or contradicts it.

The grounding judge answers one verdict per claim against the whole context; this module names
the context document the verdict is about, for every backend alike: the document sharing the
most of the claim's ids and numbers (tokens with a digit: order ids, dates, amounts -- counted
three times, since they decide what a claim is about), then of its other words. A claim sharing
nothing with any document gets no source. A supported claim's source supports it; a
contradicted claim's source is the document that says otherwise (it names the same order,
product or date and disagrees).

Example:
    >>> best_source("Order A-17 has shipped.", ["Rugs: 60 days.", "order_id: A-17\\nstatus: shipped"],
    ...             ["doc:kb-7", "tool:lookup_order#c1"])
    'tool:lookup_order#c1'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from nexagauge.judge.claimtext import content_words

__all__ = ["best_source"]

_ID = re.compile(r"\w[\w.\-/:]*\w|\w", re.UNICODE)
#: weight of an id/number token against a plain word
ID_WEIGHT = 3


@functools.lru_cache(maxsize=256)
def _tokens(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(ids and numbers, other content words) of a text, lowercased. Memoized: every claim of a
    case is matched against the same documents (they were tokenized once per claim before)."""
    ids = frozenset(t for t in _ID.findall(text.lower()) if any(ch.isdigit() for ch in t))
    words = frozenset(w for w in content_words(text) if not any(ch.isdigit() for ch in w))
    return ids, words


def best_source(claim: str, documents: Sequence[str], labels: Sequence[str]) -> str | None:
    """The label of the document ``claim`` is about (see module docstring); ``None`` when it
    shares nothing with any document or the labels do not match the documents one to one."""
    if len(documents) != len(labels) or not documents:
        return None
    cids, cwords = _tokens(claim)
    best, best_score = None, 0
    for doc, label in zip(documents, labels, strict=True):
        dids, dwords = _tokens(doc)
        score = ID_WEIGHT * len(cids & dids) + len(cwords & dwords)
        if score > best_score:
            best, best_score = label, score
    return best
