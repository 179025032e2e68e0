"""An idle consumer loop goes round less often (issue 33): ``getmany`` waits up to 0.5 s while
the handler has no timers running (records end the wait at once), 100 ms otherwise; ten rounds a
second of every idle loop were most of an idle serve's CPU. The evaluator stage's timer is the
next buffered trace's completion, not a 100 ms poll while anything is buffered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import TopicPartition

from nexagauge.online.delivery.consumer import ConsumerLoop
from nexagauge.online.rekey import RekeyStage
from nexagauge.settings import KafkaSettings

from .otlp import rand_tid, sdk_turn, traces_request
from .test_stage import TP, Clock, Emitter, make_stage, record, settle


class _Handler:
    def __init__(self, wake: float | None) -> None:
        self.wake = wake

    def __getattr__(self, name: str) -> Any:
        if name == "wakeup_s" and self.wake is not None:
            return lambda: self.wake
        raise AttributeError(name)


def _loop(handler: Any, commit_interval_s: float = 1.0) -> ConsumerLoop:
    return ConsumerLoop(KafkaSettings(), ["t"], "g", handler, commit_interval_s=commit_interval_s)


def test_round_length_follows_the_handler_and_backpressure() -> None:
    assert _loop(_Handler(None))._wait_ms() == 100  # a handler that says nothing: as before
    assert _loop(_Handler(0.1))._wait_ms() == 100
    assert _loop(_Handler(5.0))._wait_ms() == 500  # idle: at most 0.5 s
    assert _loop(_Handler(5.0), commit_interval_s=0.2)._wait_ms() == 200  # commits still on time
    paused = _loop(_Handler(5.0))
    paused._paused.add(TopicPartition("t", 0))
    assert paused._wait_ms() == 100  # a slot may free up any moment: resume quickly


async def test_the_stage_sleeps_until_its_next_buffered_trace_completes() -> None:
    clock, em = Clock(), Emitter()
    stage = make_stage(em, clock)  # trace grace 1 s
    assert stage.wakeup_s() == 1.0  # nothing buffered: idle
    await stage.handle(TP, [record(0, traces_request(sdk_turn(rand_tid(), "Q?", "A.")))])
    assert stage.wakeup_s() == pytest.approx(1.0)  # its grace ends in 1 s: no round before
    clock.t += 0.7
    assert stage.wakeup_s() == pytest.approx(0.3)
    clock.t += 0.4
    assert stage.wakeup_s() == 0.0  # due: the loop goes round now (its 100 ms floor)
    await settle(stage, clock, advance=0.0)
    for _ in range(100):
        if em.cases:
            break
        await asyncio.sleep(0.01)
    assert em.cases and stage.wakeup_s() == 1.0


def test_the_rekey_stage_has_no_timers() -> None:
    assert RekeyStage.wakeup_s(object.__new__(RekeyStage)) == 1.0


class _Consumer:
    """The part of AIOKafkaConsumer lag reports use; counts OffsetFetch requests."""

    def __init__(self) -> None:
        self.asked = 0

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition("t", 0)}

    def highwater(self, tp: TopicPartition) -> int:
        return 7

    async def committed(self, tp: TopicPartition) -> int | None:
        self.asked += 1
        return None


async def test_lag_of_a_partition_never_committed_asks_the_broker_once_per_ttl() -> None:
    from nexagauge.online.delivery.offsets import OffsetTracker

    lags: list[int] = []

    class H:
        tracker = OffsetTracker()

        def report_lag(self, tp: TopicPartition, lag: int) -> None:
            lags.append(lag)

    loop = _loop(H())
    c = _Consumer()
    loop.consumer = c
    for _ in range(5):  # five reports (one a second in the loop)
        await loop._report_lag()
    assert c.asked == 1 and lags == [7] * 5


async def test_the_fetcher_task_wakes_once_a_second_when_nothing_happens(monkeypatch: Any) -> None:
    """aiokafka's fetcher task re-checks its partitions every ``consumer_timeout_ms`` (200 ms by
    default) even when nothing changed; the loop asks for 1 s (fetches, seeks, resumes and
    rebalances wake it at once)."""
    import nexagauge.online.delivery.consumer as mod

    made: list[dict[str, Any]] = []

    class _Consumer:
        def __init__(self, **kw: Any) -> None:
            made.append(kw)

        def subscribe(self, topics: list[str], listener: Any) -> None:
            pass

        async def start(self) -> None:
            pass

    monkeypatch.setattr(mod, "AIOKafkaConsumer", _Consumer)
    await _loop(_Handler(None)).start()
    assert made and made[0]["consumer_timeout_ms"] == mod.FETCHER_WAKE_MS == 1000


@pytest.mark.integration
async def test_the_stages_fetches_wait_for_fetch_min_bytes(broker: Any) -> None:
    """``kafka.fetch_min_bytes`` reaches the consumer's fetch requests (at a trickle one round then
    brings several traces: 8.4 -> 6.7-7.0 ms of serve CPU per evaluation at 8 traces/s, measured by
    bench/online_latency.py, where the rounds are counted in CPU, not here)."""
    from .kafka_helpers import topics

    names = topics("minbytes")
    await broker.create_topics({names["traces_topic"]: 1})
    assert KafkaSettings().fetch_min_bytes == 64 * 1024
    kafka = KafkaSettings(bootstrap_servers=broker.bootstrap, fetch_min_bytes=4096)
    loop = ConsumerLoop(kafka, [names["traces_topic"]], names["group_id"], _Handler(None))
    await loop.start()
    try:
        assert loop.consumer is not None
        assert loop.consumer._fetcher._fetch_min_bytes == 4096
    finally:
        assert loop.consumer is not None
        await loop.consumer.stop()


@pytest.mark.integration
async def test_the_service_producer_sends_a_batch_without_a_linger_timer(broker: Any) -> None:
    """The service's producer (re-keyed traces, emitted-key markers, dead letters) sends a batch
    from the event-loop round that filled it: no linger timer, one loop wakeup fewer per batch
    (a 5 ms linger was ~3 extra wakeups a second at a steady 8 traces/s). Records written in one
    round still leave together, in order, and are on the broker."""
    from aiokafka import AIOKafkaConsumer

    from nexagauge.online.service import PRODUCER_LINGER_MS, service_producer

    from .kafka_helpers import topics

    assert PRODUCER_LINGER_MS == 0
    names = topics("linger")
    topic = names["rekeyed_topic"]
    await broker.create_topics({topic: 1})
    producer = service_producer(KafkaSettings(bootstrap_servers=broker.bootstrap))
    await producer.start()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest"
    )
    try:
        acc = producer._message_accumulator
        sent = [await producer.send(topic, b"r%d" % i, partition=0) for i in range(5)]
        for _ in range(3):  # the sender task takes the batch in the next rounds
            await asyncio.sleep(0)
        assert acc._wakeup_handle is None  # nothing waits on a timer to leave
        offsets = [m.offset for m in await asyncio.gather(*sent)]
        assert offsets == list(range(offsets[0], offsets[0] + 5))
        await consumer.start()
        got: list[bytes] = []
        for _ in range(50):
            for recs in (await consumer.getmany(timeout_ms=200)).values():
                got += [r.value for r in recs if r.value is not None]
            if len(got) >= 5:
                break
        assert got == [b"r%d" % i for i in range(5)]
    finally:
        await consumer.stop()
        await producer.stop()
