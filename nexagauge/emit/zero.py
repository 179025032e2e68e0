"""Known label sets start at zero, so a dashboard never shows "No data" on a healthy evaluator.

A Prometheus counter with labels has no series until its first ``.labels(...)`` call: a panel of
judge errors, budget skips or dead letters would show *No data* (indistinguishable from a broken
scrape) until the first such event. Following prometheus client_python's advice for labelled
metrics, every label combination known in advance is created at zero:

* at construction (``EvaluatorMetrics``): assembly triggers, the
  whole-evaluation skip codes (``node=""``), eviction and dead-letter reasons, evaluation span
  export outcomes;
* from the configuration (:func:`start_configured`, called by the online service at start):
  for each judge-calling node of the plan and its judge model, the calls by outcome, tokens by
  direction, spend and latency; each metric skip code for each planned metric node; the budget
  gauges of both windows (remaining = the cap, ``+Inf`` without one; exhausted = 0); the
  sampling rules (``default``, ``error``, each configured rule's name);
* when a label set first appears (``EvaluatorMetrics``): the other evaluation status of the same
  service/route/model, the other claim verdict of the same metric, the other judge outcomes of the
  same node and model.

Values are zero (or the true state), never invented: a counter at 0 says "nothing happened",
which is what happened.

Example:
    >>> from nexagauge.emit.prometheus import EvaluatorMetrics
    >>> m = EvaluatorMetrics()
    >>> m.registry.get_sample_value("nexagauge_dlq_messages_total", {"reason": "undecodable"})
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.graph.skips import METRIC_SKIPS


def start_configured(
    m: EvaluatorMetrics,
    *,
    judge_nodes: Mapping[str, str | None] | None = None,
    metric_nodes: Iterable[str] = (),
    budgets: Mapping[str, float | None] | None = None,
    sampling_rules: Iterable[str] = (),
) -> None:
    """Create the label sets the configuration makes known.

    Args:
        judge_nodes: judge-calling node -> its judge model (``"local"`` for the local judge).
        metric_nodes: the planned metric nodes (each gets every metric skip code at 0).
        budgets: ``{"hour": cap or None, "day": cap or None}`` (USD); a window without a cap is
            reported as ``+Inf`` remaining and never exhausted.
        sampling_rules: rule names of ``nexagauge_traces_sampled_total`` (a burst sampled before
            the first scrape otherwise starts the series at its final value: a rate of 0).

    Example:
        >>> from nexagauge.emit.prometheus import EvaluatorMetrics
        >>> m = EvaluatorMetrics()
        >>> start_configured(m, judge_nodes={"claims": "gpt-4o-mini"}, budgets={"hour": 5.0})
        >>> m.registry.get_sample_value("nexagauge_judge_calls_total",
        ...     {"node": "claims", "model": "gpt-4o-mini", "outcome": "error"})
        0.0
        >>> m.registry.get_sample_value("nexagauge_budget_remaining_usd", {"window": "hour"})
        5.0
    """
    for node, model in (judge_nodes or {}).items():
        m.touch_judge(node, model)
    for node in metric_nodes:
        for code in METRIC_SKIPS:
            m.skipped.labels(reason=code.value, node=m.node_label(node))
    for window, cap in (budgets or {}).items():
        m.set_budget(window, math.inf if cap is None else cap, False)
    for rule in sampling_rules:
        m.trace_sampled(rule, 0)


def start_for_service(m: EvaluatorMetrics, settings: Any, judge_kind: str | None) -> None:
    """:func:`start_configured` from the online service's settings: the plan of
    ``online.target`` / ``online.nodes``, its judge-calling nodes with their models (none without
    a judge), and the sampling budgets."""
    from nexagauge.graph.planner import plan

    o = settings.online
    agents = getattr(settings, "agents", None)
    if agents is not None:  # the agent label caps, before the first agent run is counted
        m.agents.limit(top_tools=agents.top_tools, top_agents=agents.top_agents)
    p = plan(o.target, only=o.nodes or None, report=False)  # the plan serve runs (online/plans.py)
    judge_nodes: dict[str, str | None] = {}
    if judge_kind is not None:
        for node in p.nodes:
            if p.topology.nodes[node].judge:
                judge_nodes[node] = (
                    "local" if judge_kind == "local" else settings.judge.for_node(node).model
                )
    start_configured(
        m,
        judge_nodes=judge_nodes,
        metric_nodes=p.metric_nodes,
        budgets={
            "hour": settings.sampling.budget_usd_per_hour,
            "day": settings.sampling.budget_usd_per_day,
        },
        sampling_rules=["default", "error", *(r.name for r in settings.sampling.rules)],
    )
