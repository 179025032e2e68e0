"""Per-case demand: never pay for a judge call whose output no planned node will read.

The topology says what a node *may* need (``claims`` feeds ``relevance`` and ``grounding``);
a case decides what is actually read. A judge-calling utility node (``claims``,
``geval_steps``) is skipped for a case when every planned dependent either is not eligible
(a required field is missing: no input, no context), is itself not needed, or says through
:meth:`~nexagauge.graph.node.Node.unused_input` that it will not read it for this case
(``relevance`` with ``method = "question_generation"``, a disabled block). Without this, a
record with only an output would still pay for a claim extraction that nothing reads.

Targets and aggregates are always needed; cheap utility nodes (``chunk``, ``refiner``) are never
skipped here. The executor and ``nexagauge estimate`` share this function, so estimates count
exactly the calls a run makes.

Example:
    >>> from nexagauge.graph.planner import plan
    >>> from nexagauge.graph.runtime import Runtime
    >>> from nexagauge.nodes import load_node
    >>> from nexagauge.schema.case import parse_record
    >>> from nexagauge.settings import Settings
    >>> p = plan("eval", only=["relevance", "grounding"])
    >>> nodes = {n: load_node(n) for n in p.nodes}
    >>> case = parse_record({"output": "Paris is in France."})  # no input, no context
    >>> unused_judge_nodes(p, nodes, case, Runtime(settings=Settings()))
    {'claims': 'not needed for this case (relevance: no input; grounding: no context)'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from nexagauge.graph.node import Node, NodeContext
from nexagauge.graph.planner import Plan
from nexagauge.schema.case import EvalCase

if TYPE_CHECKING:
    from nexagauge.graph.runtime import Runtime


def unused_judge_nodes(
    plan: Plan, nodes: Mapping[str, Node], case: EvalCase, runtime: Runtime
) -> dict[str, str]:
    """Judge-calling utility nodes of ``plan`` that nothing reads for ``case``, with the reason."""
    topo = plan.topology
    dependents: dict[str, list[str]] = {n: [] for n in plan.nodes}
    for d in plan.nodes:
        for r in plan.requires(d):
            dependents[r].append(d)
    ctx = NodeContext(
        case=case,
        upstream={},
        runtime=runtime,
        plan_nodes=plan.nodes,
        metric_nodes=plan.metric_nodes,
    )
    needed: dict[str, bool] = {}
    unused: dict[str, str] = {}
    for n in reversed(plan.nodes):  # topological order reversed: dependents first
        spec = topo.nodes[n]
        if n == plan.target or spec.kind != "utility":
            needed[n] = True
            continue
        why_not: list[str] = []
        for d in dependents[n]:
            missing = [f for f in topo.nodes[d].fields if not case.has(f)]
            if missing:
                why_not.append(f"{d}: no {', '.join(missing)}")
            elif not needed[d]:
                why_not.append(f"{d}: not needed")
            elif (why := nodes[d].unused_input(ctx, n)) is not None:
                why_not.append(f"{d}: {why}")
            else:
                needed[n] = True
                break
        else:
            needed[n] = False
            if spec.judge:
                unused[n] = f"not needed for this case ({'; '.join(why_not)})"
    return unused
