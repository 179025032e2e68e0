"""Members of one consumer group own the same partition numbers of every topic they read (range
assignment first): a trace's spans and its GenAI log records, keyed alike by a collector that
partitions by trace id, meet in one member even without the re-key stage. On the real broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka import ConsumerRecord, TopicPartition

from nexagauge.online.delivery.consumer import ASSIGNORS, ConsumerLoop
from nexagauge.online.delivery.offsets import OffsetTracker
from nexagauge.settings import KafkaSettings

from .kafka_helpers import topics


class _Idle:
    """A stage that takes nothing: the test looks only at who owns what."""

    def __init__(self) -> None:
        self.tracker = OffsetTracker()

    async def handle(self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        return None

    async def tick(self) -> None:
        return None

    def saturated(self) -> bool:
        return False

    def revoked(self, tps: Sequence[TopicPartition]) -> None:
        return None

    async def drain(self, timeout_s: float) -> None:
        return None

    def report_lag(self, tp: TopicPartition, lag: int) -> None:
        return None

    def forget_lag(self, tp: TopicPartition) -> None:
        return None


def test_range_by_default_and_round_robin_on_request_for_rolling_upgrades() -> None:
    assert KafkaSettings().assignors == ["range"]
    assert [ASSIGNORS[a].name for a in ["range", "roundrobin"]] == ["range", "roundrobin"]
    with pytest.raises(ValueError):
        KafkaSettings(assignors=[])
    with pytest.raises(ValueError):
        KafkaSettings(assignors=["sticky"])  # type: ignore[list-item]


@pytest.mark.integration
async def test_every_member_owns_partition_p_of_both_topics_or_neither(broker: Any) -> None:
    members = 3  # round-robin: 3 members x 4 partitions share none
    names = topics("copart")
    spans, logs = names["traces_topic"], names["traces_topic"] + "-logs"
    await broker.create_topics({spans: 4, logs: 4})
    kafka = KafkaSettings(
        bootstrap_servers=broker.bootstrap,
        fetch_max_wait_ms=20,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    loops = [ConsumerLoop(kafka, [spans, logs], names["group_id"], _Idle()) for _ in range(members)]
    runners: list[asyncio.Future[None]] = []
    try:
        await asyncio.gather(*(loop.start() for loop in loops))  # one rebalance, not three
        runners = [asyncio.ensure_future(loop.run()) for loop in loops]
        deadline = time.monotonic() + 30
        owned: list[set[tuple[str, int]]] = []
        while time.monotonic() < deadline:
            owned = [{(tp.topic, tp.partition) for tp in loop.assignment} for loop in loops]
            if sum(map(len, owned)) == 8 and all(owned):
                break
            await asyncio.sleep(0.1)
        assert sum(map(len, owned)) == 8 and all(owned), owned
        for mine in owned:
            assert {p for t, p in mine if t == spans} == {p for t, p in mine if t == logs}, owned
    finally:
        for loop in loops:
            await loop.stop(2.0)
        await asyncio.gather(*runners, return_exceptions=True)
