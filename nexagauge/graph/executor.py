"""The asyncio executor: runs a plan over cases.

Within a case, independent nodes run concurrently (relevance and grounding both wait only for
claims). Across cases, at most ``max_in_flight`` cases run at once and results come back in input
order, streaming: memory stays bounded by the window, not the dataset.

For every node of a case the executor decides, in order:
1. ineligible (a required record field is missing) -> skipped with the missing fields;
1b. a judge-calling utility node that no planned node reads for this case (``claims`` when
   relevance uses question generation and grounding has no context) -> skipped as not needed
   (:mod:`nexagauge.graph.demand`); its dependents do not read it, so they go on;
2. a prerequisite was skipped or failed -> skipped naming it;
3. ``Node.skip_reason`` (no judge, block disabled, no claims...) -> skipped with that reason;
4. node cache hit -> the cached output (its cost reported as zero: nothing was spent again);
5. otherwise ``Node.run``; an exception becomes an error outcome for that node only.
Skipped nodes produce empty metrics and zero cost. Every skip keeps its human text (``reason``)
and gets a bounded code (``skip``, :class:`~nexagauge.graph.skips.SkipReason`): ``not_eligible``,
``not_needed``, ``prerequisite_failed``, the code of a skipped prerequisite (the root cause), or
the code of the node's own reason (``no_judge``, ``disabled``, ``nothing_to_judge``...).

Example:
    >>> import asyncio
    >>> from nexagauge.settings import Settings
    >>> from nexagauge.graph.runtime import Runtime
    >>> ex = Executor(Runtime(settings=Settings()), plan("refmatch"))
    >>> res = asyncio.run(ex.run_case(parse_record({"output": "a b", "reference": "a b"}), 0))
    >>> res.outcomes["refmatch"].status
    'ok'
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import traceback
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from nexagauge.graph.demand import unused_judge_nodes
from nexagauge.graph.node import Node, NodeContext
from nexagauge.graph.planner import Plan, plan
from nexagauge.graph.runtime import Runtime
from nexagauge.graph.skips import SkipReason, skip_code
from nexagauge.graph.topology import NodeKind, load_topology
from nexagauge.nodes import load_node
from nexagauge.schema.case import EvalCase, RecordError, parse_record
from nexagauge.schema.results import CostEstimate, NodeMetrics

log = logging.getLogger(__name__)

Status = Literal["ok", "skipped", "error"]
RecordInput = tuple[int, Any]  # (index, raw mapping | EvalCase | exception from the reader)

FIELD_LABELS = {"geval": "geval block", "conversation": "conversation"}


@dataclass
class NodeOutcome:
    """What happened to one node of one case."""

    node: str
    status: Status
    reason: str | None = None
    output: BaseModel | None = None
    cached: bool = False
    elapsed_s: float = 0.0
    #: what the node cost when computed (a cache hit costs nothing now but keeps this)
    original_cost: CostEstimate | None = None
    #: the node's kind in the topology (the executor sets it from its plan; a hand-built outcome
    #: of a node of the bundled topology gets it from there)
    kind: NodeKind | None = None
    #: the bounded code of a skip (:mod:`nexagauge.graph.skips`); ``reason`` keeps the text.
    #: Derived from ``reason`` when not given (a skipped prerequisite passes on its code).
    skip: SkipReason | None = None

    def __post_init__(self) -> None:
        if self.status == "skipped" and self.skip is None:
            self.skip = skip_code(self.reason)
        if self.kind is None:
            spec = load_topology().nodes.get(self.node)
            self.kind = spec.kind if spec is not None else None

    @property
    def cost(self) -> CostEstimate:
        """The ``cost`` of the node's output (an aggregate restates its inputs' costs here)."""
        c = getattr(self.output, "cost", None)
        return c if isinstance(c, CostEstimate) else CostEstimate()

    @property
    def spend(self) -> CostEstimate:
        """What this node itself spent on judge calls now: its ``cost``, except for aggregate
        nodes (``eval``, ``report``), whose cost is the sum of the others' and would count every
        judge call again; zero for a cache hit."""
        return CostEstimate() if self.kind == "aggregate" else self.cost


@dataclass
class CaseResult:
    """The outcome of one case: every planned node, or the record error that prevented it."""

    index: int
    case_id: str | None
    case: EvalCase | None = None
    outcomes: dict[str, NodeOutcome] = field(default_factory=dict)
    error: str | None = None
    error_field: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def report(self) -> BaseModel | None:
        o = self.outcomes.get("report")
        return o.output if o is not None else None

    @property
    def cost(self) -> CostEstimate:
        """The case's judge spend: every judge call made for it, counted once (the sum of each
        node's :attr:`NodeOutcome.spend`; aggregates excluded, cache hits zero)."""
        return CostEstimate.total([o.spend for o in self.outcomes.values()])

    def metric_outcomes(self) -> Iterable[NodeOutcome]:
        return (o for o in self.outcomes.values() if isinstance(o.output, NodeMetrics))


