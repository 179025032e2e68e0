"""WordNet's antonyms as extra opposites for the local judge: a measured candidate (issue 17).

The judge's own opposites are a short built-in list (``nexagauge/judge/local/contra.py``), so
its verdicts never depend on the host. This module reads the direct antonym pairs (``!``
pointers) of a WordNet 3.0 ``dict`` directory (Debian's ``wordnet-base``:
``/usr/share/wordnet``), keeps single words, and matches claim and evidence words through a
light lemmatiser (suffix rules plus WordNet's exception lists). :func:`install` makes the
judge use them on top of the built-in list, for ``bench/local_judge/probe.py --probe
antonyms``; nothing in the package imports it.

Measured (bench/local_judge/RECORD.md): not adopted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

_POS = {"adj": "a", "adv": "r", "verb": "v", "noun": "n"}
_SUFFIXES = (("ies", "y"), ("es", "e"), ("es", ""), ("s", ""), ("ed", "e"), ("ed", ""),
             ("ing", "e"), ("ing", ""), ("ier", "y"), ("iest", "y"), ("er", "e"), ("er", ""),
             ("est", "e"), ("est", ""), ("ied", "y"))  # fmt: skip
#: frequent words whose WordNet antonyms are senses an answer rarely means ("have"/"lack")
_SKIP = frozenset(
    [
        "in",
        "out",
        "on",
        "off",
        "have",
        "lack",
        "be",
        "do",
        "go",
        "come",
        "give",
        "take",
        "get",
        "make",
        "no",
        "yes",
        "all",
        "some",
        "one",
        "many",
        "few",
        "much",
        "little",
        "here",
        "there",
        "this",
        "that",
        "like",
        "unlike",
        "part",
        "whole",
        "home",
        "away",
        "present",
        "absent",
        "back",
        "front",
        "even",
        "odd",
        "left",
        "right",
        "center",
        "wrong",
        "last",
        "next",
        "new",
        "old",
        "good",
        "bad",
        "well",
        "ill",
        "general",
        "special",
        "common",
        "rare",
        "full",
        "empty",
        "public",
        "private",
    ]
)


def antonym_pairs(wordnet: Path) -> set[tuple[str, str]]:
    """Direct antonym pairs ``(a, b)``, ``a < b``, of single words, from a WordNet directory."""
    synsets: dict[tuple[str, str], list[str]] = {}
    pointers: list[tuple[str, str, int, str, str, int]] = []
    for pos, tag in _POS.items():
        for line in (wordnet / f"data.{pos}").read_text("latin-1").splitlines():
            if line.startswith("  "):
                continue  # licence header
            f = line.split(" | ")[0].split()
            n = int(f[3], 16)
            synsets[(f[0], tag)] = [f[4 + 2 * i].lower().split("(")[0] for i in range(n)]
            i = 4 + 2 * n
            for _ in range(int(f[i])):
                sym, off, tpos, st = f[i + 1 : i + 5]
                i += 4
                if sym == "!":
                    tpos = "a" if tpos == "s" else tpos
                    pointers.append((f[0], tag, int(st[:2], 16), off, tpos, int(st[2:], 16)))
    out = set()
    for off, tag, s, toff, tpos, t in pointers:
        a, b = synsets[(off, tag)][s - 1], synsets[(toff, tpos)][t - 1]
        if a != b and "_" not in a + b and not {a, b} & _SKIP:
            out.add((min(a, b), max(a, b)))
    return out


def lemmatiser(wordnet: Path, vocab: set[str]) -> Callable[[str], set[str]]:
    """``word -> {lemmas in vocab}`` by suffix rules and WordNet's exception lists."""
    exc: dict[str, set[str]] = {}
    for pos in _POS:
        for line in (wordnet / f"{pos}.exc").read_text("latin-1").splitlines():
            f = line.split()
            if len(f) >= 2 and f[1] in vocab:
                exc.setdefault(f[0], set()).add(f[1])

    def lemmas(w: str) -> set[str]:
        out = {w} | exc.get(w, set())
        for suffix, repl in _SUFFIXES:
            if w.endswith(suffix) and len(w) - len(suffix) >= 2:
                base = w[: -len(suffix)] + repl
                out.add(base)
                if not repl and len(base) >= 3 and base[-1] == base[-2]:
                    out.add(base[:-1])  # "bigger" -> "big"
        return {x for x in out if x in vocab}

    return lemmas


def install(wordnet: Path) -> None:
    """Make the judge's antonym check also use WordNet's pairs (this process only)."""
    import nexagauge.judge.local.contra as contra
    import nexagauge.judge.local.decide as decide
    from nexagauge.judge.local.cues import _words

    pairs = antonym_pairs(wordnet)
    opposite: dict[str, set[str]] = {}
    for a, b in pairs:
        opposite.setdefault(a, set()).add(b)
        opposite.setdefault(b, set()).add(a)
    lemmas = lemmatiser(wordnet, set(opposite))
    builtin = contra.antonym_conflicts

    def conflicts(claim: str, evidence: str) -> list[str]:
        ev, cw = set(_words(evidence)), set(_words(claim))
        ev_l = {x for w in ev for x in lemmas(w)}
        cw_l = {x for w in cw for x in lemmas(w)}
        extra = [w for w in dict.fromkeys(_words(claim)) if w not in ev
                 and any(x not in ev_l and (opposite[x] & ev_l) - cw_l for x in lemmas(w))]  # fmt: skip
        return list(dict.fromkeys(builtin(claim, evidence) + extra))

    contra.antonym_conflicts = conflicts
    decide.antonym_conflicts = conflicts
