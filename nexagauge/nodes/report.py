"""``report``: projects a case's results into a stable report (what the CLI writes per case).

The shape is stable across versions: ``case_id``, ``target``, ``judge``, ``scores`` (metric ->
score or null), ``passed`` (metric -> bool or null), ``errors`` (metric -> message), ``nodes``
(node -> status, reason, cost, and the node's ``*Metrics`` payload exactly as in the spec), and
the total ``cost``. Metric names are unique per case; when two nodes emit the same name the
second is prefixed with its node (``node.metric``).

Example:
    >>> CaseReport(case_id="c1", target="eval").model_dump()["scores"]
    {}
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nexagauge.graph.node import NodeContext
from nexagauge.nodes._kinds import UncachedNode
from nexagauge.nodes.eval import EvalSummary
from nexagauge.schema.results import CostEstimate, NodeMetrics

REPORT_VERSION = 1


class NodeReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str
    reason: str | None = None
    cost: CostEstimate = Field(default_factory=CostEstimate)
    output: dict[str, Any] | None = None


class CaseReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    report_version: int = REPORT_VERSION
    case_id: str
    target: str
    judge: str | None = None
    #: which variant judged (the local judge: embedder, lexicon and calibration version)
    judge_model: str | None = None
    scores: dict[str, float | None] = Field(default_factory=dict)
    passed: dict[str, bool | None] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    nodes: dict[str, NodeReport] = Field(default_factory=dict)
    cost: CostEstimate = Field(default_factory=CostEstimate)


def summary_scores(
    summary: EvalSummary,
) -> tuple[dict[str, float | None], dict[str, bool | None], dict[str, str]]:
    """Scores, pass marks and errors of ``summary`` by metric name (``node.name`` when two nodes
    name a metric alike): what a :class:`CaseReport` holds, for callers without the report node
    (the online evaluator leaves it out of its plans).

    Example:
        >>> from nexagauge.nodes.eval import EvalMetric
        >>> m = EvalMetric(node="relevance", name="answer_relevancy", category="c", score=0.8)
        >>> summary_scores(EvalSummary(metrics=[m]))[0]
        {'answer_relevancy': 0.8}
    """
    scores: dict[str, float | None] = {}
    passed: dict[str, bool | None] = {}
    errors: dict[str, str] = {}
    for m in summary.metrics:
        key = m.name if m.name not in scores else f"{m.node}.{m.name}"
        scores[key] = m.score
        passed[key] = m.passed
        if m.error:
            errors[key] = m.error
    return scores, passed, errors


class ReportNode(UncachedNode):
    name = "report"
    version = "1"
    output_model = CaseReport

    def empty(self) -> CaseReport:  # report is never skipped for lack of fields
        return CaseReport(case_id="", target="")

    async def run(self, ctx: NodeContext) -> CaseReport:
        summary = ctx.get("eval", EvalSummary) or EvalSummary()
        target = next((n for n in reversed(ctx.plan_nodes) if n not in ("eval", "report")), "eval")
        if ctx.metric_nodes and len(ctx.metric_nodes) > 1:
            target = "eval"
        rep = CaseReport(
            case_id=ctx.case.case_id,
            target=target,
            judge=summary.judge,
            judge_model=summary.judge_model,
            cost=summary.cost,
        )
        rep.scores, rep.passed, rep.errors = summary_scores(summary)
        for node, st in summary.nodes.items():
            if node in ("eval", "report", "scan"):
                continue
            out = ctx.upstream.get(node)
            payload = None
            if isinstance(out, NodeMetrics) or (out is not None and node == target):
                payload = out.model_dump(mode="json")
            rep.nodes[node] = NodeReport(
                status=st.status, reason=st.reason, cost=st.cost, output=payload
            )
        return rep
