"""Scoring of claim judgements (spec 000), identical for every judge backend.

Per claim: the raw verdict is normalized to [0, 1] (binary: 0/1; scale: ``(raw - 1) / 4``); an
"unsure" (``idk``) relevance verdict counts 1.0, or 0.0 with ``penalize_ambiguity``; the verdict
is ``ACCEPTED`` when the normalized score >= 0.6. The metric score is the mean over claims.

``raw_score`` in the result is always on the mode's scale (0/1 or 1-5): for ``idk`` it is the
value the verdict counted as (binary 1/0, scale 5/1) and ``label: "idk"`` says so. Items of a
judgement served from the judge-call cache are marked ``cached: true``.

Example:
    >>> from nexagauge.judge.base import RawVerdict
    >>> from nexagauge.schema.case import RelevanceConfig
    >>> knobs = RelevanceConfig(scoring_mode="scale_1_5")
    >>> [claim_score(RawVerdict(r), knobs)[0] for r in (5, 3, 1)]
    [1.0, 0.5, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexagauge.judge.base import LABEL_IDK, ClaimJudgement, RawVerdict
from nexagauge.judge.tasks import normalize
from nexagauge.schema.case import GroundingConfig, RelevanceConfig, ScoringMode
from nexagauge.schema.results import ACCEPT_THRESHOLD, Claim, ClaimVerdict, MetricResult


def claim_score(
    v: RawVerdict, knobs: RelevanceConfig | GroundingConfig
) -> tuple[float, int | float]:
    """(normalized score, raw_score to report) of one verdict."""
    mode = knobs.scoring_mode
    if v.label == LABEL_IDK or v.raw is None:
        credit = 0.0 if getattr(knobs, "penalize_ambiguity", False) else 1.0
        if mode is ScoringMode.SCALE:
            return credit, 5 if credit else 1
        return credit, int(credit)
    score = normalize(v.raw, mode)
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"raw verdict {v.raw!r} out of range for {mode.value}")
    return score, v.raw


def verdict_of(score: float) -> str:
    return "ACCEPTED" if score >= ACCEPT_THRESHOLD else "REJECTED"


def claim_metric(
    name: str,
    category: str,
    claims: Sequence[Claim],
    judgement: ClaimJudgement,
    knobs: RelevanceConfig | GroundingConfig,
    meta: dict[str, Any] | None = None,
) -> MetricResult:
    """The MetricResult of one claim-judging call (or ``score=None`` + error)."""
    if judgement.error is not None:
        return MetricResult.failed(name, category, judgement.error, **(meta or {}))
    if len(judgement.verdicts) != len(claims):  # a backend bug; never pad or truncate
        return MetricResult.failed(
            name,
            category,
            f"judge returned {len(judgement.verdicts)} verdicts for {len(claims)} claims",
            **(meta or {}),
        )
    if not claims:
        return MetricResult.failed(name, category, "no claims to judge", **(meta or {}))
    result: list[Any] = []
    scores: list[float] = []
    cached = judgement.info.cached  # verdicts from the judge-call cache: nothing was spent
    for c, v in zip(claims, judgement.verdicts, strict=True):
        score, raw = claim_score(v, knobs)
        scores.append(score)
        cv = ClaimVerdict(
            item=c.item.model_copy(update={"cached": True}) if cached else c.item,
            source_chunk_index=c.source_chunk_index,
            confidence=c.confidence,
            extraction_failed=c.extraction_failed,
            verdict=verdict_of(score),
            raw_score=raw,
            label=v.label,
            reason=v.reason,
        )
        result.append(cv.model_dump(mode="json", exclude_none=True))
    if knobs.include_reasoning:
        result.append({"reasoning": judgement.reasoning or ""})
    return MetricResult(
        name=name,
        category=category,
        score=sum(scores) / len(scores),
        result=result,
        meta=meta or None,
    )
