"""The group-wide emitted-key store (nexagauge.online.delivery.markers) on a real broker (Tansu)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from nexagauge.emit.dedupe import key_hash
from nexagauge.online.delivery.markers import EmittedKeys, Origin, primary_source
from nexagauge.settings import KafkaSettings

pytestmark = pytest.mark.integration


async def _store(
    broker: Any, topic: str, capacity: int = 10_000
) -> tuple[EmittedKeys, AIOKafkaProducer]:
    k = KafkaSettings(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=20)
    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    await p.start()
    keys = EmittedKeys(k, p, topic, capacity=capacity)
    await keys.ensure(4)
    return keys, p


def test_another_member_restores_every_marker_and_fencing_records_nothing(broker: Any) -> None:
    topic = f"emitted-{uuid.uuid4().hex[:8]}"
    inp = f"in-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        a, pa = await _store(broker, topic)
        b, pb = await _store(broker, topic)
        try:
            await a.assigned([(inp, p) for p in range(4)])
            hashes = [key_hash(str(i)) for i in range(120)]
            # concurrent marks: the producer packs them into multi-record batches (after which
            # Tansu reports a stale end offset: the restore must not trust it)
            oks = await asyncio.gather(
                *[a.mark([h, key_hash(h)], a.origin((inp, i % 4, i))) for i, h in enumerate(hashes)]
            )
            assert all(oks)
            # a rebalance moves partitions 0 and 1 to b: a fences them first
            old = a.origin((inp, 0, 500))
            await a.fence([(inp, 0), (inp, 1)])
            assert old is not None and not await a.mark([key_hash("late")], old)
            assert a.fenced == 1
            await b.assigned([(inp, 0), (inp, 1)])
            for i, h in enumerate(hashes):
                assert b.contains(h) == (i % 4 in (0, 1)), i
                assert b.contains(key_hash(h)) == (i % 4 in (0, 1))
            assert not b.contains(key_hash("late"))  # the fenced mark wrote nothing
            # an origin captured before an assignment is never accepted after it
            stale = Origin(inp, 2, 1, generation=-1)
            assert not await b.mark([key_hash("x")], stale)
        finally:
            await pa.stop()
            await pb.stop()

    asyncio.run(main())


def test_restoring_one_partition_never_evicts_another_partitions_keys(broker: Any) -> None:
    """The in-memory bound holds per marker partition: restoring several partitions into one
    LRU kept only the newest keys of the partition read last."""
    topic = f"emitted-{uuid.uuid4().hex[:8]}"
    inp = f"in-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        a, pa = await _store(broker, topic)
        b, pb = await _store(broker, topic, capacity=3)
        try:
            await a.assigned([(inp, 0), (inp, 1)])
            for i in range(5):
                assert await a.mark([key_hash(f"p0-{i}")], a.origin((inp, 0, i)))
            for i in range(3):
                assert await a.mark([key_hash(f"p1-{i}")], a.origin((inp, 1, i)))
            await b.assigned([(inp, 0), (inp, 1)])
            assert [b.contains(key_hash(f"p0-{i}")) for i in range(5)] == [False, False] + [
                True
            ] * 3
            assert all(b.contains(key_hash(f"p1-{i}")) for i in range(3))
            await b.fence([(inp, 0)])  # memory only for owned partitions
            assert not b.contains(key_hash("p0-4")) and b.contains(key_hash("p1-2"))
        finally:
            await pa.stop()
            await pb.stop()

    asyncio.run(main())


def test_primary_source() -> None:
    assert primary_source(set()) is None
    assert primary_source({("t", 3, 1), ("t", 0, 2), ("t", 0, 8)}) == ("t", 0, 8)
