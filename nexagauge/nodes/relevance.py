"""``relevance``: does every claim of the output address the user's input? (spec 000)

All claims of the case are judged against the input in ONE call. Knobs (``relevance`` block):

- ``scoring_mode``: ``binary_yes_no`` (raw 0/1) or ``scale_1_5`` (normalized ``(raw-1)/4``);
- ``include_reasoning``: a trailing ``{"reasoning": ...}`` entry in ``result``;
- ``relevancy_mode``: ``task`` (closely related helpful information counts) or ``strict``;
- ``penalize_ambiguity``: the judge may answer "unsure" (``label: "idk"``), which counts as
  relevant unless this is set (then 0);
- ``method: question_generation`` switches to Ragas-style question-generation relevancy
  (:mod:`nexagauge.judge.qg_relevance`);
- ``multi_turn_strategy``: ``last_turn`` (default) or ``all_turns`` over a conversation,
  micro-averaged over every turn's claims (:mod:`nexagauge.nodes.relevance_turns`).

Per claim ACCEPTED when the normalized score >= 0.6; score = mean. Metric ``answer_relevancy``,
category ``answer``. Skips (empty metrics, zero cost): relevance disabled, empty input, no
claims, no judge. A failed claim extraction or judge call gives ``score: null`` + ``error``.

Example:
    >>> RelevanceNode.metric, RelevanceNode.category
    ('answer_relevancy', 'answer')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexagauge.graph.node import CallEstimate, NodeContext
from nexagauge.graph.runtime import NO_JUDGE
from nexagauge.nodes.claims import ClaimMetricNode
from nexagauge.schema.results import RelevanceMetrics


def _qg(ctx: NodeContext) -> bool:
    return ctx.case.relevance.method == "question_generation"


class RelevanceNode(ClaimMetricNode):
    name = "relevance"
    version = "1"
    output_model = RelevanceMetrics
    task = "relevance"
    metric = "answer_relevancy"
    target_field = "input"
    block = "relevance"

    def skip_reason(self, ctx: NodeContext) -> str | None:
        if _qg(ctx):
            from nexagauge.judge import qg_relevance

            why = self.skip_reason_static(ctx)
            if why or ctx.runtime.judge is None:
                return why or NO_JUDGE
            return qg_relevance.skip_reason(ctx)
        return super().skip_reason(ctx)

    def unused_input(self, ctx: NodeContext, prerequisite: str) -> str | None:
        if prerequisite == "claims" and _qg(ctx):
            return "method question_generation"
        return super().unused_input(ctx, prerequisite)

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        if _qg(ctx):
            from nexagauge.judge import qg_relevance

            return qg_relevance.cache_key_parts(ctx)
        return super().cache_key_parts(ctx)

    async def run(self, ctx: NodeContext) -> Any:
        if _qg(ctx):
            from nexagauge.judge import qg_relevance

            return await qg_relevance.question_generation_relevance(ctx, node=self.name)
        from nexagauge.nodes import relevance_turns

        if relevance_turns.wants_all_turns(ctx):
            return await relevance_turns.all_turns_relevance(
                ctx, node=self.name, metric=self.metric, category=self.category
            )
        return await super().run(ctx)

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        if _qg(ctx):
            from nexagauge.judge import qg_relevance

            return list(qg_relevance.estimate(ctx, node=self.name))
        return super().estimate(ctx)
