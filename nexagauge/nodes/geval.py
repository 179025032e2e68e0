"""``geval``: G-Eval rubric scoring, one judge call per metric (run concurrently).

Each metric is scored from its criteria and the steps resolved by ``geval_steps`` over its
``item_fields`` (default ``["output"]``); a metric whose fields are missing from the case, or
whose steps could not be generated, gets an error result alone.

Scores. ``binary_yes_no``: the judge answers 0/1. ``scale_1_5``: 1..5, normalized (s-1)/4.
When the endpoint returns token log-probabilities, the score is the probability-weighted
expected score over the valid score tokens, as in the G-Eval paper:
``E = sum_k p(k) * k / sum_k p(k)`` over k in {1..5} (or {0, 1}), using the top log-probs at the
position of the score token; then normalized like a raw score. This removes the ties of integer
scores and measures the judge's uncertainty. When no log-probs come back, the raw score is used
and the result says so (``score_method: "raw"``).

Example:
    >>> import math
    >>> weighted_score({"4": math.log(0.9), "5": math.log(0.1)}, scale=True)
    (4.1, {'4': 0.9, '5': 0.1})
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, create_model

from nexagauge.graph.node import CallEstimate, NodeContext
from nexagauge.nodes._kinds import StrictAnswer, judge_prompt_key
from nexagauge.nodes.geval_steps import GevalBlockNode, GevalStepsMetrics
from nexagauge.schema.case import EvalCase, GevalMetricDef, ScoringMode
from nexagauge.schema.results import CostEstimate, GevalMetrics, MetricResult

CATEGORY = "geval"
PROMPT = "geval"
TOP_LOGPROBS = 5


@cache
def score_model(scale: bool, reasoning: bool) -> type[BaseModel]:
    """Answer schema: reasoning first (when asked) so the score is conditioned on it."""
    fields: dict[str, Any] = {}
    if reasoning:
        fields["reasoning"] = (str, ...)
    fields["score"] = (Literal[1, 2, 3, 4, 5] if scale else Literal[0, 1], ...)
    return create_model(f"GevalAnswer{int(scale)}{int(reasoning)}", __base__=StrictAnswer, **fields)


def weighted_score(
    top_logprobs: Mapping[str, float], *, scale: bool
) -> tuple[float, dict[str, float]] | None:
    """Expected score over valid score tokens, or ``None`` when none of them is present.

    ``top_logprobs`` maps candidate tokens (as the endpoint returned them) to log-probabilities.
    """
    valid = ("1", "2", "3", "4", "5") if scale else ("0", "1")
    mass: dict[str, float] = {}
    for tok, lp in top_logprobs.items():
        t = tok.strip().strip('"')
        if t in valid and lp is not None and math.isfinite(lp):
            mass[t] = mass.get(t, 0.0) + math.exp(lp)
    total = sum(mass.values())
    if total <= 0:
        return None
    probs = {k: round(v / total, 6) for k, v in sorted(mass.items())}
    expected = sum(int(k) * v for k, v in mass.items()) / total
    return round(expected, 6), probs


def score_token_logprobs(
    tokens: Sequence[Mapping[str, Any]], *, scale: bool
) -> dict[str, float] | None:
    """Top log-probs at the score value's position in a JSON answer's token stream.

    ``tokens`` are the endpoint's content log-prob entries: ``{"token", "logprob",
    "top_logprobs": [{"token", "logprob"}, ...]}``. The score position is the first token after
    the ``"score"`` key whose text is a valid score digit.
    """
    valid = ("1", "2", "3", "4", "5") if scale else ("0", "1")
    text = ""
    key_end = -1
    for tok in tokens:
        t = str(tok.get("token", ""))
        if key_end < 0:
            text += t
            i = text.find('"score"')
            if i >= 0:
                key_end = i + len('"score"')
                rest = text[key_end:]
                stripped = rest.lstrip(' :"')
                if stripped[:1] in valid and len(stripped.strip().rstrip(",}").strip('"')) == 1:
                    return _tops(tok)
            continue
        if t.strip(' :"') in valid:
            return _tops(tok)
        if t.strip(' :"'):
            return None  # something else where the score should be
    return None


def _tops(tok: Mapping[str, Any]) -> dict[str, float]:
    tops = {
        str(t.get("token", "")): float(t.get("logprob", -math.inf))
        for t in tok.get("top_logprobs") or []
    }
    tops.setdefault(str(tok.get("token", "")), float(tok.get("logprob", -math.inf)))
    return tops


def normalize(raw: float, scale: bool) -> float:
    return (raw - 1.0) / 4.0 if scale else float(raw)


def item_text(case: EvalCase, fields: Sequence[str]) -> tuple[list[str], list[str]]:
    """(blocks "field:\\ntext", missing fields)."""
    blocks, missing = [], []
    for f in fields:
        t = case.field_text(f)
        if t is None or not t.strip():
            missing.append(f)
        else:
            blocks.append(f"{f}:\n{t}")
    return blocks, missing


class GevalNode(GevalBlockNode):
    name = "geval"
    version = "1"
    output_model = GevalMetrics

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        return judge_prompt_key(ctx, PROMPT)

    async def run(self, ctx: NodeContext) -> GevalMetrics:
        cfg = ctx.case.geval
        assert cfg is not None
        steps = ctx.get("geval_steps", GevalStepsMetrics) or GevalStepsMetrics()
        scale = cfg.scoring_mode is ScoringMode.SCALE
        outs = await asyncio.gather(
            *(self._one(ctx, m, steps, scale, cfg.include_reasoning) for m in cfg.metrics)
        )
        return GevalMetrics(
            metrics=[m for m, _ in outs], cost=CostEstimate.total([c for _, c in outs])
        )

    async def _one(
        self,
        ctx: NodeContext,
        metric: GevalMetricDef,
        steps: GevalStepsMetrics,
        scale: bool,
        reasoning: bool,
    ) -> tuple[MetricResult, CostEstimate]:
        from nexagauge.judge.promptlib import load_prompt

        judge = ctx.runtime.judge
        meta: dict[str, Any] = {"judge": judge.kind, "model": judge.model}
        blocks, missing = item_text(ctx.case, metric.item_fields)
        if missing:
            return MetricResult.failed(
                metric.name, CATEGORY, f"missing item field(s): {', '.join(missing)}", **meta
            ), CostEstimate()
        if metric.name not in steps.steps:
            why = steps.errors.get(metric.name, "no evaluation steps resolved")
            return MetricResult.failed(metric.name, CATEGORY, why, **meta), CostEstimate()
        prompt = load_prompt(PROMPT)
        metric_steps = steps.steps[metric.name]
        variables = {
            "criteria": metric.criteria or "(defined by the evaluation steps)",
            "steps": "\n".join(f"{i + 1}. {s}" for i, s in enumerate(metric_steps)),
            "fields": blocks,
            "format": prompt.part("format_scale_1_5" if scale else "format_binary_yes_no"),
            "reasoning": prompt.part("reasoning") if reasoning else "",
        }
        reply = await judge.structured(
            PROMPT,
            variables,
            score_model(scale, reasoning),
            node=self.name,
            untrusted=("fields",),
            top_logprobs=TOP_LOGPROBS,
        )
        if not reply.ok:
            return MetricResult.failed(
                metric.name, CATEGORY, reply.error or "judge returned no score", **meta
            ), reply.cost
        raw = int(reply.value.score)
        payload: dict[str, Any] = {
            "raw_score": raw,
            "item_fields": list(metric.item_fields),
            "steps": metric_steps,
            "steps_source": steps.source.get(metric.name),
        }
        tops = score_token_logprobs(reply.logprobs or [], scale=scale) if reply.logprobs else None
        weighted = weighted_score(tops, scale=scale) if tops else None
        if weighted is not None:
            expected, probs = weighted
            score = normalize(expected, scale)
            payload.update(
                score_method="logprob_weighted", expected_raw=expected, probabilities=probs
            )
        else:
            score = normalize(raw, scale)
            payload["score_method"] = "raw"
            payload["note"] = (
                "endpoint returned no log-probabilities"
                if not reply.logprobs
                else "no valid score token found in log-probabilities"
            )
        if reasoning:
            payload["reasoning"] = getattr(reply.value, "reasoning", "")
        score = min(1.0, max(0.0, score))
        return (
            MetricResult(
                name=metric.name, category=CATEGORY, score=score, result=[payload], meta=meta
            ),
            reply.cost,
        )

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        from nexagauge.judge.promptlib import load_prompt
        from nexagauge.text.tokens import count_tokens

        cfg = ctx.case.geval
        if cfg is None:
            return []
        p = load_prompt(PROMPT)
        base = count_tokens(p.system + p.user)
        out = []
        for m in cfg.metrics:
            blocks, missing = item_text(ctx.case, m.item_fields)
            if missing:
                continue
            steps = m.evaluation_steps or ["x" * 60] * 4
            tin = (
                base
                + sum(count_tokens(b) + 8 for b in blocks)
                + sum(count_tokens(s) + 2 for s in steps)
            )
            tin += count_tokens(m.criteria or "") + 40
            tout = 6 + (45 if cfg.include_reasoning else 0)
            out.append(CallEstimate(self.name, 1, tin, tout))
        return out
