"""The evaluation stage computes agent signals on every agent trace, sampled or not, from spans
the SDK wrote (``@nexagauge.tool`` spans read as tool calls by the online role table), through the
real decoder, assembly, extraction, sampling, graph and emitter."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.structs import ConsumerRecord, TopicPartition
from prometheus_client import CollectorRegistry

from nexagauge.emit.emitter import Emitter
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.graph.runtime import Runtime
from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.decode import decode_traces
from nexagauge.online.ingest.extract import extract_cases
from nexagauge.online.stage import EvaluatorStage
from nexagauge.sdk import conventions as C
from nexagauge.settings import EmitSettings, Settings

from .agent_sdk_app import run_agents

TOPIC = "spans"
TP = TopicPartition(TOPIC, 0)
KINDS = ["clean", "failing", "looping", "undeclared"]


class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


def stage_with(rate: float, **online: Any) -> tuple[EvaluatorStage, Emitter, Clock]:
    s = Settings(
        kafka={"traces_topic": TOPIC},
        online={"nodes": ["agent_signals"], "trace_grace_s": 1.0, **online},
        sampling={"default_rate": rate, "always_on_error": False},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    em = Emitter(
        EvaluatorMetrics(CollectorRegistry()),
        EvaluationSpanWriter.in_memory(),
        EmitSettings(dedupe_journal=False),
    )
    clock = Clock()
    return EvaluatorStage(s, Runtime.create(s, use_cache=False), em, clock=clock), em, clock


async def feed(stage: EvaluatorStage, clock: Clock, payload: bytes) -> None:
    rec = ConsumerRecord(TOPIC, 0, 0, 0, 0, None, payload, None, 0, len(payload), [])
    await stage.handle(TP, [rec])
    clock.t += 5.0
    await stage.tick()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if not stage._active and stage.in_flight == 0:
            break


def signal_records(em: Emitter) -> dict[str, list[Any]]:
    assert em.spans.events is not None
    out: dict[str, list[Any]] = {}
    for x in em.spans.events.memory.get_finished_logs():
        a = x.log_record.attributes
        if str(a[C.GEN_AI_EVALUATION_NAME]).startswith("agent."):
            out.setdefault(str(a[C.GEN_AI_EVALUATION_NAME]), []).append(a)
    return out


def value(em: Emitter, name: str, **labels: str) -> float:
    return sum(
        s.value
        for m in em.metrics.registry.collect()
        for s in m.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_sdk_tool_spans_are_tool_calls_of_the_agent_case() -> None:
    payload = run_agents(["looping"])
    batch = decode_traces(payload, "otlp_proto", wanted=frozenset())
    trace = Trace(batch.spans[0].trace_id, 0.0, 0.0)
    for sp in batch.spans:
        trace.spans[sp.span_id] = sp
    (ec,) = extract_cases(trace)
    run = ec.case.agent
    assert run is not None and ec.span.name == "support-agent"
    assert [c.name for c in run.tool_calls] == ["lookup_order"] * 3
    assert [c.call_id for c in run.tool_calls] == ["call_0", "call_1", "call_2"]
    assert run.tool_calls[0].result is not None and "shipped" in run.tool_calls[0].result
    assert run.declared_tools is not None and set(run.declared_tools) == {
        "lookup_order",
        "lookup_policy",
    }


def test_unsampled_agent_traces_still_get_their_signals() -> None:
    stage, em, clock = stage_with(0.0)
    asyncio.run(feed(stage, clock, run_agents(KINDS)))
    assert stage.stats.sampled == 0 and stage.stats.not_sampled == 4
    assert em.spans.memory.get_finished_spans() == ()  # no evaluation: nothing was sampled
    recs = signal_records(em)
    assert len(recs[C.AGENT_SIGNAL_TOOL_CALLS]) == 4 == value(em, "nexagauge_agent_runs_total")
    fails = {
        name: sum(1 for a in recs[name] if a.get(C.GEN_AI_EVALUATION_SCORE_LABEL) == "fail")
        for name in (
            C.AGENT_SIGNAL_TOOL_FAILURES,
            C.AGENT_SIGNAL_LOOPS,
            C.AGENT_SIGNAL_UNDECLARED_TOOLS,
        )
    }
    assert fails == {
        C.AGENT_SIGNAL_TOOL_FAILURES: 1,
        C.AGENT_SIGNAL_LOOPS: 1,
        C.AGENT_SIGNAL_UNDECLARED_TOOLS: 1,
    }
    # the counters agree with the records
    assert value(em, "nexagauge_agent_tool_calls_total", outcome="failed") == 1
    assert value(em, "nexagauge_agent_loops_total", tool="lookup_order") == 1
    assert value(em, "nexagauge_agent_undeclared_tool_calls_total", tool="escalate_ticket") == 1
    assert (
        value(em, "nexagauge_agent_tool_calls_total")
        == sum(a[C.GEN_AI_EVALUATION_SCORE_VALUE] for a in recs[C.AGENT_SIGNAL_TOOL_CALLS])
        == 6
    )
    assert value(em, "nexagauge_agent_runs_total", agent="support") == 4
    assert stage.tracker.committable((TOPIC, 0)) == 1  # released once the signals were emitted


def test_sampled_agent_traces_get_signals_and_an_evaluation_span_with_them() -> None:
    stage, em, clock = stage_with(1.0)
    asyncio.run(feed(stage, clock, run_agents(["looping"])))
    assert stage.stats.sampled == 1
    (span,) = em.spans.memory.get_finished_spans()
    p = C.NG_EVALUATION_AGENT_PREFIX
    assert span.attributes[p + "loops"] == 1 and span.attributes[p + "tool_calls"] == 3
    assert value(em, "nexagauge_agent_runs_total") == 1  # once, not once per path
    assert len(signal_records(em)[C.AGENT_SIGNAL_LOOPS]) == 1


def test_switch_off() -> None:
    stage, em, clock = stage_with(0.0, agent_signals=False)
    asyncio.run(feed(stage, clock, run_agents(KINDS)))
    assert signal_records(em) == {} and value(em, "nexagauge_agent_runs_total") == 0
    assert stage.stats.not_sampled == 4
