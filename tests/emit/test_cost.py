"""Judge cost is counted once: per case, the evaluation span, the Prometheus token/cost series,
the USD budget and the offline summary all equal the judge calls actually made, to the token.

Real parts: the online evaluation stage (no Kafka: records handed to its handler), the real
``openai`` client of the LLM judge over loopback HTTP to an OpenAI-compatible server that counts
every token it answers, the real executor and the real emitter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from online.otlp import rand_tid, sdk_turn, traces_request
from online.test_stage import TP, Clock, record

from nexagauge.cli._output import SummaryBuilder
from nexagauge.emit.emitter import Emitter
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.graph.executor import CaseResult, NodeOutcome
from nexagauge.graph.runtime import Runtime
from nexagauge.judge.llm.pricing import PriceTable
from nexagauge.nodes.eval import EvalSummary
from nexagauge.online.stage import EvaluatorStage
from nexagauge.schema.results import CostEstimate, RelevanceMetrics
from nexagauge.settings import EmitSettings, Settings

pytestmark = pytest.mark.integration

MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def judge() -> Iterator[Any]:
    from support.openai_server import OpenAIServer

    with OpenAIServer(model=MODEL) as srv:
        yield srv


class RecordingEmitter(Emitter):
    """The real emitter, keeping each case result it emitted (the budget's input)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results: list[CaseResult] = []

    async def emit(self, target: Any, case_result: CaseResult, **kw: Any) -> None:
        self.results.append(case_result)
        await super().emit(target, case_result, **kw)


def series_sum(m: EvaluatorMetrics, name: str, **match: str) -> tuple[float, set[str]]:
    """Sum of ``name`` over every label set matching ``match``, and the nodes it names."""
    total, nodes = 0.0, set()
    for fam in m.registry.collect():
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in match.items()):
                total += s.value
                if s.value:
                    nodes.add(s.labels["node"])
    return total, nodes


async def evaluate_turns(
    judge: Any, n: int, *, cache: bool = False, same_content: bool = False
) -> tuple[EvaluatorStage, RecordingEmitter]:
    """Evaluate ``n`` SDK turns (each its own trace) through the stage; ``same_content``: all
    with the same question, answer and documents; ``cache``: serve's in-memory caches."""
    s = Settings(
        online={"trace_grace_s": 0.0},  # target eval: every metric branch, eval + report nodes
        sampling={"default_rate": 1.0, "budget_usd_per_hour": 100.0},
        judge={"base_url": judge.base_url, "api_key": "sk-loopback", "mode": "llm", "model": MODEL},
        cache={"enabled": cache},
    )
    metrics = EvaluatorMetrics()
    emitter = RecordingEmitter(
        metrics, EvaluationSpanWriter.in_memory(), EmitSettings(dedupe_journal=False)
    )
    runtime = Runtime.create(s, service=True)
    runtime.judge.observer = metrics.judge_call  # as the service wires it
    clock = Clock()
    stage = EvaluatorStage(s, runtime, emitter, metrics=metrics, clock=clock)
    for i in range(n):
        k = 0 if same_content else i
        q, a = f"Where is tower {k}?", f"Tower {k} is in Paris. It is tall. It is made of iron."
        trace = traces_request(sdk_turn(rand_tid(), q, a, docs=[f"Tower {k} stands in Paris."]))
        await stage.handle(TP, [record(i, trace)])
        clock.t += 1.0
        await stage.tick()
        for _ in range(1000):
            if stage.in_flight == 0:
                break
            await asyncio.sleep(0.01)
    return stage, emitter


