"""Turn an assembled trace into evaluation cases, whatever instrumentation wrote it.

Readers, tried in order for each span (the first that yields messages wins):

1. OpenTelemetry GenAI: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON strings or
   structured OTLP arrays; parts layout or ``{role, content}``), ``gen_ai.system_instructions``;
   the same attributes on a ``gen_ai.client.inference.operation.details`` log record/event.
2. GenAI log events of the official OpenAI instrumentation joined by span id
   (``gen_ai.system/user/assistant.message``, ``gen_ai.choice``).
3. Legacy GenAI / OpenLLMetry LLM spans: ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``.
4. OpenInference: ``llm.input_messages.N.*`` / ``llm.output_messages.N.*``, then
   ``input.value`` / ``output.value`` (chat request/response JSON is understood).
5. OpenLLMetry entities: ``traceloop.entity.input`` / ``traceloop.entity.output``.

Context comes from retrieval spans of the same trace that ended before the evaluated span ended
(``gen_ai.retrieval.documents``, OpenInference ``retrieval.documents.N.document.content``,
OpenLLMetry ``db.query.result`` events); with none, the system message
is the context. The output is always the model's reply (the output messages), never an assistant
message of the input history; earlier user/assistant pairs of the input become the
``conversation`` turns.

Span selection (``OnlineSettings.evaluate_spans``):
- ``auto``: LLM spans, SDK-traced spans and chain/workflow/agent spans with an input and an
  output; when one candidate contains another with the same answer (a wrapper around the LLM
  call) only the outer one is evaluated, filling its missing context/model from the inner one;
- ``llm``: only LLM spans; ``root``: only the outermost candidates; ``all``: every candidate.

Example:
    >>> from nexagauge.online.assembly import Trace
    >>> extract_cases(Trace(b"\\x01" * 16, 0.0, 0.0))
    []
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from nexagauge.online.assembly import Trace
from nexagauge.online.decode import LogRef, SpanRecord, any_value, attributes
from nexagauge.schema.case import EvalCase, RecordError, parse_record
from nexagauge.sdk import conventions as C

Mode = Literal["auto", "root", "llm", "all"]
Message = tuple[str, str]  # (role, text)

_LLM_OPERATIONS = {C.OPERATION_CHAT, C.OPERATION_TEXT_COMPLETION, C.OPERATION_GENERATE_CONTENT}
_WRAPPER_KINDS = {"CHAIN", "AGENT", "workflow", "agent", "task"}
_IDX = re.compile(r"^(\d+)\.(.+)$")
_EVAL_BLOCKS = {
    C.NG_EVAL_RELEVANCE: "relevance",
    C.NG_EVAL_GROUNDING: "grounding",
    C.NG_EVAL_GEVAL: "geval",
    C.NG_EVAL_REDTEAM: "redteam",
}
TRACELOOP_SESSION_ID = C.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + "session_id"


@dataclass
class ExtractedCase:
    """One evaluation case and the span it came from."""

    span: SpanRecord
    case: EvalCase
    attrs: dict[str, Any]
    model: str | None
    conversation_id: str | None


@dataclass
class _Io:
    input_messages: list[Message] = field(default_factory=list)
    output: str | None = None
    system: str | None = None


# --------------------------------------------------------------------------------------------
# text helpers
# --------------------------------------------------------------------------------------------
def _json(v: Any) -> Any:
    if isinstance(v, str):
        s = v.strip()
        if s[:1] in ("[", "{", '"'):
            try:
                return json.loads(s)
            except ValueError:
                return v
    return v


def _content_text(content: Any) -> str | None:
    """Text of a message content: a string, a list of parts, or a part object."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        if content.get(C.PART_TYPE, C.PART_TYPE_TEXT) != C.PART_TYPE_TEXT:
            return None
        for k in (C.PART_CONTENT, "text", "value"):
            if isinstance(content.get(k), str):
                return str(content[k])
        return None
    if isinstance(content, list):
        texts = [t for t in (_content_text(p) for p in content) if t]
        return "".join(texts) if texts else None
    return None


