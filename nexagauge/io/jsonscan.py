"""JSON records of a file, one at a time: the element scanner and the per-record decoder.

:class:`JsonScanner` finds the text of each top-level element of a JSON array (or of a stream of
concatenated objects) without decoding the whole file: it tracks brackets and strings only, so
memory is bounded by the largest record. A malformed element is reported with its problem and
the scanner resynchronizes: on the element's closing bracket, at a line end for an unterminated
string, and at the next record's ``{`` when an object was never closed (in an object, an opener
can only follow ``"key":``; one where a key or ``,`` belongs starts the next record).

:func:`decode_json` decodes one record's text into a value or a
:class:`~nexagauge.schema.rawvalue.RecordError`, whatever the text holds.

Example:
    >>> import io
    >>> class Owner:
    ...     path, bytes_read = "d.json", 0
    >>> scan = JsonScanner(io.StringIO('[{"a": 1}, {"b": 2, {"c": 3}]'), Owner())
    >>> [(text, problem) for _, text, problem in scan.elements()]
    [('{"a": 1}', None), ('{"b": 2, ', "unclosed '{' (the record ends without its '}')"), ('{"c": 3}', None)]
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any, Protocol

from nexagauge.schema.rawvalue import RecordError

#: read size of the scanner; an element larger than this just grows the buffer
CHUNK_CHARS = 1 << 16


class JsonScanError(ValueError):
    """The file as a whole is not a JSON array or a stream of objects (no record can be read)."""


class ScanOwner(Protocol):
    """What the scanner reports to: the file's name (for errors) and the bytes read so far."""

    path: str
    bytes_read: int


def json_problem(e: ValueError | RecursionError) -> str:
    """What is wrong with a JSON text ``json.loads`` refused, in words."""
    if isinstance(e, RecursionError):
        return "nested too deeply to decode"
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} (column {e.colno})" if e.lineno == 1 else f"{e.msg} (line {e.lineno})"
    if "digits" in str(e):
        return "an integer too long to read (more than 4,300 digits)"
    return str(e)


def decode_json(text: str, index: int, lineno: int) -> Any:
    """One record's JSON text decoded, or a :class:`RecordError` naming its line and the problem.

    Whatever the text holds (nesting thousands deep, a 5,000-digit integer), the result is one
    value or one error: nothing raised reaches the reader's loop, so later records still come.

    Example:
        >>> decode_json('{"output": "ok"}', 0, 1)
        {'output': 'ok'}
        >>> print(decode_json("[" * 5000 + "]" * 5000, 4, 9))
        record 4: line 9: invalid JSON: nested too deeply to decode
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        where = (
            f"column {e.colno}"
            if e.lineno == 1
            else f"line {lineno + e.lineno - 1}, column {e.colno}"
        )
        return RecordError(index, None, f"line {lineno}: invalid JSON: {e.msg} ({where})")
    except (ValueError, RecursionError) as e:
        return RecordError(index, None, f"line {lineno}: invalid JSON: {json_problem(e)}")


_OUTSIDE = re.compile(r'[\[\]{}",:]')
_INSIDE = re.compile(r'["\\\n]')
_WS = re.compile(r"[\s,]*")
_CLOSER = {"}": "{", "]": "["}


class JsonScanner:
    """Finds the text of each top-level element without decoding the whole file.

    Tracks brackets and strings only; decoding (and precise error messages) is left to ``json``.
    """

    def __init__(self, f: IO[str], owner: ScanOwner) -> None:
        self.f = f
        self.owner = owner
        self.buf = ""
        self.pos = 0
        self.line = 1  # line number at self.pos
        self.eof = False
        self.truncated = False  # the last element ran into the end of the file

    def _more(self) -> bool:
        # drop what has been consumed so the buffer holds at most one element plus a chunk
        if not self.eof and self.pos > CHUNK_CHARS:
            self.buf = self.buf[self.pos :]
            self.pos = 0
        return self._more_keeping(self.pos)

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
            raise JsonScanError(
                f"{self.owner.path}: line {self.line}: expected a JSON array or objects, "
                f"found {first!r}"
            )
        while True:
            self._skip(_WS if in_array else re.compile(r"\s*"))
            if self.pos >= len(self.buf):
                if in_array and not self.truncated:
                    raise JsonScanError(
                        f"{self.owner.path}: line {self.line}: unexpected end of file "
                        "(the array has no closing ']'); the file may be truncated"
                    )
                return
            if in_array and self.buf[self.pos] == "]":
                self._advance(self.pos + 1)
                self._skip(re.compile(r"\s*"))
                if self.pos < len(self.buf):
                    raise JsonScanError(
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
        prev_rel = 0  # end of the last structural token, relative to ``start`` (rebase-stable)
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
            token_rel, token_start = prev_rel, m.start()
            prev_rel = i - start
            if c == '"':
                in_string = True
            elif c in "[{":
                if (
                    stack
                    and stack[-1] == "{"
                    and not self._after_colon(start, token_rel, token_start)
                ):
                    # in an object an opener can only be a value (after "key":); here one starts
                    # where a key or ',' belongs: the object was never closed
                    if len(stack) == 1:  # a new record begins: end the broken one before it
                        problem = problem or "unclosed '{' (the record ends without its '}')"
                        end = token_start
                        break
                    problem = problem or f"unexpected {c!r} where an object key belongs"
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

    def _after_colon(self, start: int, token_rel: int, token_start: int) -> bool:
        """Whether only blanks separate the opener at ``token_start`` from a preceding ':'."""
        colon_end = start + token_rel
        return (
            self.buf[colon_end - 1 : colon_end] == ":"
            and not self.buf[colon_end:token_start].strip()
        )

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
