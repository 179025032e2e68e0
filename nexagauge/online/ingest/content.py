"""Text out of span attribute values: JSON, chat messages, content parts, documents.

Every function here is total on hostile input: it returns ``None``/``[]`` for shapes it does not
understand, walks nested values only to a small fixed depth (content parts, chat messages and
documents are shallow by specification; anything deeper is not text we evaluate), and raises
only :class:`BadContent` -- for a value that is JSON nested deeper than Python can parse -- which
the extractor turns into the rejection of that one span (issue 15: one bad span costs only
itself). Lone UTF-16 surrogates, which a JSON ``"\\ud800"`` escape produces, are replaced by
U+FFFD (:func:`clean_text`), so no case text can break hashing or OTLP encoding later.

Example:
    >>> messages('[{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]')
    [('user', 'Hi')]
    >>> documents('["doc one", {"page_content": "doc two"}]')
    ['doc one', 'doc two']
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from nexagauge.sdk import conventions as C

Message = tuple[str, str]  # (role, text)
#: ``isinstance(v, MAPPING)`` is ``isinstance(v, Mapping)``, without the ABC's ``__instancecheck__``
#: for the plain ``dict`` s that decoded JSON and OTLP values are (hundreds of checks per trace)
MAPPING = (dict, Mapping)

#: how deep content parts may nest inside a message (a list of parts, a part, its text; deeper
#: is not a chat message of any convention, and the span is rejected)
MAX_PART_DEPTH = 8
_IDX = re.compile(r"^(\d+)\.(.+)$")
#: keys under which documents of common frameworks keep their text (LangChain ``page_content``,
#: LlamaIndex ``text``, GenAI ``content``, Haystack ``content``, JS ``pageContent``)
_DOC_TEXT_KEYS = ("content", "page_content", "text", "document", "pageContent")


class BadContent(ValueError):
    """A value the extractor cannot read at all (the span is rejected with this reason)."""


def clean_text(s: str) -> str:
    """``s`` with lone UTF-16 surrogates replaced by U+FFFD (valid pairs are joined).

    Example:
        >>> clean_text("ok") == "ok", clean_text("x\\ud800y")
        (True, 'x\\ufffdy')
    """
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return s


def parse_json(v: Any, what: str = "value") -> Any:
    """``v`` decoded when it is a string holding a JSON array, object or string; else ``v``.

    Text that is not JSON stays text. JSON nested deeper than the interpreter can parse raises
    :class:`BadContent` naming ``what`` (never ``RecursionError``).
    """
    if isinstance(v, str):
        s = v.strip()
        if s[:1] in ("[", "{", '"'):
            try:
                return json.loads(s)
            except ValueError:
                return v
            except RecursionError:
                raise BadContent(f"{what}: JSON nested too deeply to read") from None
    return v


def content_text(content: Any, _depth: int = 0) -> str | None:
    """Text of a message content: a string, a list of parts, or a part object."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if _depth >= MAX_PART_DEPTH:
        raise BadContent(f"message content nested deeper than {MAX_PART_DEPTH} levels")
    if isinstance(content, MAPPING):
        if content.get(C.PART_TYPE, C.PART_TYPE_TEXT) != C.PART_TYPE_TEXT:
            return None
        for k in (C.PART_CONTENT, "text", "value"):
            if isinstance(content.get(k), str):
                return str(content[k])
        return None
    if isinstance(content, list):
        texts = [t for t in (content_text(p, _depth + 1) for p in content) if t]
        return "".join(texts) if texts else None
    return None


def message(m: Any) -> Message | None:
    """``(role, text)`` of one chat message in the GenAI parts or ``{role, content}`` layout,
    or of a ``gen_ai.choice`` body (``{"message": {...}}``, role defaulting to assistant)."""
    if not isinstance(m, MAPPING):
        return None
    m1 = _flat_message(m)
    if m1 is not None:
        return m1[0] or "user", m1[1]
    inner = m.get("message")
    m2 = _flat_message(inner) if isinstance(inner, MAPPING) else None
    return (m2[0] or "assistant", m2[1]) if m2 else None


def _flat_message(m: Mapping[str, Any]) -> Message | None:
    role = m.get(C.MSG_ROLE)
    role = role.lower() if isinstance(role, str) else ""
    text = content_text(m.get(C.MSG_PARTS)) if C.MSG_PARTS in m else None
    if text is None:
        text = content_text(m.get("content"))
    if role not in (C.ROLE_USER, C.ROLE_SYSTEM, "developer") and tool_calls_of(m):
        return STEP_ROLE, text or ""  # an agent step: tool calls, maybe with preamble text
    if text is None and role == C.ROLE_TOOL:
        results = tool_results_of(m)
        text = "\n".join(r for _, r in results if r is not None) if results else None
    return (role, text) if text is not None else None


#: role of a message in which the model asked for tool calls (with or without preamble text):
#: an agent step, never a conversation turn or an answer
STEP_ROLE = "tool_call"
#: a tool call the model asked for: (call id, tool name, arguments as text)
ToolRequest = tuple[str | None, str, str | None]


