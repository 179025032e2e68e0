"""``eval``: per-case aggregation of every metric branch of the plan.

Collects each metric of each planned metric node (score, error, pass/fail against its threshold),
each node's status (ok / skipped with reason / error) and the case's total judge cost.

Example:
    >>> EvalSummary().model_dump()["metrics"]
    []
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nexagauge.graph.node import NodeContext
from nexagauge.nodes._kinds import UncachedNode
from nexagauge.schema.results import CostEstimate, NodeMetrics


class EvalMetric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node: str
    name: str
    category: str
    score: float | None
    error: str | None = None
    threshold: float | None = None
    passed: bool | None = None


class NodeStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str
    reason: str | None = None
    cost: CostEstimate = Field(default_factory=CostEstimate)


class EvalSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metrics: list[EvalMetric] = Field(default_factory=list)
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    cost: CostEstimate = Field(default_factory=CostEstimate)
    judge: str | None = None
    #: which variant judged (the local judge: embedder, lexicon and calibration version)
    judge_model: str | None = None


def threshold_for(ctx: NodeContext, node: str, metric: str) -> float:
    """Pass threshold of a metric: the record's own (GEval, conversation) or the run settings'."""
    case = ctx.case
    if node == "geval" and case.geval is not None:
        for m in case.geval.metrics:
            if m.name == metric:
                return float(m.threshold)
    if node == "conversation_relevance":
        return case.conversation_relevance.threshold
    run = ctx.runtime.settings.run
    return run.thresholds.get(metric, run.default_threshold)


class EvalNode(UncachedNode):
    """Collects the metric results of a case (uncached: cheap, and it depends on statuses
    rather than cached content)."""

    name = "eval"
    version = "1"
    output_model = EvalSummary

    async def run(self, ctx: NodeContext) -> EvalSummary:
        describe = getattr(ctx.runtime.judge, "describe", None)
        summary = EvalSummary(
            judge=ctx.runtime.judge_kind, judge_model=describe() if callable(describe) else None
        )
        costs: list[CostEstimate] = []
        for node, (status, reason) in ctx.statuses.items():
            out: Any = ctx.upstream.get(node)
            cost = out.cost if isinstance(getattr(out, "cost", None), CostEstimate) else None
            summary.nodes[node] = NodeStatus(
                status=status, reason=reason, cost=cost or CostEstimate()
            )
            if cost is not None:
                costs.append(cost)
        for node in ctx.metric_nodes:
            status, reason = ctx.statuses.get(node, ("skipped", "not run"))
            out = ctx.upstream.get(node)
            if status == "error":
                summary.metrics.append(
                    EvalMetric(node=node, name=node, category="error", score=None, error=reason)
                )
                continue
            if not isinstance(out, NodeMetrics):
                continue
            for m in out.metrics:
                th = threshold_for(ctx, node, m.name)
                summary.metrics.append(
                    EvalMetric(
                        node=node,
                        name=m.name,
                        category=m.category,
                        score=m.score,
                        error=m.error,
                        threshold=th,
                        passed=None if m.score is None else m.score >= th,
                    )
                )
        summary.cost = CostEstimate.total(costs)
        return summary
