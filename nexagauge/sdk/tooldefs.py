"""The ``gen_ai.tool.definitions`` of an agent: :func:`tool_definitions` builds them from what
``@nexagauge.trace(tools=[...])`` was given (``@nexagauge.tool`` functions, names, definitions).

Its own module so that the decorator and the tool module both use it without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nexagauge.sdk.serialize import to_jsonable

__all__ = ["DEFINITION_ATTR", "tool_definitions"]

#: attribute of an ``@nexagauge.tool`` function holding its definition
DEFINITION_ATTR = "__nexagauge_tool__"


def tool_definitions(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """The ``gen_ai.tool.definitions`` of an agent from what it was given.

    Each item: a function decorated with :func:`tool` (its name and description), a tool name,
    or a definition mapping (``{"type": "function", "name": ...}`` or OpenAI's
    ``{"type": "function", "function": {"name": ...}}``, kept as given).

    Example:
        >>> tool_definitions(["lookup_order", {"type": "function", "function": {"name": "refund"}}])
        [{'type': 'function', 'name': 'lookup_order'}, {'type': 'function', 'function': {'name': 'refund'}}]
    """
    if isinstance(tools, (str, Mapping)):
        raise TypeError("tools: expected a list of tools, names or definitions")
    out: list[dict[str, Any]] = []
    for t in tools:
        definition = getattr(t, DEFINITION_ATTR, None)
        if isinstance(definition, dict):
            out.append(dict(definition))
        elif isinstance(t, str):
            out.append({"type": "function", "name": t})
        elif isinstance(t, Mapping):
            data = to_jsonable(t)
            if not isinstance(data, dict):
                raise TypeError(f"tools: a definition must be a mapping, got {t!r}")
            out.append(data)
        else:
            raise TypeError(
                f"tools: expected @nexagauge.tool functions, names or definitions, got {t!r}"
            )
    return out
