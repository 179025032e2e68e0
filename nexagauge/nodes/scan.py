"""``scan``: the normalized evaluation case itself.

Scanning (aliases, joined context, validated knob blocks, stable ids) happens once, when the
record is parsed (:func:`nexagauge.schema.case.parse_record`); a record that cannot become a case
never reaches the graph. The node therefore returns ``ctx.case`` unchanged, so downstream nodes and
reports see the typed inputs as the ``scan`` output. It is never cached (it costs nothing).

Example:
    >>> ScanNode.output_model.__name__
    'EvalCase'
"""

from __future__ import annotations

from nexagauge.graph.node import NodeContext
from nexagauge.nodes._kinds import UncachedNode
from nexagauge.schema.case import EvalCase


class ScanNode(UncachedNode):
    """Returns the typed case (see module docstring)."""

    name = "scan"
    version = "1"
    output_model = EvalCase

    async def run(self, ctx: NodeContext) -> EvalCase:
        return ctx.case

    def empty(self) -> EvalCase:
        # scan has no eligibility fields and no skip reason: there is no "skipped case" to return
        raise RuntimeError("scan is never skipped: every parsed record is a case")
