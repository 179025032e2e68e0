"""One span of a sampled trace, read in full: attributes, events, joined GenAI log records, and its
input/output messages in whichever instrumentation's layout it was written.

Readers, tried in order (the first that yields both an input and an output wins):

1. OpenTelemetry GenAI: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON strings or
   structured OTLP arrays; parts layout or ``{role, content}``), ``gen_ai.system_instructions``;
   the same attributes on a ``gen_ai.client.inference.operation.details`` log record/event.
2. GenAI log events of the official OpenAI instrumentation joined by span id
   (``gen_ai.system/user/assistant.message``, ``gen_ai.choice``).
3. Legacy GenAI / OpenLLMetry LLM spans: ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``.
4. OpenInference: ``llm.input_messages.N.*`` / ``llm.output_messages.N.*``, then
   ``input.value`` / ``output.value`` (chat request/response JSON is understood).
5. OpenLLMetry entities: ``traceloop.entity.input`` / ``traceloop.entity.output``.

What *role* a span plays (answer, retrieval, other) is decided in :mod:`nexagauge.online.ingest.roles`,
not here. Everything is decoded on first use: only sampled traces pay for it.

Example:
    >>> from nexagauge.online.ingest.decode import SpanRecord
    >>> rec = SpanRecord(b"\\x01" * 16, b"\\x02" * 8, b"", "chat", 1, 2, False, "svc", {})
    >>> SpanView(rec, []).io.output is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nexagauge.online.ingest.content import (
    MAPPING,
    STEP_ROLE,
    Message,
    ToolRequest,
    content_text,
    document_list,
    document_text,
    indexed,
    message,
    messages,
    parse_json,
    render,
    tool_calls_of,
    tool_results_of,
)
from nexagauge.online.ingest.decode import LogRef, SpanRecord, any_value, attributes
from nexagauge.sdk import conventions as C

TRACELOOP_SESSION_ID = C.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + "session_id"
#: what every indexed tool-call attribute key holds (OpenInference ``message.tool_calls.``,
#: legacy ``gen_ai.completion.N.tool_calls.``)
_TOOL_CALLS_KEY = C.LEGACY_TOOL_CALLS_SUFFIX_PREFIX


@dataclass
class Io:
    """What a span says was asked and answered."""

    input_messages: list[Message] = field(default_factory=list)
    output: str | None = None
    system: str | None = None


def _split_system(msgs: list[Message]) -> tuple[list[Message], str | None]:
    system = [t for r, t in msgs if r in ("system", "developer")]
    rest = [(r, t) for r, t in msgs if r not in ("system", "developer")]
    return rest, ("\n".join(system) if system else None)


class SpanView:
    """A span with its attributes, events and joined log records decoded on first use."""

    def __init__(self, rec: SpanRecord, logs: list[LogRef]) -> None:
        self.rec = rec
        self.logs = sorted(logs, key=lambda r: r.time_ns)

    @cached_property
    def _span(self) -> Any:
        return self.rec.parse()

    @cached_property
    def attrs(self) -> dict[str, Any]:
        if self._span is None:
            return dict(self.rec.marks)
        return attributes(self._span.attributes)

    @cached_property
    def events(self) -> list[tuple[str, dict[str, Any]]]:
        if self._span is None:
            return []
        return [(e.name, attributes(e.attributes)) for e in self._span.events]

    @cached_property
    def _log_records(self) -> list[tuple[LogRef, Any]]:
        """The joined log records, each parsed once."""
        return [(log, log.parse()) for log in self.logs]

    @cached_property
    def status_message(self) -> str | None:
        """The span status description (set with status ERROR), if any."""
        msg = self._span.status.message if self._span is not None else ""
        return msg or None

    def text_attr(self, key: str) -> str | None:
        """A string attribute (``None`` when absent or of another type, e.g. an array)."""
        v = self.attrs.get(key)
        return v if isinstance(v, str) else None

    @cached_property
    def has_db_query_results(self) -> bool:
        return any(n == C.DB_QUERY_RESULT_EVENT for n, _ in self.events)

    @cached_property
    def entity_documents(self) -> list[Any] | None:
        """The Traceloop entity output as a list of documents, when it is one."""
        if C.TRACELOOP_ENTITY_OUTPUT not in self.attrs:
            return None
        return document_list(self.attrs[C.TRACELOOP_ENTITY_OUTPUT], C.TRACELOOP_ENTITY_OUTPUT)

    def documents(self, *, entity_output: bool = False) -> list[str]:
        """Retrieved document texts carried by this span (any convention); ``entity_output``
        also reads a Traceloop task/tool output that is a list of documents."""
        return [t for _, t in self.labelled_documents(entity_output=entity_output)]

    def labelled_documents(self, *, entity_output: bool = False) -> list[tuple[str | None, str]]:
        """Like :meth:`documents`, each with the document's id when the span recorded one."""
        a = self.attrs
        docs: list[tuple[str | None, str]] = []
        if C.GEN_AI_RETRIEVAL_DOCUMENTS in a:
            raw = parse_json(a[C.GEN_AI_RETRIEVAL_DOCUMENTS], C.GEN_AI_RETRIEVAL_DOCUMENTS)
            docs += _with_ids(raw if isinstance(raw, list) else [])
        for d in indexed(a, C.OI_RETRIEVAL_DOCUMENTS_PREFIX).values():
            t = d.get(C.OI_DOCUMENT_CONTENT)
            if isinstance(t, str) and t.strip():
                docs.append((_id(d.get(C.OI_DOCUMENT_ID)), t))
        for name, ea in self.events:
            if name == C.DB_QUERY_RESULT_EVENT:
                t = ea.get(C.DB_QUERY_RESULT_DOCUMENT)
                if isinstance(t, str) and t.strip():
                    docs.append((_id(ea.get(C.DB_QUERY_RESULT_ID)), t))
        if entity_output and self.entity_documents:
            docs += _with_ids(self.entity_documents)
        return docs

    @cached_property
    def model(self) -> str | None:
        for k in (C.GEN_AI_RESPONSE_MODEL, C.GEN_AI_REQUEST_MODEL, C.OI_LLM_MODEL_NAME):
            v = self.text_attr(k)
            if v:
                return v
        return None

    @cached_property
    def conversation_id(self) -> str | None:
        for k in (C.GEN_AI_CONVERSATION_ID, C.OI_SESSION_ID, TRACELOOP_SESSION_ID):
            v = self.text_attr(k)
            if v:
                return v
        return None

    # -- agent steps --------------------------------------------------------------------------
    @cached_property
    def output_tool_calls(self) -> list[ToolRequest]:
        """Tool calls the model asked for in this span's output, in any convention (GenAI
        ``tool_call`` parts, OpenInference ``llm.output_messages.N.message.tool_calls.M``, an
        OpenAI response in ``output.value``, legacy ``gen_ai.completion.N.tool_calls.M``,
        a ``gen_ai.choice`` log record)."""
        if not self._may_ask_for_tools:
            return []
        return self._tool_messages(output=True)[0]

    @cached_property
    def _may_ask_for_tools(self) -> bool:
        """A cheap look before parsing any output: can this span's output hold a tool call?
        (Most LLM spans are plain answers; their output JSON is then not parsed twice.)"""
        a = self.attrs
        for key in (C.GEN_AI_OUTPUT_MESSAGES, C.OI_OUTPUT_VALUE):
            v = a.get(key)
            if v is not None and (not isinstance(v, str) or "tool_call" in v):
                return True
        if self.logs or any(_TOOL_CALLS_KEY in k for k in a):
            return True
        return any(n == C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS for n, _ in self.events)

    @cached_property
    def input_tool_results(self) -> list[tuple[str | None, str | None]]:
        """``(call id, result)`` of every tool result sent to the model in this span's input."""
        return self._tool_messages(output=False)[1]

    @cached_property
    def input_tool_calls(self) -> list[ToolRequest]:
        """Tool calls of earlier steps repeated in this span's input history."""
        return self._tool_messages(output=False)[0]

    def _tool_messages(
        self, *, output: bool
    ) -> tuple[list[ToolRequest], list[tuple[str | None, str | None]]]:
        a = self.attrs
        raw: list[Any] = []
        key = C.GEN_AI_OUTPUT_MESSAGES if output else C.GEN_AI_INPUT_MESSAGES
        for src in self._genai_sources():
            v = parse_json(src.get(key), key)
            raw += v if isinstance(v, list) else [v] if isinstance(v, MAPPING) else []
        prefix = C.OI_LLM_OUTPUT_MESSAGES_PREFIX if output else C.OI_LLM_INPUT_MESSAGES_PREFIX
        for m in indexed(a, prefix).values():
            oi_calls = [
                {
                    "id": tc.get(C.OI_TOOL_CALL_ID),
                    "function": {
                        "name": tc.get(C.OI_TOOL_CALL_FUNCTION_NAME),
                        "arguments": tc.get(C.OI_TOOL_CALL_FUNCTION_ARGUMENTS),
                    },
                }
                for tc in indexed(m, C.OI_MESSAGE_TOOL_CALLS_PREFIX).values()
            ]
            raw.append(
                {
                    "role": m.get(C.OI_MESSAGE_ROLE),
                    "content": m.get(C.OI_MESSAGE_CONTENT),
                    "tool_call_id": m.get(C.OI_MESSAGE_TOOL_CALL_ID),
                    "tool_calls": oi_calls,
                }
            )
        if not raw:  # an OpenAI request / response as JSON (OpenInference input/output.value)
            v = parse_json(a.get(C.OI_OUTPUT_VALUE if output else C.OI_INPUT_VALUE), "value")
            if isinstance(v, MAPPING) and output and isinstance(v.get("choices"), list):
                raw += [c.get("message") for c in v["choices"][:1] if isinstance(c, MAPPING)]
            elif isinstance(v, MAPPING) and not output and isinstance(v.get("messages"), list):
                raw += v["messages"]
        legacy = C.LEGACY_GEN_AI_COMPLETION_PREFIX if output else C.LEGACY_GEN_AI_PROMPT_PREFIX
        for m in indexed(a, legacy).values():
            legacy_calls = [
                {"id": tc.get("id"), "function": tc}
                for tc in indexed(m, C.LEGACY_TOOL_CALLS_SUFFIX_PREFIX).values()
            ]
            raw.append({**m, "tool_calls": legacy_calls})
        for log, rec in self._log_records:
            body = any_value(rec.body) if rec is not None else None
            if not isinstance(body, MAPPING):
                continue
            if output and log.event_name == C.EVENT_GEN_AI_CHOICE:
                raw.append(body.get("message"))
            elif not output and log.event_name == C.EVENT_GEN_AI_TOOL_MESSAGE:
                raw.append({"role": C.ROLE_TOOL, "tool_call_id": body.get("id"), **body})
            elif not output and log.event_name == C.EVENT_GEN_AI_ASSISTANT_MESSAGE:
                raw.append(body)
        calls: list[ToolRequest] = []
        results: list[tuple[str | None, str | None]] = []
        for m in raw:
            if isinstance(m, MAPPING):
                calls += tool_calls_of(m)
                results += tool_results_of(m)
        return calls, results

    def _genai_sources(self) -> list[Mapping[str, Any]]:
        """Where GenAI messages sit: the span, else an operation-details log record or event."""
        if C.GEN_AI_OUTPUT_MESSAGES in self.attrs or C.GEN_AI_INPUT_MESSAGES in self.attrs:
            return [self.attrs]
        for log, rec in self._log_records:
            if log.event_name == C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS:
                return [attributes(rec.attributes)] if rec is not None else []
        for name, ea in self.events:
            if name == C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS:
                return [ea]
        return []

    @cached_property
    def tool_definitions(self) -> list[str] | None:
        """Names of the tools declared to the model or agent on this span
        (``gen_ai.tool.definitions``, OpenInference ``llm.tools.N.tool.json_schema``);
        ``None`` when the span records none."""
        a = self.attrs
        defs: list[Any] = []
        found = False
        if C.GEN_AI_TOOL_DEFINITIONS in a:
            found = True
            v = parse_json(a[C.GEN_AI_TOOL_DEFINITIONS], C.GEN_AI_TOOL_DEFINITIONS)
            defs += v if isinstance(v, list) else []
        for t in indexed(a, C.OI_LLM_TOOLS_PREFIX).values():
            if C.OI_TOOL_JSON_SCHEMA in t:
                found = True
                defs.append(parse_json(t[C.OI_TOOL_JSON_SCHEMA], C.OI_TOOL_JSON_SCHEMA))
        if not found:
            return None
        names: list[str] = []
        for d in defs:
            if isinstance(d, MAPPING):
                fn = d.get("function")
                src = fn if isinstance(fn, MAPPING) else d
                if isinstance(src.get("name"), str):
                    names.append(src["name"])
        return names

    # -- messages ---------------------------------------------------------------------------
    @cached_property
    def io(self) -> Io:
        a = self.attrs
        found: list[Io] = []
        for reader in (self._genai, self._logs, self._legacy, self._openinference, self._entity):
            io = reader(a)
            found.append(io)
            if io.output is not None and (io.input_messages or reader == self._entity):
                break
        else:
            io = _merge(found)
        if io.output is not None and not io.output.strip():
            io.output = None
        return io

    def _genai(self, a: Mapping[str, Any]) -> Io:
        src: Mapping[str, Any] = a
        if C.GEN_AI_OUTPUT_MESSAGES not in a:
            for log, rec in self._log_records:
                if log.event_name == C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS:
                    src = attributes(rec.attributes) if rec is not None else {}
                    break
            else:
                for name, ea in self.events:
                    if name == C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS:
                        src = ea
                        break
        io = Io()
        ins = messages(src.get(C.GEN_AI_INPUT_MESSAGES), C.GEN_AI_INPUT_MESSAGES)
        io.input_messages, io.system = _split_system(ins)
        outs = messages(src.get(C.GEN_AI_OUTPUT_MESSAGES), C.GEN_AI_OUTPUT_MESSAGES)
        replies = [t for r, t in outs if r != "user"]
        io.output = replies[0] if replies else None
        sys_value = parse_json(src.get(C.GEN_AI_SYSTEM_INSTRUCTIONS), C.GEN_AI_SYSTEM_INSTRUCTIONS)
        sys_parts = content_text(sys_value)
        if sys_parts:
            io.system = sys_parts
        return io

    def _logs(self, a: Mapping[str, Any]) -> Io:
        io = Io()
        msgs: list[Message] = []
        choices: list[tuple[int, str]] = []
        for log, rec in self._log_records:
            body = any_value(rec.body) if rec is not None else None
            if log.event_name == C.EVENT_GEN_AI_CHOICE:
                if isinstance(body, MAPPING):
                    m = message(body)
                    idx = body.get("index", 0)
                    if m:
                        choices.append((idx if isinstance(idx, int) else 0, m[1]))
                continue
            role = log.event_name.removeprefix("gen_ai.").removesuffix(".message")
            if role in ("system", "user", "assistant", "tool") and isinstance(body, MAPPING):
                t = content_text(body.get("content"))
                if role == "assistant" and tool_calls_of(body):
                    msgs.append((STEP_ROLE, t or ""))  # an agent step, never a turn
                elif t:
                    msgs.append((role, t))
        io.input_messages, io.system = _split_system(msgs)
        if choices:
            io.output = min(choices, key=lambda c: c[0])[1]
        return io

    def _legacy(self, a: Mapping[str, Any]) -> Io:
        io = Io()
        prompts = indexed(a, C.LEGACY_GEN_AI_PROMPT_PREFIX)
        msgs = [
            (_role(p.get(C.LEGACY_ROLE_SUFFIX)), p[C.LEGACY_CONTENT_SUFFIX])
            for p in prompts.values()
            if isinstance(p.get(C.LEGACY_CONTENT_SUFFIX), str)
        ]
        io.input_messages, io.system = _split_system(msgs)
        for c in indexed(a, C.LEGACY_GEN_AI_COMPLETION_PREFIX).values():
            t = c.get(C.LEGACY_CONTENT_SUFFIX)
            if isinstance(t, str):
                io.output = t
                break
        return io

    def _openinference(self, a: Mapping[str, Any]) -> Io:
        io = Io()

        def oi_msgs(prefix: str) -> list[Message]:
            out: list[Message] = []
            for m in indexed(a, prefix).values():
                text = m.get(C.OI_MESSAGE_CONTENT)
                if not isinstance(text, str):
                    parts = indexed(m, C.OI_MESSAGE_CONTENTS_PREFIX)
                    texts = [
                        p[C.OI_MESSAGE_CONTENT_TEXT]
                        for p in parts.values()
                        if isinstance(p.get(C.OI_MESSAGE_CONTENT_TEXT), str)
                    ]
                    text = "".join(texts) if texts else None
                if indexed(m, C.OI_MESSAGE_TOOL_CALLS_PREFIX):
                    out.append((STEP_ROLE, text if isinstance(text, str) else ""))
                elif isinstance(text, str):
                    out.append((_role(m.get(C.OI_MESSAGE_ROLE)), text))
            return out

        msgs = oi_msgs(C.OI_LLM_INPUT_MESSAGES_PREFIX)
        outs = [t for r, t in oi_msgs(C.OI_LLM_OUTPUT_MESSAGES_PREFIX) if r != "user"]
        if not msgs and C.OI_INPUT_VALUE in a:
            v = parse_json(a[C.OI_INPUT_VALUE], C.OI_INPUT_VALUE)
            if isinstance(v, MAPPING) and isinstance(v.get("messages"), list):
                msgs = messages(v["messages"])
            else:
                t = render(v, C.OI_INPUT_VALUE)
                msgs = [("user", t)] if t else []
        if not outs and C.OI_OUTPUT_VALUE in a:
            t = render(a[C.OI_OUTPUT_VALUE], C.OI_OUTPUT_VALUE)
            outs = [t] if t else []
        io.input_messages, io.system = _split_system(msgs)
        io.output = outs[0] if outs else None
        return io

    def _entity(self, a: Mapping[str, Any]) -> Io:
        io = Io()
        if C.TRACELOOP_ENTITY_INPUT in a:
            t = render(a[C.TRACELOOP_ENTITY_INPUT], C.TRACELOOP_ENTITY_INPUT)
            io.input_messages = [("user", t)] if t else []
        if C.TRACELOOP_ENTITY_OUTPUT in a:
            io.output = render(a[C.TRACELOOP_ENTITY_OUTPUT], C.TRACELOOP_ENTITY_OUTPUT)
        return io


def _merge(found: list[Io]) -> Io:
    """No reader had both sides: take whatever each found, the first reader's first."""
    io = Io()
    for r in found:
        io.input_messages = io.input_messages or r.input_messages
        io.output = io.output if io.output is not None else r.output
        io.system = io.system or r.system
    return io


def _id(v: Any) -> str | None:
    if isinstance(v, str) and v.strip():
        return v.strip()[:200]
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def _with_ids(items: list[Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for d in items:
        t = document_text(d)
        if t is not None:
            out.append((_id(d.get(C.DOC_ID)) if isinstance(d, MAPPING) else None, t))
    return out


def _role(v: Any) -> str:
    return v.lower() if isinstance(v, str) and v else "user"
