"""``task_completion`` (agents, off by default): did the final answer accomplish what the user
asked, given the tool calls and their results? One judge call per agent run, referenceless.

The judge sees the user's request, every tool call of the run (name, arguments, the result as
grounding reads it -- readable, bounded -- or the failure) and the final answer, with the
prompt ``task_completion`` (data, like every prompt). Knobs: the record's ``task_completion``
block (``enabled`` -- false by default --, ``scoring_mode``, ``include_reasoning``). Metric
``task_completion``, category ``agent``: binary 1/0, or the 1-5 score normalized to [0, 1].

Skips: not enabled (``disabled``; see :func:`enabled`); no agent run or no input (not eligible, by the topology); no
judge; the local judge, which cannot judge a task (``judge_unsupported``: it says so rather than
guessing).

Example:
    >>> from nexagauge.schema.tools import ToolCall
    >>> print(steps_text([ToolCall(name="lookup", call_id="c1", arguments='{"id": 7}',
    ...                            result="shipped")]))
    1. Result of tool lookup (call c1) with arguments {"id": 7}:
    shipped
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nexagauge.graph.node import CallEstimate, Node, NodeContext
from nexagauge.nodes.conversation_relevance import window_model as answer_model
from nexagauge.schema.case import ScoringMode
from nexagauge.schema.results import ACCEPT_THRESHOLD, MetricResult, TaskCompletionMetrics
from nexagauge.schema.tools import ToolCall

METRIC = "task_completion"
CATEGORY = "agent"
PROMPT = "task_completion"


def steps_text(calls: Sequence[ToolCall]) -> str:
    """The run's tool calls as the judge reads them (numbered; uncaptured results say so)."""
    if not calls:
        return "(no tool calls)"
    lines = []
    for i, c in enumerate(calls, 1):
        ev = c.evidence()
        if ev is None:
            args = f" with arguments {c.arguments}" if c.arguments else ""
            ev = f"Call of tool {c.name} (call {c.call_id}){args}: result not recorded"
        lines.append(f"{i}. {ev}")
    return "\n".join(lines)


def enabled(ctx: NodeContext) -> bool:
    """Whether the metric runs for this case: the record's / span's ``task_completion`` block
    decides when it has one; otherwise ``online.nodes`` naming ``task_completion`` turns it on
    for every agent run the service evaluates (the default, every node, does not)."""
    if METRIC in ctx.case.explicit_blocks:
        return ctx.case.task_completion.enabled
    nodes = ctx.runtime.settings.online.nodes
    return nodes is not None and METRIC in nodes


class TaskCompletionNode(Node):
    name = "task_completion"
    version = "1"
    output_model = TaskCompletionMetrics

    def skip_reason(self, ctx: NodeContext) -> str | None:
        if not enabled(ctx):
            return (
                "task_completion disabled (off by default: the task_completion block, or "
                "online.nodes naming it, turns it on)"
            )
        return ctx.runtime.llm_unavailable()

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        from nexagauge.judge.promptlib import load_prompt

        return {
            "model": getattr(ctx.runtime.judge, "model", None),
            "knobs": ctx.case.task_completion.model_dump(mode="json"),
            "prompt": load_prompt(PROMPT).id,
        }

    def _variables(self, ctx: NodeContext) -> dict[str, Any]:
        from nexagauge.judge.promptlib import load_prompt

        cfg = ctx.case.task_completion
        prompt = load_prompt(PROMPT)
        agent = ctx.case.agent
        return {
            "input": ctx.case.input or "",
            "output": ctx.case.output,
            "steps": steps_text(agent.tool_calls if agent is not None else ()),
            "format": prompt.part(f"format_{cfg.scoring_mode.value}"),
            "reasoning": prompt.part("reasoning") if cfg.include_reasoning else "",
        }

    async def run(self, ctx: NodeContext) -> TaskCompletionMetrics:
        cfg = ctx.case.task_completion
        scale = cfg.scoring_mode is ScoringMode.SCALE
        judge = ctx.runtime.judge
        meta = {"judge": judge.kind, "model": judge.model}
        reply = await judge.structured(
            PROMPT,
            self._variables(ctx),
            answer_model(scale, cfg.include_reasoning),
            node=self.name,
            untrusted=("input", "steps", "output"),
        )
        if not reply.ok or reply.value is None:
            failed = MetricResult.failed(METRIC, CATEGORY, reply.error or "no verdict", **meta)
            return TaskCompletionMetrics(metrics=[failed], cost=reply.cost)
        data = reply.value.model_dump()
        raw = int(data["score"]) if scale else int(data["verdict"] == "yes")
        score = (raw - 1) / 4.0 if scale else float(raw)
        row: dict[str, Any] = {
            "verdict": "ACCEPTED" if score >= ACCEPT_THRESHOLD else "REJECTED",
            "raw_score": raw,
            "tool_calls": len(ctx.case.agent.tool_calls) if ctx.case.agent else 0,
        }
        result: list[Any] = [row]
        if cfg.include_reasoning:
            result.append({"reasoning": data.get("reason", "")})
        metric = MetricResult(name=METRIC, category=CATEGORY, score=score, result=result, meta=meta)
        return TaskCompletionMetrics(metrics=[metric], cost=reply.cost)

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        from nexagauge.judge.jsonschema import strict_schema
        from nexagauge.judge.promptlib import load_prompt
        from nexagauge.judge.tasks import schema_tokens
        from nexagauge.judge.tokens import count_message_tokens

        if ctx.runtime.judge is not None and getattr(ctx.runtime.judge, "kind", "llm") != "llm":
            return []
        cfg = ctx.case.task_completion
        model = answer_model(cfg.scoring_mode is ScoringMode.SCALE, cfg.include_reasoning)
        msgs = load_prompt(PROMPT).render(
            self._variables(ctx), untrusted=("input", "steps", "output")
        )
        tin = count_message_tokens(msgs) + schema_tokens(strict_schema(model))
        tout = 8 + (30 if cfg.include_reasoning else 0)
        return [CallEstimate(self.name, 1, tin, tout)]
