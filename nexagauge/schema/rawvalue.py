"""Checks of a raw record's values before it becomes a case: the errors and warnings of bad data.

A record comes from a file someone else wrote, so anything JSON (or Python) can hold may be in it.
:func:`check_record` walks it once, iteratively (no recursion, so no depth can crash it), and
rejects what no later stage can handle, naming the field by its path (``metadata.tags[3]``):

- nesting deeper than :data:`MAX_DEPTH` (reports, cache keys and the judge's JSON would recurse);
- NaN and Infinity (not JSON; ``json`` reads them, but a report holding them is unreadable);
- integers too long to be written as decimal text (Python refuses above 4,300 digits);
- text holding an unpaired UTF-16 surrogate (``"\\ud800"`` is valid JSON escaping, but no UTF-8
  writer can encode it: reports, the judge's HTTP body and cache keys would all fail).

:func:`as_text` reads a text field: text as written; a finite number is read as its decimal text
with a *warning* (``"answer": 144`` is a legitimate answer, but a number where text belongs is
often a mistake); anything else is an error.

Example:
    >>> check_record({"output": "ok", "metadata": {"score": float("nan")}}, 7)
    Traceback (most recent call last):
    ...
    nexagauge.schema.rawvalue.RecordError: record 7, field 'metadata.score': NaN is not a valid number (JSON has no NaN or Infinity)
    >>> warnings: list[str] = []
    >>> as_text(144, "answer", 0, None, warnings), warnings
    ('144', ["field 'answer': the number 144 was read as the text '144' (quote it to silence this)"])
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from typing import Any

#: deepest nesting of objects/arrays a record may have (a conversation with message parts and
#: tool calls is under 10 levels; metadata rarely more)
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
_LOG10_2 = math.log10(2)


class RecordError(ValueError):
    """A record that cannot become a case. Names the record (index and id if known) and field.

    The message is safe to print anywhere: ``repr`` escapes the case id's control characters and
    unpaired surrogates.

    Example:
        >>> e = RecordError(3, "output", "missing output", case_id="c-3")
        >>> (e.field, str(e))
        ('output', "record 3 (case_id='c-3'), field 'output': missing output")
    """

    def __init__(
        self, index: int | None, field: str | None, message: str, case_id: str | None = None
    ):
        self.index = index
        self.field = field
        self.reason = message
        self.case_id = case_id
        where = f"record {index}" if index is not None else "record"
        if case_id:
            where += f" (case_id={case_id!r})"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


def _max_int_digits() -> int:
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    return limit or 4300


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def value_problem(value: Any) -> str | None:
    """What makes one scalar unusable (see the module docstring), or ``None``.

    Example:
        >>> value_problem("x\\ud800"), value_problem(1.5)
        ('text holds an unpaired UTF-16 surrogate \\\\ud800 at character 1', None)
    """
    if isinstance(value, str):
        m = _SURROGATE.search(value)
        if m is not None:
            return (
                f"text holds an unpaired UTF-16 surrogate \\u{ord(m.group()):04x} "
                f"at character {m.start()}"
            )
    elif isinstance(value, float):
        if math.isnan(value):
            return "NaN is not a valid number (JSON has no NaN or Infinity)"
        if math.isinf(value):
            return "Infinity is not a valid number (JSON has no NaN or Infinity)"
    elif (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value.bit_length() * _LOG10_2 > _max_int_digits() - 1
    ):
        return f"an integer of more than {_max_int_digits()} digits cannot be written as text"
    return None


def check_record(record: Mapping[str, Any], index: int | None, case_id: str | None = None) -> None:
    """Raise :class:`RecordError` for the first unusable value of ``record`` (module docstring).

    Linear in the size of the record; iterative, so any depth is checked without recursion.

    Example:
        >>> check_record({"output": "ok", "metadata": {"tags": ["a", "b"]}}, 0) is None
        True
    """
    stack: list[tuple[str, Any, int]] = [("", record, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, Mapping):
            if depth >= MAX_DEPTH:
                raise _too_deep(path, index, case_id)
            for k, v in value.items():
                if not isinstance(k, str):
                    raise RecordError(
                        index, path or None, f"key {k!r} is not text", case_id=case_id
                    )
                problem = value_problem(k)
                if problem is not None:
                    raise RecordError(index, path or None, f"a key's {problem}", case_id)
                stack.append((_join(path, k), v, depth + 1))
        elif isinstance(value, list | tuple):
            if depth >= MAX_DEPTH:
                raise _too_deep(path, index, case_id)
            stack.extend((_join(path, i), v, depth + 1) for i, v in enumerate(value))
        else:
            problem = value_problem(value)
            if problem is not None:
                raise RecordError(index, path or None, problem, case_id=case_id)


def _too_deep(path: str, index: int | None, case_id: str | None) -> RecordError:
    """The error for nesting past :data:`MAX_DEPTH`, naming the top-level field (the full path
    would be 64 steps long)."""
    top = re.split(r"[.\[]", path, maxsplit=1)[0] if path else None
    return RecordError(index, top or None, f"nested deeper than {MAX_DEPTH} levels", case_id)


def as_text(
    value: Any, field: str, index: int | None, case_id: str | None, warnings: list[str]
) -> str:
    """A text field's value: text as is, a finite number as its text plus a warning, else error.

    Example:
        >>> as_text("Paris.", "output", 0, None, [])
        'Paris.'
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        problem = value_problem(value)
        if problem is not None:
            raise RecordError(index, field, problem, case_id=case_id)
        text = str(value)
        warnings.append(
            f"field {field!r}: the number {text} was read as the text {text!r} "
            "(quote it to silence this)"
        )
        return text
    raise RecordError(index, field, f"expected text, got {_kind(value)}", case_id=case_id)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__
