"""Streaming dataset readers: JSON array, JSON Lines and CSV, one record at a time.

Every reader yields ``(index, raw)`` where ``index`` is the 0-based position of the record in the
file and ``raw`` is the decoded record (a mapping for well-formed data), or ``(index, RecordError)``
for a record that cannot be decoded (invalid JSON, a CSV row with extra cells, an invalid JSON knob
block in a CSV cell). The error names the record and its line; one bad record never stops the
rest. Records are *not* validated here: :func:`nexagauge.schema.case.parse_record` does that (the
executor calls it with the ``--field`` mapping), so validation errors name the field.

Nothing is loaded whole:

- **JSONL** (``.jsonl``, ``.ndjson``): one JSON value per line, blank lines ignored; each line is
  decoded on its own, so a line that is not UTF-8 is one bad record.
- **JSON** (``.json``): a top-level array ``[{...}, {...}]`` is scanned element by element (a small
  bracket/string scanner finds each element's end; only that element is decoded), so memory is
  bounded by the largest record, not the file. A file of concatenated objects (``{...}\\n{...}``,
  also pretty-printed) is accepted too. A malformed element is reported and skipped; the scanner
  resynchronizes on the element's closing bracket (an unterminated string ends at its line end).
- **CSV** (``.csv``; ``.tsv`` with tabs): :class:`csv.DictReader`, header row = field names. Empty
  cells are missing values. Cells of *structured* columns - the knob blocks (``relevance``,
  ``grounding``, ``redteam``, ``geval``, ``refalign``, ``conversation_relevance``), the conversation
  columns and ``metadata`` - are parsed as JSON (``{"scoring_mode": "scale_1_5"}``, ``false``);
  invalid JSON there is an error naming the column. Cells of the context columns (``context``,
  ``contexts``, ``documents``) holding a JSON array of texts become a list of documents; any other
  context cell is plain text. Every other cell is text, as written (an answer that happens to look
  like ``[1, 2]`` stays text). Columns renamed with ``--field`` follow their logical field.

A ``.gz`` suffix on any of these is decompressed on the fly; ``-`` reads standard input (the
format must then be given).

Example:
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.jsonl"
    >>> _ = p.write_text('{"output": "Paris."}\\nnot json\\n')
    >>> [(i, type(r).__name__) for i, r in iter_records(p)]
    [(0, 'dict'), (1, 'RecordError')]
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, cast

from nexagauge.schema.case import FIELD_ALIASES, KNOB_BLOCKS, RecordError

Format = Literal["json", "jsonl", "csv", "tsv"]
FORMATS: tuple[str, ...] = ("json", "jsonl", "csv", "tsv")
_EXTENSIONS: dict[str, Format] = {
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
}
#: read size of the JSON scanner; an element larger than this just grows the buffer
CHUNK_CHARS = 1 << 16

#: CSV columns whose cells are always JSON (objects, arrays or booleans)
JSON_COLUMNS = frozenset({*KNOB_BLOCKS, *FIELD_ALIASES["conversation"], "metadata"})
#: CSV columns whose cells may hold a JSON array of documents (else plain text)
LIST_COLUMNS = frozenset(FIELD_ALIASES["context"])


class ReaderError(ValueError):
    """The input as a whole cannot be read (missing file, unknown format, not JSON at all)."""


def detect_format(path: str | os.PathLike[str], explicit: str | None = None) -> Format:
    """The input format: ``explicit`` (``--format``) if given, else from the file extension.

    Example:
        >>> detect_format("data/cases.jsonl.gz")
        'jsonl'
    """
    if explicit:
        if explicit not in FORMATS:
            raise ReaderError(f"unknown format {explicit!r}; choose one of {', '.join(FORMATS)}")
        return explicit  # type: ignore[return-value]
    name = str(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    try:
        return _EXTENSIONS[suffix]
    except KeyError:
        raise ReaderError(
            f"cannot tell the format of {str(path)!r} from its extension; "
            f"use --format ({', '.join(FORMATS)})"
        ) from None


class RecordReader:
    """A streaming reader over one dataset file (see module docstring).

    Iterating yields ``(index, raw_record)`` or ``(index, RecordError)``. ``line_of(index)`` gives
    the 1-based line where a record starts (kept only for records not yet consumed with ``pop``),
    ``bytes_read`` / ``size`` allow a progress bar.

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
        >>> _ = p.write_text('answer,geval\\nParis.,\\n')
        >>> list(RecordReader(p))
        [(0, {'answer': 'Paris.'})]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        fmt: str | None = None,
        *,
        limit: int | None = None,
        field_map: Mapping[str, str] | None = None,
    ) -> None:
        self.path = str(path)
        self.format: Format = detect_format(path, fmt)
        if self.path == "-" and fmt is None:
            raise ReaderError("reading standard input needs --format")
        if limit is not None and limit < 0:
            raise ReaderError("--limit must be >= 0")
        self.limit = limit
        self.field_map = dict(field_map or {})
        self.lines: dict[int, int] = {}
        self.bytes_read = 0
        self.size: int | None = None
        if self.path != "-":
            p = Path(self.path)
            if not p.exists():
                raise ReaderError(f"input file {self.path!r} does not exist")
            if not p.is_file():
                raise ReaderError(f"input {self.path!r} is not a file")
            self.size = None if self.path.lower().endswith(".gz") else p.stat().st_size

    def line_of(self, index: int) -> int | None:
        return self.lines.get(index)

    def pop_line(self, index: int) -> int | None:
        """The start line of record ``index``, forgetting it (keeps memory bounded)."""
        return self.lines.pop(index, None)

    # -- opening -------------------------------------------------------------------------------
    def _open_binary(self) -> IO[bytes]:
        if self.path == "-":
            return sys.stdin.buffer
        if self.path.lower().endswith(".gz"):
            return cast(IO[bytes], gzip.open(self.path, "rb"))
        return open(self.path, "rb")

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        if self.limit == 0:
            return
        with self._open_binary() as raw:
            if self.format == "jsonl":
                gen = self._jsonl(raw)  # decoded line by line: a bad line is one bad record
            else:
                f = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
                if self.format == "json":
                    gen = self._json(f)
                else:
                    gen = self._csv(f, "\t" if self.format == "tsv" else ",")
            try:
                for count, item in enumerate(gen, start=1):
                    yield item
                    if self.limit is not None and count >= self.limit:
                        break
            except UnicodeDecodeError as e:
                raise ReaderError(
                    f"{self.path}: not UTF-8 text ({e.reason} near byte {self.bytes_read + e.start})"
                ) from None

    # -- JSON Lines ----------------------------------------------------------------------------
    def _jsonl(self, f: IO[bytes]) -> Iterator[tuple[int, Any]]:
        index = 0
        for lineno, raw_line in enumerate(f, start=1):
            self.bytes_read += len(raw_line)
            if lineno == 1 and raw_line.startswith(b"\xef\xbb\xbf"):
                raw_line = raw_line[3:]  # UTF-8 byte order mark
            if not raw_line.strip():
                continue
            self.lines[index] = lineno
            try:
                line = raw_line.decode("utf-8")
                yield index, json.loads(line.rstrip("\r\n"))
            except UnicodeDecodeError as e:
                yield (
                    index,
                    RecordError(
                        index,
                        None,
                        f"line {lineno}: not UTF-8 text ({e.reason} at column {e.start + 1})",
                    ),
                )
            except json.JSONDecodeError as e:
                yield (
                    index,
                    RecordError(
                        index, None, f"line {lineno}: invalid JSON: {e.msg} (column {e.colno})"
                    ),
                )
            index += 1

    # -- JSON array / concatenated objects -----------------------------------------------------
    def _json(self, f: IO[str]) -> Iterator[tuple[int, Any]]:
        scanner = _JsonScanner(f, self)
        for index, (lineno, text, problem) in enumerate(scanner.elements()):
            self.lines[index] = lineno
            if problem is not None:
                yield index, RecordError(index, None, f"line {lineno}: invalid JSON: {problem}")
            else:
                try:
                    yield index, json.loads(text)
                except json.JSONDecodeError as e:
                    yield (
                        index,
                        RecordError(
                            index,
                            None,
                            f"line {lineno}: invalid JSON: {e.msg} "
                            f"(line {lineno + e.lineno - 1}, column {e.colno})",
                        ),
                    )

    # -- CSV -----------------------------------------------------------------------------------
    def _csv(self, f: IO[str], delimiter: str) -> Iterator[tuple[int, Any]]:
        reader = csv.DictReader(f, delimiter=delimiter)
        # logical field of each column, so a --field-renamed knob column is parsed like its field
        logical_of = {col: logical for logical, col in self.field_map.items()}
        index = 0
        start_line = 2
        try:
            for row in reader:
                lineno, start_line = start_line, reader.line_num + 1
                self.bytes_read = _tell(f, self.bytes_read)
                self.lines[index] = lineno
                yield index, self._csv_row(row, index, lineno, logical_of)
                index += 1
        except csv.Error as e:
            yield index, RecordError(index, None, f"line {reader.line_num}: invalid CSV: {e}")

    def _csv_row(
        self, row: dict[str | None, Any], index: int, lineno: int, logical_of: dict[str, str]
    ) -> dict[str, Any] | RecordError:
        extra = row.pop(None, None)
        if extra:
            return RecordError(
                index, None, f"line {lineno}: row has {len(extra)} more cells than the header"
            )
        out: dict[str, Any] = {}
        for col, cell in row.items():
            if col is None or cell is None or cell.strip() == "":
                continue  # an empty cell is a missing value
            name = logical_of.get(col, col)
            if name in JSON_COLUMNS:
                try:
                    out[col] = json.loads(cell)
                except json.JSONDecodeError as e:
                    return RecordError(
                        index, col, f"line {lineno}: cell is not valid JSON: {e.msg}"
                    )
            elif name in LIST_COLUMNS and cell.lstrip().startswith("["):
                try:
                    value = json.loads(cell)
                except json.JSONDecodeError:
                    value = cell  # text that happens to start with '['
                out[col] = value
            else:
                out[col] = cell
        return out


