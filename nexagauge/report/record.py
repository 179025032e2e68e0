"""The ``record`` block of a case file: the question, answer, context and metadata of the case.

``nexagauge run`` writes it into each ``cases/<id>.json`` (so a report, or a person reading the
file, sees what was evaluated, not only the scores); the report reads it back with
:func:`read_record`. The text is scrubbed by the SDK's rules before it is written (a new path
that carries dataset text to disk). Case files of an older nexagauge have no ``record`` block:
:func:`read_record` then returns an empty :class:`RecordText` with ``present`` False.

Shape: ``{"input": str | null, "output": str, "context": [str, ...], "reference": str | null,
"conversation": [{"input": str, "output": str}, ...], "metadata": {...}}``, plus, for an agent's
case, ``context_sources`` (one label per context document) and ``tool_calls``.

Example:
    >>> from nexagauge.schema.case import parse_record
    >>> case = parse_record({"question": "Where?", "answer": "In Paris.", "contexts": ["a", "b"]})
    >>> block = record_block(case)
    >>> block["input"], block["output"], block["context"]
    ('Where?', 'In Paris.', ['a', 'b'])
    >>> read_record({"record": block}).question
    'Where?'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nexagauge.schema.tools import ToolCall
from nexagauge.sdk.scrubbing import Scrubber

#: the key of the block in a case file
KEY = "record"

_scrubber: Scrubber | None = None


def _scrubbed(value: Any) -> Any:
    global _scrubber
    if _scrubber is None:
        _scrubber = Scrubber(secrets=True)
    return _scrubber.scrub_data("record", value)[0]


def record_block(case: Any) -> dict[str, Any]:
    """The ``record`` block of an :class:`~nexagauge.schema.case.EvalCase`, scrubbed."""
    docs = list(case.context_documents) or ([case.context] if case.context else [])
    block = {
        "input": case.input,
        "output": case.output,
        "context": docs,
        "reference": case.reference,
        "conversation": [{"input": t.input, "output": t.output} for t in case.conversation],
        "metadata": case.metadata,
    }
    if case.context_sources:  # one source label per context document (agents, issue 30)
        block["context_sources"] = list(case.context_sources)
    if getattr(case, "agent", None) is not None:
        block["tool_calls"] = [c.model_dump(exclude_none=True) for c in case.agent.tool_calls]
    return dict(_scrubbed(block))


def _tool_call(obj: dict[str, Any]) -> ToolCall:
    """A tool call of the block (tolerant: wrong types are shown as JSON, like the rest)."""
    dur = obj.get("duration_ms")
    return ToolCall(
        name=_text(obj.get("name")) or "",
        call_id=_text(obj.get("call_id")) or "",
        arguments=_text(obj.get("arguments")),
        result=_text(obj.get("result")),
        error=_text(obj.get("error")),
        duration_ms=float(dur)
        if isinstance(dur, int | float) and not isinstance(dur, bool)
        else None,
    )


@dataclass(frozen=True)
class RecordText:
    """What a case file says was evaluated (empty with ``present`` False for old case files)."""

    present: bool = False
    question: str | None = None
    answer: str | None = None
    context: tuple[str, ...] = ()
    reference: str | None = None
    conversation: tuple[tuple[str, str], ...] = ()
    #: metadata as (key, value shown as text: strings as they are, anything else as JSON)
    metadata: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    #: one source label per context document (``doc:kb-7``, ``tool:lookup#c1``), or empty
    context_sources: tuple[str, ...] = ()
    #: the agent's tool calls (empty: no agent run, or a case file written before they were kept)
    tool_calls: tuple[ToolCall, ...] = ()

    def source_index(self, label: str | None) -> int | None:
        """The position of the context document labelled ``label`` (``None``: no such label)."""
        if not label or len(self.context_sources) != len(self.context):
            return None
        try:
            return self.context_sources.index(label)
        except ValueError:
            return None

    def document(self, label: str | None) -> str | None:
        """The context document labelled ``label`` (``None``: no such label)."""
        i = self.source_index(label)
        return None if i is None else self.context[i]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def read_record(doc: dict[str, Any]) -> RecordText:
    """The :class:`RecordText` of a case file's JSON (tolerant: wrong types are shown as JSON)."""
    block = doc.get(KEY)
    if not isinstance(block, dict):
        return RecordText()
    ctx = block.get("context")
    docs = ctx if isinstance(ctx, list) else [] if ctx is None else [ctx]
    conv = block.get("conversation")
    turns = [t for t in conv if isinstance(t, dict)] if isinstance(conv, list) else []
    meta = block.get("metadata")
    return RecordText(
        present=True,
        question=_text(block.get("input")),
        answer=_text(block.get("output")),
        context=tuple(t for t in (_text(d) for d in docs) if t is not None),
        reference=_text(block.get("reference")),
        conversation=tuple(
            (_text(t.get("input")) or "", _text(t.get("output")) or "") for t in turns
        ),
        metadata=tuple(
            (str(k), _text(v) or "null")
            for k, v in (meta.items() if isinstance(meta, dict) else ())
        ),
        context_sources=tuple(_text(x) or "" for x in _list(block.get("context_sources"))),
        tool_calls=tuple(
            _tool_call(c) for c in _list(block.get("tool_calls")) if isinstance(c, dict)
        ),
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
