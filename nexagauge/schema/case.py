"""The evaluation case: one raw record normalized into typed inputs (the ``scan`` node's output).

A record may use the canonical field names or any alias of the data schema; lists of context
documents are joined; knob blocks (``relevance``, ``grounding``, ``redteam``, ``geval``,
``refalign``) are validated strictly. Nothing is coerced silently: an unknown knob value, a wrong
type, an ambiguous pair of aliases or a record with no output raises :class:`RecordError` naming
the record and the field.

Example:
    >>> case = parse_record({"question": "Capital of France?", "answer": "Paris."}, index=0)
    >>> (case.input, case.output, case.relevance.scoring_mode.value)
    ('Capital of France?', 'Paris.', 'binary_yes_no')
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nexagauge.schema.knobs import (
    BLOCK_MODELS,
    KNOB_BLOCKS,
    ConversationRelevanceConfig,
    GevalConfig,
    GevalMetricDef,
    GroundingConfig,
    ItemField,
    JudgeKnobs,
    RedteamConfig,
    RedteamMetricDef,
    RefalignConfig,
    RelevanceConfig,
    Rubric,
    ScoringMode,
    TaskCompletionConfig,
    Turn,
)
from nexagauge.schema.rawvalue import RecordError, as_text, check_record, value_problem
from nexagauge.schema.rubrics import RubricLibrary, select_rubrics
from nexagauge.schema.toolrecords import DECLARED_FIELD, TOOL_FIELDS, add_agent, doc_labels
from nexagauge.schema.tools import AgentRun

#: names importable from here (the knob models live in :mod:`nexagauge.schema.knobs`, the
#: record error in :mod:`nexagauge.schema.rawvalue`)
__all__ = [
    "CONTEXT_SEPARATOR",
    "FIELD_ALIASES",
    "KNOB_BLOCKS",
    "ConversationRelevanceConfig",
    "EvalCase",
    "GevalConfig",
    "GevalMetricDef",
    "GroundingConfig",
    "ItemField",
    "JudgeKnobs",
    "RecordError",
    "RedteamConfig",
    "RedteamMetricDef",
    "RefalignConfig",
    "RelevanceConfig",
    "Rubric",
    "RubricLibrary",
    "ScoringMode",
    "Turn",
    "parse_record",
    "stable_case_id",
]

# --------------------------------------------------------------------------------------------
# Field aliases (data schema, "Field Reference"). Order matters only for error messages.
# --------------------------------------------------------------------------------------------
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "case_id": ("case_id", "id"),
    "output": ("output", "generation", "response", "answer", "completion"),
    "input": ("input", "question", "query", "prompt"),
    "context": ("context", "contexts", "documents"),
    "reference": ("reference", "ground_truth", "gold_answer", "label"),
    "conversation": ("conversation", "turns", "messages", "_conversation"),
}

CONTEXT_SEPARATOR = "\n\n"


class EvalCase(BaseModel):
    """A normalized, immutable evaluation case.

    ``context`` is the joined evidence string the spec asks for; ``context_documents`` keeps the
    individual documents so evidence can be attributed to a document.

    Example:
        >>> case = parse_record({"input": "Where is Paris?", "output": "In France.",
        ...                      "context": ["Paris is the capital of France."]})
        >>> (case.has("context"), case.context)
        (True, 'Paris is the capital of France.')
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    case_id: str
    output: str
    input: str | None = None
    context: str | None = None
    context_documents: tuple[str, ...] = ()
    #: one source label per context document (``doc:kb-7``, ``tool:lookup_order#call_1``);
    #: empty when the documents carry no labels
    context_sources: tuple[str, ...] = ()
    reference: str | None = None
    conversation: tuple[Turn, ...] = ()
    relevance: RelevanceConfig = Field(default_factory=RelevanceConfig)
    grounding: GroundingConfig = Field(default_factory=GroundingConfig)
    redteam: RedteamConfig = Field(default_factory=RedteamConfig)
    geval: GevalConfig | None = None
    refalign: RefalignConfig = Field(default_factory=RefalignConfig)
    conversation_relevance: ConversationRelevanceConfig = Field(
        default_factory=ConversationRelevanceConfig
    )
    task_completion: TaskCompletionConfig = Field(default_factory=TaskCompletionConfig)
    #: the agent run around the answer (tool calls, declared tools, steps); ``None`` for no agent
    agent: AgentRun | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: which knob blocks the record set explicitly (so reports can show user intent)
    explicit_blocks: tuple[str, ...] = ()
    #: what was read but looks like a mistake (a number where text belongs); never an error
    warnings: tuple[str, ...] = ()

    def has(self, field: str) -> bool:
        """Whether a data field is present and non-empty (drives node eligibility)."""
        if field == "geval":
            return self.geval is not None
        if field == "conversation":
            return bool(self.conversation)
        if field == "agent":
            return self.agent is not None
        value = getattr(self, field, None)
        return isinstance(value, str) and value.strip() != ""

    def field_text(self, field: str) -> str | None:
        """The text of an item field (``input``/``output``/``reference``/``context``)."""
        v = getattr(self, field, None)
        return v if isinstance(v, str) else None

    def fingerprint(self) -> str:
        """Content hash of everything that can change a score (used in cache keys).

        Computed once per case (the model is frozen; every node's cache key asks for it) and
        forgotten by :meth:`model_copy` with changes.
        """
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        # kept in the instance __dict__, outside the fields (pydantic compares and dumps fields)
        payload = self.model_dump(mode="json", exclude={"metadata", "explicit_blocks", "warnings"})
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (pydantic's); one with changes forgets the memoized :meth:`fingerprint`."""
        out = super().model_copy(update=update, deep=deep)
        if update:
            out.__dict__.pop("_fingerprint", None)
        return out


# --------------------------------------------------------------------------------------------
# Parsing raw records
# --------------------------------------------------------------------------------------------
def _fmt_loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _pick(
    record: Mapping[str, Any], logical: str, field_map: Mapping[str, str], index: int | None
) -> tuple[str | None, Any]:
    """Return (source column, value) for a logical field, honouring --field mappings.

    Two different non-empty aliases for the same field is an error (which one did the user mean?).
    """
    if logical in field_map:
        col = field_map[logical]
        return (col, record[col]) if col in record else (col, None)
    found: list[tuple[str, Any]] = [
        (a, record[a]) for a in FIELD_ALIASES[logical] if a in record and not _empty(record[a])
    ]
    if not found:
        return None, None
    if len(found) > 1 and any(v != found[0][1] for _, v in found[1:]):
        names = ", ".join(a for a, _ in found)
        raise RecordError(index, logical, f"conflicting values in aliases {names}; keep one")
    return found[0]


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip() == "") or (isinstance(v, list) and not v)


