"""The claim-pipeline tasks as data + code: prompt rendering, response models, verdict mapping.

Shared by the LLM judge (to call) and by the nodes' ``estimate`` (to count the very same prompt
tokens without calling). Answers are minimal by design (no per-claim reasoning, short codes):

- claims:    ``{"chunks": [["claim", ...], ...]}`` - one list per chunk, count fixed by schema;
- relevance: ``{"verdicts": ["yes"|"no"|"idk", ...]}`` or integers ``0..5`` (0 = unclear);
- grounding: ``{"verdicts": ["yes"|"no"|"contradicted", ...]}`` or ``0..5`` (0 = contradicted);
- ``include_reasoning`` adds one ``"reasoning"`` string after the verdicts.

Array lengths are fixed in the schema (``minItems = maxItems``) and checked again on receipt:
a different count is an error, never truncated or padded.

Example:
    >>> from nexagauge.schema.case import RelevanceConfig
    >>> call = judge_call("relevance", ["Paris is in France."], "Where is Paris?", RelevanceConfig())
    >>> call.prompt.id, call.schema["properties"]["verdicts"]["maxItems"]
    ('relevance.v2', 1)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from string import Template
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from nexagauge.judge.base import (
    LABEL_CONTRADICTED,
    LABEL_IDK,
    LABEL_NO,
    LABEL_NOT_SUPPORTED,
    LABEL_SUPPORTED,
    LABEL_YES,
    ClaimTask,
    RawVerdict,
)
from nexagauge.judge.jsonschema import strict_schema
from nexagauge.judge.promptlib import Prompt, load_prompt
from nexagauge.judge.tokens import count_message_tokens, count_tokens
from nexagauge.schema.case import GroundingConfig, RelevanceConfig, ScoringMode
from nexagauge.schema.results import ACCEPT_THRESHOLD


@dataclass(frozen=True)
class TaskCall:
    """A fully rendered judge call: prompt, messages, response model and its strict schema."""

    prompt: Prompt
    messages: list[dict[str, str]]
    model: type[BaseModel]
    schema: dict[str, Any]
    expected: int  # number of chunk lists / verdicts the answer must hold

    def prompt_tokens(self) -> int:
        """Prompt tokens as billed, the response schema included (endpoints bill it too)."""
        return count_message_tokens(self.messages) + schema_tokens(self.schema)


def schema_tokens(schema: dict[str, Any]) -> int:
    return count_tokens(json.dumps(schema, separators=(",", ":")))


# ---------------------------------------------------------------------------------- models
@cache
def claims_model(n_chunks: int) -> type[BaseModel]:
    """``{"chunks": [[str, ...] * n_chunks]}``."""
    return create_model(
        "claims",
        chunks=(list[list[str]], Field(min_length=n_chunks, max_length=n_chunks)),
    )


_CODES: dict[tuple[str, str], Any] = {
    ("relevance", ScoringMode.BINARY.value): Literal["yes", "no", "idk"],
    ("grounding", ScoringMode.BINARY.value): Literal["yes", "no", "contradicted"],
    ("relevance", ScoringMode.SCALE.value): Literal[0, 1, 2, 3, 4, 5],
    ("grounding", ScoringMode.SCALE.value): Literal[0, 1, 2, 3, 4, 5],
}


@cache
def verdicts_model(task: ClaimTask, mode: str, reasoning: bool, n: int) -> type[BaseModel]:
    """Response model of one claim-judging call (``n`` verdicts, optional reasoning)."""
    fields: dict[str, Any] = {
        "verdicts": (list[_CODES[(task, mode)]], Field(min_length=n, max_length=n)),  # type: ignore[valid-type]
    }
    if reasoning:
        fields["reasoning"] = (str, ...)
    return create_model(task, **fields)


# ---------------------------------------------------------------------------------- calls
def claims_call(chunk_texts: Sequence[str]) -> TaskCall:
    """The claim-extraction call for all chunks of one output."""
    prompt = load_prompt("claims")
    msgs = prompt.render(
        {"chunks": list(chunk_texts), "n": len(chunk_texts)}, untrusted=("chunks",)
    )
    model = claims_model(len(chunk_texts))
    return TaskCall(prompt, msgs, model, strict_schema(model), len(chunk_texts))


def numbered(claims: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))


def judge_call(
    task: ClaimTask,
    claims: Sequence[str],
    target: str,
    knobs: RelevanceConfig | GroundingConfig,
) -> TaskCall:
    """The relevance/grounding call: every claim against ``target`` (input/context)."""
    prompt = load_prompt(task)
    mode = knobs.scoring_mode.value
    n = len(claims)
    variables: dict[str, Any] = {
        "claims": numbered(claims),
        "format": Template(prompt.part(f"format_{mode}")).safe_substitute(n=n),
        "reasoning": prompt.part("reasoning") if knobs.include_reasoning else "",
    }
    target_var = "input" if task == "relevance" else "context"
    variables[target_var] = target
    if task == "relevance":
        rel_mode = getattr(knobs, "relevancy_mode", "task")
        variables["rule"] = prompt.part(f"rule_{rel_mode}")
    msgs = prompt.render(variables, untrusted=(target_var, "claims"))
    model = verdicts_model(task, mode, knobs.include_reasoning, n)
    return TaskCall(prompt, msgs, model, strict_schema(model), n)


# ---------------------------------------------------------------------------------- verdicts
def normalize(raw: float, mode: ScoringMode) -> float:
    """Raw judge value -> [0, 1]: binary as is, scale ``(raw - 1) / 4`` (spec 000).

    Example:
        >>> normalize(4, ScoringMode.SCALE)
        0.75
    """
    if mode is ScoringMode.SCALE:
        return (float(raw) - 1.0) / 4.0
    return float(raw)


def to_raw_verdict(task: ClaimTask, mode: ScoringMode, code: Any) -> RawVerdict:
    """Map one answer code to a :class:`RawVerdict` (see :mod:`nexagauge.judge.base`)."""
    if task == "relevance":
        if mode is ScoringMode.BINARY:
            return {
                "yes": RawVerdict(1, LABEL_YES),
                "no": RawVerdict(0, LABEL_NO),
                "idk": RawVerdict(None, LABEL_IDK),
            }[code]
        if code == 0:
            return RawVerdict(None, LABEL_IDK)
        return RawVerdict(int(code), None)
    if mode is ScoringMode.BINARY:
        return {
            "yes": RawVerdict(1, LABEL_SUPPORTED),
            "no": RawVerdict(0, LABEL_NOT_SUPPORTED),
            "contradicted": RawVerdict(0, LABEL_CONTRADICTED),
        }[code]
    if code == 0:
        return RawVerdict(1, LABEL_CONTRADICTED)
    ok = normalize(int(code), mode) >= ACCEPT_THRESHOLD
    return RawVerdict(int(code), LABEL_SUPPORTED if ok else LABEL_NOT_SUPPORTED)


# ---------------------------------------------------------------------------------- estimates
#: Calibration of the claim-extraction estimate (claims do not exist before extraction):
#: claim text ~ output text (pronouns resolved, filler dropped), one claim per ~12 output tokens.
CLAIM_TOKENS_PER_OUTPUT_TOKEN = 1.0
OUTPUT_TOKENS_PER_CLAIM = 12.0
#: answer tokens: JSON framing, per claim string quoting/commas, per verdict code, reasoning.
JSON_FRAME_TOKENS = 6
PER_CLAIM_JSON_TOKENS = 2
PER_VERDICT_TOKENS = {ScoringMode.BINARY.value: 2, ScoringMode.SCALE.value: 2}
REASONING_TOKENS = 30


@dataclass(frozen=True)
class ClaimsForecast:
    """Expected claims of an output before extraction (for estimates)."""

    count: int
    texts: list[str]  # stand-in claim texts of the expected total size


def forecast_claims(chunk_texts: Sequence[str]) -> ClaimsForecast:
    out_tokens = sum(count_tokens(t) for t in chunk_texts)
    n = max(1, round(out_tokens / OUTPUT_TOKENS_PER_CLAIM)) if out_tokens else 0
    per = max(1, round(out_tokens * CLAIM_TOKENS_PER_OUTPUT_TOKEN / n)) if n else 0
    stand_in = " ".join(["claim"] * per)  # "claim" is one cl100k token; " claim" too
    return ClaimsForecast(n, [stand_in] * n)


def claims_completion_estimate(forecast: ClaimsForecast, n_chunks: int) -> int:
    body = sum(count_tokens(t) for t in forecast.texts)
    return JSON_FRAME_TOKENS + 2 * n_chunks + body + PER_CLAIM_JSON_TOKENS * forecast.count


def verdicts_completion_estimate(n_claims: int, knobs: RelevanceConfig | GroundingConfig) -> int:
    n = JSON_FRAME_TOKENS + PER_VERDICT_TOKENS[knobs.scoring_mode.value] * n_claims
    return n + (REASONING_TOKENS if knobs.include_reasoning else 0)