def _message(m: Any) -> Message | None:
    if not isinstance(m, Mapping):
        return None
    role = str(m.get(C.MSG_ROLE) or "").lower()
    text = _content_text(m.get(C.MSG_PARTS)) if C.MSG_PARTS in m else None
    if text is None:
        text = _content_text(m.get("content"))
    if text is None and isinstance(m.get("message"), Mapping):  # gen_ai.choice layout
        inner = _message(m["message"])
        return (inner[0] or "assistant", inner[1]) if inner else None
    if text is None:
        return None
    return role or "user", text


def _messages(v: Any) -> list[Message]:
    v = _json(v)
    if isinstance(v, Mapping):
        v = [v]
    if not isinstance(v, list):
        return [("user", v)] if isinstance(v, str) and v.strip() else []
    return [m for m in (_message(x) for x in v) if m is not None]


def _render(v: Any) -> str | None:
    """A structured value (traceloop entity, ``input.value`` JSON) as evaluation text."""
    v = _json(v)
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping):
        # OpenLLMetry entity input: {"args": [...], "kwargs": {...}}; chat request/response JSON
        if "messages" in v and isinstance(v["messages"], list):
            ms = _messages(v["messages"])
            users = [t for r, t in ms if r == "user"]
            if users:
                return users[-1]
        if "choices" in v and isinstance(v["choices"], list) and v["choices"]:
            m = _message(v["choices"][0])
            if m:
                return m[1]
        args, kwargs = v.get("args"), v.get("kwargs")
        if isinstance(args, list) or isinstance(kwargs, Mapping):
            parts = [a for a in (args or []) if isinstance(a, str)]
            for k in ("question", "query", "input", "prompt", "message", "text"):
                if isinstance(kwargs, Mapping) and isinstance(kwargs.get(k), str):
                    parts.append(kwargs[k])
            if len(parts) == 1:
                return parts[0]
        for k in ("question", "query", "input", "prompt", "output", "answer", "text", "content"):
            if isinstance(v.get(k), str):
                return str(v[k])
    if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str):
        return v[0]
    return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)


