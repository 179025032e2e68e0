"""Build the second labelled set of the local judge (issue 17) from its hand-written source.

Source (written by hand, reviewed as text): ``src/relevance.txt`` and ``src/grounding.txt``.
Each file is a list of *cases*; a case is one question (relevance) or one context passage
(grounding) plus one answer of several sentences, in answer order, each with a label and a
``kind`` saying what it tests::

    === med-ibuprofen-dose | medicine | calibration
    Q: How often can an adult take ibuprofen for a headache?
    + direct: Adults can take 200 to 400 mg every four to six hours.
    + pronoun_ref: It should be taken with food.
    - same_subject_trivia: Ibuprofen was first sold in 1969.

``+`` marks the positive label (``on_topic`` / ``supported``), ``-`` the negative one
(``off_topic`` / ``unsupported``). Grounding cases have a ``C:`` line (the context) instead of
``Q:``; a ``Q:`` line there is optional (the question the answer was written for). Lines
starting with ``#`` are comments. The labelling rule is in ``bench/local_judge/RECORD.md`` ("Labelling
rule"); labels follow it, never the kind.

Outputs (committed; regenerate with ``python tests/data/local_judge_v2/build.py``):
``relevance.jsonl`` and ``grounding.jsonl``, one sentence per line, a superset of the first
set's format (``tests/data/relevance_pairs.jsonl``): ``id``, ``item`` (the case id), ``domain``,
``split``, ``question`` / ``context``, ``claim``, ``label``, ``kind``, ``clear`` and, new,
``position`` (index of the sentence in its answer) and ``previous`` (the answer's earlier
sentences, which a judge may use to resolve "it", "they").

Split: by case, never by sentence; stratified by kind; **frozen in the source**. Each case
header names its half (``=== id | domain | calibration``) and a case never changes half once
published, so a calibration fitted on an earlier version never sees today's held-out cases. A new
case written without a half is assigned by ``build.py --freeze``: cases without a half, in source
order, each go to the half (``calibration`` / ``heldout``) that keeps the per-(label, kind)
sentence counts, the case counts and the sentence counts of the halves closest (ties: BLAKE2b of
the id); ``--freeze`` then writes the half into the header. Calibration must only ever read the
``calibration`` half.

Example:
    >>> rel = build("relevance")
    >>> len(rel) >= 400 and {r["split"] for r in rel} == {"calibration", "heldout"}
    True
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"  # the v2 source; other sets: <set dir>/src
TASKS = ("relevance", "grounding")
LABELS = {"relevance": ("on_topic", "off_topic"), "grounding": ("supported", "unsupported")}
SPLITS = ("calibration", "heldout")
# Kinds that are hard on purpose; ``clear`` is False for them (as in the first set).
HARD_KINDS = frozenset(
    {
        "same_subject_trivia",
        "tangent",
        "wrong_but_on_topic",
        "paraphrase_no_shared_word",
        "contradiction",
        "wrong_number",
        "wrong_date",
        "negation_flip",
        "over_generalisation",
        "entity_swap",
        "absent_fact",
    }
)
# The kinds of each task, with the label each one carries (a kind names what makes a sentence
# relevant / supported or not, so it fixes the label; a mismatch is a typo in the source).
_BOTH_POS = (
    "paraphrase_no_shared_word",
    "hedged",
    "list_item",
    "number_unit",
    "date",
    "negation",
    "pronoun_ref",
    "jargon",
    "long_multi_clause",
    "reason",
)
KINDS: dict[str, dict[str, bool]] = {
    "relevance": {
        **dict.fromkeys(("direct", "wrong_but_on_topic", *_BOTH_POS), True),
        **dict.fromkeys(("same_subject_trivia", "tangent", "off_topic", "filler"), False),
    },
    "grounding": {
        **dict.fromkeys(("paraphrase", *_BOTH_POS), True),
        **dict.fromkeys(
            (
                "absent_fact",
                "contradiction",
                "wrong_number",
                "wrong_date",
                "entity_swap",
                "negation_flip",
                "over_generalisation",
            ),
            False,
        ),
    },
}
_SENT = re.compile(r"^([+-])\s*([a-z_]+):\s+(\S.*)$")


@dataclass
class Case:
    """One question/context with its answer sentences, as written in the source."""

    id: str
    domain: str
    line: int
    split: str | None = None
    question: str = ""
    context: str = ""
    sentences: list[tuple[str, str, bool]] = field(default_factory=list)  # (kind, text, positive)


def parse(task: str, text: str) -> list[Case]:
    """Parse one source file; errors name the line."""
    cases: list[Case] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("==="):
            head = [h.strip() for h in line[3:].split("|")]
            if len(head) not in (2, 3) or not all(head):
                raise ValueError(f"line {n}: expected '=== case-id | domain [| split]'")
            if len(head) == 3 and head[2] not in SPLITS:
                raise ValueError(f"line {n}: split must be one of {SPLITS}, got {head[2]!r}")
            cases.append(Case(head[0], head[1], n, head[2] if len(head) == 3 else None))
            continue
        if not cases:
            raise ValueError(f"line {n}: text before the first '===' case header")
        case = cases[-1]
        if line.startswith("Q:"):
            case.question = line[2:].strip()
        elif line.startswith("C:"):
            case.context = line[2:].strip()
        elif m := _SENT.match(line):
            kind, positive = m.group(2), m.group(1) == "+"
            if kind not in KINDS[task]:
                raise ValueError(f"line {n}: unknown {task} kind {kind!r}")
            if KINDS[task][kind] != positive:
                sign = "+" if KINDS[task][kind] else "-"
                raise ValueError(f"line {n}: kind {kind!r} is always {sign}")
            case.sentences.append((kind, m.group(3).strip(), positive))
        else:
            raise ValueError(f"line {n}: not a '=== ', 'Q:', 'C:', '+ kind: ' or '- kind: ' line")
    for c in cases:
        target = c.question if task == "relevance" else c.context
        if not target:
            raise ValueError(
                f"case {c.id} (line {c.line}): no {'Q:' if task == 'relevance' else 'C:'}"
            )
        if not c.sentences:
            raise ValueError(f"case {c.id} (line {c.line}): no sentences")
    ids = [c.id for c in cases]
    dup = [i for i, k in Counter(ids).items() if k > 1]
    if dup:
        raise ValueError(f"duplicate case ids: {dup}")
    return cases


def _h(s: str) -> str:
    return hashlib.blake2b(s.encode(), digest_size=8).hexdigest()


def assign_splits(cases: list[Case]) -> dict[str, str]:
    """Case id -> split: the source's frozen half, else greedy and stratified (see module doc).

    Only cases without a half are assigned, in source order, so appending cases never moves an
    earlier one.
    """
    counts = {s: Counter[tuple[bool, str]]() for s in SPLITS}
    n_cases = dict.fromkeys(SPLITS, 0)
    n_sents = dict.fromkeys(SPLITS, 0)
    out: dict[str, str] = {}

    def put(c: Case, to: str) -> None:
        out[c.id] = to
        counts[to].update((pos, kind) for kind, _, pos in c.sentences)
        n_cases[to] += 1
        n_sents[to] += len(c.sentences)

    for c in cases:
        if c.split is not None:
            put(c, c.split)
    for c in cases:
        if c.split is not None:
            continue
        mine = Counter((pos, kind) for kind, _, pos in c.sentences)

        def cost(to: str, mine: Counter[tuple[bool, str]] = mine, c: Case = c) -> float:
            other = SPLITS[1 - SPLITS.index(to)]
            keys = set(counts[to]) | set(counts[other]) | set(mine)
            imb = float(sum(abs(counts[to][k] + mine[k] - counts[other][k]) for k in keys))
            imb += abs(n_cases[to] + 1 - n_cases[other]) * 2
            imb += abs(n_sents[to] + len(c.sentences) - n_sents[other]) * 0.5
            return imb

        a, b = cost(SPLITS[0]), cost(SPLITS[1])
        put(c, SPLITS[0] if a < b else SPLITS[1] if b < a else SPLITS[int(_h(c.id), 16) % 2])
    return out


def set_number(root: Path) -> str:
    """``"2"`` for ``local_judge_v2``: the digits ending the set directory's name (row id prefix)."""
    m = re.search(r"(\d+)$", root.name)
    if m is None:
        raise ValueError(f"{root}: a labelled set directory is named like local_judge_v2")
    return m.group(1)


