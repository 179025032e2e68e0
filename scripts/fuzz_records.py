"""On-demand fuzz campaign of offline record parsing (issue 15), longer than the suite.

Two parts, both checking the rule "one bad record costs only itself":

1. the property tests of ``tests/core/test_record_properties.py`` with many examples
   (``NEXAGAUGE_FUZZ_EXAMPLES``, default here 5,000 = 50x the suite's);
2. a time-bounded mutation campaign: seed datasets in every input format (JSONL, JSON array,
   concatenated JSON objects, CSV) are mutated at the byte level (bit flips, cuts, inserts,
   duplicated and deleted spans, splices between seeds) and at the value level (a field replaced
   by nesting thousands deep, a lone-surrogate escape, a 5,000-digit integer, NaN/Infinity, a
   number, an unclosed brace, a 200,000-character cell), then read with ``RecordReader`` and
   parsed with ``parse_record``. Invariants: the reader raises only ``ReaderError``, indexes are
   contiguous, every value is a record or a ``RecordError`` with a printable message; parsing
   raises only ``RecordError``; every case fingerprints and its report encodes as UTF-8 JSON.
   Every ``--cli-every``-th input also goes through the real ``nexagauge run`` command: no
   traceback, exit status 0 or 1, ``summary.json`` written and its record count equal to the
   number of records the reader yields. A failing input is saved to ``--out``.

    python scripts/fuzz_records.py [--seconds 300] [--examples 5000] [--seed 1] [--out fuzz-out]
    python scripts/fuzz_records.py --skip-properties --seconds 3600 --cli-every 0  # in-process only

Exit status 1 when any invariant failed.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _fuzz import ROOT, arguments, campaign, finish

sys.path.insert(0, str(ROOT))

from nexagauge.io.readers import ReaderError, RecordReader
from nexagauge.schema.case import RecordError, parse_record

RECORDS: list[dict[str, Any]] = [
    {
        "case_id": "a",
        "question": "Where is the tower?",
        "answer": "In Paris.",
        "context": ["Paris."],
    },
    {"id": "b", "output": "Rome.", "reference": "Rome.", "metadata": {"tags": ["x", 1, None]}},
    {
        "case_id": "c",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": "Hello."},
        ],
        "relevance": {"scoring_mode": "scale_1_5"},
        "geval": {"metrics": [{"name": "polite", "criteria": "Is it polite?", "threshold": 0.5}]},
    },
    {"output": "No id, content-derived.", "grounding": False},
]
HOSTILE_VALUES = [
    "[" * 5000 + "]" * 5000,
    '"x\\ud800"',
    "7" * 5000,
    "NaN",
    "-Infinity",
    "42",
    '{"unclosed": ',
    json.dumps("y" * 200_000),
    '[{"content": 5}]',
    "true",
]


def seeds() -> list[tuple[str, bytes]]:
    """``(format, file content)`` of the seed records in every input format."""
    jsonl = "\n".join(json.dumps(r) for r in RECORDS) + "\n"
    array = "[\n" + ",\n".join(json.dumps(r, indent=2) for r in RECORDS) + "\n]\n"
    stream = "\n".join(json.dumps(r, indent=1) for r in RECORDS) + "\n"
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["case_id", "output", "input", "context", "relevance"])
    w.writerow(["a", "In Paris.", "Where?", '["Paris."]', '{"scoring_mode": "scale_1_5"}'])
    w.writerow(["b", "multi\nline", "", "plain text", ""])
    w.writerow(["c", "Rome.", "Capital?", "", "false"])
    return [
        ("jsonl", jsonl.encode()),
        ("json", array.encode()),
        ("json", stream.encode()),
        ("csv", buf.getvalue().encode()),
    ]


def mutate_values(raw: bytes, rnd: random.Random) -> bytes:
    """Replace one JSON value (after a ``:`` or a CSV comma) with a hostile one."""
    text = raw.decode("utf-8", "surrogatepass")
    marks = [i for i, c in enumerate(text) if c in ":,"]
    if not marks:
        return raw
    at = rnd.choice(marks) + 1
    end = at
    while end < len(text) and text[end] not in ",}\n]":
        end += 1
    value = rnd.choice(HOSTILE_VALUES)
    return (text[:at] + " " + value + text[end:]).encode("utf-8", "surrogatepass")


def mutate_bytes(raw: bytes, other: bytes, rnd: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(6)
        if not data:
            break
        i = rnd.randrange(len(data))
        if op == 0:
            data[i] ^= 1 << rnd.randrange(8)
        elif op == 1:
            del data[i : i + rnd.randint(1, 40)]
        elif op == 2:
            data[i:i] = bytes(
                rnd.choice(b'{}[]",:\\\n\r\x00\xff') for _ in range(rnd.randint(1, 6))
            )
        elif op == 3:
            j = rnd.randrange(len(other)) if other else 0
            data[i:] = other[j:]
        elif op == 4:
            data[i:i] = data[i : i + rnd.randint(1, 200)]
        else:
            del data[i:]
    return bytes(data)


def check(fmt: str, content: bytes, tmp: Path) -> int:
    """Read and parse one file; raise AssertionError on a broken invariant. Returns #records."""
    path = tmp / f"input.{fmt}"
    path.write_bytes(content)
    try:
        items = list(RecordReader(path))
    except ReaderError as e:
        str(e).encode("utf-8")
        return -1
    assert [i for i, _ in items] == list(range(len(items))), "indexes not contiguous"
    for index, value in items:
        if isinstance(value, RecordError):
            str(value).encode("utf-8")
            continue
        try:
            case = parse_record(value, index)
        except RecordError as e:
            str(e).encode("utf-8")
            continue
        case.fingerprint()
        json.dumps(case.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
    return len(items)


def check_cli(fmt: str, content: bytes, records: int, tmp: Path) -> None:
    """The real command on the same file: no traceback, a summary, the same record count."""
    path = tmp / f"cli.{fmt}"
    path.write_bytes(content)
    out = tmp / "out"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NEXAGAUGE_JUDGE_MODE": "none",
        "NEXAGAUGE_CACHE_ENABLED": "false",
    }
    p = subprocess.run(
        [sys.executable, "-m", "nexagauge", "run", "chunk", "-i", str(path), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.returncode in (0, 1), (p.returncode, p.stderr[-2000:])
    summary = json.loads((out / "summary.json").read_text())
    if records >= 0:
        assert summary["records"] == records, (summary["records"], records)


def generate(rnd: random.Random, pool: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    """One input: a seed file with a value replaced or its bytes mutated."""
    fmt, raw = rnd.choice(pool)
    if rnd.random() < 0.4:
        return fmt, mutate_values(raw, rnd)
    return fmt, mutate_bytes(raw, rnd.choice(pool)[1], rnd)


def run_campaign(seconds: float, seed: int, out: Path, cli_every: int) -> int:
    """The mutation campaign; every ``cli_every``-th input also through the real command."""
    pool = seeds()
    with tempfile.TemporaryDirectory(prefix="ng-fuzz-records-") as d:
        tmp = Path(d)

        def check_one(item: tuple[str, bytes], n: int) -> None:
            fmt, content = item
            records = check(fmt, content, tmp)
            if cli_every and n % cli_every == 0:
                check_cli(fmt, content, records, tmp)

        return campaign(
            seconds,
            seed,
            out,
            lambda rnd: generate(rnd, pool),
            check_one,
            lambda item: {item[0]: item[1]},
        )


def main() -> int:
    ap = arguments(__doc__, examples=5000, examples_help="examples per property (x100 scale)")
    ap.add_argument("--cli-every", type=int, default=200, help="every Nth input also via the CLI")
    a = ap.parse_args()
    return finish(
        a,
        "tests/core/test_record_properties.py",
        lambda: run_campaign(a.seconds, a.seed, a.out, a.cli_every),
    )


if __name__ == "__main__":
    sys.exit(main())