def _args_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    except (RecursionError, ValueError, TypeError):
        raise BadContent("tool arguments nested too deeply to render") from None


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def tool_calls_of(m: Mapping[str, Any]) -> list[ToolRequest]:
    """Tool calls one chat message asks for: GenAI ``tool_call`` parts, or the OpenAI
    ``tool_calls`` list (``{"id", "function": {"name", "arguments"}}``).

    Example:
        >>> tool_calls_of({"role": "assistant", "parts": [{"type": "tool_call", "id": "c1",
        ...                "name": "lookup", "arguments": {"id": 7}}]})
        [('c1', 'lookup', '{"id": 7}')]
    """
    out: list[ToolRequest] = []
    parts = m.get(C.MSG_PARTS)
    for p in parts if isinstance(parts, list) else ():
        if isinstance(p, MAPPING) and p.get(C.PART_TYPE) == C.PART_TYPE_TOOL_CALL:
            name = _s(p.get(C.PART_TOOL_NAME))
            if name:
                args = _args_text(p.get(C.PART_TOOL_ARGUMENTS))
                out.append((_s(p.get(C.PART_TOOL_CALL_ID)), name, args))
    calls = m.get("tool_calls")
    for tc in calls if isinstance(calls, list) else ():
        if not isinstance(tc, MAPPING):
            continue
        fn = tc.get("function")
        fn = fn if isinstance(fn, MAPPING) else tc
        name = _s(fn.get("name"))
        if name:
            out.append((_s(tc.get("id")), name, _args_text(fn.get("arguments"))))
    return out


def tool_results_of(m: Mapping[str, Any]) -> list[tuple[str | None, str | None]]:
    """Tool results one chat message carries: GenAI ``tool_call_response`` parts, or an
    OpenAI ``{"role": "tool", "tool_call_id", "content"}`` message: ``(call id, result)``."""
    out: list[tuple[str | None, str | None]] = []
    parts = m.get(C.MSG_PARTS)
    for p in parts if isinstance(parts, list) else ():
        if isinstance(p, MAPPING) and p.get(C.PART_TYPE) == C.PART_TYPE_TOOL_CALL_RESPONSE:
            r = p.get(C.PART_TOOL_RESPONSE)
            out.append((_s(p.get(C.PART_TOOL_CALL_ID)), r if isinstance(r, str) else _args_text(r)))
    role = m.get(C.MSG_ROLE)
    if not out and isinstance(role, str) and role.lower() == C.ROLE_TOOL:
        c = m.get("content")
        text = content_text(c) if c is not None else None
        out.append((_s(m.get("tool_call_id")), text))
    return out


def messages(v: Any, what: str = "messages") -> list[Message]:
    """Chat messages of a JSON string or structured value (a list, or one message object)."""
    v = parse_json(v, what)
    if isinstance(v, MAPPING):
        v = [v]
    if not isinstance(v, list):
        return [("user", v)] if isinstance(v, str) and v.strip() else []
    try:
        return [m for m in (message(x) for x in v) if m is not None]
    except BadContent as e:
        raise BadContent(f"{what}: {e}") from None


def render(v: Any, what: str = "value") -> str | None:
    """A structured value (Traceloop entity, ``input.value`` JSON) as evaluation text."""
    v = parse_json(v, what)
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, MAPPING):
        # OpenLLMetry entity input: {"args": [...], "kwargs": {...}}; chat request/response JSON
        if "messages" in v and isinstance(v["messages"], list):
            users = [t for r, t in messages(v["messages"]) if r == "user"]
            if users:
                return users[-1]
        if "choices" in v and isinstance(v["choices"], list) and v["choices"]:
            m = message(v["choices"][0])
            if m:
                return m[1]
        args, kwargs = v.get("args"), v.get("kwargs")
        if isinstance(args, list) or isinstance(kwargs, MAPPING):
            parts = [a for a in (args if isinstance(args, list) else []) if isinstance(a, str)]
            for k in ("question", "query", "input", "prompt", "message", "text"):
                if isinstance(kwargs, MAPPING) and isinstance(kwargs.get(k), str):
                    parts.append(kwargs[k])
            if len(parts) == 1:
                return parts[0]
        for k in ("question", "query", "input", "prompt", "output", "answer", "text", "content"):
            if isinstance(v.get(k), str):
                return str(v[k])
    if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str):
        return v[0]
    try:
        return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    except (RecursionError, ValueError, TypeError):
        raise BadContent(f"{what}: value nested too deeply to render") from None


def document_text(d: Any) -> str | None:
    """The text of one retrieved document: a string, or an object with a text field
    (``content``, ``page_content``, ``text``, ...; LangChain's serialized ``kwargs`` too)."""
    if isinstance(d, str):
        return d if d.strip() else None
    if not isinstance(d, MAPPING):
        return None
    for src in (d, d.get("kwargs")):
        if isinstance(src, MAPPING):
            for k in _DOC_TEXT_KEYS:
                t = src.get(k)
                if isinstance(t, str) and t.strip():
                    return t
    return None


def document_list(v: Any, what: str = "documents") -> list[Any] | None:
    """``v`` as a list of documents when it is (JSON of) a list whose every item is a document
    (a non-empty string or an object with a text field); ``None`` otherwise. An empty list is a
    retrieval that found nothing."""
    v = parse_json(v, what)
    if not isinstance(v, list):
        return None
    if all(document_text(d) is not None for d in v):
        return v
    return None


def documents(v: Any, what: str = "documents") -> list[str]:
    """Document texts of a JSON string or structured list (items without text are skipped)."""
    v = parse_json(v, what)
    if not isinstance(v, list):
        return []
    return [t for t in (document_text(d) for d in v) if t is not None]


def indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``prefix{i}.{suffix}`` attributes grouped as ``{i: {suffix: value}}``, by index."""
    out: dict[int, dict[str, Any]] = {}
    n = len(prefix)
    for k, v in attrs.items():
        if k.startswith(prefix):
            m = _IDX.match(k[n:])
            if m and len(m.group(1)) <= 9:  # an index, not a 5,000-digit number
                out.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return dict(sorted(out.items()))


def norm(s: str | None) -> str:
    """Whitespace-normalized text (answers of a wrapper and its LLM call compare equal)."""
    return " ".join((s or "").split())
