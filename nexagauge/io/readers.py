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
import sys
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, cast

from nexagauge.io.jsonscan import JsonScanError, JsonScanner, decode_json, json_problem
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
            except (OSError, EOFError, zlib.error) as e:  # a truncated .gz, a read error
                raise ReaderError(
                    f"{self.path}: reading stopped: {type(e).__name__}: {e}"
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
            except UnicodeDecodeError as e:
                yield (
                    index,
                    RecordError(
                        index,
                        None,
                        f"line {lineno}: not UTF-8 text ({e.reason} at column {e.start + 1})",
                    ),
                )
            else:
                yield index, decode_json(line.rstrip("\r\n"), index, lineno)
            index += 1

    # -- JSON array / concatenated objects -----------------------------------------------------
    def _json(self, f: IO[str]) -> Iterator[tuple[int, Any]]:
        scanner = JsonScanner(f, self)
        try:
            for index, (lineno, text, problem) in enumerate(scanner.elements()):
                self.lines[index] = lineno
                if problem is not None:
                    yield index, RecordError(index, None, f"line {lineno}: invalid JSON: {problem}")
                else:
                    yield index, decode_json(text, index, lineno)
        except JsonScanError as e:
            raise ReaderError(str(e)) from None

    # -- CSV -----------------------------------------------------------------------------------
    def _csv(self, f: IO[str], delimiter: str) -> Iterator[tuple[int, Any]]:
        lines = _LineCounter(f)
        reader = csv.reader(lines, delimiter=delimiter)
        # logical field of each column, so a --field-renamed knob column is parsed like its field
        logical_of = {col: logical for logical, col in self.field_map.items()}
        header: list[str] | None = None
        index = 0
        while True:
            start = lines.count + 1  # the row's first line (csv yields [] for each blank line)
            try:
                row = _next_row(reader)
            except StopIteration:
                return
            except csv.Error as e:  # one broken row; the reader goes on at the next line
                if header is None:
                    raise ReaderError(
                        f"{self.path}: line {start}: invalid CSV header: {e}"
                    ) from None
                self.lines[index] = start
                where = f"line {start}" if lines.count <= start else f"lines {start}-{lines.count}"
                yield index, RecordError(index, None, f"{where}: invalid CSV: {e}")
                index += 1
                continue
            if not row:
                continue
            if header is None:
                header = row
                continue
            self.bytes_read = _tell(f, self.bytes_read)
            self.lines[index] = start
            yield index, self._csv_row(header, row, index, start, logical_of)
            index += 1

    def _csv_row(
        self,
        header: list[str],
        cells: list[str],
        index: int,
        lineno: int,
        logical_of: dict[str, str],
    ) -> dict[str, Any] | RecordError:
        if len(cells) > len(header):
            return RecordError(
                index,
                None,
                f"line {lineno}: row has {len(cells) - len(header)} more cells than the header",
            )
        out: dict[str, Any] = {}
        for col, cell in zip(header, cells, strict=False):
            if cell.strip() == "":
                continue  # an empty cell is a missing value
            name = logical_of.get(col, col)
            if name in JSON_COLUMNS:
                try:
                    out[col] = json.loads(cell)
                except (ValueError, RecursionError) as e:
                    return RecordError(
                        index, col, f"line {lineno}: cell is not valid JSON: {json_problem(e)}"
                    )
            elif name in LIST_COLUMNS and cell.lstrip().startswith("["):
                try:
                    value = json.loads(cell)
                except (ValueError, RecursionError):
                    value = cell  # text that happens to start with '['
                out[col] = value
            else:
                out[col] = cell
        return out


#: largest CSV cell read (the csv module's default, 131,072 characters, is smaller than a long
#: context document; memory is bounded by the record either way, as in the JSON readers)
MAX_CSV_CELL = min(sys.maxsize, 2**31 - 1)


def _next_row(reader: Iterator[list[str]]) -> list[str]:
    """The next CSV row, read with :data:`MAX_CSV_CELL` as the cell limit.

    ``csv.field_size_limit`` is process-wide, so it is raised only for this call and restored:
    other users of the csv module keep theirs.
    """
    previous = csv.field_size_limit(MAX_CSV_CELL)
    try:
        return next(reader)
    finally:
        csv.field_size_limit(previous)


class _LineCounter:
    """Iterates the lines of a text file for ``csv.reader``, counting them (exact row lines)."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.count = 0

    def __iter__(self) -> _LineCounter:
        return self

    def __next__(self) -> str:
        line = self.f.readline()
        if not line:
            raise StopIteration
        self.count += 1
        return line


def _tell(f: IO[str], fallback: int) -> int:
    try:
        buffer = getattr(f, "buffer", None)
        return int(buffer.tell()) if buffer is not None else fallback
    except (OSError, ValueError):
        return fallback


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
