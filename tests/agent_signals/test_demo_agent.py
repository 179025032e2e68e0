"""The demo's agent path: its traces read as agent runs, each fault is the signal it stands for."""

from __future__ import annotations

import random

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge
from nexagauge.demo.agent import AGENT, DemoAgent
from nexagauge.demo.app import DemoApp
from nexagauge.nodes.agent_signals import agent_signals
from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.decode import decode_traces
from nexagauge.online.ingest.extract import extract_cases


@pytest.fixture
def agent() -> tuple[DemoAgent, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = nexagauge.configure(exporter=exporter, batch=False, set_global=False)
    try:
        yield DemoAgent(random.Random(3), provider=provider), exporter
    finally:
        nexagauge.shutdown()


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("clean", (2, 0, 0, 0)),
        ("tool_failure", (2, 1, 0, 0)),
        ("loop", (4, 0, 1, 0)),
        ("undeclared", (3, 0, 0, 1)),
    ],
)
def test_each_fault_is_its_signal(
    agent: tuple[DemoAgent, InMemorySpanExporter], fault: str, expected: tuple[int, ...]
) -> None:
    demo, exporter = agent
    answer = demo.ask("What plan is account acme-42 on?", fault)
    payload = bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    batch = decode_traces(payload, "otlp_proto", wanted=frozenset())
    trace = Trace(batch.spans[0].trace_id, 0.0, 0.0)
    for sp in batch.spans:
        trace.spans[sp.span_id] = sp
    (case,) = extract_cases(trace)  # one evaluated answer per run: the agent's
    assert case.span.name == "support.agent" and case.case.output == answer
    assert case.case.context_sources[0] == "tool:account_status#call_1"
    run = case.case.agent
    assert run is not None
    s = agent_signals(run)
    assert (s.tool_calls, len(s.failed), len(s.loops), len(s.undeclared)) == expected
    assert (s.agent, s.llm_steps, s.definitions_recorded) == (AGENT, 1, True)


def test_the_app_mixes_agent_runs_in() -> None:
    app = DemoApp(seed=5, agent_share=1.0)
    exporter = InMemorySpanExporter()
    nexagauge.configure(exporter=exporter, batch=False, set_global=False)
    try:
        app.agent.provider = nexagauge.configure(exporter=exporter, batch=False, set_global=False)
        for _ in range(40):
            app.agent_run()
    finally:
        nexagauge.shutdown()
    assert app.counts["agent"] == 40 == sum(app.agent.counts.values())
    assert all(app.agent.counts[k] > 0 for k in ("clean", "tool_failure"))
    roots = [s for s in exporter.get_finished_spans() if s.name == "support.agent"]
    assert len(roots) == 40
