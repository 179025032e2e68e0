"""Streaming readers: JSON array, JSONL, CSV; per-record errors with line numbers; streaming."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexagauge.io import jsonscan
from nexagauge.io.readers import ReaderError, RecordReader, detect_format, iter_records
from nexagauge.schema.case import RecordError

from .conftest import SAMPLE, SAMPLE_BAD


def _split(items: list[tuple[int, Any]]) -> tuple[list[Any], dict[int, RecordError]]:
    good = [r for _, r in items if not isinstance(r, RecordError)]
    bad = {i: r for i, r in items if isinstance(r, RecordError)}
    return good, bad


# -- format detection --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,fmt",
    [
        ("a.json", "json"),
        ("a.JSONL", "jsonl"),
        ("a.ndjson", "jsonl"),
        ("a.csv", "csv"),
        ("a.tsv", "tsv"),
        ("a.jsonl.gz", "jsonl"),
    ],
)
def test_format_by_extension(name: str, fmt: str) -> None:
    assert detect_format(name) == fmt


def test_format_override_and_unknown() -> None:
    assert detect_format("data.txt", "jsonl") == "jsonl"
    with pytest.raises(ReaderError, match="--format"):
        detect_format("data.txt")
    with pytest.raises(ReaderError, match="unknown format"):
        detect_format("a.json", "xml")


def test_missing_file_is_a_reader_error(tmp_path: Path) -> None:
    with pytest.raises(ReaderError, match="does not exist"):
        RecordReader(tmp_path / "nope.jsonl")


# -- JSONL ------------------------------------------------------------------------------------------
def test_jsonl_bad_lines_do_not_stop_the_rest(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"output": "a"}\n\n{"output": \n[1]\n{"output": "d"}\n')
    items = list(iter_records(p))
    assert [i for i, _ in items] == [0, 1, 2, 3]  # blank lines take no index
    good, bad = _split(items)
    assert good == [{"output": "a"}, [1], {"output": "d"}]
    assert list(bad) == [1]
    assert "line 3" in str(bad[1]) and str(bad[1]).startswith("record 1")


def test_bundled_samples_read() -> None:
    good, bad = _split(list(iter_records(SAMPLE)))
    assert len(good) >= 20 and not bad
    good, bad = _split(list(iter_records(SAMPLE_BAD)))
    assert list(bad) == [1] and len(good) == 8


def test_limit_and_line_tracking(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps({"output": str(i)}) for i in range(10)))
    r = RecordReader(p, limit=3)
    assert [i for i, _ in r] == [0, 1, 2]
    assert r.pop_line(2) == 3 and r.pop_line(2) is None
    assert list(RecordReader(p, limit=0)) == []


def test_gzip_input(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write('{"output": "a"}\n{"output": "b"}\n')
    assert [r for _, r in iter_records(p)] == [{"output": "a"}, {"output": "b"}]


# -- JSON array --------------------------------------------------------------------------------------
def test_json_array_with_malformed_elements(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text(
        "[\n"
        '  {"output": "a", "note": "brackets ] } and \\" in strings"},\n'
        '  {"output": "b", "x": [1, 2},\n'
        '  {"output": "c", "y": "unterminated\n'
        "  },\n"
        '  {"output": "d"},\n'
        '  {"output": "e" "f": 1},\n'
        '  {"output": "g"}\n'
        "]\n"
    )
    items = list(iter_records(p))
    good, bad = _split(items)
    assert [g["output"] for g in good] == ["a", "d", "g"]
    assert sorted(bad) == [1, 2, 4]
    assert "line 3" in str(bad[1]) and "mismatched" in str(bad[1])
    assert "line 4" in str(bad[2]) and "unterminated" in str(bad[2])
    assert "line 7" in str(bad[4])


def test_json_concatenated_objects_and_empty_array(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text('{\n "output": "a"\n}\n{"output": "b"}')
    assert [r["output"] for _, r in iter_records(p)] == ["a", "b"]
    p.write_text("  [ ]  ")
    assert list(iter_records(p)) == []
    p.write_text("")
    assert list(iter_records(p)) == []


def test_json_array_ending_inside_a_record(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text('[{"output": "a"}, {"output": ]')
    good, bad = _split(list(iter_records(p)))
    assert good == [{"output": "a"}] and "incomplete record" in str(bad[1])
    p.write_text('[{"output": "a"}}, {"output": "b"}]')  # a stray closer spoils one record only
    good, bad = _split(list(iter_records(p)))
    assert good == [{"output": "b"}] and "unexpected '}'" in str(bad[0])


def test_json_not_an_array(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text('"just a string"')
    with pytest.raises(ReaderError, match="expected a JSON array"):
        list(iter_records(p))


def test_json_truncated_array_reports_the_tail(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_text('[{"output": "a"}, {"output": "b"')
    good, bad = _split(list(iter_records(p)))
    assert good == [{"output": "a"}] and list(bad) == [1]
    assert "end of file" in str(bad[1])
    p.write_text('[{"output": "a"}, {"output": "b"}')  # complete records, no closing bracket
    it = iter_records(p)
    assert [r for _, r in (next(it), next(it))] == [{"output": "a"}, {"output": "b"}]
    with pytest.raises(ReaderError, match="no closing"):
        next(it)


record = st.fixed_dictionaries(
    {"output": st.text(max_size=40)},
    optional={
        "input": st.text(max_size=20),
        "context": st.lists(st.text(max_size=15), max_size=3),
        "n": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
        "geval": st.fixed_dictionaries(
            {
                "metrics": st.lists(
                    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
                    max_size=2,
                )
            }
        ),
    },
)


@given(
    records=st.lists(record, max_size=12),
    indent=st.sampled_from([None, 0, 2]),
    chunk=st.integers(min_value=1, max_value=64),
    ensure_ascii=st.booleans(),
)
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_json_array_scanner_round_trips(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    records: list[dict[str, Any]],
    indent: int | None,
    chunk: int,
    ensure_ascii: bool,
) -> None:
    """Whatever the layout and however the file is cut into reads, every record comes back."""
    monkeypatch.setattr(jsonscan, "CHUNK_CHARS", chunk)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(records, indent=indent, ensure_ascii=ensure_ascii), encoding="utf-8")
    assert [r for _, r in iter_records(p)] == records


def test_json_array_is_streamed_not_loaded(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    one = {"output": "x" * 1000, "context": ["y" * 500]}
    with p.open("w") as f:
        f.write("[")
        for i in range(4000):  # ~6 MB
            f.write(("," if i else "") + json.dumps({**one, "case_id": f"c{i}"}))
        f.write("]")
    reader = RecordReader(p)
    it = iter(reader)
    first = next(it)
    assert first[1]["case_id"] == "c0"
    assert reader.bytes_read <= 2 * jsonscan.CHUNK_CHARS < p.stat().st_size / 10
    n = sum(1 for _ in it)
    assert n == 3999


# -- CSV -----------------------------------------------------------------------------------------------
def test_csv_cells_json_and_text(tmp_path: Path) -> None:
    p = tmp_path / "d.csv"
    rows = [
        ["case_id", "question", "answer", "contexts", "relevance", "geval", "notes"],
        [
            "c1",
            "Q1?",
            "[1] is a citation",
            '["doc a", "doc b"]',
            '{"scoring_mode": "scale_1_5", "include_reasoning": true}',
            "",
            "[not json",
        ],
        ["c2", "Q2?", "multi\nline answer", "[plain text context", "false", "", ""],
        ["c3", "Q3?", "A3", "", "{bad json", "", ""],
        ["c4", "Q4?", "A4", "", "", "", "", "extra cell"],
    ]
    import csv

    with p.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    items = list(iter_records(p))
    good, bad = _split(items)
    assert good[0] == {
        "case_id": "c1",
        "question": "Q1?",
        "answer": "[1] is a citation",  # text columns stay text
        "contexts": ["doc a", "doc b"],
        "relevance": {"scoring_mode": "scale_1_5", "include_reasoning": True},
        "notes": "[not json",
    }
    assert good[1]["answer"] == "multi\nline answer"
    assert good[1]["contexts"] == "[plain text context" and good[1]["relevance"] is False
    assert sorted(bad) == [2, 3]
    assert bad[2].field == "relevance" and "line 5" in str(
        bad[2]
    )  # row 3 starts after a 2-line row
    assert "more cells than the header" in str(bad[3]) and "line 6" in str(bad[3])


def test_csv_field_map_column_is_parsed_like_its_field(tmp_path: Path) -> None:
    p = tmp_path / "d.tsv"
    p.write_text('out\tcfg\nhello\t{"scoring_mode": "scale_1_5"}\n')
    [(_, rec)] = list(iter_records(p, field_map={"output": "out", "relevance": "cfg"}))
    assert rec == {"out": "hello", "cfg": {"scoring_mode": "scale_1_5"}}


@given(
    body=st.text(alphabet='[]{},:"\\ \nab1', max_size=80),
    chunk=st.integers(min_value=1, max_value=16),
)
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_json_scanner_survives_garbage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, chunk: int
) -> None:
    """Any input ends in records, per-record errors or one ReaderError - never a crash or hang."""
    monkeypatch.setattr(jsonscan, "CHUNK_CHARS", chunk)
    p = tmp_path / "g.json"
    p.write_text("[" + body)
    items: list[tuple[int, Any]] = []
    try:
        for item in iter_records(p):
            items.append(item)
            assert len(items) <= len(body) + 1
    except ReaderError:
        pass
    assert [i for i, _ in items] == list(range(len(items)))
    try:
        expected = json.loads("[" + body)
    except json.JSONDecodeError:
        return
    assert [r for _, r in items] == expected  # valid input: exactly its elements, no errors


def test_encoding_problems(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"output": "a"}\n{"output": "caf\xe9"}\n{"output": "c"}\n')
    good, bad = _split(list(iter_records(p)))
    assert good == [{"output": "a"}, {"output": "c"}]  # BOM skipped, the Latin-1 line is one error
    assert "line 2: not UTF-8" in str(bad[1])
    j = tmp_path / "d.json"
    j.write_bytes(b'[{"output": "caf\xe9"}]')
    with pytest.raises(ReaderError, match="not UTF-8"):
        list(iter_records(j))
