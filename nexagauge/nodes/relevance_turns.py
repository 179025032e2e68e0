"""Claim-level relevance over a conversation: ``relevance.multi_turn_strategy``.

- ``last_turn`` (default): only the final exchange is judged. It is the case's own
  ``input``/``output`` (a conversation record's last turn), so the plain relevance node does it.
- ``all_turns``: every turn's claims are judged against that turn's input and the score is
  micro-averaged over all claims of all turns (Axion's multi-turn strategy). Calls: the last turn
  reuses the shared ``claims`` node; the claims of every earlier turn are extracted in ONE call
  (each turn's output is a chunk), then each turn is judged against its own input, all turns
  concurrently. Result entries carry ``turn_index``; ``meta.evaluated_turns`` counts the turns.

Example:
    >>> from nexagauge.schema.case import parse_record
    >>> c = parse_record({"conversation": [{"input": "a?", "output": "A."},
    ...                                    {"input": "b?", "output": "B."}]}, 0)
    >>> [t.input for t in earlier_turns(c)]
    ['a?']
"""

from __future__ import annotations

import asyncio
from typing import Any

from nexagauge.graph.node import NodeContext
from nexagauge.nodes.chunk import chunk_output
from nexagauge.nodes.claims import build_claims, extraction_error, judge_meta
from nexagauge.schema.case import EvalCase, Turn
from nexagauge.schema.results import (
    Chunk,
    Claim,
    ClaimsMetrics,
    CostEstimate,
    MetricResult,
    RelevanceMetrics,
)


def wants_all_turns(ctx: NodeContext) -> bool:
    return ctx.case.relevance.multi_turn_strategy == "all_turns" and bool(earlier_turns(ctx.case))


def earlier_turns(case: EvalCase) -> list[Turn]:
    """The turns before the case's own exchange (its input/output is the last turn)."""
    turns = list(case.conversation)
    if turns and turns[-1].output == case.output and turns[-1].input == (case.input or ""):
        turns = turns[:-1]
    return [t for t in turns if t.output.strip() and t.input.strip()]


def _turn_chunks(turns: list[Turn], max_tokens: int) -> tuple[list[Chunk], list[int]]:
    """All earlier turns' outputs as one chunk list (re-indexed) and each chunk's turn."""
    chunks: list[Chunk] = []
    owner: list[int] = []
    for t_index, turn in enumerate(turns):
        for c in chunk_output(turn.output, max_tokens).chunks:
            chunks.append(c.model_copy(update={"index": len(chunks)}))
            owner.append(t_index)
    return chunks, owner


async def all_turns_relevance(
    ctx: NodeContext, *, node: str, metric: str, category: str
) -> RelevanceMetrics:
    """Micro-averaged claim relevance over every turn (see module docstring)."""
    from nexagauge.judge.scoring import claim_metric

    judge = ctx.runtime.judge
    knobs = ctx.case.relevance
    meta = judge_meta(ctx, node)
    turns = earlier_turns(ctx.case)
    last_claims = ctx.get("claims", ClaimsMetrics)
    err = extraction_error(last_claims)
    if err is not None or last_claims is None:
        return RelevanceMetrics(
            metrics=[MetricResult.failed(metric, category, err or "no claims", **meta)]
        )

    chunks, owner = _turn_chunks(turns, ctx.runtime.settings.run.chunk_max_tokens)
    ex = await judge.extract_claims(chunks, node="claims")
    costs = [ex.cost]
    if ex.error is not None:
        failed = MetricResult.failed(
            metric, category, f"claim extraction of earlier turns failed: {ex.error}", **meta
        )
        return RelevanceMetrics(metrics=[failed], cost=ex.cost)
    per_turn: list[list[Claim]] = [[] for _ in turns]
    for claim in build_claims(list(ex.claims), cached=ex.info.cached):
        per_turn[owner[claim.source_chunk_index]].append(claim)

    groups: list[tuple[int, str, list[Claim]]] = [
        (i, turns[i].input, cl) for i, cl in enumerate(per_turn) if cl
    ]
    if last_claims.claims:
        groups.append((len(turns), ctx.case.input or "", list(last_claims.claims)))
    judgements = await asyncio.gather(
        *(judge.judge_claims("relevance", cl, target, knobs, node=node) for _, target, cl in groups)
    )
    rows: list[Any] = []
    total, n = 0.0, 0
    reasons: list[str] = []
    for (turn_index, _, cl), j in zip(groups, judgements, strict=True):
        costs.append(j.cost)
        m = claim_metric(metric, category, cl, j, knobs, meta)
        if m.score is None:
            why = f"turn {turn_index}: {m.error}"
            return RelevanceMetrics(
                metrics=[MetricResult.failed(metric, category, why, **meta)],
                cost=CostEstimate.total(costs),
            )
        for entry in m.result:
            if isinstance(entry, dict) and "reasoning" in entry:
                if entry["reasoning"]:
                    reasons.append(f"turn {turn_index}: {entry['reasoning']}")
                continue
            rows.append({**entry, "turn_index": turn_index})
        total += m.score * len(cl)
        n += len(cl)
    if knobs.include_reasoning:
        rows.append({"reasoning": " ".join(reasons)})
    result = MetricResult(
        name=metric,
        category=category,
        score=total / n,
        result=rows,
        meta={**meta, "multi_turn_strategy": "all_turns", "evaluated_turns": len(groups)},
    )
    return RelevanceMetrics(metrics=[result], cost=CostEstimate.total(costs))