def freeze(task: str, root: Path = HERE) -> int:
    """Write the half of every case that has none into ``src/<task>.txt``; returns how many."""
    path = root / "src" / f"{task}.txt"
    text = path.read_text("utf-8")
    cases = parse(task, text)
    split = assign_splits(cases)
    lines = text.splitlines(keepends=True)
    todo = [c for c in cases if c.split is None]
    for c in todo:
        i = c.line - 1
        end = "\n" if lines[i].endswith("\n") else ""
        lines[i] = f"=== {c.id} | {c.domain} | {split[c.id]}{end}"
    path.write_text("".join(lines), "utf-8")
    return len(todo)


def rows_of(task: str, cases: list[Case], number: str = "2") -> list[dict[str, Any]]:
    """The output rows of ``task`` (one per sentence), cases in source order; row ids start
    with ``rel<number>-`` / ``grd<number>-``."""
    split = assign_splits(cases)
    pos_label, neg_label = LABELS[task]
    prefix = ("rel" if task == "relevance" else "grd") + number
    rows: list[dict[str, Any]] = []
    for c in cases:
        answer = [t for _, t, _ in c.sentences]
        for i, (kind, text, positive) in enumerate(c.sentences):
            row: dict[str, Any] = {
                "id": f"{prefix}-{c.id}-{i}",
                "item": c.id,
                "domain": c.domain,
                "split": split[c.id],
            }
            if task == "relevance":
                row["question"] = c.question
            else:
                row["context"] = c.context
                if c.question:
                    row["question"] = c.question
            row |= {
                "claim": text,
                "label": pos_label if positive else neg_label,
                "kind": kind,
                "clear": kind not in HARD_KINDS,
                "position": i,
                "previous": answer[:i],
            }
            rows.append(row)
    return rows


