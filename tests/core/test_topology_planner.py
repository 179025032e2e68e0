"""The topology loader (validation) and the planner."""

from __future__ import annotations

import pytest

from nexagauge.graph.planner import PlanError, plan
from nexagauge.graph.topology import TopologyError, load_topology, parse_topology
from nexagauge.nodes import REGISTRY

# The data schema's "Minimum Node Activation Matrix": node -> required record fields.
ACTIVATION = {
    "scan": (),
    "chunk": ("output",),
    "refiner": ("output",),
    "claims": ("output",),
    "relevance": ("output", "input"),
    "grounding": ("output", "context"),
    "redteam": ("output",),
    "geval_steps": ("output", "geval"),
    "geval": ("output", "geval"),
    "refmatch": ("output", "reference"),
    "refalign": ("output", "reference"),
    "eval": (),
    "report": (),
}


def test_bundled_topology_matches_the_activation_matrix() -> None:
    topo = load_topology()
    for node, fields in ACTIVATION.items():
        assert set(topo.nodes[node].fields) == set(fields), node
    assert set(topo.nodes) <= set(REGISTRY)  # every node has an implementation entry
    # topological order: every prerequisite comes first
    pos = {n: i for i, n in enumerate(topo.order)}
    for n, spec in topo.nodes.items():
        assert all(pos[r] < pos[n] for r in spec.requires)
    assert topo.ancestors("relevance") == ["scan", "chunk", "refiner", "claims"]


def _toml(nodes: dict[str, str]) -> str:
    return "\n".join(f'[nodes.{n}]\nkind = "utility"\n{body}\n' for n, body in nodes.items())


@pytest.mark.parametrize(
    "text,match",
    [
        (
            _toml({"a": 'requires = ["b"]', "b": 'requires = ["a"]'}),
            r"cycle among nodes \['a', 'b'\]",
        ),
        (_toml({"a": 'requires = ["a"]'}), "cycle"),
        (_toml({"a": "", "b": 'requires = ["c"]', "c": 'requires = ["b"]'}), r"cycle.*'b', 'c'"),
        (_toml({"a": 'requires = ["ghost"]'}), r"requires unknown nodes \['ghost'\]"),
        (_toml({"a": 'fields = ["outptu"]'}), "unknown fields"),
        (_toml({"a": "colour = 1"}), "unknown keys"),
        ('[nodes.a]\nkind = "magic"\n', "invalid kind"),
        ("[nodes.a\n", "t.toml: Expected"),
        ("title = 'x'\n", "no \\[nodes"),
    ],
)
def test_invalid_topologies_are_rejected(text: str, match: str) -> None:
    with pytest.raises(TopologyError, match=match):
        parse_topology(text, "t.toml")


def test_unknown_node_lookup() -> None:
    with pytest.raises(KeyError, match="unknown node"):
        load_topology().ancestors("nope")


# -- planner -----------------------------------------------------------------------------------------
def test_plan_metric_target() -> None:
    p = plan("relevance")
    assert p.nodes == ("scan", "chunk", "refiner", "claims", "relevance", "eval", "report")
    assert p.metric_nodes == ("relevance",)
    assert plan("refmatch").nodes == ("scan", "refmatch", "eval", "report")


def test_plan_eval_covers_every_metric_branch() -> None:
    topo = load_topology()
    p = plan("eval")
    assert set(p.metric_nodes) == set(topo.metric_nodes)
    for m in topo.metric_nodes:
        assert set(topo.ancestors(m)) <= set(p.nodes)
    assert p.nodes[-2:] == ("eval", "report")
    assert plan("report").nodes == p.nodes


def test_plan_only_subset_and_utility_target() -> None:
    p = plan("eval", only=["refmatch", "grounding"])
    assert set(p.metric_nodes) == {"refmatch", "grounding"}
    assert "relevance" not in p.nodes and "claims" in p.nodes
    u = plan("chunk")
    assert u.nodes == ("scan", "chunk", "eval", "report") and u.metric_nodes == ()
    # requires() keeps only prerequisites in the plan (eval's soft prerequisites)
    assert plan("refmatch").requires("eval") == ("refmatch",)
    # eval waits for a utility target too, so the report always holds the target's output
    assert u.requires("eval") == ("chunk",)
    assert plan("claims").requires("eval") == ("claims",)


@pytest.mark.parametrize(
    "target,only,match",
    [("nope", None, "unknown node 'nope'"), ("eval", ["chunk"], "--only names unknown metric")],
)
def test_plan_errors(target: str, only: list[str] | None, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        plan(target, only=only)
