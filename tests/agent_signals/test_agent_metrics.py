"""The agent Prometheus series: counts, zero-initialised label sets, bounded labels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from nexagauge.emit.agent_metrics import AgentMetrics
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.zero import start_for_service
from nexagauge.nodes.agent_signals import agent_signals
from nexagauge.schema.tools import AgentRun
from nexagauge.settings import Settings

from .runs import CLEAN, FAILING, LOOPING, NO_DEFINITIONS, UNDECLARED, call


def value(m: AgentMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_each_run_counted_once_with_zeros_beside() -> None:
    m = EvaluatorMetrics(CollectorRegistry()).agents
    for run in (CLEAN, FAILING, LOOPING, UNDECLARED, NO_DEFINITIONS):
        m.record(agent_signals(run))
    a = {"agent": "support"}
    assert value(m, "nexagauge_agent_runs_total", **a, definitions="recorded") == 4
    assert value(m, "nexagauge_agent_runs_total", **a, definitions="not_recorded") == 1
    order = {**a, "tool": "lookup_order"}
    assert value(m, "nexagauge_agent_tool_calls_total", **order, outcome="ok") == 4
    assert value(m, "nexagauge_agent_tool_calls_total", **order, outcome="failed") == 1
    assert value(m, "nexagauge_agent_loops_total", **order) == 1
    assert value(m, "nexagauge_agent_undeclared_tool_calls_total", **order) == 0
    esc = {**a, "tool": "escalate_ticket"}
    # declared definitions: counted; no definitions: never counted as undeclared
    assert value(m, "nexagauge_agent_undeclared_tool_calls_total", **esc) == 1
    assert value(m, "nexagauge_agent_loops_total", **esc) == 0  # zero, not absent
    assert value(m, "nexagauge_agent_tool_calls_total", **esc, outcome="failed") == 0
    assert value(m, "nexagauge_agent_steps_count", **a, kind="llm") == 5
    assert value(m, "nexagauge_agent_steps_sum", **a, kind="tool") == 1 + 1 + 3 + 1 + 1
    # durations: 12 ms, 900 ms, 3 x 5 ms
    assert value(m, "nexagauge_agent_tool_latency_seconds_count", **order) == 5
    assert value(m, "nexagauge_agent_tool_latency_seconds_bucket", **order, le="0.01") == 3
    assert value(m, "nexagauge_agent_grounding_score_count", **a) == 0


def test_tool_and_agent_labels_are_bounded() -> None:
    m = EvaluatorMetrics(CollectorRegistry()).agents
    m.limit(top_tools=2, top_agents=1)
    tools = tuple(call(f"tool_{i}", str(i)) for i in range(5))
    m.record(agent_signals(AgentRun(agent="a", tool_calls=tools)))
    m.record(agent_signals(AgentRun(agent="b", tool_calls=tools[:1])))
    names = {
        (s.labels["agent"], s.labels["tool"])
        for metric in m.registry.collect()
        if metric.name == "nexagauge_agent_tool_calls"
        for s in metric.samples
    }
    assert names == {("a", "tool_0"), ("a", "tool_1"), ("a", "other"), ("other", "tool_0")}
    assert value(m, "nexagauge_agent_tool_calls_total", agent="a", tool="other", outcome="ok") == 3


def test_service_start_applies_the_caps() -> None:
    em = EvaluatorMetrics(CollectorRegistry())
    start_for_service(em, Settings(agents={"top_tools": 1}), None)
    em.agents.record(agent_signals(AgentRun(tool_calls=(call("x", "1"), call("y", "2")))))
    labels = {"agent": "unknown", "tool": "other", "outcome": "ok"}
    assert value(em.agents, "nexagauge_agent_tool_calls_total", **labels) == 1