def _context_docs(
    value: Any, field: str, index: int | None, case_id: str | None = None
) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        docs: list[str] = []
        for i, d in enumerate(value):
            if isinstance(d, str):
                docs.append(d)
            elif isinstance(d, Mapping):
                text = next(
                    (d[k] for k in ("text", "content", "page_content", "document") if k in d), None
                )
                if not isinstance(text, str):
                    raise RecordError(
                        index, f"{field}[{i}]", "document object has no text field", case_id=case_id
                    )
                docs.append(text)
            else:
                raise RecordError(
                    index,
                    f"{field}[{i}]",
                    f"expected text, got {type(d).__name__}",
                    case_id=case_id,
                )
        return tuple(d for d in docs if d.strip())
    raise RecordError(
        index, field, f"expected text or list of texts, got {type(value).__name__}", case_id=case_id
    )


_ROLE_USER = {"user", "human"}
_ROLE_ASSISTANT = {"assistant", "ai", "bot", "model"}


def _conversation(
    value: Any, field: str, index: int | None, case_id: str | None = None
) -> tuple[Turn, ...]:
    """Accept ``[{input, output}, ...]`` turns or ``[{role, content}, ...]`` chat messages."""
    if not isinstance(value, list):
        raise RecordError(
            index, field, f"expected a list of turns, got {type(value).__name__}", case_id=case_id
        )
    if all(isinstance(t, Mapping) and "input" in t and "output" in t for t in value):
        turns = []
        for i, t in enumerate(value):
            try:
                turns.append(Turn(input=t["input"], output=t["output"]))
            except ValidationError as e:
                raise RecordError(
                    index, f"{field}[{i}]", _first_error(e), case_id=case_id
                ) from None
        return tuple(turns)
    out: list[Turn] = []
    pending_user: list[str] = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping) or "role" not in m:
            raise RecordError(
                index,
                f"{field}[{i}]",
                "expected {input, output} turns or {role, content} messages",
                case_id=case_id,
            )
        if not isinstance(m["role"], str):
            raise RecordError(
                index,
                f"{field}[{i}].role",
                f"expected a role name, got {type(m['role']).__name__}",
                case_id=case_id,
            )
        role = m["role"].lower()
        if role in _ROLE_ASSISTANT and m.get("tool_calls"):
            continue  # an agent step (tool calls, maybe with preamble text): never a turn
        content = m.get("content")
        if isinstance(content, list):  # parts layout
            content = _parts_text(content, f"{field}[{i}].content", index, case_id)
        if not isinstance(content, str):
            raise RecordError(
                index, f"{field}[{i}].content", "message content must be text", case_id=case_id
            )
        if role in _ROLE_USER:
            pending_user.append(content)
        elif role in _ROLE_ASSISTANT:
            if not pending_user and not out:
                continue  # assistant greeting before any user message: no turn to score
            out.append(Turn(input="\n".join(pending_user), output=content))
            pending_user = []
        elif role in {"system", "developer", "tool"}:
            continue
        else:
            raise RecordError(
                index, f"{field}[{i}].role", f"unknown role {m['role']!r}", case_id=case_id
            )
    return tuple(out)


