"""Text normalization and word tokenization shared by the deterministic nodes.

- :func:`normalize_text`: NFKC, case-folded, whitespace collapsed - the form in which two texts
  that differ only in case, spacing or Unicode presentation compare equal (refiner, dedup).
- :func:`words`: lower-cased word tokens (Unicode letters and digits; punctuation dropped), the
  tokenization of METEOR, so scores do not depend on punctuation attached to words.

Example:
    >>> normalize_text("  The\\u00a0Eiffel   TOWER. ")
    'the eiffel tower.'
    >>> words("It's 324 m tall - in Paris!")
    ["it's", '324', 'm', 'tall', 'in', 'paris']
"""

from __future__ import annotations

import re
import unicodedata

_WS = re.compile(r"\s+")
# a word: letters/digits (any script), optionally joined by an inner apostrophe ("it's", "o'clock")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def normalize_text(text: str) -> str:
    """NFKC + casefold + collapsed whitespace, stripped.

    Example:
        >>> normalize_text("Paris\\n\\n  IS nice")
        'paris is nice'
    """
    t = unicodedata.normalize("NFKC", text).casefold()
    return _WS.sub(" ", t).strip()


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (NFKC, case-folded; punctuation and ``_`` dropped).

    Apostrophes inside a word are kept and unified to ``'``.

    Example:
        >>> words("The cats' owner didn't come.")
        ['the', 'cats', 'owner', "didn't", 'come']
    """
    t = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return _WORD.findall(t)
