"""``nexagauge run`` on hostile records (issue 15 items 7-11): the real command on real files.

Every bad record is named (index, line, case id, field) in errors.jsonl and on the terminal; every
good record around it is evaluated; summary.json is always written; exit statuses as documented
(1 when a record failed or the input had no records).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from .conftest import Runner


def _errors(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]


def _case_ids(out: Path) -> set[str]:
    return {json.loads(p.read_text())["case_id"] for p in (out / "cases").glob("*.json")}


def _good(n: int) -> str:
    return json.dumps({"case_id": f"good-{n}", "output": f"Good answer number {n}."})


#: (line of the JSONL file, expected field or None, a word the reason must hold)
HOSTILE_LINES: list[tuple[str, str | None, str]] = [
    # 7: a message part whose text is a number (TypeError in case.py before)
    (
        '{"case_id":"parts","messages":[{"role":"user","content":[{"content":5}]}],"output":"x"}',
        "messages[0].content[0].content",
        "must be text",
    ),
    # 8: an unpaired surrogate in the case id (UnicodeEncodeError writing the reports before)
    ('{"id":"x\\ud800","output":"fine text"}', "id", "surrogate"),
    ('{"case_id":"sur-out","output":"bad \\udc00 text"}', "output", "surrogate"),
    # 9: nesting 5,000 deep and a 5,000-digit integer (lost the records before them)
    ('{"case_id":"deep","output":"x","metadata":' + "[" * 5000 + "]" * 5000 + "}", None, "deep"),
    ('{"case_id":"bigint","output":' + "7" * 5000 + "}", None, "4,300 digits"),
    (
        '{"case_id":"deep-ok-json","output":"x","metadata":' + "[" * 80 + "]" * 80 + "}",
        "metadata",
        "nested deeper than 64",
    ),
    # 11: NaN / Infinity outputs, a NaN geval threshold
    ('{"case_id":"nan","output":NaN}', "output", "NaN"),
    ('{"case_id":"inf","output":-Infinity}', "output", "Infinity"),
    (
        '{"case_id":"thr","output":"x","geval":{"metrics":[{"name":"m","criteria":"c",'
        '"threshold":NaN}]}}',
        "geval.metrics[0].threshold",
        "NaN",
    ),
    (
        '{"case_id":"role","messages":[{"role":7,"content":"hi"}],"output":"x"}',
        "messages[0].role",
        "role",
    ),
]


def test_run_survives_every_hostile_record_and_names_each(cli: Runner, tmp_path: Path) -> None:
    lines = [_good(0)]
    for n, (text, _, _) in enumerate(HOSTILE_LINES, start=1):
        lines += [text, _good(n)]
    lines.append('{"case_id":"number","answer":42}')  # read as text "42", with a warning
    data = tmp_path / "hostile.jsonl"
    data.write_text("\n".join(lines) + "\n")

    r = cli("run", "chunk", "--input", str(data), "-o", "out")

    assert r.rc == 1, r.err
    assert "Traceback" not in r.err, r.err
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    good = len(HOSTILE_LINES) + 1
    assert (summary["records"], summary["cases"]) == (len(lines), good + 1)
    assert (summary["failed_records"], summary["warnings"]) == (len(HOSTILE_LINES), 1)
    assert _case_ids(out) == {f"good-{n}" for n in range(good)} | {"number"}
    errors = [e for e in _errors(out) if e["kind"] == "record"]
    assert len(errors) == len(HOSTILE_LINES)
    for err, (text, field, word) in zip(errors, HOSTILE_LINES, strict=True):
        line = lines.index(text) + 1
        assert (err["index"], err["line"]) == (line - 1, line), err
        assert err["field"] == field, err
        assert word in err["reason"], err
        # the terminal names the same record, at the same line, with the same reason
        assert f"line {line}: {err['reason']}" in r.err
    by_reason = {e["case_id"]: e for e in errors}
    # the case id with the surrogate survives the round trip through errors.jsonl
    assert by_reason["x\ud800"]["index"] == 3 and by_reason["parts"]["case_id"] == "parts"
    [warning] = [e for e in _errors(out) if e["kind"] == "warning"]
    assert warning["case_id"] == "number" and "42" in warning["reason"]
    assert "warning: line" in r.err and "the number 42 was read as the text '42'" in r.err
    report = json.loads((out / "cases" / "number.json").read_text())
    assert report["warnings"] == [warning["reason"]]


def test_terminal_lists_at_most_20_bad_records_unless_verbose(cli: Runner, tmp_path: Path) -> None:
    data = tmp_path / "many.jsonl"
    data.write_text("\n".join(['{"output": 1.5e999}'] * 25 + [_good(0)]) + "\n")
    r = cli("run", "chunk", "--input", str(data), "-o", "out")
    assert r.rc == 1
    assert r.err.count("Infinity is not a valid number") == 20
    assert "... and 5 more (-v lists them all)" in r.err
    r = cli("-v", "run", "chunk", "--input", str(data), "-o", "out2")
    assert r.err.count("Infinity is not a valid number") == 25 and "more (-v" not in r.err


def test_json_array_keeps_the_elements_after_an_unclosed_brace(cli: Runner, tmp_path: Path) -> None:
    data = tmp_path / "broken.json"
    data.write_text(
        "[\n"
        + _good(0)
        + ',\n{"case_id": "open", "output": "never closed",\n'
        + _good(1)
        + ",\n"
        + '{"case_id": "deep", "output": "x", "m": '
        + "[" * 5000
        + "]" * 5000
        + "},\n"
        + _good(2)
        + "\n]\n"
    )
    r = cli("run", "chunk", "--input", str(data), "-o", "out")
    assert r.rc == 1, r.err
    assert _case_ids(tmp_path / "out") == {"good-0", "good-1", "good-2"}
    errs = _errors(tmp_path / "out")
    assert [(e["index"], e["line"]) for e in errs] == [(1, 3), (3, 5)]
    assert "unclosed '{'" in errs[0]["reason"] and "nested too deeply" in errs[1]["reason"]


def test_csv_cell_over_the_csv_module_limit_is_read(cli: Runner, tmp_path: Path) -> None:
    data = tmp_path / "big.csv"
    with data.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case_id", "output", "context"])
        w.writerow(["a", "first", "short"])
        w.writerow(["b", "second", "y" * 140_000])  # over csv's default 131,072
        w.writerow(["c", "multi\nline\nanswer", "z"])
        w.writerow(["d", "fourth", "z"])
    r = cli("run", "chunk", "--input", str(data), "-o", "out")
    assert r.rc == 0, r.err
    assert _case_ids(tmp_path / "out") == {"a", "b", "c", "d"}
    lines = {
        json.loads(p.read_text())["case_id"]: json.loads(p.read_text())["line"]
        for p in (tmp_path / "out" / "cases").glob("*.json")
    }
    assert lines == {"a": 2, "b": 3, "c": 4, "d": 7}


def test_empty_input_is_an_input_error_with_a_summary(cli: Runner, tmp_path: Path) -> None:
    for name, text in (("empty.jsonl", ""), ("blank.json", "  \n"), ("header.csv", "output\n")):
        data = tmp_path / name
        data.write_text(text)
        r = cli("run", "chunk", "--input", str(data), "-o", f"out-{name}")
        assert r.rc == 1, (name, r.err)
        assert "the input holds no records" in r.err
        summary = json.loads((tmp_path / f"out-{name}" / "summary.json").read_text())
        assert summary["records"] == 0 and "no records" in summary["input_error"]
    r = cli("run", "chunk", "--input", str(tmp_path / "empty.jsonl"), "-o", "lim0", "--limit", "0")
    assert r.rc == 0, r.err  # nothing asked for: not an error


def test_a_truncated_gzip_keeps_the_records_before_the_cut(cli: Runner, tmp_path: Path) -> None:
    import gzip

    whole = gzip.compress(("\n".join(_good(n) for n in range(200)) + "\n").encode())
    data = tmp_path / "cut.jsonl.gz"
    data.write_bytes(whole[: len(whole) * 2 // 3])  # no end-of-stream marker
    r = cli("run", "chunk", "--input", str(data), "-o", "out")
    assert r.rc == 1, r.err
    assert "Traceback" not in r.err and "reading stopped: EOFError" in r.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert 0 < summary["cases"] == summary["records"] < 200
    assert "reading stopped" in summary["input_error"]
    assert _case_ids(tmp_path / "out") == {f"good-{n}" for n in range(summary["cases"])}
