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

import hashlib
import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

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
KNOB_BLOCKS = ("relevance", "grounding", "redteam", "geval", "refalign", "conversation_relevance")
#: Fields GEval / redteam rubrics may reference.
ItemField = Literal["input", "output", "reference", "context"]

CONTEXT_SEPARATOR = "\n\n"


def _output_only() -> list[ItemField]:
    return ["output"]


class RecordError(ValueError):
    """A record that cannot become a case. Names the record (index and id if known) and field.

    Example:
        >>> try:
        ...     parse_record({"input": "Where is Paris?"}, 3)
        ... except RecordError as e:
        ...     print(e.field, "|", e)
        output | record 3, field 'output': missing output (one of output/generation/response/answer/completion)
    """

    def __init__(
        self, index: int | None, field: str | None, message: str, case_id: str | None = None
    ):
        self.index = index
        self.field = field
        self.reason = message
        self.case_id = case_id
        where = f"record {index}" if index is not None else "record"
        if case_id:
            where += f" (case_id={case_id!r})"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class ScoringMode(StrEnum):
    BINARY = "binary_yes_no"
    SCALE = "scale_1_5"


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class JudgeKnobs(_Block):
    """The two knobs shared by every LLM-judge node (defaults: binary, no reasoning)."""

    scoring_mode: ScoringMode = ScoringMode.BINARY
    include_reasoning: StrictBool = False
    enabled: StrictBool = True


class RelevanceConfig(JudgeKnobs):
    """``relevance`` block: scoring knobs plus the Axion and Ragas options.

    ``method``: ``claims`` (per-claim judging, default) or ``question_generation`` (Ragas).
    ``relevancy_mode``: ``task`` counts closely related helpful information; ``strict`` only direct
    answers. ``penalize_ambiguity``: an explicit "unsure" verdict scores 0 instead of 1.
    """

    method: Literal["claims", "question_generation"] = "claims"
    relevancy_mode: Literal["task", "strict"] = "task"
    penalize_ambiguity: StrictBool = False
    strictness: StrictInt = Field(default=3, ge=1, le=10)
    multi_turn_strategy: Literal["last_turn", "all_turns"] = "last_turn"


class GroundingConfig(JudgeKnobs):
    pass


class Rubric(_Block):
    goal: StrictStr
    violations: list[StrictStr] = Field(default_factory=list)
    non_violations: list[StrictStr] = Field(default_factory=list)


class RedteamMetricDef(_Block):
    name: StrictStr = Field(min_length=1)
    item_fields: list[ItemField] = Field(default_factory=_output_only, min_length=1)
    rubric: Rubric


class RedteamConfig(JudgeKnobs):
    """``redteam`` block. Custom rubrics add to the defaults (bias, toxicity); a custom rubric with
    a default's name replaces it; ``replace_defaults: true`` drops the defaults entirely."""

    metrics: list[RedteamMetricDef] = Field(default_factory=list)
    replace_defaults: StrictBool = False

    @model_validator(mode="after")
    def _unique(self) -> RedteamConfig:
        names = [m.name for m in self.metrics]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate redteam metric names: {sorted(dup)}")
        return self


class GevalMetricDef(_Block):
    name: StrictStr = Field(min_length=1)
    item_fields: list[ItemField] = Field(default_factory=_output_only, min_length=1)
    criteria: StrictStr | None = None
    evaluation_steps: list[StrictStr] | None = None
    threshold: StrictFloat | StrictInt = 0.5

    @model_validator(mode="after")
    def _criteria_or_steps(self) -> GevalMetricDef:
        if not self.criteria and not self.evaluation_steps:
            raise ValueError(f"geval metric {self.name!r} needs 'criteria' or 'evaluation_steps'")
        return self


class GevalConfig(JudgeKnobs):
    metrics: list[GevalMetricDef] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> GevalConfig:
        names = [m.name for m in self.metrics]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate geval metric names: {sorted(dup)}")
        return self


class RefalignConfig(_Block):
    """``refalign`` block: embedding alignment of output units to reference units."""

    atomic_chunks: StrictBool = False
    similarity_threshold: StrictFloat = Field(default=0.7, ge=0.0, le=1.0)
    refine_top_k: StrictInt | None = Field(default=None, ge=1)
    enabled: StrictBool = True


class ConversationRelevanceConfig(JudgeKnobs):
    """``conversation_relevance`` block (promptfoo/DeepEval conversation relevancy)."""

    window_size: StrictInt = Field(default=5, ge=1, le=50)
    window_mode: Literal["per_turn", "sliding"] = "per_turn"
    threshold: StrictFloat = Field(default=0.5, ge=0.0, le=1.0)
    rubric_prompt: StrictStr | None = None


