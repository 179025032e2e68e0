"""Chaos on the judge, on real parts: Tansu, the service's consumer groups, the real ``openai``
client over loopback HTTP to a judge that fails 30% of requests with HTTP 500 and 10% with 429,
then stops answering entirely, then recovers.

Asserted per trace id: every trace is evaluated exactly once, nothing is dead-lettered for a
transient error, the breaker opened during the outage (gauge, readiness detail, paused
partitions) and probed the judge, and everything committed to the end afterwards.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import pytest

from nexagauge.online.service import OnlineService
from nexagauge.settings import Settings

from .kafka_helpers import build_traces, committed, end_offsets, produce, settings_dict, topics

pytestmark = pytest.mark.integration


class Recorder:
    """The real emitter (Prometheus + in-memory evaluation spans), recording case ids."""

    def __init__(self, emitter: Any) -> None:
        self.emitter = emitter
        self.cases: list[str] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        await self.emitter.emit(target, case_result, started_ns=started_ns)
        self.cases.append(target.case_id)

    async def aclose(self) -> None:
        await self.emitter.aclose()


async def wait_for(pred: Any, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())


def judge_settings(base_url: str) -> dict[str, Any]:
    # few, fast retries: without the breaker these faults dead-letter evaluations (issue 14)
    return {
        "mode": "llm",
        "base_url": base_url,
        "api_key": "k",
        "max_retries": 2,
        "backoff_base_s": 0.05,
        "backoff_max_s": 0.2,
        "timeout_s": 5.0,
    }


async def test_flaky_judge_then_outage_then_recovery_loses_and_dead_letters_nothing(
    broker: Any,
) -> None:
    from support.openai_server import OpenAIServer, Reply

    from nexagauge.emit.emitter import Emitter
    from nexagauge.emit.prometheus import EvaluatorMetrics

    names = topics("outage")
    await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
    rnd = random.Random(7)
    phase = {"name": "flaky"}
    counts: Counter[str] = Counter()

    def chaos(req: Any) -> Reply | None:
        counts[phase["name"]] += 1
        if phase["name"] == "outage":
            return Reply(status=503, error_message="judge down")
        if phase["name"] == "flaky":
            x = rnd.random()
            if x < 0.3:
                return Reply(status=500, error_message="internal error")
            if x < 0.4:
                return Reply(status=429, error_message="slow down")
        return None  # a schema-valid answer

    with OpenAIServer(handler=chaos) as judge:
        d = settings_dict(broker.bootstrap, names, judge_breaker_cooldown_s=0.2)
        d["judge"] = judge_settings(judge.base_url)
        d["emit"] = {"span_exporter": "memory", "dedupe_journal": False}
        settings = Settings(**d)
        metrics = EvaluatorMetrics()
        rec = Recorder(Emitter.from_settings(settings, metrics=metrics))
        svc = OnlineService(settings, emitter=rec, metrics=metrics, serve_http=False)
        await svc.start()
        stop = asyncio.Event()
        runner = asyncio.ensure_future(svc.run_until(stop))
        try:
            msgs1, exp1 = build_traces(30, seed=1)
            await produce(broker.bootstrap, names["traces_topic"], msgs1, 2)
            assert await wait_for(lambda: len(rec.cases) >= 10, 30), rec.cases
            phase["name"] = "outage"
            msgs2, exp2 = build_traces(30, seed=2)
            await produce(broker.bootstrap, names["traces_topic"], msgs2, 2)
            b = svc.breaker
            assert await wait_for(lambda: b is not None and b.state != "closed", 20)
            assert await wait_for(lambda: svc.loops[-1].paused > 0, 5)  # consumption paused
            ready, why = svc.readiness()
            assert ready and "judge circuit" in why
            assert metrics.registry.get_sample_value("nexagauge_judge_breaker_state") in (1, 2)
            await asyncio.sleep(2.0)  # a few probes into the outage
            assert b is not None and b.probes >= 2
            stuck = len(rec.cases)
            phase["name"] = "recovered"
            expected = set(exp1) | set(exp2)
            assert await wait_for(lambda: set(rec.cases) >= expected, 40), (
                f"evaluated {len(set(rec.cases))}/{len(expected)} (at outage end: {stuck})"
            )
            assert b.state == "closed"
            assert metrics.registry.get_sample_value("nexagauge_judge_breaker_state") == 0
            assert metrics.registry.get_sample_value("nexagauge_judge_breaker_openings_total") >= 1
            dupes = {c: n for c, n in Counter(rec.cases).items() if n > 1}
            assert not dupes and len(rec.cases) == len(expected)  # exactly once each
            assert svc.stage is not None and svc.stage.stats.failed == 0
            # counted once each in Prometheus too, all ok
            reg = metrics.registry
            counted: Counter[str] = Counter()
            for m in reg.collect():
                for smp in m.samples:
                    if smp.name == "nexagauge_evaluations_total":
                        counted[smp.labels["status"]] += int(smp.value)
            assert counted["ok"] == len(expected) and counted["failed"] == 0, counted
            assert not reg.get_sample_value("nexagauge_duplicate_evaluations_total")
            dlq = metrics.registry.get_sample_value(
                "nexagauge_dlq_messages_total", {"reason": "evaluation_failed"}
            )
            assert not dlq  # nothing dead-lettered for transient errors
            assert counts["flaky"] > 0 and counts["outage"] > 0

            assert svc.stage.in_flight == 0

            async def all_committed() -> bool:  # the source topic, by the re-key group
                topic = names["traces_topic"]
                ends = await end_offsets(broker.bootstrap, topic, 2)
                return (
                    await committed(broker.bootstrap, names["group_id"] + "-rekey", topic, 2)
                    == ends
                )

            deadline = time.monotonic() + 10
            while not await all_committed():
                assert time.monotonic() < deadline, "source offsets never committed to the end"
                await asyncio.sleep(0.2)
        finally:
            stop.set()
            await runner
