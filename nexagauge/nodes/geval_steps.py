"""``geval_steps``: resolve the evaluation steps of every GEval metric of a case.

Provided ``evaluation_steps`` are used as given. Otherwise steps are generated from ``criteria``
and ``item_fields`` ONCE per (criteria, item fields, judge model, prompt version): a process-wide
single-flight memo makes concurrent cases share one in-flight generation, and an on-disk store
(``<cache dir>/geval_steps``) shares them across runs. The case that generated the steps carries
their cost; every other case reports ``source: cached`` and zero cost.

Example:
    >>> steps_key("Is it polite?", ("output",), "gpt-4o-mini", "geval_steps.v1") == steps_key(
    ...     "Is it polite?", ("output",), "gpt-4o-mini", "geval_steps.v1")
    True
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from pydantic import BaseModel, ConfigDict, Field

from nexagauge.graph.cache import ContentStore
from nexagauge.graph.node import CallEstimate, Node, NodeContext
from nexagauge.graph.runtime import Runtime
from nexagauge.nodes._kinds import UncachedNode
from nexagauge.schema.case import GevalMetricDef
from nexagauge.schema.results import CostEstimate, GevalStepsMetrics

PROMPT = "geval_steps"
NAMESPACE = "geval_steps"


class StepsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[str] = Field(min_length=1, max_length=12)


def steps_key(criteria: str, fields: tuple[str, ...], model: str, prompt_id: str) -> str:
    return ContentStore.key(
        {
            "criteria": criteria.strip(),
            "fields": sorted(fields),
            "model": model,
            "prompt": prompt_id,
        }
    )


# process-wide memo: key -> steps; in-flight generations: (loop id, key) -> future
_memo: dict[str, list[str]] = {}
_inflight: dict[tuple[int, str], asyncio.Future[tuple[list[str], CostEstimate]]] = {}
# keys already counted by ``estimate`` in this process (a dataset generates each key once)
_estimated: set[str] = set()


def clear_memo() -> None:
    """Forget generated steps held in memory (tests; the on-disk store is unaffected)."""
    _memo.clear()
    _inflight.clear()
    _estimated.clear()


async def resolve_steps(
    runtime: Runtime, metric: GevalMetricDef
) -> tuple[list[str], str, CostEstimate]:
    """Steps for one metric: (steps, source, cost). Raises ``RuntimeError`` on judge failure."""
    if metric.evaluation_steps:
        return list(metric.evaluation_steps), "given", CostEstimate()
    from nexagauge.judge.promptlib import load_prompt

    judge = runtime.judge
    prompt_id = load_prompt(PROMPT).id
    key = steps_key(metric.criteria or "", tuple(metric.item_fields), judge.model, prompt_id)
    if key in _memo:
        return list(_memo[key]), "cached", CostEstimate()
    store = runtime.cache.namespace(NAMESPACE) if runtime.cache is not None else None
    if store is not None and (raw := store.get(key)) is not None:
        try:
            steps = list(json.loads(raw)["steps"])
            _memo[key] = steps
            return list(steps), "cached", CostEstimate()
        except (ValueError, KeyError, TypeError):
            pass  # unreadable entry: regenerate
    loop_key = (id(asyncio.get_running_loop()), key)
    fut = _inflight.get(loop_key)
    if fut is not None:
        steps, _ = await asyncio.shield(fut)
        return list(steps), "cached", CostEstimate()
    fut = asyncio.get_running_loop().create_future()
    _inflight[loop_key] = fut
    try:
        reply = await judge.structured(
            PROMPT,
            {"criteria": metric.criteria or "", "fields": ", ".join(metric.item_fields)},
            StepsAnswer,
            node="geval_steps",
            untrusted=("criteria",),
        )
        if not reply.ok:
            raise RuntimeError(reply.error or "judge returned no steps")
        steps = [s.strip() for s in reply.value.steps if s.strip()]
        if not steps:
            raise RuntimeError("judge returned only empty steps")
        _memo[key] = steps
        if store is not None:
            with contextlib.suppress(OSError):
                store.put(key, json.dumps({"steps": steps}).encode())
        fut.set_result((steps, CostEstimate()))
        return list(steps), "generated", reply.cost
    except BaseException as e:
        if not fut.done():
            fut.set_exception(e if isinstance(e, Exception) else RuntimeError("cancelled"))
            fut.exception()  # mark retrieved: waiters re-raise, nobody logs "never retrieved"
        raise
    finally:
        _inflight.pop(loop_key, None)


def geval_skip_reason(ctx: NodeContext) -> str | None:
    """Shared by ``geval_steps`` and ``geval``: no block, disabled, or no LLM judge."""
    cfg = ctx.case.geval
    if cfg is None:
        return "no geval block"
    if not cfg.enabled:
        return "geval disabled"
    return ctx.runtime.llm_unavailable()


class GevalBlockNode(Node):
    """Base of ``geval_steps`` and ``geval``: both run on the same cases (:func:`geval_skip_reason`)."""

    def skip_reason(self, ctx: NodeContext) -> str | None:
        return geval_skip_reason(ctx)


class GevalStepsNode(GevalBlockNode, UncachedNode):
    """Resolves each geval metric's steps (uncached per case: steps have their own cross-case
    cache, and per-case entries would duplicate it)."""

    name = "geval_steps"
    version = "1"
    output_model = GevalStepsMetrics

    async def run(self, ctx: NodeContext) -> GevalStepsMetrics:
        assert ctx.case.geval is not None
        out = GevalStepsMetrics()
        costs = []
        results = await asyncio.gather(
            *(resolve_steps(ctx.runtime, m) for m in ctx.case.geval.metrics),
            return_exceptions=True,
        )
        for m, r in zip(ctx.case.geval.metrics, results, strict=True):
            if isinstance(r, BaseException):
                if not isinstance(r, Exception):
                    raise r
                out.errors[m.name] = f"step generation failed: {r}"
                continue
            steps, source, cost = r
            out.steps[m.name] = steps
            out.source[m.name] = source
            costs.append(cost)
        out.cost = CostEstimate.total(costs)
        return out

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        from nexagauge.judge.promptlib import load_prompt
        from nexagauge.text.tokens import count_tokens

        if ctx.case.geval is None or (
            ctx.runtime.judge is not None and not ctx.runtime.judge.supports_llm_tasks
        ):
            return []
        p = load_prompt(PROMPT)
        model = getattr(ctx.runtime.judge, "model", None) or ctx.runtime.settings.judge.model
        out = []
        for m in ctx.case.geval.metrics:
            if m.evaluation_steps:
                continue
            k = steps_key(m.criteria or "", tuple(m.item_fields), model, p.id)
            if k in _memo or k in _estimated:
                continue
            _estimated.add(k)
            out.append(
                CallEstimate(
                    self.name, 1, count_tokens(p.system + p.user + (m.criteria or "")) + 40, 80
                )
            )
        return out