class Turn(_Block):
    """One conversation turn: the user's input and the assistant's output."""

    input: StrictStr
    output: StrictStr


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
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: which knob blocks the record set explicitly (so reports can show user intent)
    explicit_blocks: tuple[str, ...] = ()

    def has(self, field: str) -> bool:
        """Whether a data field is present and non-empty (drives node eligibility)."""
        if field == "geval":
            return self.geval is not None
        if field == "conversation":
            return bool(self.conversation)
        value = getattr(self, field, None)
        return isinstance(value, str) and value.strip() != ""

    def field_text(self, field: str) -> str | None:
        """The text of an item field (``input``/``output``/``reference``/``context``)."""
        v = getattr(self, field, None)
        return v if isinstance(v, str) else None

    def fingerprint(self) -> str:
        """Content hash of everything that can change a score (used in cache keys)."""
        payload = self.model_dump(mode="json", exclude={"metadata", "explicit_blocks"})
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


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


def _as_text(value: Any, field: str, index: int | None, case_id: str | None = None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        raise RecordError(
            index, field, f"expected text, got {type(value).__name__}", case_id=case_id
        )
    if isinstance(value, int | float):
        # a number as answer ("42") is legitimate data, not a coercion of a wrong type
        return str(value)
    raise RecordError(index, field, f"expected text, got {type(value).__name__}", case_id=case_id)


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
        role = str(m["role"]).lower()
        content = m.get("content")
        if isinstance(content, list):  # parts layout
            content = "".join(
                p.get("content", p.get("text", "")) for p in content if isinstance(p, Mapping)
            )
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


def _first_error(e: ValidationError, with_loc: bool = True) -> str:
    err = e.errors()[0]
    loc = _fmt_loc(tuple(err.get("loc", ())))
    msg = err.get("msg", "invalid")
    given = err.get("input")
    if isinstance(given, str | int | float | bool):
        msg += f" (got {given!r})"
    return f"{loc}: {msg}" if loc and with_loc else msg


_BLOCK_MODELS: dict[str, type[BaseModel]] = {
    "relevance": RelevanceConfig,
    "grounding": GroundingConfig,
    "redteam": RedteamConfig,
    "geval": GevalConfig,
    "refalign": RefalignConfig,
    "conversation_relevance": ConversationRelevanceConfig,
}


def stable_case_id(
    output: str, input: str | None, context: str | None, reference: str | None
) -> str:
    """A content-derived id for records without ``case_id``: the same record always gets it."""
    h = hashlib.sha256()
    for part in (output, input or "", context or "", reference or ""):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return "case-" + h.hexdigest()[:16]


def parse_record(
    record: Any, index: int | None = None, field_map: Mapping[str, str] | None = None
) -> EvalCase:
    """Normalize one raw record into an :class:`EvalCase` (the ``scan`` node).

    ``field_map`` maps logical names to custom columns (``--field output=model_answer``).
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

    raw_id = _pick(record, "case_id", field_map, index)[1]
    case_id_hint = str(raw_id) if raw_id is not None and not isinstance(raw_id, bool) else None

    def err(field: str | None, msg: str) -> RecordError:
        return RecordError(index, field, msg, case_id=case_id_hint)

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
        values["output"] = _as_text(out, src or "output", index, case_id_hint)
        if not values["output"].strip():
            raise err(src or "output", "output is empty")

        src, inp = _pick(record, "input", field_map, index)
        if inp is not None:
            values["input"] = _as_text(inp, src or "input", index, case_id_hint)
        elif turns:
            values["input"] = turns[-1].input

        src, ctx = _pick(record, "context", field_map, index)
        if ctx is not None:
            docs = _context_docs(ctx, src or "context", index, case_id_hint)
            values["context_documents"] = docs
            values["context"] = CONTEXT_SEPARATOR.join(docs) if docs else None

        src, ref = _pick(record, "reference", field_map, index)
        if ref is not None:
            values["reference"] = _as_text(ref, src or "reference", index, case_id_hint)

        explicit = []
        for block, model in _BLOCK_MODELS.items():
            col = field_map.get(block, block)
            if col not in record or record[col] is None:
                continue
            raw = record[col]
            if raw is False:  # "relevance": false disables a node
                raw = {"enabled": False}
            if not isinstance(raw, Mapping):
                raise err(col, f"expected an object, got {type(raw).__name__}")
            try:
                values[block] = model.model_validate(dict(raw))
            except ValidationError as e:
                loc = _fmt_loc(tuple(e.errors()[0].get("loc", ())))
                raise err(f"{col}.{loc}" if loc else col, _first_error(e, with_loc=False)) from None
            explicit.append(block)
        values["explicit_blocks"] = tuple(explicit)

        known = {a for aliases in FIELD_ALIASES.values() for a in aliases} | set(KNOB_BLOCKS)
        known |= set(field_map.values())
        meta = record.get("metadata")
        metadata: dict[str, Any] = dict(meta) if isinstance(meta, Mapping) else {}
        for k, v in record.items():
            if k not in known and k != "metadata":
                metadata[k] = v
        values["metadata"] = metadata

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