#: a cached output's cost (zero) as its JSON form: what every output's ``cost`` digests as
_ZERO_COST = CostEstimate().model_dump(mode="json")


def _digest(model: BaseModel) -> str:
    """Digest of an upstream output for cache keys. A cache hit carries ``cached`` flags and a
    zero cost, so both forms are normalized alike: otherwise every node below a cached one would
    miss on the second run.

    The normalization works on the output's JSON form (one pydantic dump, then a walk of plain
    dicts), not on model copies: :func:`_mark_cached` copies every claim, verdict and chunk,
    which made digests a tenth of the graph's own CPU per online evaluation."""
    data = model.model_dump(mode="json")
    if isinstance(getattr(model, "cost", None), CostEstimate):
        data["cost"] = _ZERO_COST
    _flag_cached(data)
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _flag_cached(value: Any) -> None:
    """Set every ``"cached": false`` in a dumped output to true, in place (the form a cache hit
    has after :func:`_mark_cached`)."""
    if type(value) is dict:
        if value.get("cached") is False:
            value["cached"] = True
        for v in value.values():
            if type(v) is dict or type(v) is list:
                _flag_cached(v)
    elif type(value) is list:
        for v in value:
            if type(v) is dict or type(v) is list:
                _flag_cached(v)


def _upstream_digests(
    reqs: tuple[str, ...], outputs: Mapping[str, BaseModel], memo: dict[str, str]
) -> dict[str, str]:
    """The digests of the upstream outputs ``reqs`` present in ``outputs``; each output is
    digested once per case (``memo``), however many nodes below it key on it."""
    out: dict[str, str] = {}
    for r in reqs:
        if r in outputs:
            d = memo.get(r)
            if d is None:
                d = memo[r] = _digest(outputs[r])
            out[r] = d
    return out


def _mark_cached(value: Any) -> Any:
    """Set ``item.cached = True`` on items of a cached output (claims, verdicts, chunks)."""
    if isinstance(value, BaseModel):
        updates: dict[str, Any] = {}
        for name in type(value).model_fields:
            v = getattr(value, name)
            nv = _mark_cached(v)
            if nv is not v:
                updates[name] = nv
        if "cached" in type(value).model_fields and getattr(value, "cached", None) is False:
            updates["cached"] = True
        return value.model_copy(update=updates) if updates else value
    if isinstance(value, list):
        new = [_mark_cached(v) for v in value]
        return new if any(a is not b for a, b in zip(new, value, strict=True)) else value
    if isinstance(value, dict):
        newd = {k: _mark_cached(v) for k, v in value.items()}
        if value.get("cached") is False and "text" in value:
            newd["cached"] = True
        return newd if any(newd[k] is not value[k] for k in value) else value
    return value


