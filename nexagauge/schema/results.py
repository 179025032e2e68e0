"""Result models: what every node returns, with exactly the JSON shape of the spec.

A node's output is a ``*Metrics`` wrapper (``{"metrics": [...], "cost": {...}}``); each
``MetricResult`` has ``name/category/score/result/error``. A metric that could not be computed
has ``score: None`` and an ``error`` - never a silent 1.0, 0.0 or NaN (the validator enforces it).

Example:
    >>> m = MetricResult(name="answer_relevancy", category="answer", score=None, error="no verdicts")
    >>> m.model_dump()["score"] is None
    True
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Verdict = Literal["ACCEPTED", "REJECTED"]

#: Per-claim verdict threshold on the normalized [0, 1] score (spec: ACCEPTED when >= 0.6).
ACCEPT_THRESHOLD = 0.6


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class CostEstimate(_Model):
    """Judge spend of one node or case: USD and token counts (floats, as in the spec).

    Example:
        >>> total = CostEstimate.total([CostEstimate(input_tokens=200, output_tokens=12)] * 3)
        >>> (total.input_tokens, total.output_tokens)
        (600.0, 36.0)
    """

    cost: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0

    def __add__(self, other: CostEstimate) -> CostEstimate:
        return CostEstimate(
            cost=self.cost + other.cost,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )

    @classmethod
    def zero(cls) -> CostEstimate:
        return cls()

    @classmethod
    def total(cls, costs: list[CostEstimate]) -> CostEstimate:
        out = cls()
        for c in costs:
            out = out + c
        return out


def text_id(text: str, *salt: str) -> str:
    """Stable 16-hex id of a text (and optional salt): the ``item.id`` of chunks and claims."""
    h = hashlib.blake2b(digest_size=8)
    for part in (*salt, text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


class Item(_Model):
    """A unit of text (chunk, claim, refined unit) with token metadata."""

    id: str
    text: str
    tokens: float
    confidence: float = 1.0
    cached: bool = False


class Chunk(_Model):
    """A span of the output. ``char_start/char_end`` index the original output string."""

    item: Item
    index: int
    char_start: int
    char_end: int


class ChunkList(_Model):
    """Output of ``chunk`` and ``refiner``: every chunk of the output, in order."""

    chunks: list[Chunk] = Field(default_factory=list)
    dropped: list[dict[str, Any]] = Field(
        default_factory=list,
        description="refiner only: chunks removed as near-duplicates, with the index they duplicate",
    )


class Claim(_Model):
    """An atomic, self-contained claim extracted from one chunk of the output."""

    item: Item
    source_chunk_index: int
    confidence: float = 1.0
    extraction_failed: bool = False


class ClaimVerdict(Claim):
    """A claim judged by relevance or grounding (the spec's ``RelevancyClaim``).

    ``label`` refines the verdict where the judge distinguishes more than yes/no
    (grounding: ``supported`` / ``not_supported`` / ``contradicted``; relevance: ``yes/no/idk``);
    ``reason`` is the per-claim explanation when reasoning was requested; ``source`` (grounding)
    the label of the context document that supports or contradicts the claim (``doc:kb-7``,
    ``tool:lookup_order#call_1``; :mod:`nexagauge.judge.attribution`), when the context's
    documents are labelled.
    """

    verdict: Verdict
    raw_score: int | float
    label: str | None = None
    reason: str | None = None
    source: str | None = None


class MetricResult(_Model):
    """One metric's outcome.

    ``score`` is in [0, 1] or ``None`` together with an ``error``. ``result`` holds the per-item
    payload (claims, verdicts, and optionally a trailing ``{"reasoning": ...}``). ``meta`` carries
    provenance (e.g. ``{"judge": "local"}``) and is omitted from JSON when empty.

    Example:
        >>> m = MetricResult(name="grounding", category="answer", error="judge call failed: HTTP 500")
        >>> (m.score, m.error)
        (None, 'judge call failed: HTTP 500')
        >>> MetricResult(name="grounding", category="answer", score=float("nan"))
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for MetricResult
        ...
    """

    name: str
    category: str
    score: float | None = None
    result: list[Any] = Field(default_factory=list)
    error: str | None = None
    meta: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: not v)

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and (math.isnan(v) or math.isinf(v)):
            raise ValueError("score must be finite; use score=None with an error instead")
        return v

    @model_validator(mode="after")
    def _score_or_error(self) -> MetricResult:
        if self.score is None and not self.error:
            raise ValueError(f"metric {self.name!r} has no score and no error")
        return self

    @classmethod
    def failed(cls, name: str, category: str, error: str, **meta: Any) -> MetricResult:
        return cls(name=name, category=category, score=None, error=error, meta=meta or None)


class NodeMetrics(_Model):
    """The ``*Metrics`` wrapper every metric node returns: ``{"metrics": [...], "cost": {...}}``."""

    metrics: list[MetricResult] = Field(default_factory=list)
    cost: CostEstimate = Field(default_factory=CostEstimate)


class ClaimsMetrics(NodeMetrics):
    """Output of ``claims``: the claims shared by relevance and grounding, plus extraction cost."""

    claims: list[Claim] = Field(default_factory=list)


class RelevanceMetrics(NodeMetrics):
    pass


class GroundingMetrics(NodeMetrics):
    pass


class RedteamMetrics(NodeMetrics):
    pass


class GevalStepsMetrics(NodeMetrics):
    """Output of ``geval_steps``: resolved evaluation steps per GEval metric name."""

    steps: dict[str, list[str]] = Field(default_factory=dict)
    #: how each metric's steps were resolved: "given", "generated" or "cached"
    source: dict[str, str] = Field(default_factory=dict)
    #: metrics whose steps could not be generated, with the reason
    errors: dict[str, str] = Field(default_factory=dict)


class GevalMetrics(NodeMetrics):
    pass


class RefmatchMetrics(NodeMetrics):
    pass


class RefalignMetrics(NodeMetrics):
    pass


class ConversationMetrics(NodeMetrics):
    pass


class TaskCompletionMetrics(NodeMetrics):
    pass
