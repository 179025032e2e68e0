"""Structured judge answers: validate the returned text, and build the one corrective re-ask.

An answer is valid when it parses as a JSON object (tolerating think blocks, fences and prose
around it, :func:`~nexagauge.judge.jsonschema.parse_json_object`), passes the caller's semantic
``check`` (e.g. one verdict per claim) and validates against the pydantic response model. An
invalid answer gets exactly one re-ask that quotes the problem - never a key the judge invented
(:func:`~nexagauge.judge.jsonschema.error_location`) - and then the call fails explicitly.

Example:
    >>> from pydantic import BaseModel
    >>> class A(BaseModel):
    ...     ok: bool
    >>> validate_answer('{"ok": true}', A, None)
    (A(ok=True), None)
    >>> validate_answer("no json here", A, None)[0] is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from nexagauge.judge.jsonschema import error_location, parse_json_object
from nexagauge.judge.promptlib import load_prompt


def validate_answer(
    content: str | None, model: type[BaseModel], check: Callable[[Any], str | None] | None
) -> tuple[BaseModel | None, str | None]:
    """``(value, None)`` for a valid answer, else ``(None, the problem in one line)``."""
    try:
        data = parse_json_object(content)
    except ValueError as e:
        return None, str(e)
    if check is not None:
        problem = check(data)
        if problem:
            return None, problem
    try:
        return model.model_validate(data), None
    except ValidationError as e:
        err = e.errors()[0]
        loc = error_location(tuple(err.get("loc", ())), model)  # never a key the judge invented
        return None, f"{loc}: {err.get('msg', 'invalid')}" if loc else err.get("msg", "invalid")


def reask_messages(
    messages: list[dict[str, str]], content: str | None, error: str | None
) -> list[dict[str, str]]:
    """The conversation so far, the invalid answer, and the ``reask`` prompt naming ``error``."""
    reask = load_prompt("reask")
    return [
        *messages,
        {"role": "assistant", "content": content or ""},
        *reask.render({"error": error}),
    ]
