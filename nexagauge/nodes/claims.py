"""``claims``: atomic, self-contained claims of the output, extracted once per case.

Input: every chunk of the ``refiner`` :class:`ChunkList` (all chunks of a case in ONE judge call).
Output: :class:`ClaimsMetrics` - ``claims`` (each with ``source_chunk_index`` = the chunk's
``index`` and a ``confidence``) and the extraction ``cost``; shared by ``relevance`` and
``grounding`` so the output is decomposed once, not once per metric.

- Near-identical claims (word-set Jaccard >= 0.85) are merged: the first is kept, with the highest
  confidence of the group.
- An extraction that fails (judge error after retries / re-ask) yields no claims and a failed
  ``claims`` metric with the error, so downstream metrics report the error instead of a score.
- An output without claims (a greeting) yields an empty list: downstream metrics skip.

Example:
    >>> ClaimsNode.name, ClaimsNode.output_model.__name__
    ('claims', 'ClaimsMetrics')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexagauge.graph.node import CallEstimate, Node, NodeContext
from nexagauge.graph.runtime import NO_JUDGE
from nexagauge.judge.base import ExtractedClaim
from nexagauge.judge.claimtext import merge_indices
from nexagauge.judge.tokens import count_tokens
from nexagauge.schema.results import (
    Chunk,
    ChunkList,
    Claim,
    ClaimsMetrics,
    Item,
    MetricResult,
    text_id,
)

CATEGORY = "utility"
#: metric name of a failed extraction (downstream metrics surface its error)
METRIC = "claims"


def case_chunks(ctx: NodeContext) -> list[Chunk]:
    """The refined chunks of the case (falls back to the raw ``chunk`` list, then to chunking
    the output here, so an estimate never sees nothing)."""
    for node in ("refiner", "chunk"):
        cl = ctx.upstream.get(node)
        if isinstance(cl, ChunkList):
            return list(cl.chunks)
    from nexagauge.nodes.chunk import chunk_output

    return list(chunk_output(ctx.case.output, ctx.runtime.settings.run.chunk_max_tokens).chunks)


def build_claims(extracted: list[ExtractedClaim], cached: bool = False) -> list[Claim]:
    """Merge near-identical claims and give each an id and token count (``cached``: the
    extraction came from the judge-call cache)."""
    kept = merge_indices([(c.text, c.confidence) for c in extracted])
    out = []
    for i, conf in kept:
        c = extracted[i]
        item = Item(
            id=text_id(c.text, "claim", str(c.source_chunk_index)),
            text=c.text,
            tokens=float(count_tokens(c.text)),
            cached=cached,
        )
        out.append(Claim(item=item, source_chunk_index=c.source_chunk_index, confidence=conf))
    return out


def judge_meta(ctx: NodeContext, node: str) -> dict[str, Any]:
    """Provenance of a result: ``{"judge": kind, "model": model}`` (the local judge adds more)."""
    judge = ctx.runtime.judge
    result_meta = getattr(judge, "result_meta", None)
    if callable(result_meta):
        return dict(result_meta())
    model_for = getattr(judge, "model_for", None)
    model = model_for(node) if callable(model_for) else getattr(judge, "model", None)
    return {"judge": getattr(judge, "kind", None), "model": model}


def uses_llm_tokens(ctx: NodeContext) -> bool:
    """Whether calls of this runtime spend LLM tokens (the local judge does not)."""
    return ctx.runtime.judge is None or getattr(ctx.runtime.judge, "kind", "llm") == "llm"


class ClaimsNode(Node):
    """Extracts claims from every refined chunk in one judge call (see module docstring)."""

    name = "claims"
    version = "1"
    output_model = ClaimsMetrics

    def skip_reason(self, ctx: NodeContext) -> str | None:
        return NO_JUDGE if ctx.runtime.judge is None else None

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        from nexagauge.judge.promptlib import load_prompt

        return {**judge_meta(ctx, self.name), "prompt": load_prompt("claims").id}

    async def run(self, ctx: NodeContext) -> ClaimsMetrics:
        chunks = case_chunks(ctx)
        if not chunks:
            return ClaimsMetrics()
        ex = await ctx.runtime.judge.extract_claims(chunks, node=self.name)
        if ex.error is not None:
            failed = MetricResult.failed(
                METRIC,
                CATEGORY,
                f"claim extraction failed: {ex.error}",
                **judge_meta(ctx, self.name),
            )
            return ClaimsMetrics(metrics=[failed], cost=ex.cost)
        claims = build_claims(list(ex.claims), cached=ex.info.cached)
        return ClaimsMetrics(claims=claims, cost=ex.cost)

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        from nexagauge.judge.tasks import claims_call, claims_completion_estimate, forecast_claims

        if not uses_llm_tokens(ctx):
            return []
        texts = [c.item.text for c in case_chunks(ctx)]
        if not texts:
            return []
        call = claims_call(texts)
        out = claims_completion_estimate(forecast_claims(texts), len(texts))
        return [CallEstimate(self.name, 1, call.prompt_tokens(), out)]


def extraction_error(claims: ClaimsMetrics | None) -> str | None:
    """The error of a failed extraction, if the claims node failed for this case."""
    if claims is None:
        return None
    for m in claims.metrics:
        if m.error:
            return m.error
    return None


class ClaimMetricNode(Node):
    """Shared logic of ``relevance`` and ``grounding``: all claims judged in one call.

    Subclasses set ``name``, ``task`` (the judge task), ``metric``, ``target_field`` and
    ``block`` (the record's knob block).
    """

    task: str
    metric: str
    target_field: str
    block: str
    category = "answer"

    def knobs(self, ctx: NodeContext) -> Any:
        return getattr(ctx.case, self.block)

    def target(self, ctx: NodeContext) -> str:
        return (ctx.case.field_text(self.target_field) or "").strip()

    def skip_reason(self, ctx: NodeContext) -> str | None:
        if not self.knobs(ctx).enabled:
            return f"{self.block} disabled in the record"
        if not self.target(ctx):
            return f"no {self.target_field}"
        if ctx.runtime.judge is None:
            return NO_JUDGE
        claims = ctx.get("claims", ClaimsMetrics)
        if claims is None:
            return "no claims"
        if not claims.claims and extraction_error(claims) is None:
            return "no claims in the output"
        return None

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        from nexagauge.judge.promptlib import load_prompt

        return {
            **judge_meta(ctx, self.name),
            "knobs": self.knobs(ctx).model_dump(mode="json"),
            "prompt": load_prompt(self.task).id,
        }

    async def run(self, ctx: NodeContext) -> Any:
        from nexagauge.judge.scoring import claim_metric

        meta = judge_meta(ctx, self.name)
        claims = ctx.get("claims", ClaimsMetrics)
        err = extraction_error(claims)
        if err is not None or claims is None:
            failed = MetricResult.failed(self.metric, self.category, err or "no claims", **meta)
            return self.output_model(metrics=[failed])
        knobs = self.knobs(ctx)
        j = await ctx.runtime.judge.judge_claims(
            self.task, claims.claims, self.target(ctx), knobs, node=self.name
        )
        metric = claim_metric(self.metric, self.category, claims.claims, j, knobs, meta)
        return self.output_model(metrics=[metric], cost=j.cost)

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        from nexagauge.judge.tasks import forecast_claims, judge_call, verdicts_completion_estimate

        if not uses_llm_tokens(ctx) or self.skip_reason_static(ctx):
            return []
        claims = ctx.get("claims", ClaimsMetrics)
        if claims is not None and claims.claims:
            texts = [c.item.text for c in claims.claims]
        else:  # estimates run before any claim exists: forecast them from the chunks
            texts = forecast_claims([c.item.text for c in case_chunks(ctx)]).texts
        if not texts:
            return []
        knobs = self.knobs(ctx)
        call = judge_call(self.task, texts, self.target(ctx), knobs)  # type: ignore[arg-type]
        out = verdicts_completion_estimate(len(texts), knobs)
        return [CallEstimate(self.name, 1, call.prompt_tokens(), out)]

    def unused_input(self, ctx: NodeContext, prerequisite: str) -> str | None:
        return self.skip_reason_static(ctx)

    def skip_reason_static(self, ctx: NodeContext) -> str | None:
        """Skip reasons known before any judge runs (used by ``estimate``)."""
        if not self.knobs(ctx).enabled:
            return f"{self.block} disabled in the record"
        if not self.target(ctx):
            return f"no {self.target_field}"
        return None
