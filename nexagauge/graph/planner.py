"""Turn a target node into the nodes a run needs (plus ``eval`` and ``report``).

- target ``eval`` or ``report``: every metric branch (or the ``only`` subset), eval, report;
- target a metric node: its prerequisites, the node, eval (aggregating just that branch), report;
- target a utility node (``chunk``, ``claims``...): its prerequisites, the node, eval, report.

Example:
    >>> plan("relevance").nodes
    ('scan', 'chunk', 'refiner', 'claims', 'relevance', 'eval', 'report')
    >>> plan("eval", only=["refmatch"]).metric_nodes
    ('refmatch',)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nexagauge.graph.topology import Topology, load_topology

AGGREGATES = ("eval", "report")


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Plan:
    target: str
    nodes: tuple[str, ...]
    metric_nodes: tuple[str, ...]
    topology: Topology

    def requires(self, node: str) -> tuple[str, ...]:
        """The prerequisites of ``node`` that are part of this plan.

        An aggregating node with soft prerequisites (``eval``) also waits for a utility target
        (``nexagauge run chunk``): otherwise it would race the target and the report would
        sometimes miss the target's output.
        """
        spec = self.topology.nodes[node]
        reqs = tuple(r for r in spec.requires if r in self.nodes)
        if spec.soft_requires and self.target not in (*AGGREGATES, node, *reqs):
            reqs = (*reqs, self.target)
        return reqs


def plan(
    target: str,
    *,
    only: Iterable[str] | None = None,
    topology: Topology | None = None,
    report: bool = True,
) -> Plan:
    """Plan the nodes needed to produce ``target`` (see module docstring).

    ``report=False`` leaves the ``report`` node out unless it is the target: the online
    evaluator emits from the metric nodes and ``eval``, and nothing reads a per-case report
    there (it cost ~2 % of an evaluation's CPU).

    Example:
        >>> plan("grounding").nodes
        ('scan', 'chunk', 'refiner', 'claims', 'grounding', 'eval', 'report')
        >>> plan("grounding", report=False).nodes
        ('scan', 'chunk', 'refiner', 'claims', 'grounding', 'eval')
    """
    topo = topology or load_topology()
    if target not in topo.nodes:
        raise PlanError(f"unknown node {target!r}; choose one of: {', '.join(topo.order)}")
    only_set = set(only) if only is not None else None
    if only_set is not None:
        unknown = only_set - set(topo.metric_nodes)
        if unknown:
            raise PlanError(
                f"--only names unknown metric nodes {sorted(unknown)}; "
                f"metric nodes: {', '.join(topo.metric_nodes)}"
            )
    if target in AGGREGATES:
        branches = [n for n in topo.metric_nodes if only_set is None or n in only_set]
    elif topo.nodes[target].kind == "metric":
        branches = [target]
    else:
        branches = []
    wanted: set[str] = set(AGGREGATES)
    for b in [*branches, target]:
        if b not in AGGREGATES:
            wanted.add(b)
            wanted.update(topo.ancestors(b))
    wanted.add("scan")
    if not report and target != "report":
        wanted.discard("report")
    nodes = tuple(n for n in topo.order if n in wanted)
    return Plan(target=target, nodes=nodes, metric_nodes=tuple(branches), topology=topo)