def _tell(f: IO[str], fallback: int) -> int:
    try:
        buffer = getattr(f, "buffer", None)
        return int(buffer.tell()) if buffer is not None else fallback
    except (OSError, ValueError):
        return fallback


_OUTSIDE = re.compile(r'[\[\]{}",]')
_INSIDE = re.compile(r'["\\\n]')
_WS = re.compile(r"[\s,]*")
_CLOSER = {"}": "{", "]": "["}


class _JsonScanner:
    """Finds the text of each top-level element without decoding the whole file.

    Tracks brackets and strings only; decoding (and precise error messages) is left to ``json``.
    """

    def __init__(self, f: IO[str], owner: RecordReader) -> None:
        self.f = f
        self.owner = owner
        self.buf = ""
        self.pos = 0
        self.line = 1  # line number at self.pos
        self.eof = False
        self.truncated = False  # the last element ran into the end of the file

    def _more(self) -> bool:
        if self.eof:
            return False
        # drop what has been consumed so the buffer holds at most one element plus a chunk
        if self.pos > CHUNK_CHARS:
            self.buf = self.buf[self.pos :]
            self.pos = 0
        chunk = self.f.read(CHUNK_CHARS)
        if not chunk:
            self.eof = True
            return False
        self.owner.bytes_read += len(chunk.encode("utf-8", "surrogatepass"))
        self.buf += chunk
        return True

    def _advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def _skip(self, pattern: re.Pattern[str]) -> None:
        while True:
            m = pattern.match(self.buf, self.pos)
            end = m.end() if m else self.pos
            self._advance(end)
            if end < len(self.buf) or not self._more():
                return

    def elements(self) -> Iterator[tuple[int, str, str | None]]:
        """Yield ``(start_line, element_text, problem)``; ``problem`` is set for broken input."""
        self._skip(re.compile(r"\s*"))
        if self.pos >= len(self.buf):
            return  # an empty file holds no records
        first = self.buf[self.pos]
        if first == "[":
            in_array = True
            self._advance(self.pos + 1)
        elif first == "{":
            in_array = False
        else:
            raise ReaderError(
                f"{self.owner.path}: line {self.line}: expected a JSON array or objects, "
                f"found {first!r}"
            )
        while True:
            self._skip(_WS if in_array else re.compile(r"\s*"))
            if self.pos >= len(self.buf):
                if in_array and not self.truncated:
                    raise ReaderError(
                        f"{self.owner.path}: line {self.line}: unexpected end of file "
                        "(the array has no closing ']'); the file may be truncated"
                    )
                return
            if in_array and self.buf[self.pos] == "]":
                self._advance(self.pos + 1)
                self._skip(re.compile(r"\s*"))
                if self.pos < len(self.buf):
                    raise ReaderError(
                        f"{self.owner.path}: line {self.line}: unexpected data after the array"
                    )
                return
            yield self._element(in_array)

    def _element(self, in_array: bool) -> tuple[int, str, str | None]:
        start, start_line = self.pos, self.line
        stack: list[str] = []
        problem: str | None = None
        i = start
        in_string = False
        while True:
            pattern = _INSIDE if in_string else _OUTSIDE
            m = pattern.search(self.buf, i)
            if m is None:
                i = len(self.buf)
                if self._more_keeping(start):
                    start, i = self._rebase(start, i)
                    continue
                end = len(self.buf)
                if stack or in_string:
                    problem = problem or "unexpected end of file inside a record"
                    self.truncated = True
                break
            c = m.group()
            i = m.end()
            if in_string:
                if c == "\\":
                    if i >= len(self.buf) and self._more_keeping(start):
                        start, i = self._rebase(start, i)
                    i += 1  # skip the escaped character
                elif c == '"':
                    in_string = False
                else:  # a raw newline: JSON strings cannot span lines
                    problem = problem or "unterminated string"
                    in_string = False
                continue
            if c == '"':
                in_string = True
            elif c in "[{":
                stack.append(c)
            elif c in "]}":
                if not stack:
                    if in_array and c == "]":
                        end = i - 1  # the array's closing bracket ends a scalar element
                        break
                    problem = problem or f"unexpected {c!r}"
                    end = i
                    break
                if _CLOSER[c] not in stack:
                    if in_array and c == "]":  # the array ends inside an unfinished record
                        problem = problem or "incomplete record before the closing ']'"
                        end = i - 1
                        break
                    problem = problem or f"unexpected {c!r}"  # a stray closer
                    continue
                if stack[-1] != _CLOSER[c]:
                    problem = problem or f"mismatched {c!r}"
                    # resynchronize: the closer closes its nearest matching opener
                    while stack and stack[-1] != _CLOSER[c]:
                        stack.pop()
                if stack:
                    stack.pop()
                if not stack and not in_array:
                    end = i
                    break
            elif c == "," and not stack and in_array:
                end = i - 1
                break
        text = self.buf[start:end]
        self._advance(end)
        return start_line, text, problem

    def _more_keeping(self, start: int) -> bool:
        """Read more input without dropping the element that starts at ``start``."""
        if self.eof:
            return False
        chunk = self.f.read(CHUNK_CHARS)
        if not chunk:
            self.eof = True
            return False
        self.owner.bytes_read += len(chunk.encode("utf-8", "surrogatepass"))
        self.buf += chunk
        return True

    def _rebase(self, start: int, i: int) -> tuple[int, int]:
        """Drop consumed text before ``start`` (keeps memory bounded during long files)."""
        if start > CHUNK_CHARS:
            self.line += self.buf.count("\n", self.pos, start)
            self.buf = self.buf[start:]
            i -= start
            start = 0
            self.pos = 0
        return start, i


def iter_records(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    limit: int | None = None,
    field_map: Mapping[str, str] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Stream ``(index, raw | RecordError)`` from a dataset file (see :class:`RecordReader`).

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.json"
        >>> _ = p.write_text('[{"answer": "Paris."}, {"answer": ]')
        >>> [(i, getattr(r, "reason", r)) for i, r in iter_records(p)][0]
        (0, {'answer': 'Paris.'})
    """
    return iter(RecordReader(path, fmt, limit=limit, field_map=field_map))