def _parts_text(parts: list[Any], field: str, index: int | None, case_id: str | None) -> str:
    """The text of a message's parts (``[{"type": "text", "text": ...}, ...]``), joined.

    A part without text (an image, a tool call) adds nothing; a part whose text is not text is
    an error naming it (``messages[0].content[2].text``).
    """
    texts: list[str] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        key = "content" if "content" in part else "text"
        text = part.get(key, "")
        if not isinstance(text, str):
            raise RecordError(
                index,
                f"{field}[{j}].{key}",
                f"message part text must be text, got {type(text).__name__}",
                case_id=case_id,
            )
        texts.append(text)
    return "".join(texts)


def _first_error(e: ValidationError, with_loc: bool = True) -> str:
    err = e.errors()[0]
    loc = _fmt_loc(tuple(err.get("loc", ())))
    msg = err.get("msg", "invalid")
    given = err.get("input")
    if isinstance(given, str | int | float | bool):
        msg += f" (got {given!r})"
    return f"{loc}: {msg}" if loc and with_loc else msg


def stable_case_id(
    output: str, input: str | None, context: str | None, reference: str | None
) -> str:
    """A content-derived id for records without ``case_id``: the same record always gets it."""
    h = hashlib.sha256()
    for part in (output, input or "", context or "", reference or ""):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return "case-" + h.hexdigest()[:16]


def _id_hint(record: Mapping[str, Any], field_map: Mapping[str, str]) -> str | None:
    """The record's case id as text for error messages, if it has a usable one."""
    cols = (field_map["case_id"],) if "case_id" in field_map else FIELD_ALIASES["case_id"]
    for col in cols:
        v = record.get(col)
        if isinstance(v, str) and v.strip():
            return v
        if isinstance(v, int) and not isinstance(v, bool) and value_problem(v) is None:
            return str(v)
    return None


