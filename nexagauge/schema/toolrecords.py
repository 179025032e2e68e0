"""Tool calls of an offline record: the documented ``tool_calls`` field and its common shapes.

A record of an agent's answer may list the tool calls that came before it (``nexagauge run``
grounds the answer in their results with the same source labels as the online evaluator, and
the agent signals read them). Accepted shapes, per item of ``tool_calls`` (alias
``tools_called``):

- the documented one: ``{"name", "arguments"?, "result"?, "error"?, "id"?, "duration_ms"?}``
  (``arguments`` text or an object; ``call_id`` is an alias of ``id``);
- OpenAI ``tool_calls``: ``{"id", "type": "function", "function": {"name", "arguments"}}``,
  whose results are the ``{"role": "tool", "tool_call_id", "content"}`` messages of the record's
  ``messages``;
- DeepEval ``tools_called``: ``{"name", "input_parameters", "output"}``.

Without a ``tool_calls`` field, the assistant ``tool_calls`` and ``tool`` messages of the
record's ``messages`` are its tool calls. ``tools`` (OpenAI tool definitions, or names) are the
declared tools of a record with tool calls (elsewhere ``tools`` is ordinary metadata). Every error names the record and the field (``tool_calls[2].name``).

Example:
    >>> calls = tool_calls_of_record({"tool_calls": [{"name": "lookup", "arguments": {"id": 7},
    ...                                "result": "shipped"}]}, 0, None)
    >>> [(c.name, c.call_id, c.arguments, c.result) for c in calls]
    [('lookup', 'lookup-1', '{"id": 7}', 'shipped')]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nexagauge.schema.rawvalue import RecordError
from nexagauge.schema.tools import AgentRun, ToolCall, doc_label

__all__ = [
    "DECLARED_FIELD",
    "TOOL_FIELDS",
    "add_agent",
    "declared_tools_of_record",
    "doc_labels",
    "tool_calls_of_record",
]

#: record keys of tool calls (never copied into metadata)
TOOL_FIELDS = ("tool_calls", "tools_called")
#: record key of the declared tools: read (and kept out of metadata) only in a record with tool
#: calls, so a dataset's unrelated ``tools`` column stays metadata
DECLARED_FIELD = "tools"
_MESSAGES = ("messages", "conversation", "turns")


def _text(v: Any, field: str, index: int | None, case_id: str | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping | list | int | float | bool):
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    raise RecordError(index, field, f"expected text or JSON, got {type(v).__name__}", case_id)


def _results_by_id(record: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _MESSAGES:
        msgs = record.get(key)
        for m in msgs if isinstance(msgs, list) else ():
            if isinstance(m, Mapping) and m.get("role") == "tool":
                cid = m.get("tool_call_id")
                if isinstance(cid, str) and cid not in out:
                    out[cid] = m.get("content")
    return out


def _message_calls(record: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The assistant ``tool_calls`` of the record's messages (field name, items)."""
    for key in _MESSAGES:
        msgs = record.get(key)
        items: list[Any] = []
        for m in msgs if isinstance(msgs, list) else ():
            if isinstance(m, Mapping) and isinstance(m.get("tool_calls"), list):
                items += m["tool_calls"]
        if items:
            return key, items
    return "tool_calls", []


