"""Group-wide deduplication of emitted evaluations: a compacted topic of emitted keys.

Every member of the evaluator's consumer group shares one record of what was emitted, built the
way Kafka Streams builds a state store with a changelog (:mod:`nexagauge.online.delivery.changelog`):

* **write**: after an evaluation's span export is confirmed and before it is counted, the
  emitter calls :meth:`EmittedKeys.mark`, which writes one record (key: the evaluation's key
  hash; value: the other key hashes of that emission and the input offset) to
  ``kafka.emitted_topic`` with ``acks=all``, to the partition **co-partitioned** with the input
  partition the trace came from;
* **restore**: when a member is assigned an input partition, the consumer loop keeps it paused
  while :meth:`EmittedKeys.assigned` reads the co-partitioned marker partition from its start to
  its end, so a redelivered trace whose output is durable is suppressed by *whichever* member
  owns its partition now (and not counted again);
* **fence**: on revocation :meth:`EmittedKeys.fence` first withdraws ownership (an evaluation of
  a revoked partition that reaches :meth:`mark` later records and counts nothing: the new owner
  evaluates and counts the trace), then waits for the marker writes already under way, so every
  marker of the old owner is in the topic before the rebalance completes and the new owner
  restores.

See docs/online.md, "Delivery guarantees", for exactly what this guarantees and its limits.

Example (not run: needs a broker)::

    keys = EmittedKeys(kafka_settings, producer, "nexagauge_emitted", capacity=100_000)
    await keys.ensure(partitions=12)
    await keys.assigned([("nexagauge_spans_by_trace", 3)])
    ok = await keys.mark([h_eval, h_metric], keys.origin(("nexagauge_spans_by_trace", 3, 41)))
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from nexagauge.emit.dedupe import DedupeWindow
from nexagauge.online.delivery.changelog import Changelog
from nexagauge.settings import KafkaSettings

log = logging.getLogger(__name__)

#: an input partition: (topic, partition)
InputPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an evaluated trace came from, as the emitted-key store needs it."""

    topic: str
    partition: int
    offset: int  # highest offset of the trace in that partition
    generation: int  # ownership generation of the partition when the evaluation started


