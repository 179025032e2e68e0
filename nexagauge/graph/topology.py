"""The node graph as data: loads ``topology.toml`` and validates it.

The topology says, for every node, its prerequisites and the record fields that make it eligible.
It is validated when loaded: unknown prerequisites, cycles, unknown fields or kinds are errors.

Example:
    >>> topo = load_topology()
    >>> topo.nodes["relevance"].requires
    ('claims',)
    >>> topo.ancestors("relevance")
    ['scan', 'chunk', 'refiner', 'claims']
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

NodeKind = Literal["utility", "metric", "aggregate"]
KNOWN_FIELDS = frozenset(
    {"output", "input", "context", "reference", "geval", "conversation", "agent"}
)


class TopologyError(ValueError):
    """The topology file is inconsistent."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    kind: NodeKind
    requires: tuple[str, ...]
    fields: tuple[str, ...]
    description: str = ""
    judge: bool = False
    block: str | None = None
    soft_requires: bool = False


@dataclass(frozen=True)
class Topology:
    nodes: dict[str, NodeSpec]
    order: tuple[str, ...] = field(default=())  # a topological order of all nodes

    def ancestors(self, name: str) -> list[str]:
        """All transitive prerequisites of ``name``, in topological order (excluding itself)."""
        if name not in self.nodes:
            raise KeyError(f"unknown node {name!r}; known: {', '.join(self.order)}")
        seen: set[str] = set()
        stack = list(self.nodes[name].requires)
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(self.nodes[n].requires)
        return [n for n in self.order if n in seen]

    @property
    def metric_nodes(self) -> list[str]:
        return [n for n in self.order if self.nodes[n].kind == "metric"]


def _parse(data: dict[str, Any], source: str) -> Topology:
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, dict) or not raw_nodes:
        raise TopologyError(f"{source}: no [nodes.*] tables")
    nodes: dict[str, NodeSpec] = {}
    for name, spec in raw_nodes.items():
        if not isinstance(spec, dict):
            raise TopologyError(f"{source}: node {name!r} is not a table")
        unknown = set(spec) - {
            "kind",
            "requires",
            "fields",
            "description",
            "judge",
            "block",
            "soft_requires",
        }
        if unknown:
            raise TopologyError(f"{source}: node {name!r} has unknown keys {sorted(unknown)}")
        kind = spec.get("kind")
        if kind not in ("utility", "metric", "aggregate"):
            raise TopologyError(f"{source}: node {name!r} has invalid kind {kind!r}")
        fields = tuple(spec.get("fields", ()))
        bad = set(fields) - KNOWN_FIELDS
        if bad:
            raise TopologyError(f"{source}: node {name!r} uses unknown fields {sorted(bad)}")
        nodes[name] = NodeSpec(
            name=name,
            kind=kind,
            requires=tuple(spec.get("requires", ())),
            fields=fields,
            description=str(spec.get("description", "")),
            judge=bool(spec.get("judge", False)),
            block=spec.get("block"),
            soft_requires=bool(spec.get("soft_requires", False)),
        )
    for n in nodes.values():
        missing = [r for r in n.requires if r not in nodes]
        if missing:
            raise TopologyError(f"{source}: node {n.name!r} requires unknown nodes {missing}")
    # Kahn's algorithm; file order breaks ties so the order is deterministic.
    indeg = {n: len(spec.requires) for n, spec in nodes.items()}
    order: list[str] = []
    ready = [n for n in nodes if indeg[n] == 0]
    while ready:
        name = ready.pop(0)
        order.append(name)
        for m, spec in nodes.items():
            if name in spec.requires:
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
    if len(order) != len(nodes):
        cyclic = sorted(set(nodes) - set(order))
        raise TopologyError(f"{source}: cycle among nodes {cyclic}")
    return Topology(nodes=nodes, order=tuple(order))


def parse_topology(text: str, source: str = "<string>") -> Topology:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(f"{source}: {e}") from None
    return _parse(data, source)


@cache
def load_topology(path: str | None = None) -> Topology:
    """Load and validate the bundled topology (or one at ``path``)."""
    if path:
        return parse_topology(Path(path).read_text(), path)
    text = resources.files("nexagauge.graph").joinpath("topology.toml").read_text()
    return parse_topology(text, "nexagauge/graph/topology.toml")
