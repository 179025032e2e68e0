"""list the metric nodes, their prerequisites and eligible record fields

Print the node graph: requires = prerequisite nodes, fields = record fields that must be present
for the node to run.

``nexagauge nodes``: print the node graph (node, kind, requires, eligible fields, description).

The graph is read from ``nexagauge/graph/topology.toml`` (validated on load); nothing is imported
from the node modules, so this works even where optional node dependencies are missing.

Example:
    nexagauge nodes
    nexagauge nodes --json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from nexagauge.cli._output import format_table
from nexagauge.cli.main import EXIT_OK, add_command


def add_parser(sub: Any) -> None:
    p = add_command(sub, "nodes", __doc__)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from nexagauge.graph.topology import load_topology

    topo = load_topology()
    nodes = list(topo.nodes.values())  # file order: the order the graph is documented in
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "node": n.name,
                        "kind": n.kind,
                        "requires": list(n.requires),
                        "fields": list(n.fields),
                        "judge": n.judge,
                        "block": n.block,
                        "description": n.description,
                    }
                    for n in nodes
                ],
                indent=2,
            )
        )
        return EXIT_OK
    rows = [
        [
            n.name,
            n.kind + (" (judge)" if n.judge else ""),
            ", ".join(n.requires) or "-",
            ", ".join(n.fields) or ("any eligible branch" if n.soft_requires else "-"),
            n.description,
        ]
        for n in nodes
    ]
    print(format_table(["node", "kind", "requires", "fields", "description"], rows))
    return EXIT_OK
