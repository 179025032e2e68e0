"""Span roles, decided once and in one place: which spans are *answers* (they become evaluation
cases), which are *retrievals* (their documents become the context of later answers), and which
are neither (tools, embeddings, rerankers, guardrails, inner steps).

Why one module: every instrumentation names its spans differently, and a wrong role is a wrong
number -- a retriever scored as an answer (a JSON list judged for relevance, an extra turn in a
conversation, documents missing from the real answer's context) is the measured defect of issue 13.

The role table (first matching vocabulary wins; ``docs/online.md`` has the same table):

========================== ======================================= ==========================
vocabulary                 attribute = value                       role (kind)
========================== ======================================= ==========================
nexa-gauge SDK             ``nexagauge.sdk.version`` present and
                           ``gen_ai.operation.name`` = retrieval   retrieval
                           = execute_tool / embeddings             other (tool / embedding)
                           anything else (a ``@nexagauge.trace``)  answer (traced)
OTel GenAI                 ``gen_ai.operation.name`` = chat,
                           text_completion, generate_content       answer (llm)
                           = retrieval                             retrieval
                           = invoke_agent, invoke_workflow         answer (workflow)
                           = execute_tool, embeddings              other (tool / embedding)
OpenInference              ``openinference.span.kind`` = LLM       answer (llm)
                           = CHAIN, AGENT                          answer (workflow)
                           = RETRIEVER                             retrieval
                           = TOOL, EMBEDDING, RERANKER, GUARDRAIL,
                           EVALUATOR, PROMPT                       other
Traceloop (OpenLLMetry)    ``traceloop.span.kind`` = workflow,
                           agent                                   answer (workflow)
                           = task / tool whose
                           ``traceloop.entity.output`` is a JSON
                           list of documents                       retrieval
                           = task (other output)                   answer (workflow)
                           = tool (other output)                   other (tool)
legacy GenAI (OpenLLMetry) ``gen_ai.prompt.N.*`` /
                           ``gen_ai.completion.N.*``               answer (llm)
any                        ``gen_ai.retrieval.documents`` or
                           ``db.query.result`` events              retrieval
any                        nothing of the above                    other
an LLM answer above        output asks for tool calls (with or
                           without preamble text)                  other (step)
========================== ======================================= ==========================

Tool spans (kind ``tool``) are read as the agent's tool calls by
:mod:`nexagauge.online.ingest.agent`; LLM steps count as the agent's steps.

A *workflow* answer (a chain, agent, workflow or task wrapping the real work) is an answer only
when it is the outermost one: a workflow span inside another answering workflow or traced call is
an inner step (role other, kind ``step``) -- LangChain emits a CHAIN span per runnable, Traceloop a
task per decorated helper, and their intermediate outputs (prompt templates, rewritten queries)
are not answers. Every answer needs an input and an output; a span without them is not a
candidate and does not hide the spans below it. Values of the wrong type (an array where a string
is expected) never match.

Example:
    >>> from nexagauge.online.ingest.decode import SpanRecord
    >>> from nexagauge.online.ingest.spanview import SpanView
    >>> rec = SpanRecord(b"\\x01" * 16, b"\\x02" * 8, b"", "search", 1, 2, False, "svc",
    ...                  {"openinference.span.kind": "RETRIEVER"})
    >>> classify(SpanView(rec, [])).role
    <Role.RETRIEVAL: 'retrieval'>
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from nexagauge.online.ingest.content import BadContent, norm
from nexagauge.online.ingest.spanview import SpanView
from nexagauge.sdk import conventions as C

# values of third-party span kinds (attribute *names* live in nexagauge.sdk.conventions)
OI_LLM = C.OI_SPAN_KIND_LLM
OI_WORKFLOWS = frozenset({C.OI_SPAN_KIND_CHAIN, "AGENT"})
OI_RETRIEVER = C.OI_SPAN_KIND_RETRIEVER
OI_OTHER = frozenset({"TOOL", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT"})
TL_WORKFLOWS = frozenset({"workflow", "agent"})
TL_TASK, TL_TOOL = "task", "tool"
GENAI_LLM = frozenset({C.OPERATION_CHAT, C.OPERATION_TEXT_COMPLETION, C.OPERATION_GENERATE_CONTENT})
GENAI_WORKFLOWS = frozenset({C.OPERATION_INVOKE_AGENT, C.OPERATION_INVOKE_WORKFLOW})
GENAI_OTHER = {C.OPERATION_EXECUTE_TOOL: "tool", C.OPERATION_EMBEDDINGS: "embedding"}

#: per-span rejection reasons (``nexagauge_skipped_total{reason}``)
INVALID_SPAN = "invalid_span"
EXTRACT_ERROR = "extract_error"


class Role(StrEnum):
    """What a span is to the evaluator."""

    ANSWER = "answer"
    RETRIEVAL = "retrieval"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class SpanRole:
    """A span's role, its kind (``llm``, ``workflow``, ``traced``, ``retrieval``, ``tool``,
    ``step``, ...) and the ``attribute=value`` that decided it."""

    role: Role
    kind: str
    why: str

    @property
    def is_answer(self) -> bool:
        return self.role is Role.ANSWER


_OTHER = SpanRole(Role.OTHER, "other", "no role attribute")


def _s(attrs: Mapping[str, object], key: str) -> str | None:
    v = attrs.get(key)
    return v if isinstance(v, str) and v else None


def classify(v: SpanView) -> SpanRole:
    """The role of one span from its own attributes (the role table above), before the
    trace-level rule that turns nested workflows into steps (:func:`assign`).

    An LLM call whose output asks for tool calls (with or without preamble text such as "Let me
    look up your order") is an agent step (role other, kind ``step``), never an answer.

    Raises :class:`~nexagauge.online.ingest.content.BadContent` when a value it must read (a Traceloop
    output) is unreadable.
    """
    r = _classify(v)
    if r.kind == "llm" and v.output_tool_calls:
        return SpanRole(Role.OTHER, "step", f"{r.why}, output = tool calls")
    return r


def _classify(v: SpanView) -> SpanRole:
    a = v.attrs
    op = _s(a, C.GEN_AI_OPERATION_NAME)
    if C.NG_SDK_VERSION in a:
        if op == C.OPERATION_RETRIEVAL:
            return SpanRole(Role.RETRIEVAL, "retrieval", f"{C.GEN_AI_OPERATION_NAME}={op}")
        if op in GENAI_OTHER:
            return SpanRole(Role.OTHER, GENAI_OTHER[op], f"{C.GEN_AI_OPERATION_NAME}={op}")
        return SpanRole(Role.ANSWER, "traced", C.NG_SDK_VERSION)
    if op is not None:
        why = f"{C.GEN_AI_OPERATION_NAME}={op}"
        if op in GENAI_LLM:
            return SpanRole(Role.ANSWER, "llm", why)
        if op == C.OPERATION_RETRIEVAL:
            return SpanRole(Role.RETRIEVAL, "retrieval", why)
        if op in GENAI_WORKFLOWS:
            return SpanRole(Role.ANSWER, "workflow", why)
        if op in GENAI_OTHER:
            return SpanRole(Role.OTHER, GENAI_OTHER[op], why)
    oi = _s(a, C.OI_SPAN_KIND)
    if oi is not None:
        oi = oi.upper()
        why = f"{C.OI_SPAN_KIND}={oi}"
        if oi == OI_LLM:
            return SpanRole(Role.ANSWER, "llm", why)
        if oi in OI_WORKFLOWS:
            return SpanRole(Role.ANSWER, "workflow", why)
        if oi == OI_RETRIEVER:
            return SpanRole(Role.RETRIEVAL, "retrieval", why)
        if oi in OI_OTHER:
            return SpanRole(Role.OTHER, oi.lower(), why)
    tl = _s(a, C.TRACELOOP_SPAN_KIND)
    if tl is not None:
        tl = tl.lower()
        why = f"{C.TRACELOOP_SPAN_KIND}={tl}"
        if tl in TL_WORKFLOWS:
            return SpanRole(Role.ANSWER, "workflow", why)
        if tl in (TL_TASK, TL_TOOL):
            if v.entity_documents is not None:
                return SpanRole(
                    Role.RETRIEVAL, "retrieval", f"{why}, {C.TRACELOOP_ENTITY_OUTPUT}=documents"
                )
            if tl == TL_TASK:
                return SpanRole(Role.ANSWER, "workflow", why)
            return SpanRole(Role.OTHER, "tool", why)
    prefixes = (C.LEGACY_GEN_AI_PROMPT_PREFIX, C.LEGACY_GEN_AI_COMPLETION_PREFIX)
    if any(k.startswith(prefixes) for k in a):
        return SpanRole(Role.ANSWER, "llm", "gen_ai.prompt.N / gen_ai.completion.N")
    if C.GEN_AI_RETRIEVAL_DOCUMENTS in a:
        return SpanRole(Role.RETRIEVAL, "retrieval", C.GEN_AI_RETRIEVAL_DOCUMENTS)
    if v.has_db_query_results:
        return SpanRole(Role.RETRIEVAL, "retrieval", f"{C.DB_QUERY_RESULT_EVENT} events")
    return _OTHER


@dataclass(slots=True)
class Answer:
    """An answer span of a trace: ``nested`` when another answer contains it, ``same_as`` the
    outermost containing answer with the same (whitespace-normalized) output, if any."""

    view: SpanView
    role: SpanRole
    nested: bool = False
    same_as: bytes | None = None


@dataclass(slots=True)
class Rejection:
    """A span the extractor could not read: ``reason`` is a metric label, ``detail`` names the
    span and the attribute (never its value)."""

    span_id: bytes
    reason: str
    detail: str


@dataclass(slots=True)
class TraceRoles:
    """Every span's role in one trace (:func:`assign`)."""

    roles: dict[bytes, SpanRole] = field(default_factory=dict)
    answers: list[Answer] = field(default_factory=list)
    retrievals: list[SpanView] = field(default_factory=list)
    #: tool executions (kind ``tool``) and LLM calls (kinds ``llm`` and ``step``) of the trace
    tools: list[SpanView] = field(default_factory=list)
    llm_calls: list[SpanView] = field(default_factory=list)
    #: spans of agents / workflows (for the agent's name)
    agents: list[SpanView] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def rejection(v: SpanView, e: BaseException) -> Rejection:
    """The rejection of span ``v`` for error ``e`` (:class:`BadContent` = unreadable input;
    anything else is an extractor bug, reported by its type)."""
    where = f"span {v.rec.span_hex} ({v.rec.name[:80]!r})"
    if isinstance(e, BadContent):
        return Rejection(v.rec.span_id, INVALID_SPAN, f"{where}: {e}")
    return Rejection(v.rec.span_id, EXTRACT_ERROR, f"{where}: {type(e).__name__}")


def _candidate(v: SpanView, tr: TraceRoles) -> SpanRole | None:
    """The span's own role if it is an answer with an input and an output; records the role
    (and rejects the span when it cannot be read)."""
    try:
        r = classify(v)
        tr.roles[v.rec.span_id] = r
        if r.role is Role.RETRIEVAL:
            tr.retrievals.append(v)
        elif r.kind == "tool":
            tr.tools.append(v)
        elif r.kind in ("llm", "step"):
            tr.llm_calls.append(v)
        elif r.kind in ("workflow", "traced"):  # traced: @nexagauge.trace(tools=...) agents
            tr.agents.append(v)
        if not r.is_answer:
            return None
        io = v.io
        return r if io.output is not None and io.input_messages else None
    except Exception as e:  # one unreadable span costs only itself
        tr.rejected.append(rejection(v, e))
        tr.roles[v.rec.span_id] = _OTHER
        return None


def assign(views: Mapping[bytes, SpanView]) -> TraceRoles:
    """Roles of every span of a trace, in one walk of the span tree (linear in the spans).

    Spans whose parent is missing (or whose parent links form a cycle) are walked as roots.
    """
    tr = TraceRoles()
    children: dict[bytes, list[bytes]] = {}
    roots: list[bytes] = []
    for sid, v in views.items():
        p = v.rec.parent_span_id
        if p and p != sid and p in views:
            children.setdefault(p, []).append(sid)
        else:
            roots.append(sid)
    visited: set[bytes] = set()
    outer_by_output: dict[str, bytes] = {}
    depth = {"answers": 0, "wrappers": 0}
    # iterative depth-first walk: ("enter", sid) / ("exit", undo) items; a 3,000-deep parent
    # chain must not recurse, and each span is entered once
    for start in [*roots, *views]:  # then spans on a parent cycle (never reached from a root)
        if start in visited:
            continue
        stack: list[tuple[bool, bytes, tuple[bool, bool, str | None]]] = [
            (True, start, (False, False, None))
        ]
        while stack:
            enter, sid, undo = stack.pop()
            if not enter:
                is_answer, is_wrapper, key = undo
                depth["answers"] -= is_answer
                depth["wrappers"] -= is_wrapper
                if key is not None:
                    del outer_by_output[key]
                continue
            if sid in visited:
                continue
            visited.add(sid)
            v = views[sid]
            r = _candidate(v, tr)
            undo = (False, False, None)
            if r is not None and r.kind == "workflow" and depth["wrappers"]:
                tr.roles[sid] = SpanRole(Role.OTHER, "step", f"{r.why} inside another answer")
                r = None
            if r is not None:
                key = norm(v.io.output)
                tr.answers.append(
                    Answer(v, r, nested=depth["answers"] > 0, same_as=outer_by_output.get(key))
                )
                wrapper = r.kind in ("workflow", "traced")
                new_key = key if key not in outer_by_output else None
                if new_key is not None:
                    outer_by_output[new_key] = sid
                depth["answers"] += 1
                depth["wrappers"] += wrapper
                undo = (True, wrapper, new_key)
            stack.append((False, sid, undo))
            stack.extend((True, c, (False, False, None)) for c in reversed(children.get(sid, ())))
    return tr