class EmittedKeys:
    """The group-wide emitted-key store (see module docstring); implements
    :class:`nexagauge.emit.dedupe.EmittedKeyStore`.

    Args:
        kafka: connection settings (the restore consumer uses them).
        producer: the service's ``acks=all`` producer.
        topic: the compacted marker topic (``kafka.emitted_topic``).
        capacity: most key hashes held in memory per owned marker partition (the newest are
            kept); size it above the keys of one partition's uncommitted backlog. Per partition,
            so restoring one partition never evicts another's keys.
    """

    def __init__(self, kafka: KafkaSettings, producer: Any, topic: str, capacity: int) -> None:
        self.log = Changelog(kafka, producer, topic)
        self.topic = topic
        self.partitions = 0
        self.capacity = capacity
        self._keys: dict[int | None, DedupeWindow] = {}  # marker partition (None: local) -> keys
        self._owned: dict[InputPartition, int] = {}
        self._generation = 0
        self._writing: dict[int, set[asyncio.Future[None]]] = {}
        self.fenced = 0  # marks refused because the partition had moved (tests, logs)

    async def ensure(
        self, partitions: int, *, create: bool = True, retention_ms: int | None = None
    ) -> None:
        """Create the marker topic with ``partitions`` partitions when missing, and learn its
        real partition count (markers go to ``input partition % count``).

        Every key is unique, so compaction alone never shrinks the topic: with ``retention_ms``
        it is ``compact,delete``, and markers older than that are deleted (a redelivery older
        than the retention is evaluated again; keep it above the longest consumer downtime)."""
        if create:
            configs = (
                {"cleanup.policy": "compact,delete", "retention.ms": str(retention_ms)}
                if retention_ms
                else None
            )
            await self.log.ensure(partitions, configs)
        real = await self.log.producer.partitions_for(self.topic)
        self.partitions = len(real or ()) or partitions
        if self.partitions != partitions:
            log.warning(
                "emitted-key topic %s has %d partitions, the input %d: markers are placed by "
                "partition modulo %d (still exact, but restores read more than needed)",
                self.topic,
                self.partitions,
                partitions,
                self.partitions,
            )

    def _part(self, partition: int) -> int:
        return partition % max(1, self.partitions)

    # -- ownership ----------------------------------------------------------------------------
    async def assigned(self, tps: Sequence[InputPartition]) -> None:
        """Restore the markers of newly assigned input partitions, then own them."""
        parts = sorted({self._part(p) for _, p in tps})
        restored = await self.log.restore(parts)
        n = 0
        for part, by_key in restored.items():
            for key, value in by_key.items():
                n += self._remember(part, key, value)
        for tp in tps:
            self._generation += 1
            self._owned[tp] = self._generation
        log.info("emitted keys: %d restored from %s partitions %s", n, self.topic, parts)

    def _window(self, part: int | None) -> DedupeWindow:
        w = self._keys.get(part)
        if w is None:
            w = self._keys[part] = DedupeWindow(self.capacity)
        return w

    def _remember(self, part: int, key: str, value: Any) -> int:
        hashes = [key, *(value.get("k", ()) if isinstance(value, dict) else ())]
        w = self._window(part)
        for h in hashes:
            if isinstance(h, str):
                w.add_hash(h)
        return len(hashes)

    async def fence(self, tps: Iterable[InputPartition]) -> None:
        """Withdraw ownership of revoked partitions, then wait for their marker writes."""
        parts: set[int] = set()
        for tp in tps:
            if self._owned.pop(tp, None) is not None:
                parts.add(self._part(tp[1]))
        pending = [f for p in parts for f in self._writing.get(p, ())]
        if pending:
            await asyncio.wait(pending)
        owned = {self._part(p) for _, p in self._owned}
        for p in parts - owned:  # memory only for owned partitions (restored on reassignment)
            self._keys.pop(p, None)

    def origin(self, source: tuple[str, int, int] | None) -> Origin | None:
        """The :class:`Origin` of a trace whose primary source message is ``source``."""
        if source is None:
            return None
        topic, partition, offset = source
        gen = self._owned.get((topic, partition))
        return Origin(topic, partition, offset, gen if gen is not None else -1)

    # -- EmittedKeyStore ------------------------------------------------------------------------
    def contains(self, key_hash: str) -> bool:
        return any(w.has_hash(key_hash) for w in self._keys.values())

    async def mark(self, key_hashes: Sequence[str], origin: Any) -> bool:
        """Durably record ``key_hashes`` (see module docstring); ``False`` when fenced."""
        if not key_hashes:
            return True
        if not isinstance(origin, Origin):
            # not from an input partition (the conversation stage has its own changelog):
            # remembered in this process only
            local = self._window(None)
            for h in key_hashes:
                local.add_hash(h)
            return True
        if self._owned.get((origin.topic, origin.partition)) != origin.generation:
            self.fenced += 1
            return False
        part = self._part(origin.partition)
        value = {"k": list(key_hashes[1:]), "o": origin.offset}
        write = asyncio.ensure_future(self.log.write(part, key_hashes[0], value))
        self._writing.setdefault(part, set()).add(write)
        try:
            await asyncio.shield(write)
        finally:
            if write.done():
                self._writing[part].discard(write)
            else:  # cancelled while the write runs: keep it visible to fence()
                write.add_done_callback(lambda f: self._writing[part].discard(f))
        w = self._window(part)
        for h in key_hashes:
            w.add_hash(h)
        return True


def primary_source(sources: Iterable[tuple[str, int, int]]) -> tuple[str, int, int] | None:
    """The source a trace's markers are placed by: its lowest (topic, partition), with the
    highest offset the trace has there. With re-keying every source of a trace is in one
    partition of the re-keyed topic.

    Example:
        >>> primary_source({("t", 2, 7), ("t", 1, 9), ("t", 1, 4)})
        ('t', 1, 9)
    """
    best: tuple[str, int, int] | None = None
    for topic, part, off in sources:
        if (
            best is None
            or (topic, part) < best[:2]
            or ((topic, part) == best[:2] and off > best[2])
        ):
            best = (topic, part, off)
    return best


async def emitted_keys(settings: Any, producer: Any) -> EmittedKeys:
    """The service's store on ``kafka.emitted_topic``, co-partitioned with the evaluator's input
    topic (the re-keyed topic, or the spans topic without re-keying)."""
    k = settings.kafka
    source = k.rekeyed_topic if settings.online.rekey else k.traces_topic
    n = len(await producer.partitions_for(source) or ()) or k.topic_partitions
    keys = EmittedKeys(k, producer, k.emitted_topic, settings.emit.dedupe_window)
    retention = int(k.emitted_retention_s * 1000) if k.emitted_retention_s else None
    await keys.ensure(n, create=k.create_topics, retention_ms=retention)
    return keys