def parse_record(
    record: Any,
    index: int | None = None,
    field_map: Mapping[str, str] | None = None,
    *,
    rubrics: RubricLibrary | None = None,
    inline_rubrics: bool = True,
) -> EvalCase:
    """Normalize one raw record into an :class:`EvalCase` (the ``scan`` node).

    ``field_map`` maps logical names to custom columns (``--field output=model_answer``).
    ``rubrics``: the evaluator's configured rubrics, which a geval/redteam metric selects by
    name; ``inline_rubrics``: whether the record may carry judge instructions itself (true for a
    dataset; false for a span, see :mod:`nexagauge.schema.rubrics`).
    Raises :class:`RecordError` naming the record and the offending field.

    Example:
        >>> case = parse_record({"id": "c1", "answer": "Paris.", "q": "Capital of France?"},
        ...                     field_map={"input": "q"})
        >>> (case.case_id, case.input, case.output)
        ('c1', 'Capital of France?', 'Paris.')
    """
    field_map = field_map or {}
    if not isinstance(record, Mapping):
        raise RecordError(index, None, f"expected an object, got {type(record).__name__}")
    unknown_logical = set(field_map) - set(FIELD_ALIASES) - set(KNOB_BLOCKS)
    if unknown_logical:
        raise RecordError(index, None, f"--field maps unknown fields {sorted(unknown_logical)}")

    case_id_hint = _id_hint(record, field_map)
    check_record(record, index, case_id_hint)  # first: nothing below may meet an unusable value
    raw_id = _pick(record, "case_id", field_map, index)[1]

    def err(field: str | None, msg: str) -> RecordError:
        return RecordError(index, field, msg, case_id=case_id_hint)

    warnings: list[str] = []
    try:
        values: dict[str, Any] = {}
        src, conv = _pick(record, "conversation", field_map, index)
        turns = (
            _conversation(conv, src or "conversation", index, case_id_hint)
            if conv is not None
            else ()
        )
        if turns:
            values["conversation"] = turns

        src, out = _pick(record, "output", field_map, index)
        if out is None:
            if turns:
                out = turns[-1].output
            else:
                aliases = "/".join(FIELD_ALIASES["output"])
                raise err(src or "output", f"missing output (one of {aliases})")
        values["output"] = as_text(out, src or "output", index, case_id_hint, warnings)
        if not values["output"].strip():
            raise err(src or "output", "output is empty")

        src, inp = _pick(record, "input", field_map, index)
        if inp is not None:
            values["input"] = as_text(inp, src or "input", index, case_id_hint, warnings)
        elif turns:
            values["input"] = turns[-1].input

        src, ctx = _pick(record, "context", field_map, index)
        if ctx is not None:
            docs = _context_docs(ctx, src or "context", index, case_id_hint)
            values["context_documents"] = docs
            values["context"] = CONTEXT_SEPARATOR.join(docs) if docs else None
            labels = doc_labels(ctx)
            if len(labels) == len(docs):
                values["_doc_labels"] = labels

        add_agent(record, index, case_id_hint, values, CONTEXT_SEPARATOR)

        src, ref = _pick(record, "reference", field_map, index)
        if ref is not None:
            values["reference"] = as_text(ref, src or "reference", index, case_id_hint, warnings)

        explicit = []
        for block, model in BLOCK_MODELS.items():
            col = field_map.get(block, block)
            if col not in record or record[col] is None:
                continue
            raw = record[col]
            if raw is False:  # "relevance": false disables a node
                raw = {"enabled": False}
            if not isinstance(raw, Mapping):
                raise err(col, f"expected an object, got {type(raw).__name__}")
            raw = select_rubrics(
                block, raw, rubrics, inline=inline_rubrics, index=index, case_id=case_id_hint
            )
            try:
                values[block] = model.model_validate(dict(raw))
            except ValidationError as e:
                loc = _fmt_loc(tuple(e.errors()[0].get("loc", ())))
                raise err(f"{col}.{loc}" if loc else col, _first_error(e, with_loc=False)) from None
            explicit.append(block)
        values["explicit_blocks"] = tuple(explicit)

        known = {a for aliases in FIELD_ALIASES.values() for a in aliases} | set(KNOB_BLOCKS)
        known |= set(TOOL_FIELDS) | ({DECLARED_FIELD} if "agent" in values else set())
        known |= set(field_map.values())
        meta = record.get("metadata")
        metadata: dict[str, Any] = dict(meta) if isinstance(meta, Mapping) else {}
        for k, v in record.items():
            if k not in known and k != "metadata":
                metadata[k] = v
        values["metadata"] = metadata
        values["warnings"] = tuple(warnings)
        values.pop("_doc_labels", None)

        if raw_id is not None:
            if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
                raise err("case_id", f"expected text or integer, got {type(raw_id).__name__}")
            values["case_id"] = str(raw_id)
        else:
            values["case_id"] = stable_case_id(
                values["output"],
                values.get("input"),
                values.get("context"),
                values.get("reference"),
            )
        return EvalCase(**values)
    except RecordError:
        raise
    except ValidationError as e:
        raise err(None, _first_error(e)) from None
