"""The adaptive concurrency limit (issue 33): AIMD between ``online.min_in_flight`` and
``online.max_in_flight`` on evaluation latency and judge throttling, in the limit itself and in
the evaluator stage (the bound it enforces, the gauge it reports)."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.online.concurrency import AdaptiveLimit

from .otlp import rand_tid, sdk_turn, traces_request
from .test_stage import TP, Clock, Emitter, make_stage, record, settle


def test_grows_from_the_floor_to_the_ceiling_while_latency_holds() -> None:
    lim = AdaptiveLimit(floor=8, ceiling=128)
    assert lim.value == 8
    for _ in range(120):  # slow start: one per completion
        lim.completed(0.65)
    assert lim.value == 128
    for _ in range(500):
        lim.completed(0.7)
    assert lim.value == 128 and lim.cuts == {"latency": 0, "throttled": 0}


def test_a_limit_that_is_not_reached_does_not_grow() -> None:
    """Below capacity (a steady rate) the limit learns nothing about the judge: it stays put."""
    lim = AdaptiveLimit(floor=8, ceiling=128)
    for _ in range(500):
        lim.completed(0.65, at_limit=False)
    assert lim.value == 8


def test_a_throttling_judge_halves_the_limit_once_per_round_never_below_the_floor() -> None:
    lim = AdaptiveLimit(floor=4, ceiling=64, initial=64)
    lim.completed(0.6, throttled=True)
    assert lim.value == 64  # decided at the end of the round (a limit's worth of completions)
    for _ in range(63):
        lim.completed(0.6)
    assert lim.value == 32 and lim.cuts["throttled"] == 1
    for _ in range(32):  # a good round, the limit used up: +1
        lim.completed(0.6)
    assert lim.value == 33 and lim.cuts["throttled"] == 1
    for _ in range(10):
        for _ in range(lim.value - 1):
            lim.completed(0.6, at_limit=False)
        lim.completed(0.6, throttled=True)
    assert lim.value == 4  # the floor


def test_a_round_of_inflated_latency_cuts_one_slow_evaluation_does_not() -> None:
    lim = AdaptiveLimit(floor=2, ceiling=100, initial=50)
    for _ in range(100):  # slow start: +1 per good completion
        lim.completed(0.5)
    assert lim.value == 100
    for _ in range(99):
        lim.completed(0.5)
    lim.completed(5.0)  # one slow evaluation on a busy machine: the round's mean is fine
    assert lim.value == 100 and lim.cuts["latency"] == 0
    for _ in range(100):  # a round at 4x the baseline: the judge's queue is the bottleneck
        lim.completed(2.0)
    assert lim.value == 80 and lim.cuts["latency"] == 1
    for _ in range(80):  # after a cut: +1 per good round
        lim.completed(0.5)
    assert lim.value == 81


def test_the_baseline_follows_a_judge_that_became_slower_for_good() -> None:
    lim = AdaptiveLimit(floor=2, ceiling=50, initial=50, window=100)
    for _ in range(20):
        lim.completed(0.3)
    for _ in range(200):  # 0.9 s from now on: cut, then the old minimum ages out
        lim.completed(0.9)
    cuts = lim.cuts["latency"]
    assert cuts >= 1 and lim.baseline_s == 0.9
    low = lim.value
    for _ in range(400):
        lim.completed(0.9)
    assert lim.cuts["latency"] == cuts and lim.value > low  # no more cuts: it grows again


def test_fixed_when_floor_and_ceiling_agree() -> None:
    lim = AdaptiveLimit(floor=32, ceiling=32)
    for _ in range(100):
        lim.completed(5.0, throttled=True)
    assert lim.value == 32


class _Judge:
    """Stands in for the LLM judge's counters (``stats.retries``)."""

    def __init__(self) -> None:
        self.stats = type("S", (), {"retries": 0})()


async def test_the_stage_runs_at_most_the_limit_and_reports_it() -> None:
    clock, em = Clock(), Emitter()
    em.gate = asyncio.Event()
    stage = make_stage(em, clock, max_in_flight=64, min_in_flight=3)
    reg = CollectorRegistry()
    stage.metrics = EvaluatorMetrics(registry=reg)
    text = generate_latest(reg).decode()
    assert "nexagauge_concurrency_limit 0.0" in text  # zero-initialised like the other series
    msgs = [record(i, traces_request(sdk_turn(rand_tid(), f"q{i}", f"a{i}"))) for i in range(10)]
    await stage.handle(TP, msgs)
    clock.t += 2
    await stage.tick()
    await asyncio.sleep(0.05)
    assert stage.limit.value == 3 and stage.in_flight == 3 and stage.saturated()
    assert "nexagauge_concurrency_limit 3.0" in generate_latest(reg).decode()
    em.gate.set()
    await settle(stage, clock, 0)
    for _ in range(100):
        if len(em.cases) == 10:
            break
        await asyncio.sleep(0.01)
    # every completion found the limit used up with the same latency: it grew (slow start)
    assert len(em.cases) == 10 and stage.limit.value > 3
    await stage.tick()
    assert f"nexagauge_concurrency_limit {stage.limit.value:.1f}" in generate_latest(reg).decode()


async def test_judge_retries_count_as_throttling() -> None:
    clock, em = Clock(), Emitter()
    stage = make_stage(em, clock, max_in_flight=16, min_in_flight=2)
    judge: Any = _Judge()
    stage.runtime.judge = judge
    assert not stage._judge_throttled()
    judge.stats.retries = 3  # the judge client retried (429 / 5xx / timeout) meanwhile
    assert stage._judge_throttled()
    assert not stage._judge_throttled()  # counted once


def test_adaptive_concurrency_off_is_the_fixed_max_in_flight() -> None:
    stage = make_stage(Emitter(), Clock(), max_in_flight=12, adaptive_concurrency=False)
    assert stage.limit.value == 12 and stage.limit.floor == 12


async def test_the_limit_follows_the_evaluation_not_the_wait_for_its_export() -> None:
    """The emit waits for its batched export (up to ``emit.confirm.EXPORT_INTERVAL_S``): a wait
    of our own choosing, not a slower judge; counted in, it cut the limit at saturation."""
    clock, em = Clock(), Emitter()
    em.gate = asyncio.Event()
    stage = make_stage(em, clock, max_in_flight=8, min_in_flight=2)
    seen: list[float] = []
    stage.limit.completed = lambda latency, **_: seen.append(latency)  # type: ignore[method-assign]
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "q", "a")))])
    clock.t += 2
    await stage.tick()
    await asyncio.sleep(0.4)  # the export has not been confirmed yet
    em.gate.set()
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert len(em.cases) == 1 and len(seen) == 1 and seen[0] < 0.3