def _indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``prefix{i}.{suffix}`` attributes grouped as ``{i: {suffix: value}}``."""
    out: dict[int, dict[str, Any]] = {}
    n = len(prefix)
    for k, v in attrs.items():
        if k.startswith(prefix):
            m = _IDX.match(k[n:])
            if m:
                out.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------
# per-span view
# --------------------------------------------------------------------------------------------
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

    @property
    def operation(self) -> str | None:
        v = self.attrs.get(C.GEN_AI_OPERATION_NAME)
        return v if isinstance(v, str) else None

    @cached_property
    def is_sdk(self) -> bool:
        return C.NG_SDK_VERSION in self.attrs

    @cached_property
    def is_llm(self) -> bool:
        a = self.attrs
        if self.operation in _LLM_OPERATIONS or a.get(C.OI_SPAN_KIND) == C.OI_SPAN_KIND_LLM:
            return True
        return any(
            k.startswith((C.LEGACY_GEN_AI_PROMPT_PREFIX, C.LEGACY_GEN_AI_COMPLETION_PREFIX))
            for k in a
        )

    @cached_property
    def is_wrapper(self) -> bool:
        a = self.attrs
        return a.get(C.OI_SPAN_KIND) in _WRAPPER_KINDS or a.get(C.TRACELOOP_SPAN_KIND) in (
            _WRAPPER_KINDS
        )

    @cached_property
    def is_retrieval(self) -> bool:
        a = self.attrs
        # a traced call may also carry the documents it was given (gen_ai.retrieval.documents on
        # a workflow span): that makes it context-bearing, not a retrieval span
        return (
            self.operation == C.OPERATION_RETRIEVAL
            or a.get(C.OI_SPAN_KIND) == C.OI_SPAN_KIND_RETRIEVER
            or (
                any(n == C.DB_QUERY_RESULT_EVENT for n, _ in self.events)
                and not (self.is_llm or self.is_sdk or self.is_wrapper)
            )
        )

    @cached_property
    def documents(self) -> list[str]:
        """Retrieved document texts carried by this span (any convention)."""
        a = self.attrs
        docs: list[str] = []
        for d in _json_list(a.get(C.GEN_AI_RETRIEVAL_DOCUMENTS)):
            t = d.get(C.DOC_CONTENT) if isinstance(d, Mapping) else d
            if isinstance(t, str) and t.strip():
                docs.append(t)
        for d in _indexed(a, C.OI_RETRIEVAL_DOCUMENTS_PREFIX).values():
            t = d.get(C.OI_DOCUMENT_CONTENT)
            if isinstance(t, str) and t.strip():
                docs.append(t)
        for name, ea in self.events:
            if name == C.DB_QUERY_RESULT_EVENT:
                t = ea.get(C.DB_QUERY_RESULT_DOCUMENT)
                if isinstance(t, str) and t.strip():
                    docs.append(t)
        return docs

    @cached_property
    def model(self) -> str | None:
        for k in (C.GEN_AI_RESPONSE_MODEL, C.GEN_AI_REQUEST_MODEL, C.OI_LLM_MODEL_NAME):
            v = self.attrs.get(k)
            if isinstance(v, str) and v:
                return v
        return None

    @cached_property
    def conversation_id(self) -> str | None:
        for k in (C.GEN_AI_CONVERSATION_ID, C.OI_SESSION_ID, TRACELOOP_SESSION_ID):
            v = self.attrs.get(k)
            if isinstance(v, str) and v:
                return v
        return None

    # -- messages ---------------------------------------------------------------------------
    @cached_property
    def io(self) -> _Io:
        a = self.attrs
        for reader in (self._genai, self._logs, self._legacy, self._openinference, self._entity):
            io = reader(a)
            if io.output is not None and (io.input_messages or reader is self._entity):
                break
        else:
            io = self._merge(a)
        if io.output is not None and not io.output.strip():
            io.output = None
        return io

    def _merge(self, a: Mapping[str, Any]) -> _Io:
        """No reader had both sides: take whatever each found."""
        io = _Io()
        for reader in (self._genai, self._logs, self._legacy, self._openinference, self._entity):
            r = reader(a)
            io.input_messages = io.input_messages or r.input_messages
            io.output = io.output if io.output is not None else r.output
            io.system = io.system or r.system
        return io

    @staticmethod
    def _split_system(msgs: list[Message]) -> tuple[list[Message], str | None]:
        system = [t for r, t in msgs if r in ("system", "developer")]
        rest = [(r, t) for r, t in msgs if r not in ("system", "developer")]
        return rest, ("\n".join(system) if system else None)

    def _genai(self, a: Mapping[str, Any]) -> _Io:
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
        io = _Io()
        msgs, io.system = self._split_system(_messages(src.get(C.GEN_AI_INPUT_MESSAGES)))
        io.input_messages = msgs
        outs = [t for r, t in _messages(src.get(C.GEN_AI_OUTPUT_MESSAGES)) if r != "user"]
        io.output = outs[0] if outs else None
        sys_parts = _content_text(_json(src.get(C.GEN_AI_SYSTEM_INSTRUCTIONS)))
        if sys_parts:
            io.system = sys_parts
        return io

    def _logs(self, a: Mapping[str, Any]) -> _Io:
        io = _Io()
        msgs: list[Message] = []
        choices: list[tuple[int, str]] = []
        for log, rec in self._log_records:
            body = any_value(rec.body) if rec is not None else None
            if log.event_name == C.EVENT_GEN_AI_CHOICE:
                if isinstance(body, Mapping):
                    m = _message(body)
                    idx = body.get("index", 0)
                    if m:
                        choices.append((idx if isinstance(idx, int) else 0, m[1]))
                continue
            role = log.event_name.removeprefix("gen_ai.").removesuffix(".message")
            if role in ("system", "user", "assistant", "tool") and isinstance(body, Mapping):
                t = _content_text(body.get("content"))
                if t:
                    msgs.append((role, t))
        io.input_messages, io.system = self._split_system(msgs)
        if choices:
            io.output = sorted(choices)[0][1]
        return io

    def _legacy(self, a: Mapping[str, Any]) -> _Io:
        io = _Io()
        prompts = _indexed(a, C.LEGACY_GEN_AI_PROMPT_PREFIX)
        msgs = [
            (str(p.get(C.LEGACY_ROLE_SUFFIX) or "user"), p[C.LEGACY_CONTENT_SUFFIX])
            for p in prompts.values()
            if isinstance(p.get(C.LEGACY_CONTENT_SUFFIX), str)
        ]
        io.input_messages, io.system = self._split_system(msgs)
        comps = _indexed(a, C.LEGACY_GEN_AI_COMPLETION_PREFIX)
        for c in comps.values():
            t = c.get(C.LEGACY_CONTENT_SUFFIX)
            if isinstance(t, str):
                io.output = t
                break
        return io

    def _openinference(self, a: Mapping[str, Any]) -> _Io:
        io = _Io()

        def oi_msgs(prefix: str) -> list[Message]:
            out: list[Message] = []
            for m in _indexed(a, prefix).values():
                text = m.get(C.OI_MESSAGE_CONTENT)
                if not isinstance(text, str):
                    parts = _indexed(m, C.OI_MESSAGE_CONTENTS_PREFIX)
                    texts = [
                        p[C.OI_MESSAGE_CONTENT_TEXT]
                        for p in parts.values()
                        if isinstance(p.get(C.OI_MESSAGE_CONTENT_TEXT), str)
                    ]
                    text = "".join(texts) if texts else None
                if isinstance(text, str):
                    out.append((str(m.get(C.OI_MESSAGE_ROLE) or "user").lower(), text))
            return out

        msgs = oi_msgs(C.OI_LLM_INPUT_MESSAGES_PREFIX)
        outs = [t for r, t in oi_msgs(C.OI_LLM_OUTPUT_MESSAGES_PREFIX) if r != "user"]
        if not msgs and C.OI_INPUT_VALUE in a:
            v = _json(a[C.OI_INPUT_VALUE])
            if isinstance(v, Mapping) and isinstance(v.get("messages"), list):
                msgs = _messages(v["messages"])
            else:
                t = _render(v)
                msgs = [("user", t)] if t else []
        if not outs and C.OI_OUTPUT_VALUE in a:
            t = _render(a[C.OI_OUTPUT_VALUE])
            outs = [t] if t else []
        io.input_messages, io.system = self._split_system(msgs)
        io.output = outs[0] if outs else None
        return io

    def _entity(self, a: Mapping[str, Any]) -> _Io:
        io = _Io()
        if C.TRACELOOP_ENTITY_INPUT in a:
            t = _render(a[C.TRACELOOP_ENTITY_INPUT])
            io.input_messages = [("user", t)] if t else []
        if C.TRACELOOP_ENTITY_OUTPUT in a:
            io.output = _render(a[C.TRACELOOP_ENTITY_OUTPUT])
        return io


def _json_list(v: Any) -> list[Any]:
    v = _json(v)
    return v if isinstance(v, list) else []


# --------------------------------------------------------------------------------------------
# trace -> cases
# --------------------------------------------------------------------------------------------
def _norm(s: str | None) -> str:
    return " ".join((s or "").split())


def _turns(msgs: list[Message], output: str) -> tuple[str | None, list[dict[str, str]]]:
    """(current input, conversation turns) from the input messages and the reply."""
    users_pending: list[str] = []
    turns: list[dict[str, str]] = []
    for role, text in msgs:
        if role in ("user", "human"):
            users_pending.append(text)
        elif role in ("assistant", "ai", "model") and users_pending:
            turns.append({"input": "\n".join(users_pending), "output": text})
            users_pending = []
    current = "\n".join(users_pending) if users_pending else None
    if current is None and msgs and msgs[-1][0] not in ("assistant", "ai", "model"):
        current = msgs[-1][1]  # a tool result or other non-user turn asked for the reply
    if current is not None and turns:
        return current, [*turns, {"input": current, "output": output}]
    return current, []


def extract_cases(
    trace: Trace, mode: Mode = "auto", *, views: Mapping[bytes, SpanView] | None = None
) -> list[ExtractedCase]:
    """Every case of a trace according to ``mode`` (see module docstring); never raises.

    A span whose record is invalid for the case schema (e.g. a malformed ``nexagauge.eval.*``
    block) yields no case; :func:`extract_cases_with_errors` reports why.
    """
    return extract_cases_with_errors(trace, mode, views=views)[0]


def build_views(trace: Trace) -> dict[bytes, SpanView]:
    logs_by_span: dict[bytes, list[LogRef]] = {}
    for log in trace.logs:
        logs_by_span.setdefault(log.span_id, []).append(log)
    return {sid: SpanView(s, logs_by_span.get(sid, [])) for sid, s in trace.spans.items()}


def extract_cases_with_errors(
    trace: Trace, mode: Mode = "auto", *, views: Mapping[bytes, SpanView] | None = None
) -> tuple[list[ExtractedCase], list[tuple[SpanRecord, str]]]:
    """Like :func:`extract_cases`, also returning ``(span, error)`` for spans that failed."""
    views = views if views is not None else build_views(trace)
    parent = {sid: v.rec.parent_span_id for sid, v in views.items()}

    def ancestors(sid: bytes) -> Iterable[bytes]:
        seen = {sid}
        p = parent.get(sid)
        while p and p in views and p not in seen:
            seen.add(p)
            yield p
            p = parent.get(p)

    def eligible(v: SpanView) -> bool:
        if v.is_retrieval and not v.is_llm:
            return False
        if mode == "llm":
            return v.is_llm
        if mode == "all":
            return True
        return v.is_llm or v.is_sdk or v.is_wrapper

    cands = [
        v for v in views.values() if eligible(v) and v.io.output is not None and v.io.input_messages
    ]
    cand_ids = {v.rec.span_id for v in cands}
    absorbed: dict[bytes, list[SpanView]] = {}
    chosen: list[SpanView] = []
    for v in cands:
        anc = [a for a in ancestors(v.rec.span_id) if a in cand_ids]
        if mode == "root" and anc:
            continue
        if mode == "auto":
            same = [a for a in anc if _norm(views[a].io.output) == _norm(v.io.output)]
            if same:
                absorbed.setdefault(same[-1], []).append(v)
                continue
        chosen.append(v)

    retrieval = [v for v in views.values() if v.is_retrieval and v.documents]
    trace_conv = next((v.conversation_id for v in views.values() if v.conversation_id), None)
    out: list[ExtractedCase] = []
    errors: list[tuple[SpanRecord, str]] = []
    for v in chosen:
        inner = absorbed.get(v.rec.span_id, [])
        try:
            out.append(_case(v, inner, retrieval, trace_conv))
        except RecordError as e:
            errors.append((v.rec, str(e)))
    return out, errors


def _case(
    v: SpanView, inner: list[SpanView], retrieval: list[SpanView], trace_conv: str | None
) -> ExtractedCase:
    a = v.attrs
    io = v.io
    assert io.output is not None
    current, turns = _turns(io.input_messages, io.output)
    docs: list[str] = list(dict.fromkeys(v.documents))  # documents the call itself was given
    for r in retrieval:
        if r.rec.span_id == v.rec.span_id or (r.rec.end_ns and r.rec.end_ns <= v.rec.end_ns):
            docs.extend(d for d in r.documents if d not in docs)
    system = io.system or next((i.io.system for i in inner if i.io.system), None)
    if not docs and system:
        docs = [system]
    record: dict[str, Any] = {
        "case_id": f"{v.rec.trace_hex}:{v.rec.span_hex}",
        "output": io.output,
        "metadata": {"service": v.rec.service, "span_name": v.rec.name},
    }
    if current:
        record["input"] = current
    if docs:
        record["context"] = docs
    if turns:
        record["conversation"] = turns
    for attr, block in _EVAL_BLOCKS.items():
        if attr in a:
            blk = _json(a[attr])
            if not isinstance(blk, Mapping):
                raise RecordError(None, attr, "evaluation block must be a JSON object")
            record[block] = blk
    model = v.model or next((i.model for i in inner if i.model), None)
    if model:
        record["metadata"]["model"] = model
    case = parse_record(record, None)
    conv = v.conversation_id or trace_conv
    return ExtractedCase(span=v.rec, case=case, attrs=a, model=model, conversation_id=conv)
