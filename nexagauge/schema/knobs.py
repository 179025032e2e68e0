"""The knob blocks of a case (``relevance``, ``grounding``, ``redteam``, ``geval``, ``refalign``,
``conversation_relevance``) and conversation turns: strict pydantic models, nothing coerced.

A record sets a block as a JSON object; :func:`nexagauge.schema.case.parse_record` validates it
with the model of :data:`BLOCK_MODELS`. Unknown keys, wrong types and non-finite numbers (NaN,
Infinity) are errors naming the key.

Example:
    >>> GevalMetricDef(name="tone", criteria="Is it polite?").threshold
    0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

KNOB_BLOCKS = (
    "relevance",
    "grounding",
    "redteam",
    "geval",
    "refalign",
    "conversation_relevance",
    "task_completion",
)
#: Fields GEval / redteam rubrics may reference.
ItemField = Literal["input", "output", "reference", "context"]


def _output_only() -> list[ItemField]:
    return ["output"]


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


def _check_unique_names(block: str, metrics: Sequence[RedteamMetricDef | GevalMetricDef]) -> None:
    """A block's custom metrics must have distinct names (a result is keyed by its name)."""
    names = [m.name for m in metrics]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"duplicate {block} metric names: {sorted(dup)}")


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
        _check_unique_names("redteam", self.metrics)
        return self


class GevalMetricDef(_Block):
    name: StrictStr = Field(min_length=1)
    item_fields: list[ItemField] = Field(default_factory=_output_only, min_length=1)
    criteria: StrictStr | None = None
    evaluation_steps: list[StrictStr] | None = None
    #: pass mark on the normalized [0, 1] score; NaN/Infinity are rejected (no score passes NaN)
    threshold: StrictFloat | StrictInt = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _criteria_or_steps(self) -> GevalMetricDef:
        if not self.criteria and not self.evaluation_steps:
            raise ValueError(f"geval metric {self.name!r} needs 'criteria' or 'evaluation_steps'")
        return self


class GevalConfig(JudgeKnobs):
    metrics: list[GevalMetricDef] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> GevalConfig:
        _check_unique_names("geval", self.metrics)
        return self


class RefalignConfig(_Block):
    """``refalign`` block: embedding alignment of output units to reference units."""

    atomic_chunks: StrictBool = False
    similarity_threshold: StrictFloat = Field(default=0.7, ge=0.0, le=1.0, allow_inf_nan=False)
    refine_top_k: StrictInt | None = Field(default=None, ge=1)
    enabled: StrictBool = True


class ConversationRelevanceConfig(JudgeKnobs):
    """``conversation_relevance`` block (promptfoo/DeepEval conversation relevancy)."""

    window_size: StrictInt = Field(default=5, ge=1, le=50)
    window_mode: Literal["per_turn", "sliding"] = "per_turn"
    threshold: StrictFloat = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    rubric_prompt: StrictStr | None = None


class Turn(_Block):
    """One conversation turn: the user's input and the assistant's output."""

    input: StrictStr
    output: StrictStr


class TaskCompletionConfig(JudgeKnobs):
    """``task_completion`` block (agents): did the final answer accomplish what the user asked,
    given the tool calls and their results? **Off by default** (one judge call per agent run):
    ``{"enabled": true}`` in a record, or the ``nexagauge.eval.task_completion`` span attribute,
    turns it on (as does ``online.nodes`` naming it, for cases without the block); it runs only
    on cases with an agent run and an input."""

    enabled: StrictBool = False


BLOCK_MODELS: dict[str, type[BaseModel]] = {
    "relevance": RelevanceConfig,
    "grounding": GroundingConfig,
    "redteam": RedteamConfig,
    "geval": GevalConfig,
    "refalign": RefalignConfig,
    "conversation_relevance": ConversationRelevanceConfig,
    "task_completion": TaskCompletionConfig,
}