async def test_cost_counted_once_everywhere(judge: Any) -> None:
    judge.reset()
    stage, emitter = await evaluate_turns(judge, 2)
    try:
        assert len(emitter.results) == 2
        tokens_in, tokens_out = judge.stats.prompt_tokens, judge.stats.completion_tokens
        assert tokens_in > 0 and tokens_out > 0 and judge.stats.chat_requests >= 6
        usd = PriceTable.load(None).cost(MODEL, tokens_in, tokens_out)
        assert usd > 0

        # the case results (the budget's and the offline summary's input)
        total = CostEstimate.total([r.cost for r in emitter.results])
        assert (total.input_tokens, total.output_tokens) == (tokens_in, tokens_out)
        assert total.cost == pytest.approx(usd, rel=1e-9)

        # evaluation spans
        spans = emitter.spans.memory.get_finished_spans()
        assert len(spans) == 2
        span_usd = sum(float((s.attributes or {})["nexagauge.evaluation.cost_usd"]) for s in spans)
        assert span_usd == pytest.approx(usd, rel=1e-9)
        span_in = sum(int((s.attributes or {})["nexagauge.evaluation.input_tokens"]) for s in spans)
        span_out = sum(
            int((s.attributes or {})["nexagauge.evaluation.output_tokens"]) for s in spans
        )
        assert (span_in, span_out) == (tokens_in, tokens_out)

        # Prometheus: one series per node that called the judge, no aggregate copies
        m = emitter.metrics
        p_in, nodes = series_sum(m, "nexagauge_judge_tokens_total", direction="input")
        p_out, _ = series_sum(m, "nexagauge_judge_tokens_total", direction="output")
        p_usd, cost_nodes = series_sum(m, "nexagauge_judge_cost_usd_total")
        assert (p_in, p_out) == (tokens_in, tokens_out)
        assert p_usd == pytest.approx(usd, rel=1e-9)
        assert not ({"eval", "report"} & (nodes | cost_nodes))
        assert {"claims", "relevance", "grounding"} <= nodes
        calls, _ = series_sum(m, "nexagauge_judge_calls_total", outcome="ok")
        assert calls == judge.stats.chat_requests

        # the USD budget
        await stage.tick()  # publishes the budget gauges
        assert stage.limiter.spent("hour") == pytest.approx(usd, rel=1e-9)
        assert m.registry.get_sample_value(
            "nexagauge_budget_remaining_usd", {"window": "hour"}
        ) == pytest.approx(100.0 - usd, rel=1e-9)
    finally:
        await stage.runtime.aclose()
        await emitter.aclose()


async def test_offline_summary_counts_cost_once(judge: Any) -> None:
    """The offline CLI's run summary adds ``CaseResult.cost``: the same judge calls, once."""
    judge.reset()
    stage, emitter = await evaluate_turns(judge, 1)
    try:
        b = SummaryBuilder("eval", stage._executor(None)[0].plan.metric_nodes)
        for r in emitter.results:
            b.add(r)
        assert (b.cost.input_tokens, b.cost.output_tokens) == (
            judge.stats.prompt_tokens,
            judge.stats.completion_tokens,
        )
    finally:
        await stage.runtime.aclose()
        await emitter.aclose()


async def test_cached_judge_answers_are_counted_as_cached(judge: Any) -> None:
    """Identical content in another trace is judged 0 times: every answer it needed is counted as
    ``judge_calls_total{outcome="cached"}``, and it costs nothing anywhere."""
    judge.reset()
    stage, emitter = await evaluate_turns(judge, 2, cache=True, same_content=True)
    try:
        first_calls = judge.stats.chat_requests
        assert first_calls >= 3 and len(emitter.results) == 2
        m = emitter.metrics
        ok, ok_nodes = series_sum(m, "nexagauge_judge_calls_total", outcome="ok")
        cached, cached_nodes = series_sum(m, "nexagauge_judge_calls_total", outcome="cached")
        assert ok == first_calls  # the second trace sent nothing
        assert cached == first_calls and cached_nodes == ok_nodes
        lat, _ = series_sum(m, "nexagauge_judge_latency_seconds_count")
        assert lat == first_calls  # cached answers made no request: no latency observed
        spans = emitter.spans.memory.get_finished_spans()
        costs = sorted(float((s.attributes or {})["nexagauge.evaluation.cost_usd"]) for s in spans)
        assert costs[0] == 0.0 < costs[1]
        assert emitter.results[1].cost == CostEstimate()
        p_usd, _ = series_sum(m, "nexagauge_judge_cost_usd_total")
        assert p_usd == pytest.approx(costs[1], rel=1e-9)
    finally:
        await stage.runtime.aclose()
        await emitter.aclose()


def test_aggregate_nodes_restate_cost_and_are_not_summed() -> None:
    """``eval`` and ``report`` hold the case total: the case cost is the metric node's alone."""
    c = CostEstimate(cost=0.5, input_tokens=100.0, output_tokens=10.0)
    res = CaseResult(index=0, case_id="c")
    res.outcomes["relevance"] = NodeOutcome("relevance", "ok", output=RelevanceMetrics(cost=c))
    res.outcomes["eval"] = NodeOutcome("eval", "ok", output=EvalSummary(cost=c))
    assert res.outcomes["eval"].kind == "aggregate"
    assert res.outcomes["eval"].spend == CostEstimate()
    assert res.cost == c
