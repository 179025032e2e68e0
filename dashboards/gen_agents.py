"""The Agents dashboard and the agent alerts (tool failure spike, loops).

Part of ``dashboards/generate.py``: the deterministic agent signals of every agent run
(``nexagauge.nodes.agent_signals``, exported by ``nexagauge.emit.agent_metrics``) per agent and
tool: tool failure rate per tool, loops, calls to undeclared tools, runs whose tool definitions
were not recorded, steps per run, tool latency, and the grounding of answers grounded in tool
results. Counts that are good news at zero (loops, undeclared tools, failures) show 0 or "none",
never "No data".
"""

from __future__ import annotations

from typing import Any

from gen_common import mn
from gen_grafana import Panel, dashboard, none_when_zero, row, target, variable
from gen_rules import Alert

from nexagauge.emit.alerts import LOOP_MIN_RUNS, LOOP_RATE, TOOL_FAILURE_RATE, TOOL_MIN_CALLS

AGENT = 'agent=~"$agent"'
TOOL = 'agent=~"$agent", tool=~"$tool"'
RATE = "$__rate_interval"
RANGE = "$__range"
ZERO = " or on() vector(0)"
COUNT_STAT = {
    "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
    "colorMode": "background",
    "graphMode": "none",
    "textMode": "value",
}


def agent_variables() -> list[dict[str, Any]]:
    """``agent`` and ``tool`` (chained), from the agent series."""
    return [
        variable("agent", "Agent", f"label_values({mn.AGENT_RUNS}, agent)"),
        variable("tool", "Tool", f"label_values({mn.AGENT_TOOL_CALLS}{{{AGENT}}}, tool)"),
    ]


def _count_stat(title: str, series: str, sel: str, none: str, description: str) -> Panel:
    return Panel(
        title,
        "stat",
        [target(f"sum(increase({series}{{{sel}}}[{RANGE}])){ZERO}", "", instant=True)],
        w=6,
        h=5,
        description=description,
        unit="short",
        thresholds=[(None, "green"), (1.0, "red")],
        mappings=none_when_zero(none),
        options=COUNT_STAT,
    )


def agents_dashboard() -> dict[str, Any]:
    calls = mn.AGENT_TOOL_CALLS
    failure_rate = (
        f'sum by (agent, tool) (rate({calls}{{{TOOL}, outcome="failed"}}[{RATE}]))'
        f" / (sum by (agent, tool) (rate({calls}{{{TOOL}}}[{RATE}])) > 0)"
    )
    panels: list[Panel | dict[str, Any]] = [
        row("Agent runs and their signals (no judge: every agent run, sampled or not)"),
        Panel(
            "Agent runs",
            "stat",
            [target(f"sum(increase({mn.AGENT_RUNS}{{{AGENT}}}[{RANGE}])){ZERO}", "", instant=True)],
            w=6,
            h=5,
            description="Agent runs in the selected time range (every agent trace, whatever "
            "the judge sampling rate).",
            unit="short",
            options={**COUNT_STAT, "colorMode": "none"},
        ),
        _count_stat(
            "Failed tool calls",
            calls,
            f'{TOOL}, outcome="failed"',
            "none",
            "Tool calls that recorded an error in the selected time range.",
        ),
        _count_stat(
            "Loops",
            mn.AGENT_LOOPS,
            TOOL,
            "none",
            "A tool called with the same arguments at least agents.loop_threshold times in one "
            "run (default 3), counted once per run and tool.",
        ),
        _count_stat(
            "Calls to undeclared tools",
            mn.AGENT_UNDECLARED_TOOL_CALLS,
            TOOL,
            "none",
            "Calls to a tool that is not in the run's declared tool definitions. Runs without "
            "recorded definitions cannot be checked: see the next row.",
        ),
        Panel(
            "Tool failure rate per tool",
            "timeseries",
            [target(f"({failure_rate}){ZERO}", "{{agent}} / {{tool}}")],
            w=12,
            description=f"Share of calls to each tool that failed (alert above "
            f"{TOOL_FAILURE_RATE:.0%} over 15 minutes with at least {TOOL_MIN_CALLS} calls); "
            "a single 0 line while no tool was called.",
            unit="percentunit",
            min=0.0,
            max=1.0,
            thresholds=[(None, "green"), (TOOL_FAILURE_RATE, "red")],
        ),
        Panel(
            "Tool calls by outcome",
            "timeseries",
            [
                target(
                    f"sum by (tool, outcome) (rate({calls}{{{TOOL}}}[{RATE}]))",
                    "{{tool}} {{outcome}}",
                )
            ],
            w=12,
            unit="ops",
            description="Tool calls per second by tool and outcome.",
        ),
        Panel(
            "Loops and undeclared tool calls per run",
            "timeseries",
            [
                target(
                    f"(sum by (agent) (rate({mn.AGENT_LOOPS}{{{AGENT}}}[{RATE}]))"
                    f" / (sum by (agent) (rate({mn.AGENT_RUNS}{{{AGENT}}}[{RATE}])) > 0)){ZERO}",
                    "{{agent}} loops",
                ),
                target(
                    f"(sum by (agent) (rate({mn.AGENT_UNDECLARED_TOOL_CALLS}{{{AGENT}}}[{RATE}]))"
                    f" / (sum by (agent) (rate({mn.AGENT_RUNS}{{{AGENT}}}[{RATE}])) > 0)){ZERO}",
                    "{{agent}} undeclared tool calls",
                ),
            ],
            w=12,
            unit="short",
            min=0.0,
            description=f"Loops per agent run (alert above {LOOP_RATE} over 30 minutes with at "
            f"least {LOOP_MIN_RUNS} runs) and calls to undeclared tools per run.",
        ),
        Panel(
            "Runs without recorded tool definitions",
            "timeseries",
            [
                target(
                    f'sum by (agent) (rate({mn.AGENT_RUNS}{{{AGENT}, definitions="not_recorded"}}'
                    f"[{RATE}])) / (sum by (agent) (rate({mn.AGENT_RUNS}{{{AGENT}}}[{RATE}])) > 0)"
                    f"{ZERO}",
                    "{{agent}}",
                )
            ],
            w=12,
            unit="percentunit",
            min=0.0,
            max=1.0,
            description="Share of runs whose trace recorded no tool definitions: their calls "
            "to undeclared tools cannot be checked (record them with "
            "@nexagauge.trace(tools=[...]) or the instrumentation's gen_ai.tool.definitions).",
        ),
        row("Steps, latency and grounding"),
        Panel(
            "Steps per run",
            "timeseries",
            [
                target(
                    f"sum by (agent, kind) (increase({mn.AGENT_STEPS}_sum{{{AGENT}}}[15m]))"
                    f" / (sum by (agent, kind) (increase({mn.AGENT_STEPS}_count{{{AGENT}}}[15m]))"
                    " > 0)",
                    "{{agent}} {{kind}} steps",
                )
            ],
            w=8,
            unit="short",
            min=0.0,
            description="Mean LLM calls and tool calls per agent run over the last 15 minutes "
            "(a slow signal: a longer window than the rates).",
        ),
        Panel(
            "Tool latency (p95)",
            "timeseries",
            [
                target(
                    "histogram_quantile(0.95, sum by (le, agent, tool) "
                    f"(rate({mn.AGENT_TOOL_LATENCY}_bucket{{{TOOL}}}[{RATE}])))",
                    "{{agent}} / {{tool}}",
                )
            ],
            w=8,
            unit="s",
            description="95th percentile of each tool's call duration.",
        ),
        Panel(
            "Grounding of tool-grounded answers",
            "timeseries",
            [
                target(
                    f"sum by (agent) (rate({mn.AGENT_GROUNDING}_sum{{{AGENT}}}[{RATE}]))"
                    f" / (sum by (agent) (rate({mn.AGENT_GROUNDING}_count{{{AGENT}}}[{RATE}]))"
                    " > 0)",
                    "{{agent}}",
                )
            ],
            w=8,
            unit="percentunit",
            min=0.0,
            max=1.0,
            description="Mean grounding of the evaluated agent answers whose context holds a "
            "tool result (sampled runs; the judge checks claims against the tool results).",
        ),
    ]
    return dashboard(
        "nexagauge-agents",
        "nexa-gauge / Agents",
        "Deterministic signals of every agent run (failed tool calls, loops, undeclared tools, "
        "steps, tool latency) and the grounding of answers grounded in tool results.",
        panels,
        agent_variables(),
        ["agents"],
    )


