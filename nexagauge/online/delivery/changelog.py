"""A changelog-backed key/value store per partition (the Kafka Streams state-store pattern).

The conversation stage keeps each conversation's state in memory and, after every processed
turn, writes the new state to a **compacted** changelog topic, keyed by the state key and sent to
the **same partition number** as the input partition the state belongs to (co-partitioned). When
a member is assigned an input partition it first reads that changelog partition from the start to
its end (:meth:`Changelog.restore`), so the state continues where the previous owner left it —
after a restart, a crash or a rebalance. Compaction keeps only the newest value per key; a
``None`` value (tombstone) deletes a key.

Ordering that makes it exact (see docs/online.md, "Conversation state"): a turn's score is
emitted first, then its state is written here, then its input offset is released for commit. A
crash before the changelog write re-delivers the turn to a state that has not seen it (judged
again, re-emitted under the same deterministic span id); a crash after it re-delivers the turn to
a state that has (skipped as ``duplicate_turn``).

Example (not run: needs a broker)::

    log = Changelog(kafka_settings, producer, "nexagauge_turns_changelog")
    await log.ensure(partitions=12)
    states = await log.restore([0, 3])        # {partition: {key: value}}
    await log.write(3, "conv-1|fp", {"n_turns": 4, ...})
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from nexagauge.settings import KafkaSettings

log = logging.getLogger(__name__)

#: reserved key of the restore barrier records (tombstones: compaction removes them)
BARRIER_KEY = "\x00restore-barrier"


class Changelog:
    """Writes and restores JSON values of one changelog topic (see module docstring)."""

    def __init__(self, kafka: KafkaSettings, producer: Any, topic: str) -> None:
        self.kafka = kafka
        self.producer = producer
        self.topic = topic
        self.writes = 0
        self.restored = 0
        self.bad = 0

    async def ensure(self, partitions: int, configs: dict[str, str] | None = None) -> None:
        """Create the topic (compacted, ``partitions`` partitions) when missing; ``configs``
        adds or overrides topic configs (e.g. ``compact,delete`` with a retention)."""
        from nexagauge.online.delivery.broker import TopicSpec, create_topics

        spec_configs = {"cleanup.policy": "compact", **(configs or {})}
        await create_topics(self.kafka, [TopicSpec(self.topic, partitions, spec_configs)])

    async def write(self, partition: int, key: str, value: Any) -> None:
        """Durably write (``acks=all`` producer) the newest ``value`` of ``key``; ``None`` deletes."""
        data = None if value is None else json.dumps(value, separators=(",", ":")).encode()
        await self.producer.send_and_wait(
            self.topic, data, key=key.encode("utf-8"), partition=partition
        )
        self.writes += 1

    async def _barriers(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Where "the end" of each partition is: one past a barrier record written now.

        A broker's end offset can be stale (Tansu reports fewer than it holds after
        multi-record batches), so the restore writes a tombstone of a reserved key to each
        partition (``acks=all``) and reads until past it, the read-your-own-write barrier of
        Confluent's schema registry: everything written before is then read for certain.
        """
        ends: dict[TopicPartition, int] = {}
        for tp in tps:
            md = await self.producer.send_and_wait(
                self.topic, None, key=BARRIER_KEY.encode(), partition=tp.partition
            )
            ends[tp] = md.offset + 1
        return ends

    async def restore(
        self, partitions: Sequence[int], timeout_s: float = 60.0
    ) -> dict[int, dict[str, Any]]:
        """Read each changelog partition from its start to its current end; newest value per key.

        A value that is not valid JSON is skipped and counted in :attr:`bad` (logged with its
        partition and offset), never fatal: one corrupt record costs only its own key. Past
        ``timeout_s`` (an unreachable broker) the restore stops with what it read and logs an
        error naming the partitions left unread.
        """
        import time

        from nexagauge.online.delivery.consumer import client_kwargs

        out: dict[int, dict[str, Any]] = {p: {} for p in partitions}
        if not partitions:
            return out
        tps = [TopicPartition(self.topic, p) for p in partitions]
        c = AIOKafkaConsumer(
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self.kafka.fetch_max_wait_ms,
            max_partition_fetch_bytes=max(self.kafka.max_message_bytes, 1024 * 1024),
            **client_kwargs(self.kafka),
        )
        await c.start()
        try:
            # the consumer's metadata; Tansu's all-topics answer can miss a topic for a moment,
            # and trusting one such answer made a restore return nothing at all: ask again
            known: set[int] = set()
            for _ in range(50):
                await c.topics()
                known = c.partitions_for_topic(self.topic) or set()
                if known >= set(partitions):
                    break
                await asyncio.sleep(0.1)
            tps = [tp for tp in tps if tp.partition in known]
            if not tps:
                return out
            c.assign(tps)
            ends = await self._barriers(tps)
            # an explicit seek to the first offset: seek_to_beginning() is a lazy reset that the
            # default "latest" reset of the fresh assignment could overtake (the restore then
            # started at the end and returned nothing - seen 2 in 30 restores on Tansu)
            for tp, first in (await c.beginning_offsets(tps)).items():
                c.seek(tp, first)
            todo = set(tps)
            deadline = time.monotonic() + timeout_s
            while todo:
                if time.monotonic() > deadline:
                    log.error(
                        "changelog %s: restore of %s incomplete after %.0f s",
                        self.topic,
                        sorted(tp.partition for tp in todo),
                        timeout_s,
                    )
                    break
                batches = await c.getmany(*todo, timeout_ms=200)
                for tp, records in batches.items():
                    self._apply(out[tp.partition], tp.partition, records)
                for tp in list(todo):
                    if await c.position(tp) >= ends[tp]:
                        todo.discard(tp)
        finally:
            await c.stop()
        self.restored += sum(len(v) for v in out.values())
        return out

    def _apply(self, state: dict[str, Any], partition: int, records: Sequence[Any]) -> None:
        """Newest value per key wins; a tombstone deletes; a corrupt value costs only itself."""
        for r in records:
            key = r.key.decode("utf-8", "replace") if r.key else ""
            if key == BARRIER_KEY:
                continue
            if r.value is None:
                state.pop(key, None)
                continue
            try:
                state[key] = json.loads(r.value)
            except (ValueError, RecursionError):
                self.bad += 1
                log.warning(
                    "changelog %s/%d@%d: not JSON, skipped", self.topic, partition, r.offset
                )
