"""The contract every graph node implements.

A node is a small class in ``nexagauge/nodes/<name>.py``. The executor decides eligibility from
the topology (record fields), asks the node whether it must skip for another reason (no judge,
disabled block, no claims), looks the result up in the node cache, and otherwise awaits ``run``.

Rules for node authors:
- ``run`` returns an instance of ``output_model`` (a pydantic model, so it can be cached as JSON).
- Metric nodes return a ``NodeMetrics`` subclass; a metric that cannot be computed is a
  ``MetricResult`` with ``score=None`` and an ``error`` (never a fake score). Raising is reserved
  for bugs; the executor turns an exception into an error result for that node only.
- ``cache_key_parts`` returns everything besides the case that changes the output (knob block,
  judge model, thresholds); ``version`` must be bumped when the implementation changes results.
- CPU-heavy work goes through ``ctx.runtime.to_thread`` so the event loop stays free.

Example:
    >>> class Echo(Node):
    ...     name = "echo"
    ...     output_model = NodeMetrics
    ...     async def run(self, ctx: NodeContext) -> NodeMetrics:
    ...         return NodeMetrics()
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel

from nexagauge.schema.case import EvalCase
from nexagauge.schema.results import NodeMetrics

if TYPE_CHECKING:
    from nexagauge.graph.runtime import Runtime

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class NodeContext:
    """What a node sees: the case, its prerequisites' outputs, and the shared runtime services."""

    case: EvalCase
    upstream: Mapping[str, BaseModel]
    runtime: Runtime
    #: status of every node already decided for this case: node -> (status, reason)
    statuses: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    #: nodes of the current plan and the metric branches ``eval`` aggregates
    plan_nodes: tuple[str, ...] = ()
    metric_nodes: tuple[str, ...] = ()

    def get(self, node: str, model: type[M]) -> M | None:
        """The output of a prerequisite node, typed; ``None`` when it was skipped."""
        v = self.upstream.get(node)
        if v is None:
            return None
        if not isinstance(v, model):
            raise TypeError(f"upstream {node!r} is {type(v).__name__}, expected {model.__name__}")
        return v


@dataclass(frozen=True)
class CallEstimate:
    """What one planned judge call would cost (``estimate`` never calls the judge)."""

    node: str
    calls: int
    input_tokens: int
    output_tokens: int


class Node(ABC):
    """Base class of all graph nodes (see module docstring for the rules)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    output_model: ClassVar[type[BaseModel]] = NodeMetrics

    def skip_reason(self, ctx: NodeContext) -> str | None:
        """A reason to skip this case beyond field eligibility, or ``None`` to run."""
        return None

    def unused_input(self, ctx: NodeContext, prerequisite: str) -> str | None:
        """Why this node will not read ``prerequisite``'s output for this case (``None``: it
        will). Decided before anything runs (``ctx.upstream`` is empty); a judge-calling
        prerequisite that no planned node reads is skipped (:mod:`nexagauge.graph.demand`)."""
        return None

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        """Configuration (besides case content and upstream outputs) that changes the output."""
        return {}

    def cacheable(self, ctx: NodeContext) -> bool:
        """Whether results may be stored in the node cache (cheap nodes may opt out)."""
        return True

    @abstractmethod
    async def run(self, ctx: NodeContext) -> BaseModel:
        """Compute the node's output for one case."""

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        """Planned judge calls for this case, computed without calling any judge."""
        return []

    def empty(self) -> BaseModel:
        """The output of a skipped node: empty metrics and zero cost."""
        return self.output_model()
