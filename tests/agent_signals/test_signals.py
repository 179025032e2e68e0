"""The signals function and node: each signal on exactly the runs that have it."""

from __future__ import annotations

import asyncio

import pytest

from nexagauge.graph.executor import evaluate
from nexagauge.graph.node import NodeContext
from nexagauge.graph.runtime import Runtime
from nexagauge.nodes.agent_signals import AgentSignalsMetrics, AgentSignalsNode, agent_signals
from nexagauge.schema.case import EvalCase
from nexagauge.schema.tools import AgentRun
from nexagauge.settings import Settings

from .runs import CLEAN, DECLARED, FAILING, LOOPING, NO_DEFINITIONS, UNDECLARED, call


def test_clean_run_has_no_signal() -> None:
    s = agent_signals(CLEAN)
    assert (s.tool_calls, s.llm_steps, s.failed, s.loops, s.undeclared) == (1, 2, (), (), ())
    assert s.definitions_recorded
    assert s.slowest is not None and s.slowest.duration_ms == 12.0


def test_each_signal_on_its_run_only() -> None:
    runs = {"clean": CLEAN, "failing": FAILING, "looping": LOOPING, "undeclared": UNDECLARED}
    found = {
        k: (bool(s.failed), bool(s.loops), bool(s.undeclared))
        for k, r in runs.items()
        for s in [agent_signals(r)]
    }
    assert found == {
        "clean": (False, False, False),
        "failing": (True, False, False),
        "looping": (False, True, False),
        "undeclared": (False, False, True),
    }
    assert agent_signals(FAILING).failed[0].source_label == "tool:lookup_order#c1"
    loop = agent_signals(LOOPING).loops[0]
    assert (loop.tool, loop.count, loop.call_ids) == ("lookup_order", 3, ("c0", "c1", "c2"))


def test_no_definitions_is_unknown_not_undeclared() -> None:
    s = agent_signals(NO_DEFINITIONS)
    assert not s.definitions_recorded
    assert s.undeclared == ()
    assert [c.declared for c in s.calls] == [None]


def test_loop_threshold_and_argument_comparison() -> None:
    two = AgentRun(tool_calls=(call("t", "a", '{"x": 1, "y": 2}'), call("t", "b", '{"y":2,"x":1}')))
    assert agent_signals(two, loop_threshold=3).loops == ()
    assert agent_signals(two, loop_threshold=2).loops[0].count == 2  # key order does not matter
    differ = AgentRun(tool_calls=(call("t", "a", '{"x": 1}'), call("t", "b", '{"x": 2}')))
    assert agent_signals(differ, loop_threshold=2).loops == ()
    other_tool = AgentRun(tool_calls=(call("t", "a", "{}"), call("u", "b", "{}")))
    assert agent_signals(other_tool, loop_threshold=2).loops == ()
    # arguments not recorded: never a loop (no false positive from missing data)
    unknown = AgentRun(tool_calls=tuple(call("t", str(i), None) for i in range(5)))
    assert agent_signals(unknown, loop_threshold=2).loops == ()
    text = AgentRun(tool_calls=(call("t", "a", "same "), call("t", "b", "same")))
    assert agent_signals(text, loop_threshold=2).loops[0].call_ids == ("a", "b")
    with pytest.raises(ValueError, match="loop_threshold"):
        agent_signals(two, loop_threshold=1)


def test_node_reads_the_configured_threshold() -> None:
    settings = Settings(agents={"loop_threshold": 4})
    ctx = NodeContext(
        case=EvalCase(case_id="c", output="done", agent=LOOPING),
        upstream={},
        runtime=Runtime(settings=settings),
    )
    out = asyncio.run(AgentSignalsNode().run(ctx))
    assert isinstance(out, AgentSignalsMetrics) and out.metrics == []
    assert out.signals is not None and out.signals.loops == () and out.signals.loop_threshold == 4


def test_graph_runs_it_for_agent_cases_only() -> None:
    agent_case = EvalCase(case_id="a", output="Your order shipped.", agent=FAILING)
    plain = EvalCase(case_id="p", output="Paris.")
    first, second = asyncio.run(evaluate([agent_case, plain], "agent_signals"))
    out = first.outcomes["agent_signals"].output
    assert isinstance(out, AgentSignalsMetrics) and out.signals is not None
    assert [c.call_id for c in out.signals.failed] == ["c1"]
    assert second.outcomes["agent_signals"].status == "skipped"


def test_eval_plan_includes_signals_without_changing_pass_rates() -> None:
    case = EvalCase(case_id="a", output="ok", agent=UNDECLARED)
    (res,) = asyncio.run(evaluate([case], "eval", only=["agent_signals"]))
    summary = res.outcomes["eval"].output
    assert res.outcomes["agent_signals"].status == "ok"
    assert summary.metrics == []  # type: ignore[union-attr]
    assert UNDECLARED.declared_tools == DECLARED
