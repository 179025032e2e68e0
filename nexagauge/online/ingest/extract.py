"""Turn an assembled trace into evaluation cases, whatever instrumentation wrote it.

Which spans are answers, retrievals or neither is decided by :mod:`nexagauge.online.ingest.roles`; how a
span's input and output are read, by :mod:`nexagauge.online.ingest.spanview`. This module picks the
answers to evaluate and gives each its context:

- **context**: the documents the answer span itself carries (``gen_ai.retrieval.documents`` on a
  traced call), then the documents of the trace's retrieval spans *and the results of its tool
  calls* (:mod:`nexagauge.online.ingest.agent`) that ended before the answer ended, in the order
  they ended (de-duplicated; at most :data:`MAX_CONTEXT_DOCS`, the most recent). Each document
  has a source label (``context_sources``): ``doc:<id>`` (``doc:<n>``, its position, for a
  document without id), ``tool:<name>#<call id>``. Only when the trace holds **no** retrieval
  span and no tool result at all is the system message the context (label ``system``).
- **agent**: when the trace is an agent's (tool calls, tool definitions or an agent span), the
  case's :class:`~nexagauge.schema.tools.AgentRun`: the tool calls and LLM steps before the
  answer.
- **output**: always the model's reply (the output messages), never an assistant message of the
  input history; earlier user/assistant pairs of the input become ``conversation`` turns.

Answer selection (``OnlineSettings.evaluate_spans``):

- ``auto``: every answer; when one answer contains another with the same output (a workflow around
  its LLM call) only the outer one is evaluated, filling its missing model/system message from
  the inner one;
- ``llm``: only LLM answers; ``root``: only answers no other answer contains; ``all``: every
  answer, without merging.

Extraction never raises for a span and is linear in the size of the trace: a span that cannot be
read is rejected with a reason naming it (:class:`SpanError`), the other spans of the trace still
yield their cases.

Example:
    >>> from nexagauge.online.ingest.assembly import Trace
    >>> extract_cases(Trace(b"\\x01" * 16, 0.0, 0.0))
    []
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from nexagauge.online.ingest.agent import trace_agent
from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.content import (
    STEP_ROLE,
    BadContent,
    Message,
    clean_text,
    parse_json,
)
from nexagauge.online.ingest.decode import LogRef, SpanRecord
from nexagauge.online.ingest.roles import EXTRACT_ERROR, INVALID_SPAN, Answer, assign, rejection
from nexagauge.online.ingest.spanview import TRACELOOP_SESSION_ID, SpanView
from nexagauge.schema.case import EvalCase, RecordError, parse_record
from nexagauge.schema.rubrics import RubricLibrary, UntrustedRubricError
from nexagauge.schema.tools import AgentRun, doc_label
from nexagauge.sdk import conventions as C

__all__ = [
    "EXTRACT_ERROR",
    "INVALID_CASE",
    "INVALID_SPAN",
    "MAX_CONTEXT_DOCS",
    "TRACELOOP_SESSION_ID",
    "UNTRUSTED_RUBRIC",
    "ExtractedCase",
    "Mode",
    "SpanError",
    "SpanView",
    "build_views",
    "extract_cases",
    "extract_cases_with_errors",
]

Mode = Literal["auto", "root", "llm", "all"]

#: most documents one case takes as context (the most recent before the answer): bounds the work
#: per case, so a trace of many answers and many retrievals stays linear
MAX_CONTEXT_DOCS = 64
#: how deep an evaluation block or case text may nest (deeper: the span is rejected)
_MAX_RECORD_DEPTH = 32
INVALID_CASE = "invalid_case"
#: a span wrote judge instructions (see :mod:`nexagauge.schema.rubrics`)
UNTRUSTED_RUBRIC = "untrusted_rubric"
_EVAL_BLOCKS = {
    C.NG_EVAL_RELEVANCE: "relevance",
    C.NG_EVAL_GROUNDING: "grounding",
    C.NG_EVAL_GEVAL: "geval",
    C.NG_EVAL_REDTEAM: "redteam",
    C.NG_EVAL_TASK_COMPLETION: "task_completion",
}


@dataclass
class ExtractedCase:
    """One evaluation case and the span it came from."""

    span: SpanRecord
    case: EvalCase
    attrs: dict[str, Any]
    model: str | None
    conversation_id: str | None


class SpanError(NamedTuple):
    """A span that yielded no case although it was read: ``reason`` is the skip reason counted
    in ``nexagauge_skipped_total`` (``invalid_case``, ``invalid_span``, ``extract_error``) and
    ``detail`` names the span and the field (never the offending value)."""

    span: SpanRecord
    detail: str
    reason: str


def build_views(trace: Trace) -> dict[bytes, SpanView]:
    """One :class:`SpanView` per span of ``trace``, with its GenAI log records joined."""
    logs_by_span: dict[bytes, list[LogRef]] = {}
    for log in trace.logs:
        logs_by_span.setdefault(log.span_id, []).append(log)
    return {sid: SpanView(s, logs_by_span.get(sid, [])) for sid, s in trace.spans.items()}


def extract_cases(
    trace: Trace,
    mode: Mode = "auto",
    *,
    views: Mapping[bytes, SpanView] | None = None,
    rubrics: RubricLibrary | None = None,
    inline_rubrics: bool = False,
) -> list[ExtractedCase]:
    """Every case of a trace according to ``mode`` (see module docstring); never raises.

    A span that cannot be read, or whose record is invalid for the case schema (e.g. a
    malformed ``nexagauge.eval.*`` block, or judge instructions written in the span while
    ``inline_rubrics`` is false: spans select ``rubrics`` by name), yields no case;
    :func:`extract_cases_with_errors` reports why.
    """
    return extract_cases_with_errors(
        trace, mode, views=views, rubrics=rubrics, inline_rubrics=inline_rubrics
    )[0]


def extract_cases_with_errors(
    trace: Trace,
    mode: Mode = "auto",
    *,
    views: Mapping[bytes, SpanView] | None = None,
    rubrics: RubricLibrary | None = None,
    inline_rubrics: bool = False,
) -> tuple[list[ExtractedCase], list[SpanError]]:
    """Like :func:`extract_cases`, also returning a :class:`SpanError` per rejected span."""
    views = views if views is not None else build_views(trace)
    tr = assign(views)
    errors = [SpanError(views[r.span_id].rec, r.detail, r.reason) for r in tr.rejected]
    chosen: list[Answer] = []
    absorbed: dict[bytes, list[SpanView]] = {}
    for ans in tr.answers:
        if mode == "llm" and ans.role.kind != "llm":
            continue
        if mode == "root" and ans.nested:
            continue
        if mode == "auto" and ans.same_as is not None:
            absorbed.setdefault(ans.same_as, []).append(ans.view)
            continue
        chosen.append(ans)
    if not chosen:
        return [], errors
    agent = trace_agent(tr)
    rejected = {r.span_id for r in tr.rejected}
    for bad, e in agent.unreadable:  # reported once, even when its answer role failed too
        if bad.rec.span_id not in rejected:
            rejected.add(bad.rec.span_id)
            rej = rejection(bad, e)
            errors.append(SpanError(bad.rec, rej.detail, rej.reason))
    tool_docs: list[tuple[int, list[Doc]]] = [
        (c.end_ns, [(c.call.source_label, ev)])
        for c in agent.calls
        if (ev := c.call.evidence()) is not None
    ]
    contexts = _contexts([a.view for a in chosen], tr.retrievals, errors, tool_docs)
    trace_conv = next((v.conversation_id for v in views.values() if v.conversation_id), None)
    out: list[ExtractedCase] = []
    for ans in chosen:
        v = ans.view
        try:
            docs = contexts[v.rec.span_id]
            inner = absorbed.get(v.rec.span_id, [])
            trusted = (rubrics, inline_rubrics)
            has_evidence = bool(tr.retrievals or tool_docs)
            run = agent.run_before(v.rec.end_ns)
            out.append(_case(v, inner, docs, has_evidence, trace_conv, trusted, run))
        except RecordError as e:
            why = UNTRUSTED_RUBRIC if isinstance(e, UntrustedRubricError) else INVALID_CASE
            errors.append(SpanError(v.rec, str(e), why))
        except Exception as e:  # one bad span costs only itself
            r = rejection(v, e)
            errors.append(SpanError(v.rec, r.detail, r.reason))
    return out, errors


#: a context document: (source label or ``None`` for an unlabelled document, text)
Doc = tuple[str | None, str]


def _contexts(
    answers: list[SpanView],
    retrievals: list[SpanView],
    errors: list[SpanError],
    tool_docs: list[tuple[int, list[Doc]]] | None = None,
) -> dict[bytes, list[Doc]]:
    """Context documents of each answer: its own, then those of retrievals and tool calls that
    ended before it (one sweep over all sorted by end time: linear, whatever the number)."""
    retr: list[tuple[int, list[Doc]]] = list(tool_docs or [])
    for r in retrievals:
        if not r.rec.end_ns:
            continue
        try:
            docs = r.labelled_documents(entity_output=True)
            retr.append((r.rec.end_ns, [(doc_label(i) if i else None, t) for i, t in docs]))
        except Exception as e:  # an unreadable retrieval adds no documents, costs nothing else
            rej = rejection(r, e)
            errors.append(SpanError(r.rec, rej.detail, rej.reason))
    retr.sort(key=lambda x: x[0])
    acc: list[Doc] = []
    seen: set[str] = set()
    out: dict[bytes, list[Doc]] = {}
    i = 0
    for v in sorted(answers, key=lambda a: a.rec.end_ns):
        while i < len(retr) and retr[i][0] <= v.rec.end_ns:
            for d in retr[i][1]:
                if d[1] not in seen:
                    seen.add(d[1])
                    acc.append(d)
            i += 1
        try:  # documents the call itself was given
            own = list(
                {t: (doc_label(i) if i else None, t) for i, t in v.labelled_documents()}.values()
            )
        except BadContent:
            own = []  # unreadable documents on an answer: the retrieval spans still count
        own_set = {t for _, t in own}
        room = max(0, MAX_CONTEXT_DOCS - len(own))
        recent = acc[-room:] if room else []
        out[v.rec.span_id] = (own + [d for d in recent if d[1] not in own_set])[:MAX_CONTEXT_DOCS]
    return out


def _turns(msgs: list[Message], output: str) -> tuple[str | None, list[dict[str, str]]]:
    """(current input, conversation turns) from the input messages and the reply."""
    users_pending: list[str] = []
    turns: list[dict[str, str]] = []
    # agent steps (tool-call requests, with or without preamble text, and the tool results
    # sent back) are neither turns nor the question
    steps = any(r == STEP_ROLE for r, _ in msgs)
    msgs = [(r, t) for r, t in msgs if r != STEP_ROLE and not (steps and r == C.ROLE_TOOL)]
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


def _clean_agent(run: AgentRun) -> AgentRun:
    """``run`` with lone surrogates replaced in every tool text (as the case's other text)."""
    calls = tuple(
        c.model_copy(
            update={
                k: clean_text(x)
                for k in ("name", "call_id", "arguments", "result", "error")
                if isinstance(x := getattr(c, k), str)
            }
        )
        for c in run.tool_calls
    )
    return run.model_copy(update={"tool_calls": calls})


def _clean(v: Any, what: str, depth: int = 0) -> Any:
    """``v`` with every string's lone surrogates replaced (:func:`clean_text`); values nested
    deeper than a case can use reject the span."""
    if isinstance(v, str):
        return clean_text(v)
    if depth > _MAX_RECORD_DEPTH:
        raise BadContent(f"{what}: nested deeper than {_MAX_RECORD_DEPTH} levels")
    if isinstance(v, Mapping):
        return {clean_text(str(k)): _clean(x, what, depth + 1) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x, what, depth + 1) for x in v]
    return v


