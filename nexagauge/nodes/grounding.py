"""``grounding``: is every claim of the output supported by the context? (one judge call)

Every claim of the case is judged against the joined context in ONE call with the record's
``grounding`` knobs (``scoring_mode``, ``include_reasoning``). Each claim's ``label`` tells
``supported`` / ``not_supported`` / ``contradicted`` apart (both of the latter are REJECTED; a
contradiction is worse news and is reported as such). Metric ``grounding``, category ``answer``;
score = mean of per-claim normalized scores; skips (empty metrics, zero cost) when grounding is
disabled, the context is empty, or the output has no claims.

The context of an agent's answer holds its tool results as well as retrieved documents, each
with a source label (``case.context_sources``): every supported or contradicted claim records
the ``source`` it rests on (:mod:`nexagauge.judge.attribution`). An answer that came after tool
calls whose results were not captured (opt-in in the GenAI conventions) is not judged: grounding
skips with its own reason (``tool_results_missing``) instead of scoring the answer against a
context that lacks what the agent saw.

Example:
    >>> GroundingNode.metric, GroundingNode.target_field
    ('grounding', 'context')
"""

from __future__ import annotations

from typing import Any

from nexagauge.graph.node import NodeContext
from nexagauge.graph.skips import TOOL_RESULTS_NOT_CAPTURED
from nexagauge.judge.attribution import best_source
from nexagauge.judge.base import LABEL_CONTRADICTED, LABEL_SUPPORTED
from nexagauge.nodes.claims import ClaimMetricNode
from nexagauge.schema.case import EvalCase
from nexagauge.schema.results import GroundingMetrics


def uncaptured_tool_results(case: EvalCase) -> str | None:
    """The skip text when the case's agent made tool calls whose results were not captured.

    Example:
        >>> from nexagauge.schema.tools import AgentRun, ToolCall
        >>> case = EvalCase(case_id="c", output="Shipped.", context="x",
        ...                 agent=AgentRun(tool_calls=(ToolCall(name="t", call_id="1"),)))
        >>> uncaptured_tool_results(case)
        'tool results not captured: 1 of 1 tool calls (t#1)'
    """
    if case.agent is None:
        return None
    missing = [c for c in case.agent.tool_calls if not c.result_captured]
    if not missing:
        return None
    names = ", ".join(f"{c.name}#{c.call_id}" for c in missing[:3])
    more = ", ..." if len(missing) > 3 else ""
    n = len(case.agent.tool_calls)
    return f"{TOOL_RESULTS_NOT_CAPTURED}: {len(missing)} of {n} tool calls ({names}{more})"


class GroundingNode(ClaimMetricNode):
    name = "grounding"
    version = "2"
    output_model = GroundingMetrics
    task = "grounding"
    metric = "grounding"
    target_field = "context"
    block = "grounding"

    def skip_reason(self, ctx: NodeContext) -> str | None:
        return self._static(ctx) or super().skip_reason(ctx)

    def skip_reason_static(self, ctx: NodeContext) -> str | None:
        return self._static(ctx) or super().skip_reason_static(ctx)

    def _static(self, ctx: NodeContext) -> str | None:
        if not self.knobs(ctx).enabled:
            return None  # "disabled" says more; the base class reports it
        return uncaptured_tool_results(ctx.case)

    async def run(self, ctx: NodeContext) -> Any:
        out = await super().run(ctx)
        docs, labels = ctx.case.context_documents, ctx.case.context_sources
        if not labels or len(labels) != len(docs):
            return out
        for m in out.metrics:
            for entry in m.result:
                if isinstance(entry, dict) and entry.get("label") in (
                    LABEL_SUPPORTED,
                    LABEL_CONTRADICTED,
                ):
                    src = best_source(entry["item"]["text"], docs, labels)
                    if src is not None:
                        entry["source"] = src
        return out
