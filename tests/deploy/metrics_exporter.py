"""A stand-in evaluator process for the Prometheus tests: real ``EvaluatorMetrics``, live traffic.

It exposes every series of ``nexagauge.emit.metric_names`` through the evaluator's own metrics
class (``nexagauge.emit.prometheus.EvaluatorMetrics``, so names, labels and buckets are the real
ones) on ``/metrics`` and updates them ten times a second with realistic values: RAG traffic of
one service on two routes and two models, relevance around 0.8, grounding of the ``answer`` route
around 0.45 (below the alert floor), judge calls with 20 % errors, a growing consumer lag, an
exhausted hourly budget that skips traces, dead letters, evictions, broker contact, a judge
outage now and then and one re-created topic; and agent runs (``nexagauge.emit.agent_metrics``,
from the real signal function) with a failing tool, loops and an undeclared tool now and then.

It is a fixture for running every dashboard query and alert expression against a real Prometheus
until the online evaluator (``nexagauge serve``) runs in the same test; it is not used anywhere
else.

Usage: ``python tests/deploy/metrics_exporter.py [--port 0] [--seed 7]``; prints
``ready <port>`` once the endpoint serves, then runs until terminated.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time

from prometheus_client import start_http_server

from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.nodes.agent_signals import agent_signals
from nexagauge.schema.tools import AgentRun, ToolCall

SERVICE = "demo-rag"
ROUTES = {"answer": 0.6, "chat": 0.4}
MODELS = {"gpt-4o-mini": 0.7, "llama-3.1-8b": 0.3}
GROUNDING_MEAN = {"answer": 0.45, "chat": 0.85}
RELEVANCE_MEAN = {"answer": 0.8, "chat": 0.85}
JUDGE_MODEL = "gpt-4o-mini"


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _score(rng: random.Random, mean: float) -> float:
    return min(1.0, max(0.0, rng.gauss(mean, 0.12)))


def tick(m: EvaluatorMetrics, rng: random.Random, step: int) -> None:
    """One tenth of a second of evaluator activity."""
    # consuming
    for topic, spans in (("otlp_spans", rng.randint(20, 60)), ("otlp_logs", rng.randint(0, 8))):
        m.spans_consumed(topic, spans)
        m.messages_consumed(topic, max(1, spans // 10))
    for p in range(3):
        m.set_consumer_lag("otlp_spans", p, 400 + 5 * step + rng.randint(0, 3))
        m.set_consumer_lag("otlp_logs", p, rng.randint(0, 20))
    m.set_buffer(traces=rng.randint(50, 120), spans=rng.randint(500, 1500))
    m.set_in_flight(rng.randint(2, 16))
    m.set_paused_partitions(1 if step % 50 < 10 else 0)
    # assembling and sampling
    for _ in range(4):
        m.trace_assembled(rng.choice(["root_end", "root_end", "root_end", "inactivity"]))
        if rng.random() < 0.3:
            m.trace_sampled(rng.choice(["default", "errors"]))
        else:
            m.trace_not_sampled()
    if step % 7 == 0:
        m.trace_assembled("evicted")
        m.trace_evicted("max_traces")
        m.late_spans(2)
    if step % 13 == 0:
        m.dead_lettered("decode_error")
    # dependencies: the broker answers; a judge outage now and then; a topic re-created once
    m.health.broker_contact(True)
    m.health.breaker_changed("open" if step % 600 >= 590 else "closed")
    if step % 997 == 0:
        m.health.topic_recreated("nexagauge_dlq")
    m.skip("budget_hour")
    m.skip(rng.choice(["rate_limit", "no_case"]))
    m.set_budget("hour", 0.0, True)
    m.set_budget("day", 12.5 - step * 0.001, False)
    # evaluating
    for _ in range(8):
        route, model = _pick(rng, ROUTES), _pick(rng, MODELS)
        labels = m.labels_for(SERVICE, route, model)
        trace_id = f"{rng.getrandbits(128):032x}"
        status = "ok" if rng.random() < 0.95 else "failed"
        if status == "ok":
            for metric, mean in (
                ("answer_relevancy", RELEVANCE_MEAN[route]),
                ("grounding", GROUNDING_MEAN[route]),
            ):
                s = _score(rng, mean)
                m.record_score(metric, labels, s, trace_id=trace_id)
                n = rng.randint(3, 6)
                rejected = sum(rng.random() > s for _ in range(n))
                m.record_claims(metric, labels, "ACCEPTED", n - rejected)
                m.record_claims(metric, labels, "REJECTED", rejected)
        m.record_evaluation(status, labels, rng.uniform(2.0, 20.0), time.time(), trace_id=trace_id)
        m.evaluation_spans_exported("exported" if rng.random() < 0.98 else "failed")
        for node in ("claims", "relevance", "grounding"):
            r = rng.random()
            outcome = "error" if r < 0.2 else ("cached" if r < 0.25 else "ok")
            m.judge_call(node, JUDGE_MODEL, outcome, rng.uniform(0.3, 3.0))
            if outcome == "ok":
                tin, tout = rng.randint(300, 1500), rng.randint(20, 200)
                m.record_judge_usage(node, JUDGE_MODEL, tin, tout, tin * 1.5e-7 + tout * 6e-7)
    agent_tick(m, rng, step)


def agent_tick(m: EvaluatorMetrics, rng: random.Random, step: int) -> None:
    """One agent run: two declared tools, a failure (10 %), a loop (5 %) or an undeclared tool
    (5 %) now and then, a run without recorded definitions (10 %)."""
    x = rng.random()
    calls = [
        ToolCall(
            name="lookup_order",
            call_id=f"c{step}a",
            arguments='{"order_id": "A-1"}',
            result=None if x < 0.1 else "{}",
            error="TimeoutError: slow" if x < 0.1 else None,
            duration_ms=rng.uniform(20, 400),
        ),
        ToolCall(name="lookup_policy", call_id=f"c{step}b", arguments="{}", result="ok"),
    ]
    if 0.1 <= x < 0.15:
        calls += [
            ToolCall(name="lookup_policy", call_id=f"c{step}{i}", arguments="{}") for i in "cd"
        ]
    if 0.15 <= x < 0.2:
        calls.append(ToolCall(name="escalate_ticket", call_id=f"c{step}e", arguments="{}"))
    declared = None if rng.random() < 0.1 else ("lookup_order", "lookup_policy")
    run = AgentRun(agent="support", tool_calls=tuple(calls), declared_tools=declared, llm_steps=2)
    m.agents.record(agent_signals(run))
    m.agents.record_grounding("support", _score(rng, 0.7))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    m = EvaluatorMetrics()
    rng = random.Random(args.seed)
    tick(m, rng, 0)  # every series exists before the first scrape
    server, _thread = start_http_server(args.port, addr="127.0.0.1", registry=m.registry)
    print(f"ready {server.server_port}", flush=True)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    step = 1
    while not stop:
        tick(m, rng, step)
        step += 1
        time.sleep(0.1)
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