def tool_calls_of_record(
    record: Mapping[str, Any], index: int | None, case_id: str | None
) -> tuple[ToolCall, ...]:
    """The tool calls of one raw record (see module docstring); ``()`` when it has none.

    Raises :class:`RecordError` naming the field of a malformed call.
    """
    field = next((k for k in ("tool_calls", "tools_called") if record.get(k) is not None), None)
    if field is not None:
        items = record[field]
        if not isinstance(items, list):
            raise RecordError(
                index, field, f"expected a list of tool calls, got {type(items).__name__}", case_id
            )
    else:
        field, items = _message_calls(record)
    results = _results_by_id(record)
    counts: dict[str, int] = {}
    out: list[ToolCall] = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise RecordError(index, where, "expected a tool call object", case_id)
        fn = item.get("function")
        src = fn if isinstance(fn, Mapping) else item
        name = src.get("name")
        if not isinstance(name, str) or not name.strip():
            raise RecordError(index, f"{where}.name", "a tool call needs a tool name", case_id)
        cid = item.get("id", item.get("call_id"))
        if cid is not None and not isinstance(cid, str | int):
            raise RecordError(index, f"{where}.id", "expected text or an integer", case_id)
        counts[name] = counts.get(name, 0) + 1
        call_id = str(cid) if cid is not None else f"{name}-{counts[name]}"
        args_key = next((k for k in ("arguments", "input_parameters", "input") if k in src), None)
        args = _text(src.get(args_key), f"{where}.{args_key}", index, case_id) if args_key else None
        res_key = next((k for k in ("result", "output", "content") if k in item), None)
        raw = item.get(res_key) if res_key else results.get(call_id)
        result = _text(raw, f"{where}.{res_key or 'result'}", index, case_id)
        error = _text(item.get("error"), f"{where}.error", index, case_id)
        dur = item.get("duration_ms")
        if dur is not None and (isinstance(dur, bool) or not isinstance(dur, int | float)):
            raise RecordError(index, f"{where}.duration_ms", "expected a number", case_id)
        out.append(
            ToolCall(
                name=name,
                call_id=call_id,
                arguments=args,
                result=result,
                error=error,
                duration_ms=float(dur) if dur is not None else None,
            )
        )
    return tuple(out)


def declared_tools_of_record(
    record: Mapping[str, Any], index: int | None, case_id: str | None
) -> tuple[str, ...] | None:
    """Names of the record's declared tools (``tools``: OpenAI definitions or names);
    ``None`` when the record declares none."""
    tools = record.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise RecordError(index, "tools", "expected a list of tool definitions or names", case_id)
    names: list[str] = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, Mapping) else None
        src = fn if isinstance(fn, Mapping) else t
        name = (
            src if isinstance(src, str) else src.get("name") if isinstance(src, Mapping) else None
        )
        if not isinstance(name, str) or not name.strip():
            raise RecordError(index, f"tools[{i}]", "a tool definition needs a name", case_id)
        names.append(name)
    return tuple(sorted(set(names)))


def doc_labels(value: Any) -> list[str]:
    """``doc:<id>`` per context document of a record (``doc:<n>``, 1-based, without an id)."""
    items = value if isinstance(value, list) else [value]
    out = []
    for n, d in enumerate(items, 1):
        i = d.get("id") if isinstance(d, Mapping) else None
        text = d if isinstance(d, str) else None
        if isinstance(d, Mapping):
            text = next(
                (d[k] for k in ("text", "content", "page_content", "document") if k in d), ""
            )
        if isinstance(text, str) and text.strip():
            out.append(doc_label(str(i) if isinstance(i, str | int) else str(n)))
    return out


def add_agent(
    record: Mapping[str, Any],
    index: int | None,
    case_id: str | None,
    values: dict[str, Any],
    separator: str,
) -> None:
    """The record's tool calls (``tool_calls``, see :mod:`nexagauge.schema.toolrecords`): the
    case's ``agent``, and each captured result appended to the context with its source label."""
    calls = tool_calls_of_record(record, index, case_id)
    if not calls:
        return
    declared = declared_tools_of_record(record, index, case_id)
    steps = 1
    for key in ("messages", "conversation", "turns"):
        msgs = record.get(key)
        if isinstance(msgs, list):
            steps += sum(1 for m in msgs if isinstance(m, Mapping) and m.get("tool_calls"))
            break
    values["agent"] = AgentRun(tool_calls=calls, declared_tools=declared, llm_steps=steps)
    evidence = [(c.source_label, ev) for c in calls if (ev := c.evidence()) is not None]
    if not evidence:
        return
    docs = list(values.get("context_documents", ()))
    labels = list(values.pop("_doc_labels", [doc_label(str(n)) for n in range(1, len(docs) + 1)]))
    docs += [t for _, t in evidence]
    labels += [lb for lb, _ in evidence]
    values["context_documents"] = tuple(docs)
    values["context"] = separator.join(docs)
    values["context_sources"] = tuple(labels)