def agent_alerts() -> list[Alert]:
    calls = mn.AGENT_TOOL_CALLS
    return [
        Alert(
            name="NexagaugeAgentToolFailures",
            expr=(
                f'sum by (agent, tool) (increase({calls}{{outcome="failed"}}[15m]))'
                f" / sum by (agent, tool) (increase({calls}[15m])) > {TOOL_FAILURE_RATE}"
                f" and on(agent, tool) sum by (agent, tool) (increase({calls}[15m]))"
                f" >= {TOOL_MIN_CALLS}"
            ),
            for_="10m",
            severity="warning",
            summary="Tool {{ $labels.tool }} of agent {{ $labels.agent }} fails "
            "{{ $value | humanizePercentage }} of its calls",
            description=f"More than {TOOL_FAILURE_RATE:.0%} of the calls agent "
            "{{ $labels.agent }} made to {{ $labels.tool }} failed over 15 minutes (at least "
            f"{TOOL_MIN_CALLS} calls).",
            anchor="agent-tool-failures",
            dashboard="nexagauge-agents",
        ),
        Alert(
            name="NexagaugeAgentLoops",
            expr=(
                f"sum by (agent) (increase({mn.AGENT_LOOPS}[30m]))"
                f" / sum by (agent) (increase({mn.AGENT_RUNS}[30m])) > {LOOP_RATE}"
                f" and on(agent) sum by (agent) (increase({mn.AGENT_RUNS}[30m]))"
                f" >= {LOOP_MIN_RUNS}"
            ),
            for_="15m",
            severity="warning",
            summary="Agent {{ $labels.agent }} loops",
            description='{{ $value | printf "%.2f" }} loops per run over 30 minutes (a tool '
            "called with the same arguments again and again; alert above "
            f"{LOOP_RATE}, at least {LOOP_MIN_RUNS} runs).",
            anchor="agent-loops",
            dashboard="nexagauge-agents",
        ),
    ]


def agent_rules() -> dict[str, Any]:
    """``rules/agents.yml``: the agent alerts (raw series only)."""
    return {"groups": [{"name": "nexagauge_agents", "rules": [a.rule() for a in agent_alerts()]}]}
