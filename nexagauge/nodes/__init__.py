"""Graph nodes, one module per node. The registry maps node names to ``module:Class``.

Nodes are imported lazily (``load_node``) so a run only imports what its plan needs.

Example:
    >>> load_node("refmatch").name
    'refmatch'
"""

from __future__ import annotations

import importlib
from functools import cache

from nexagauge.graph.node import Node

REGISTRY: dict[str, str] = {
    "scan": "nexagauge.nodes.scan:ScanNode",
    "chunk": "nexagauge.nodes.chunk:ChunkNode",
    "refiner": "nexagauge.nodes.refiner:RefinerNode",
    "claims": "nexagauge.nodes.claims:ClaimsNode",
    "relevance": "nexagauge.nodes.relevance:RelevanceNode",
    "grounding": "nexagauge.nodes.grounding:GroundingNode",
    "redteam": "nexagauge.nodes.redteam:RedteamNode",
    "geval_steps": "nexagauge.nodes.geval_steps:GevalStepsNode",
    "geval": "nexagauge.nodes.geval:GevalNode",
    "refmatch": "nexagauge.nodes.refmatch:RefmatchNode",
    "refalign": "nexagauge.nodes.refalign:RefalignNode",
    "conversation_relevance": "nexagauge.nodes.conversation_relevance:ConversationRelevanceNode",
    "agent_signals": "nexagauge.nodes.agent_signals:AgentSignalsNode",
    "task_completion": "nexagauge.nodes.task_completion:TaskCompletionNode",
    "eval": "nexagauge.nodes.eval:EvalNode",
    "report": "nexagauge.nodes.report:ReportNode",
}


@cache
def load_node(name: str) -> Node:
    """Instantiate the node registered under ``name``."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown node {name!r}; known: {', '.join(REGISTRY)}") from None
    module, _, cls = target.partition(":")
    node = getattr(importlib.import_module(module), cls)()
    if not isinstance(node, Node):
        raise TypeError(f"{target} is not a Node")
    return node