def _case(
    v: SpanView,
    inner: list[SpanView],
    docs: list[Doc],
    trace_has_retrieval: bool,
    trace_conv: str | None,
    trusted: tuple[RubricLibrary | None, bool] = (None, False),
    agent: AgentRun | None = None,
) -> ExtractedCase:
    a = v.attrs
    io = v.io
    assert io.output is not None
    current, turns = _turns(io.input_messages, io.output)
    system = io.system or next((i.io.system for i in inner if i.io.system), None)
    if not docs and system and not trace_has_retrieval:
        docs = [("system", system)]
    record: dict[str, Any] = {
        "case_id": f"{v.rec.trace_hex}:{v.rec.span_hex}",
        "output": io.output,
        "metadata": {"service": v.rec.service, "span_name": v.rec.name},
    }
    if current:
        record["input"] = current
    if docs:
        record["context"] = [t for _, t in docs]
    if turns:
        record["conversation"] = turns
    for attr, block in _EVAL_BLOCKS.items():
        if attr in a:
            blk = parse_json(a[attr], attr)
            if not isinstance(blk, Mapping):
                raise RecordError(None, attr, "evaluation block must be a JSON object")
            record[block] = _clean(blk, attr)
    model = v.model or next((i.model for i in inner if i.model), None)
    if model:
        record["metadata"]["model"] = model
    case = parse_record(_clean(record, "case"), None, rubrics=trusted[0], inline_rubrics=trusted[1])
    update: dict[str, Any] = {}
    if len(case.context_documents) == len(docs) and docs:
        update["context_sources"] = tuple(
            label or doc_label(str(n)) for n, (label, _) in enumerate(docs, 1)
        )
    if agent is not None:
        update["agent"] = _clean_agent(agent)
    if update:
        case = case.model_copy(update=update)
    conv = v.conversation_id or trace_conv
    return ExtractedCase(span=v.rec, case=case, attrs=a, model=model, conversation_id=conv)