class Executor:
    """Runs a :class:`Plan` over cases (see module docstring).

    Example:
        >>> from nexagauge.settings import Settings
        >>> ex = Executor(Runtime(settings=Settings()), plan("refmatch"))
        >>> case = parse_record({"output": "Paris is in France.", "reference": "Paris, France."})
        >>> res = asyncio.run(ex.run_case(case))
        >>> (res.outcomes["refmatch"].status, sorted(res.outcomes))
        ('ok', ['eval', 'refmatch', 'report', 'scan'])
    """

    def __init__(
        self,
        runtime: Runtime,
        plan_: Plan,
        *,
        max_in_flight: int | None = None,
        field_map: Mapping[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.plan = plan_
        self.max_in_flight = max(1, max_in_flight or runtime.settings.run.max_cases_in_flight)
        self.field_map = dict(field_map or {})
        self.nodes: dict[str, Node] = {n: load_node(n) for n in plan_.nodes}

    # -- one case ---------------------------------------------------------------------------
    async def run_case(self, case: EvalCase, index: int = 0) -> CaseResult:
        """Run every planned node for one case; never raises for node failures."""
        result = CaseResult(index=index, case_id=case.case_id, case=case)
        outputs: dict[str, BaseModel] = {}
        statuses: dict[str, tuple[str, str | None]] = {}
        done: dict[str, asyncio.Event] = {n: asyncio.Event() for n in self.plan.nodes}
        unused = unused_judge_nodes(self.plan, self.nodes, case, self.runtime)
        #: upstream output digests of this case's cache keys, each computed once; ``None`` when
        #: no node of this case can be in the cache (its first sighting in memory)
        cache = self.runtime.cache
        digests: dict[str, str] | None = (
            {} if cache is not None and cache.admits(case.fingerprint()) else None
        )

        async def run_node(name: str) -> None:
            try:
                spec = self.plan.topology.nodes[name]
                reqs = self.plan.requires(name)
                for r in reqs:
                    await done[r].wait()
                outcome = await self._decide(
                    name, case, reqs, spec.soft_requires, outputs, statuses, unused, digests
                )
                outcome.kind = spec.kind
                result.outcomes[name] = outcome
                statuses[name] = (outcome.status, outcome.reason)
                if outcome.status == "ok" and outcome.output is not None:
                    outputs[name] = outcome.output
            finally:
                done[name].set()

        await asyncio.gather(*(run_node(n) for n in self.plan.nodes))
        result.outcomes = {n: result.outcomes[n] for n in self.plan.nodes}
        return result

    async def _decide(
        self,
        name: str,
        case: EvalCase,
        reqs: tuple[str, ...],
        soft: bool,
        outputs: dict[str, BaseModel],
        statuses: dict[str, tuple[str, str | None]],
        unused: Mapping[str, str],
        digests: dict[str, str] | None = None,
    ) -> NodeOutcome:
        node = self.nodes[name]
        spec = self.plan.topology.nodes[name]
        missing = [f for f in spec.fields if not case.has(f)]
        if missing:
            labels = ", ".join(FIELD_LABELS.get(f, f) for f in missing)
            return NodeOutcome(
                name,
                "skipped",
                f"not eligible: no {labels}",
                node.empty(),
                skip=SkipReason.NOT_ELIGIBLE,
            )
        if name in unused:
            return NodeOutcome(
                name, "skipped", unused[name], node.empty(), skip=SkipReason.NOT_NEEDED
            )
        if not soft:
            for r in reqs:
                if r in unused:  # nothing that runs reads it (see graph/demand.py)
                    continue
                st, why = statuses.get(r, ("skipped", "not run"))
                if st != "ok":
                    failed = st == "error"
                    verb = "failed" if failed else "skipped"
                    return NodeOutcome(
                        name,
                        "skipped",
                        f"{r} {verb}: {why}",
                        node.empty(),
                        # a skipped prerequisite's code is derived from its text (root cause)
                        skip=SkipReason.PREREQUISITE_FAILED if failed else None,
                    )
        ctx = NodeContext(
            case=case,
            upstream=dict(outputs),
            runtime=self.runtime,
            statuses=dict(statuses),
            plan_nodes=self.plan.nodes,
            metric_nodes=self.plan.metric_nodes,
        )
        t0 = time.perf_counter()
        try:
            why = node.skip_reason(ctx)
            if why:
                return NodeOutcome(name, "skipped", why, node.empty())
            cache = self.runtime.cache
            key = None
            if cache is not None and digests is not None and node.cacheable(ctx):
                key = cache.key(
                    node=name,
                    version=node.version,
                    case=case.fingerprint(),
                    config=dict(node.cache_key_parts(ctx)),
                    upstream=_upstream_digests(reqs, outputs, digests),
                )
                hit = cache.get(key, node.output_model)
                if hit is not None:
                    original = getattr(hit, "cost", None)
                    if isinstance(original, CostEstimate):
                        hit = hit.model_copy(update={"cost": CostEstimate()})
                    return NodeOutcome(
                        name,
                        "ok",
                        None,
                        _mark_cached(hit),
                        cached=True,
                        elapsed_s=time.perf_counter() - t0,
                        original_cost=original if isinstance(original, CostEstimate) else None,
                    )
            out = await node.run(ctx)
            if not isinstance(out, node.output_model):
                raise TypeError(
                    f"node {name} returned {type(out).__name__}, expected "
                    f"{node.output_model.__name__}"
                )
            if key is not None and cache is not None and _cacheable_output(out):
                try:
                    cache.put(key, out)
                except OSError as e:  # a full disk must not fail the evaluation
                    log.warning("node cache write failed for %s: %s", name, e)
            return NodeOutcome(name, "ok", None, out, elapsed_s=time.perf_counter() - t0)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.debug("node %s failed for case %s:\n%s", name, case.case_id, traceback.format_exc())
            return NodeOutcome(
                name,
                "error",
                f"{type(e).__name__}: {e}",
                node.empty(),
                elapsed_s=time.perf_counter() - t0,
            )

    # -- many cases -------------------------------------------------------------------------
    async def run_records(
        self, records: Iterable[RecordInput] | AsyncIterable[RecordInput]
    ) -> AsyncIterator[CaseResult]:
        """Parse and evaluate records with bounded concurrency; yields results in input order.

        A record that fails to parse yields a ``CaseResult`` with ``error`` set; the rest run.
        """
        window: deque[asyncio.Task[CaseResult]] = deque()

        async def source() -> AsyncIterator[RecordInput]:
            if isinstance(records, AsyncIterable):
                async for r in records:
                    yield r
            else:
                for r in records:
                    yield r

        try:
            broken: Exception | None = None
            try:
                async for index, raw in source():
                    window.append(asyncio.create_task(self._one(index, raw)))
                    while len(window) >= self.max_in_flight:
                        yield await window.popleft()
            except Exception as e:  # the input broke off: what was read before still counts
                broken = e
            while window:
                yield await window.popleft()
            if broken is not None:
                raise broken
        finally:
            for t in window:
                t.cancel()

    async def _one(self, index: int, raw: Any) -> CaseResult:
        if isinstance(raw, RecordError):
            return CaseResult(index, raw.case_id, error=str(raw), error_field=raw.field)
        if isinstance(raw, Exception):
            return CaseResult(index, None, error=f"record {index}: {raw}")
        try:
            case = (
                raw
                if isinstance(raw, EvalCase)
                else parse_record(raw, index, self.field_map, rubrics=self.runtime.settings.rubrics)
            )
        except RecordError as e:
            return CaseResult(index, e.case_id, error=str(e), error_field=e.field)
        except Exception as e:  # a record parse_record did not foresee: still only this record
            log.exception("record %d could not be parsed", index)
            return CaseResult(
                index, None, error=f"record {index}: cannot be read: {type(e).__name__}: {e}"
            )
        return await self.run_case(case, index)


def _cacheable_output(out: BaseModel) -> bool:
    """Never cache results that carry transient errors (a retry later may succeed)."""
    metrics = getattr(out, "metrics", None)
    if isinstance(metrics, list):
        return not any(getattr(m, "error", None) for m in metrics)
    return True


async def evaluate(
    records: Iterable[Any],
    target: str = "eval",
    *,
    runtime: Runtime | None = None,
    only: Iterable[str] | None = None,
) -> list[CaseResult]:
    """Evaluate raw records (or EvalCases) in memory; a convenience for notebooks and tests.

    Example:
        >>> import asyncio
        >>> rs = asyncio.run(evaluate([{"output": "Paris.", "reference": "Paris."}], "refmatch"))
        >>> rs[0].outcomes["refmatch"].status
        'ok'
    """
    from nexagauge.settings import Settings

    rt = runtime or Runtime.create(Settings(), use_cache=False)
    ex = Executor(rt, plan(target, only=only))
    out = [r async for r in ex.run_records(enumerate(records))]
    if runtime is None:
        await rt.aclose()
    return out
