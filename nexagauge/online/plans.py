"""The executors of the online evaluator, one per node set, with their config fingerprints.

``nexagauge serve`` (:class:`~nexagauge.online.service.EvaluatorStage`) and ``nexagauge dlq
replay`` (:mod:`nexagauge.online.replay`) build executors here, so that a replayed dead letter is
evaluated by the same plan and gets the same configuration fingerprint - hence the same
deterministic evaluation ids (``EvaluationTarget.dedupe_key``) - as in the service.

Example:
    >>> from nexagauge.settings import Settings
    >>> from nexagauge.graph.runtime import Runtime
    >>> s = Settings(online={"nodes": ["refmatch"]})
    >>> ex, fp = Executors(s, Runtime(settings=s)).get(None)
    >>> (ex.plan.metric_nodes, len(fp))
    (('refmatch',), 16)
"""

from __future__ import annotations

from collections.abc import Sequence

from nexagauge.emit.target import config_fingerprint
from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.settings import Settings


class Executors:
    """Executor and fingerprint per node set (``None``: ``online.nodes``), built once each."""

    def __init__(self, settings: Settings, runtime: Runtime) -> None:
        self.settings = settings
        self.runtime = runtime
        self._cache: dict[tuple[str, ...] | None, tuple[Executor, str]] = {}

    def get(self, nodes: Sequence[str] | None) -> tuple[Executor, str]:
        """The executor of ``nodes`` (a sampling rule's node set) and its config fingerprint."""
        o = self.settings.online
        key = tuple(nodes) if nodes is not None else (tuple(o.nodes) if o.nodes else None)
        hit = self._cache.get(key)
        if hit is None:
            p = plan(o.target, only=key, report=False)  # nothing online reads a report
            ex = Executor(self.runtime, p, max_in_flight=o.max_in_flight)
            judge = self.settings.judge.model if self.runtime.judge is not None else None
            knobs = {
                "target": o.target,
                "thresholds": dict(self.settings.run.thresholds),
                "default_threshold": self.settings.run.default_threshold,
                "judge_kind": self.runtime.judge_kind,
            }
            hit = self._cache[key] = (ex, config_fingerprint(p.metric_nodes, knobs, judge))
        return hit
