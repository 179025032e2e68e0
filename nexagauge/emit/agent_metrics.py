"""Agent signals as Prometheus series (names in :mod:`nexagauge.emit.metric_names`).

:class:`AgentMetrics` lives in the evaluator's registry (``EvaluatorMetrics.agents``) and counts
the :class:`~nexagauge.nodes.agent_signals.AgentSignals` of every agent run, once (the emitter's
``emit_signals`` calls :meth:`AgentMetrics.record` after the run's key is recorded):

* ``nexagauge_agent_runs_total{agent, definitions=recorded|not_recorded}``
* ``nexagauge_agent_tool_calls_total{agent, tool, outcome=ok|failed}``
* ``nexagauge_agent_loops_total{agent, tool}`` and
  ``nexagauge_agent_undeclared_tool_calls_total{agent, tool}``
* ``nexagauge_agent_steps{agent, kind=llm|tool}`` (histogram of steps per run) and
  ``nexagauge_agent_tool_latency_seconds{agent, tool}``
* ``nexagauge_agent_grounding_score{agent}``: grounding of answers whose context holds a tool
  result (observed by the emitter with the evaluation's scores).

Labels are bounded: ``agent`` keeps the first ``agents.top_agents`` names and ``tool`` the first
``agents.top_tools`` names seen (a series, once created, keeps its name); later ones are
``"other"``. Names are cleaned like every label from app data (secrets scrubbed, length cut).
Every series of an agent starts at zero when the agent is first seen, and every series of an
(agent, tool) pair when the pair is first seen, so a rate of failures or loops is 0, not
"No data", on a healthy agent.

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> from nexagauge.nodes.agent_signals import agent_signals
    >>> from nexagauge.schema.tools import AgentRun, ToolCall
    >>> m = AgentMetrics(CollectorRegistry())
    >>> m.record(agent_signals(AgentRun(agent="support", declared_tools=("t",),
    ...     tool_calls=(ToolCall(name="t", call_id="1", error="TimeoutError"),))))
    >>> m.registry.get_sample_value("nexagauge_agent_tool_calls_total",
    ...     {"agent": "support", "tool": "t", "outcome": "failed"})
    1.0
    >>> m.registry.get_sample_value("nexagauge_agent_loops_total", {"agent": "support", "tool": "t"})
    0.0
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry

from nexagauge.emit import metric_names as N
from nexagauge.emit.labels import LabelLimiter
from nexagauge.emit.series import Series
from nexagauge.nodes.agent_signals import AgentSignals

#: labels of every agent series, and of the series of an agent's tool
AGENT = ("agent",)
AGENT_TOOL = ("agent", "tool")
#: ``definitions`` label values
DEFINITIONS = ("recorded", "not_recorded")
#: ``outcome`` label values of tool calls
TOOL_OUTCOMES = ("ok", "failed")
#: ``kind`` label values of steps
STEP_KINDS = ("llm", "tool")


class AgentMetrics:
    """The agent series in ``registry`` (see module docstring)."""

    def __init__(
        self, registry: CollectorRegistry, *, top_tools: int = 20, top_agents: int = 20
    ) -> None:
        self.registry = registry
        self.limit(top_tools=top_tools, top_agents=top_agents)
        s = Series(registry)
        self.runs = s.counter(
            N.AGENT_RUNS,
            "Agent runs, by whether their tool definitions were recorded.",
            (*AGENT, "definitions"),
        )
        self.tool_calls = s.counter(
            N.AGENT_TOOL_CALLS, "Tool calls of agent runs, by outcome.", (*AGENT_TOOL, "outcome")
        )
        self.loops = s.counter(
            N.AGENT_LOOPS,
            "Loops: one tool called with the same arguments >= agents.loop_threshold times in a run.",
            AGENT_TOOL,
        )
        self.undeclared = s.counter(
            N.AGENT_UNDECLARED_TOOL_CALLS,
            "Calls to tools not in the run's declared tool definitions.",
            AGENT_TOOL,
        )
        self.steps = s.histogram(
            N.AGENT_STEPS,
            "Steps per agent run (LLM calls, tool calls).",
            (*AGENT, "kind"),
            buckets=N.AGENT_STEPS_BUCKETS,
        )
        self.latency = s.histogram(
            N.AGENT_TOOL_LATENCY,
            "Seconds per tool call.",
            AGENT_TOOL,
            buckets=N.AGENT_TOOL_LATENCY_BUCKETS,
        )
        self.grounding = s.histogram(
            N.AGENT_GROUNDING,
            "Grounding score of agent answers whose context holds a tool result.",
            AGENT,
            buckets=N.SCORE_BUCKETS,
        )
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def limit(self, *, top_tools: int, top_agents: int) -> None:
        """Set the label caps (``agents.top_tools`` / ``top_agents``); before the first record."""
        self._agents = LabelLimiter(None, top_agents)
        self._tools = LabelLimiter(None, top_tools)

    def agent_label(self, agent: str | None) -> str:
        """The bounded ``agent`` label of an agent name (``unknown`` when the run has none)."""
        return self._agents("agent", agent)

    def _touch(self, agent: str, tool: str | None = None) -> None:
        key = (agent,) if tool is None else (agent, tool)
        if key in self._seen:
            return
        with self._lock:
            if tool is None:
                for d in DEFINITIONS:
                    self.runs.labels(agent=agent, definitions=d)
                for kind in STEP_KINDS:
                    self.steps.labels(agent=agent, kind=kind)
                self.grounding.labels(agent=agent)
            else:
                for outcome in TOOL_OUTCOMES:
                    self.tool_calls.labels(agent=agent, tool=tool, outcome=outcome)
                self.loops.labels(agent=agent, tool=tool)
                self.undeclared.labels(agent=agent, tool=tool)
                self.latency.labels(agent=agent, tool=tool)
            self._seen.add(key)

    def record(self, signals: AgentSignals) -> None:
        """Count one agent run's signals (the emitter calls this once per run)."""
        agent = self.agent_label(signals.agent)
        self._touch(agent)
        definitions = "recorded" if signals.definitions_recorded else "not_recorded"
        self.runs.labels(agent=agent, definitions=definitions).inc()
        self.steps.labels(agent=agent, kind="llm").observe(signals.llm_steps)
        self.steps.labels(agent=agent, kind="tool").observe(signals.tool_calls)
        for call in signals.calls:
            tool = self._tools("tool", call.name)
            self._touch(agent, tool)
            outcome = "failed" if call.failed else "ok"
            self.tool_calls.labels(agent=agent, tool=tool, outcome=outcome).inc()
            if call.declared is False:
                self.undeclared.labels(agent=agent, tool=tool).inc()
            if call.duration_ms is not None and call.duration_ms >= 0:
                self.latency.labels(agent=agent, tool=tool).observe(call.duration_ms / 1000.0)
        for loop in signals.loops:
            tool = self._tools("tool", loop.tool)
            self._touch(agent, tool)
            self.loops.labels(agent=agent, tool=tool).inc()

    def record_grounding(self, agent: str | None, score: float) -> None:
        """Observe the grounding score of an agent answer grounded (partly) in tool results."""
        label = self.agent_label(agent)
        self._touch(label)
        self.grounding.labels(agent=label).observe(min(1.0, max(0.0, float(score))))
