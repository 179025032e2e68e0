"""Agent signals leave as result records on the agent span, attributes of the evaluation span and
Prometheus series; the counters agree with the records; nothing is counted twice; no case text."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry

from nexagauge.emit.emitter import Emitter
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.emit.target import EvaluationTarget
from nexagauge.graph.executor import CaseResult, NodeOutcome, evaluate
from nexagauge.nodes.agent_signals import agent_signals
from nexagauge.schema.case import EvalCase
from nexagauge.schema.results import GroundingMetrics, MetricResult
from nexagauge.sdk import conventions as C
from nexagauge.settings import EmitSettings

from .runs import CLEAN, FAILING, LOOPING, NO_DEFINITIONS, UNDECLARED

TRACE = "0af7651916cd43dd8448eb211c80319c"


def target(i: int) -> EvaluationTarget:
    return EvaluationTarget(TRACE, f"{i + 1:016x}", "shop", "invoke_agent support", 0)


def emitter() -> Emitter:
    return Emitter(
        EvaluatorMetrics(CollectorRegistry()),
        EvaluationSpanWriter.in_memory(),
        EmitSettings(dedupe_journal=False),
    )


def records(em: Emitter) -> list[Any]:
    assert em.spans.events is not None
    return [x.log_record for x in em.spans.events.memory.get_finished_logs()]


def total(em: Emitter, name: str, **match: str) -> float:
    out = 0.0
    for metric in em.metrics.registry.collect():
        for s in metric.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in match.items()):
                out += s.value
    return out


RUNS = [CLEAN, FAILING, LOOPING, UNDECLARED, NO_DEFINITIONS]


def test_records_and_counters_reconcile() -> None:
    em = emitter()

    async def go() -> list[bool]:
        return [await em.emit_signals(target(i), agent_signals(r)) for i, r in enumerate(RUNS)]

    assert asyncio.run(go()) == [True] * len(RUNS)
    recs = records(em)
    by_name: Counter[str] = Counter()
    values: Counter[str] = Counter()
    for r in recs:
        assert r.event_name == C.GEN_AI_EVALUATION_RESULT_EVENT
        assert f"{r.trace_id:032x}" == TRACE  # in the agent span's context
        name = r.attributes[C.GEN_AI_EVALUATION_NAME]
        by_name[name] += 1
        values[name] += r.attributes.get(C.GEN_AI_EVALUATION_SCORE_VALUE, 0.0)
    assert {f"{r.span_id:016x}" for r in recs} == {target(i).span_id for i in range(len(RUNS))}
    runs = total(em, "nexagauge_agent_runs_total")
    assert by_name[C.AGENT_SIGNAL_TOOL_CALLS] == runs == len(RUNS)
    assert values[C.AGENT_SIGNAL_TOOL_CALLS] == total(em, "nexagauge_agent_tool_calls_total") == 7
    assert (
        values[C.AGENT_SIGNAL_TOOL_FAILURES]
        == total(em, "nexagauge_agent_tool_calls_total", outcome="failed")
        == 1
    )
    assert values[C.AGENT_SIGNAL_LOOPS] == total(em, "nexagauge_agent_loops_total") == 1
    assert (
        values[C.AGENT_SIGNAL_UNDECLARED_TOOLS]
        == total(em, "nexagauge_agent_undeclared_tool_calls_total")
        == 1
    )
    assert values[C.AGENT_SIGNAL_LLM_STEPS] == total(em, "nexagauge_agent_steps_sum", kind="llm")
    not_recorded = [
        r
        for r in recs
        if r.attributes.get(C.GEN_AI_EVALUATION_SCORE_LABEL) == C.AGENT_DEFINITIONS_NOT_RECORDED
    ]
    assert (
        len(not_recorded)
        == total(em, "nexagauge_agent_runs_total", definitions="not_recorded")
        == 1
    )
    assert C.GEN_AI_EVALUATION_SCORE_VALUE not in not_recorded[0].attributes  # never a false 0
    assert total(em, "nexagauge_evaluation_events_total", outcome="exported") == len(recs)


def test_each_signal_labelled_on_its_run_only() -> None:
    em = emitter()
    for i, r in enumerate(RUNS):
        asyncio.run(em.emit_signals(target(i), agent_signals(r)))
    fails = {
        (f"{r.span_id:016x}", r.attributes[C.GEN_AI_EVALUATION_NAME])
        for r in records(em)
        if r.attributes.get(C.GEN_AI_EVALUATION_SCORE_LABEL) == "fail"
    }
    assert fails == {
        (target(1).span_id, C.AGENT_SIGNAL_TOOL_FAILURES),
        (target(2).span_id, C.AGENT_SIGNAL_LOOPS),
        (target(3).span_id, C.AGENT_SIGNAL_UNDECLARED_TOOLS),
    }


def test_redelivery_counts_nothing_again() -> None:
    em = emitter()
    s = agent_signals(FAILING)

    async def deliveries() -> list[bool]:  # concurrent duplicates, then a late redelivery
        first = await asyncio.gather(*(em.emit_signals(target(0), s) for _ in range(3)))
        return [*first, await em.emit_signals(target(0), s)]

    assert sorted(asyncio.run(deliveries())) == [False, False, False, True]
    assert total(em, "nexagauge_agent_runs_total") == 1
    # one run's records: calls, steps, failures, loops, undeclared, latency
    assert len(records(em)) == 6


def test_no_case_text_in_records() -> None:
    em = emitter()
    asyncio.run(em.emit_signals(target(0), agent_signals(FAILING)))
    text = " ".join(str(v) for r in records(em) for v in r.attributes.values())
    assert "order service" not in text and "A-1042" not in text  # error message, arguments
    assert "lookup_order#c1 (TimeoutError)" in text  # the error class only


def test_evaluation_span_carries_the_signals() -> None:
    em = emitter()
    case = EvalCase(case_id="a", output="Your order shipped.", agent=LOOPING)
    (res,) = asyncio.run(evaluate([case], "eval", only=["agent_signals"]))
    asyncio.run(em.emit(target(0), res))
    (span,) = em.spans.memory.get_finished_spans()
    a = span.attributes or {}
    p = C.NG_EVALUATION_AGENT_PREFIX
    assert (a[p + "tool_calls"], a[p + "loops"], a[p + "failed_tool_calls"]) == (3, 1, 0)
    assert a[p + "llm_steps"] == 4 and a[p + "undeclared_tool_calls"] == 0
    assert a[p + "tool_definitions"] == "recorded"
    # the evaluation itself counts no agent series: emit_signals does, once per run
    assert total(em, "nexagauge_agent_runs_total") == 0


def test_grounding_of_tool_grounded_answers() -> None:
    em = emitter()
    grounded = EvalCase(
        case_id="g",
        output="Your order shipped.",
        context="{...}",
        context_documents=('{"status": "shipped"}',),
        context_sources=("tool:lookup_order#c1",),
        agent=CLEAN,
    )
    docs_only = grounded.model_copy(update={"context_sources": ("doc:kb-1",)})

    def result(case: EvalCase) -> CaseResult:
        out = GroundingMetrics(
            metrics=[MetricResult(name="grounding", category="answer", score=0.8)]
        )
        return CaseResult(
            0, case.case_id, case, {"grounding": NodeOutcome("grounding", "ok", output=out)}
        )

    asyncio.run(em.emit(target(0), result(grounded)))
    asyncio.run(em.emit(target(1), result(docs_only)))
    assert total(em, "nexagauge_agent_grounding_score_count", agent="support") == 1
    assert total(em, "nexagauge_agent_grounding_score_sum", agent="support") == 0.8
