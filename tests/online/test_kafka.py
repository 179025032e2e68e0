"""The evaluator on a real Kafka-protocol broker (Tansu) with aiokafka, in process.

Each test counts by trace: every produced trace is evaluated at least once, poison goes to the
dead-letter topic byte for byte, and offsets are committed up to the end once all is done.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from nexagauge.graph.runtime import Runtime
from nexagauge.online.delivery.dlq import HEADER_REASON, HEADER_SOURCE
from nexagauge.online.service import OnlineService

from .kafka_helpers import (
    build_traces,
    committed,
    end_offsets,
    make_settings,
    produce,
    read_all,
    topics,
)

pytestmark = pytest.mark.integration


class Recorder:
    def __init__(self) -> None:
        self.cases: list[str] = []
        self.targets: list[Any] = []
        self.results: list[Any] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        self.cases.append(target.case_id)
        self.targets.append(target)
        self.results.append(case_result)


async def wait_for(pred, within_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return pred()


async def test_rekeyed_traces_evaluated_and_garbage_dead_lettered(broker: Any) -> None:
    names = topics("dlq")
    await broker.create_topics({names["traces_topic"]: 3, names["logs_topic"]: 1})
    settings = make_settings(broker.bootstrap, names)
    msgs, expected = build_traces(40)
    garbage = [b"\x00\xffnot-otlp\x13" * 3, b"{broken json", b'{"resourceSpans": 7}']
    values = msgs[:10] + garbage[:2] + msgs[10:] + garbage[2:]
    rec = Recorder()
    svc = OnlineService(
        settings, runtime=Runtime.create(settings, use_cache=False), emitter=rec, serve_http=False
    )
    await svc.start()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(svc.run_until(stop))
    try:
        # every consumer loop, the re-key stage's too, commits at online.commit_interval_s (the
        # re-key loop used its own 0.5 s while the docs named the setting)
        assert len(svc.loops) == 2
        commit_every = {loop.commit_interval_s for loop in svc.loops}
        assert commit_every == {settings.online.commit_interval_s}
        await produce(broker.bootstrap, names["traces_topic"], values, 3)
        assert await wait_for(lambda: set(rec.cases) >= set(expected), 30), (
            f"evaluated {len(set(rec.cases))}/{len(expected)}"
        )
        dlq = await read_all(broker.bootstrap, names["dlq_topic"], len(garbage))
        assert sorted(r.value for r in dlq) == sorted(garbage)  # original bytes
        reasons = Counter(dict(r.headers)[HEADER_REASON].decode() for r in dlq)
        assert sum(reasons.values()) == 3 and set(reasons) <= {"undecodable", "not_otlp"}
        assert all(
            dict(r.headers)[HEADER_SOURCE].startswith(names["traces_topic"].encode()) for r in dlq
        )
        # each case evaluated with its retrieval context, from spans that were split over partitions
        assert len(rec.cases) == len(expected)  # no duplicates without failures
        t = rec.targets[0]
        assert t.service == "shop-bot" and t.span_name == "answer" and t.config_fingerprint

        async def all_committed() -> bool:
            ends = await end_offsets(broker.bootstrap, names["traces_topic"], 3)
            done = await committed(
                broker.bootstrap, names["group_id"] + "-rekey", names["traces_topic"], 3
            )
            return done == ends

        deadline = time.monotonic() + 10
        while not await all_committed():
            assert time.monotonic() < deadline, "source offsets never fully committed"
            await asyncio.sleep(0.2)
        assert svc.stage is not None and svc.stage.stats.poison == 0  # poison stopped at re-key
        assert svc.rekey_stage.poison == 3
        # consumption is counted on the collector's topic too, and the two stages agree on spans
        m = svc.metrics.registry.get_sample_value
        src, rekeyed = names["traces_topic"], settings.kafka.rekeyed_topic
        assert m("nexagauge_messages_consumed_total", {"topic": src}) == len(values)
        n_spans = sum(
            len(ss.spans)
            for raw in msgs
            for rs in ExportTraceServiceRequest.FromString(raw).resource_spans
            for ss in rs.scope_spans
        )
        assert m("nexagauge_spans_consumed_total", {"topic": src}) == n_spans
        assert m("nexagauge_spans_consumed_total", {"topic": rekeyed}) == n_spans
        assert m("nexagauge_messages_consumed_total", {"topic": rekeyed}) >= len(expected)
    finally:
        stop.set()
        await runner


async def test_direct_consumption_without_rekey_and_poison_in_evaluator(broker: Any) -> None:
    names = topics("direct")
    await broker.create_topics({names["traces_topic"]: 1, names["logs_topic"]: 1})
    settings = make_settings(broker.bootstrap, names, rekey=False)
    msgs, expected = build_traces(15)
    garbage = [b"\x08\x96\x01garbage\xff\xff"]
    rec = Recorder()
    svc = OnlineService(
        settings, runtime=Runtime.create(settings, use_cache=False), emitter=rec, serve_http=False
    )
    await svc.start()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(svc.run_until(stop))
    try:
        await produce(broker.bootstrap, names["traces_topic"], msgs[:4] + garbage + msgs[4:], 1)
        assert await wait_for(lambda: set(rec.cases) >= set(expected), 30)
        dlq = await read_all(broker.bootstrap, names["dlq_topic"], 1)
        assert [r.value for r in dlq] == garbage
        assert svc.stage is not None and svc.stage.stats.poison == 1
        ends = await end_offsets(broker.bootstrap, names["traces_topic"], 1)
        deadline = time.monotonic() + 10
        while (
            await committed(broker.bootstrap, names["group_id"], names["traces_topic"], 1) != ends
        ):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await runner


async def test_log_records_on_the_logs_topic_are_joined_through_rekey(broker: Any) -> None:
    """Content of the official OpenAI instrumentation travels in log records on the logs topic;
    the re-key stage routes them by trace id next to their spans, and the case is built from them."""
    from nexagauge.sdk import conventions as C

    from .otlp import logs_request, rand_tid, sid, span, traces_request

    names = topics("logs")
    await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 2})
    settings = make_settings(broker.bootstrap, names)
    rec = Recorder()
    svc = OnlineService(
        settings, runtime=Runtime.create(settings, use_cache=False), emitter=rec, serve_http=False
    )
    await svc.start()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(svc.run_until(stop))
    try:
        expected, span_msgs, log_msgs = [], [], []
        for i in range(8):
            t = rand_tid()
            expected.append(f"{t.hex()}:{sid(1).hex()}")
            span_msgs.append(
                traces_request([span(t, sid(1), "chat gpt-4o", {C.GEN_AI_OPERATION_NAME: "chat"})])
            )
            log_msgs.append(
                logs_request(
                    [
                        {
                            "trace_id": t,
                            "span_id": sid(1),
                            "event": C.EVENT_GEN_AI_USER_MESSAGE,
                            "body": {"content": f"question {i}?"},
                            "time": 1,
                        },
                        {
                            "trace_id": t,
                            "span_id": sid(1),
                            "event": C.EVENT_GEN_AI_CHOICE,
                            "body": {
                                "index": 0,
                                "message": {"role": "assistant", "content": f"answer {i}."},
                            },
                            "time": 2,
                        },
                    ]
                )
            )
        await produce(broker.bootstrap, names["logs_topic"], log_msgs, 2, seed=1)
        await produce(broker.bootstrap, names["traces_topic"], span_msgs, 2, seed=2)
        assert await wait_for(lambda: set(rec.cases) >= set(expected), 30), rec.cases
        assert svc.stage is not None and svc.stage.stats.logs == 16
    finally:
        stop.set()
        await runner


async def test_backpressure_pauses_partitions_but_stays_in_the_group(broker: Any) -> None:
    """At max_in_flight every partition is paused while getmany keeps being called: with a poll
    interval far shorter than the stall, the member is never kicked out (no revocation)."""
    names = topics("bp")
    await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
    settings = make_settings(broker.bootstrap, names, rekey=False, max_in_flight=2)
    settings.kafka.max_poll_interval_ms = 1500
    gate = asyncio.Event()

    class Gated(Recorder):
        async def emit(
            self, target: Any, case_result: Any, *, started_ns: int | None = None
        ) -> None:
            await gate.wait()
            await super().emit(target, case_result)

    rec = Gated()
    svc = OnlineService(
        settings, runtime=Runtime.create(settings, use_cache=False), emitter=rec, serve_http=False
    )
    await svc.start()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(svc.run_until(stop))
    try:
        msgs, expected = build_traces(20)
        await produce(broker.bootstrap, names["traces_topic"], msgs, 2)
        loop = svc.loops[-1]
        assert await wait_for(lambda: loop.paused > 0, 20)
        assigned = set(loop.assignment)
        await asyncio.sleep(3.0)  # twice the poll interval, stalled on the emitter
        assert loop.paused == len(assigned) and set(loop.assignment) == assigned
        assert svc.stage is not None and svc.stage.in_flight >= 2
        gate.set()
        assert await wait_for(lambda: set(rec.cases) >= set(expected), 30)
        assert await wait_for(lambda: loop.paused == 0, 5)
        assert len(rec.cases) == len(expected)  # no rebalance, so no re-delivery
    finally:
        gate.set()
        stop.set()
        await runner


async def test_service_judges_identical_content_once_from_memory_not_disk(
    broker: Any, tmp_path: Any
) -> None:
    """`serve`'s default cache (cache.backend = auto): a bounded in-memory LRU. A second and a
    third trace with the same question and answer cost no judge call, and nothing is written to
    disk. Each trace is a case of its own (its case id is the span's), seen once, so its nodes
    key nothing in the node cache (``NodeCache.admits``): the judge's answers are what repeats."""
    from support.openai_server import OpenAIServer

    from nexagauge.graph.cache import MemoryStore
    from nexagauge.settings import Settings

    from .kafka_helpers import settings_dict
    from .otlp import rand_tid, sdk_turn, traces_request

    names = topics("mem")
    await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
    cache_dir = tmp_path / "cache"
    with OpenAIServer() as judge:
        d = settings_dict(broker.bootstrap, names)
        d["judge"] = {"mode": "llm", "base_url": judge.base_url, "api_key": "k"}
        d["cache"] = {"enabled": True, "dir": str(cache_dir)}
        settings = Settings(**d)
        rec = Recorder()
        svc = OnlineService(settings, emitter=rec, serve_http=False)  # it builds its runtime
        await svc.start()
        stop = asyncio.Event()
        runner = asyncio.ensure_future(svc.run_until(stop))
        try:
            assert svc.runtime is not None and svc.runtime.cache is not None
            assert isinstance(svc.runtime.cache.memory, MemoryStore)
            for n in (1, 2, 3):  # one after the other: each must find the earlier answers
                spans = sdk_turn(rand_tid(), "Where is Paris?", "Paris is in France.", docs=["x"])
                await produce(broker.bootstrap, names["traces_topic"], [traces_request(spans)], 2)
                assert await wait_for(lambda n=n: len(rec.cases) == n, 30), rec.cases
            assert judge.stats.chat_requests == 2  # claims + relevance, for the first trace only
            assert len(svc.runtime.cache.memory) > 0
            scores = [
                [(m.name, m.score) for m in r.outcomes["relevance"].output.metrics]
                for r in rec.results
            ]
            assert scores[1:] == [scores[0]] * 2  # the same, from the judge's cached answers
            assert [r.outcomes["relevance"].cost.cost for r in rec.results[1:]] == [0.0, 0.0]
            assert svc.runtime.cache.unkeyed == 3  # three cases, each seen once
            assert not cache_dir.exists() or not any(cache_dir.rglob("*")), list(
                cache_dir.rglob("*")
            )
        finally:
            stop.set()
            await runner