def build(task: str, root: Path = HERE) -> list[dict[str, Any]]:
    """Rows of ``task`` built from ``<root>/src/<task>.txt`` (``root``: the set's directory)."""
    cases = parse(task, (root / "src" / f"{task}.txt").read_text("utf-8"))
    return rows_of(task, cases, set_number(root))


def output_path(task: str, root: Path = HERE) -> Path:
    return root / f"{task}.jsonl"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    do_freeze = "--freeze" in args
    rest = [a for a in args if a != "--freeze"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        raise SystemExit("usage: build.py [--freeze] [SET_DIR]  (default: this directory, v2)")
    root = Path(rest[0]).resolve() if rest else HERE
    tasks = [t for t in TASKS if (root / "src" / f"{t}.txt").is_file()]
    if not tasks:
        raise SystemExit(f"{root / 'src'}: no {' or '.join(f'{t}.txt' for t in TASKS)}")
    for task in tasks:  # a set may have one task only (v5: relevance, training data)
        if do_freeze:
            print(f"{task}: froze the half of {freeze(task, root)} new cases")
        rows = build(task, root)
        output_path(task, root).write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8"
        )
        by = Counter((r["split"], r["label"]) for r in rows)
        print(f"{task}: {len(rows)} sentences, {len({r['item'] for r in rows})} cases; {dict(by)}")


if __name__ == "__main__":
    main()
