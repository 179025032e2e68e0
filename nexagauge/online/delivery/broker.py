"""Broker contact: a periodic health check that also re-creates the evaluator's own topics.

aiokafka's clients reconnect on their own, but they do not say when the broker is gone (a
consumer's ``getmany`` just returns nothing), and nothing re-creates a topic that vanished - a
broker restarted on empty storage, a topic deleted by mistake - so ``serve`` used to wedge: the
re-key stage produced into a topic that no longer existed. :class:`BrokerMonitor` runs one cheap
metadata request (``list_topics`` of an admin client) every ``kafka.health_check_interval_s``:

- success: the broker is up (``nexagauge_broker_up`` 1, ``nexagauge_broker_contact_age_seconds``
  back to 0); every own topic (:class:`TopicSpec`: dead letters, re-keyed spans, turns, the
  conversation changelog) missing from the answer is created again, with its partitions and
  configuration (``nexagauge_topics_recreated_total{topic}``, one WARNING each). A vanished own
  topic means the broker lost its data (a restart on empty storage): the committed offsets and
  the input topics went with it, so ``on_topics_recreated`` lets the service :func:`rewind` its
  consumers (otherwise they would wait at their old positions, beyond the end of the new logs);
- failure or no answer within the interval: ``nexagauge_broker_up`` 0; after
  ``kafka.broker_unreachable_after_s`` without contact :meth:`BrokerMonitor.readiness` is false
  (``/readyz`` 503 with the age of the last contact). One WARNING when contact is lost and one when
  it is back, not one per attempt.

Example (not run: needs a broker)::

    mon = BrokerMonitor(kafka, [TopicSpec("nexagauge_dlq", 12)], health=health_metrics)
    await mon.start(); ...; ok, why = mon.readiness(); await mon.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nexagauge.online.delivery.consumer import client_kwargs
from nexagauge.settings import KafkaSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSpec:
    """A topic the evaluator owns: created at start and re-created when it vanishes."""

    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


async def ensure_topics(admin: Any, kafka: KafkaSettings, specs: Iterable[TopicSpec]) -> list[str]:
    """Create the ``specs`` missing from the cluster; returns the names created.

    Example (not run: needs a broker)::

        created = await ensure_topics(admin, kafka, [TopicSpec("nexagauge_dlq", 12)])
    """
    from aiokafka.admin import NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    existing = set(await admin.list_topics())
    new = [
        NewTopic(
            s.name,
            num_partitions=s.partitions,
            replication_factor=kafka.replication_factor,
            topic_configs=dict(s.configs),
        )
        for s in specs
        if s.name not in existing
    ]
    if not new:
        return []
    with contextlib.suppress(TopicAlreadyExistsError):  # another member was faster
        await admin.create_topics(new)
    return [t.name for t in new]


async def create_topics(
    kafka: KafkaSettings, specs: Iterable[TopicSpec], *, wait_s: float = 0.0
) -> list[str]:
    """Create the ``specs`` missing from the cluster through an admin client of its own (opened
    and closed here; :func:`ensure_topics` does the creating); returns the names created.

    With ``wait_s``, it then waits up to that long until the cluster's metadata lists every
    partition of every spec (a client that produces at once then finds them all); after
    ``wait_s`` it returns anyway and the client's own metadata request waits instead.

    Example (not run: needs a broker)::

        await create_topics(KafkaSettings(bootstrap_servers="127.0.0.1:9092"),
                            [TopicSpec("otlp_spans", 4)], wait_s=5.0)
    """
    from aiokafka.admin import AIOKafkaAdminClient

    specs = list(specs)
    admin = AIOKafkaAdminClient(**client_kwargs(kafka))
    await admin.start()
    try:
        created = await ensure_topics(admin, kafka, specs)
        want = {s.name: s.partitions for s in specs}
        deadline = time.monotonic() + wait_s
        while want and wait_s > 0:
            md = await admin.describe_topics(list(want))
            if all(len(t.get("partitions", [])) == want[t["topic"]] for t in md):
                break
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        return created
    finally:
        await admin.close()


class BrokerMonitor:
    """Periodic broker health check and own-topic re-creation (see module docstring).

    Args:
        kafka: connection settings, ``health_check_interval_s``, ``broker_unreachable_after_s``.
        topics: the evaluator's own topics (re-created only when ``kafka.create_topics``).
        health: :class:`~nexagauge.emit.health.HealthMetrics` to update (optional).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        topics: Iterable[TopicSpec],
        *,
        health: Any = None,
        on_topics_recreated: Callable[[list[str]], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kafka = kafka
        self.on_topics_recreated = on_topics_recreated
        self.health = health
        self.topics: list[TopicSpec] = []
        self.add_topics(topics)
        self.clock = clock
        self.interval_s = kafka.health_check_interval_s
        self.unreachable_after_s = kafka.broker_unreachable_after_s
        self.up = False
        self.last_contact: float | None = None
        self.checks = 0
        self.recreated: list[str] = []
        self._admin: Any = None
        self._task: asyncio.Task[None] | None = None
        self._lost_logged = False
        self._lock: asyncio.Lock | None = None

    def add_topics(self, specs: Iterable[TopicSpec]) -> None:
        """Own more topics (the conversation stage's, once it is wired)."""
        names = {t.name for t in self.topics}
        new = [s for s in specs if s.name not in names]
        self.topics += new
        if self.health is not None:
            for spec in new:
                self.health.own_topic(spec.name)

    async def start(self) -> None:
        """First check (contact at start is a fact, not a guess), then check periodically."""
        await self.check()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.check()

    async def _client(self) -> Any:
        if self._admin is None:
            from aiokafka.admin import AIOKafkaAdminClient

            timeout_ms = int(max(1.0, self.interval_s) * 1000)
            admin = AIOKafkaAdminClient(request_timeout_ms=timeout_ms, **client_kwargs(self.kafka))
            try:
                await admin.start()
            except BaseException:
                with contextlib.suppress(Exception):
                    await admin.close()
                raise
            self._admin = admin
        return self._admin

    async def _probe(self) -> list[str]:
        admin = await self._client()
        if not self.kafka.create_topics:
            await admin.list_topics()
            return []
        created = await ensure_topics(admin, self.kafka, self.topics)
        for name in created:
            log.warning("topic %s vanished from the broker; re-created it", name)
            self.recreated.append(name)
            if self.health is not None:
                self.health.topic_recreated(name)
        return created

    async def check(self) -> bool:
        """One health check (bounded by the interval); updates state and metrics. Concurrent
        callers (the periodic task, a consumer loop about to commit) take turns."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await self._check()

    async def _check(self) -> bool:
        self.checks += 1
        timeout = max(1.0, self.interval_s)
        try:
            created = await asyncio.wait_for(self._probe(), timeout=timeout)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._drop_client()
            self._set(False, f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            return False
        self._set(True, "")
        if created and self.on_topics_recreated is not None:
            try:  # not bounded by the probe's timeout: a half-done reset would be worse
                await self.on_topics_recreated(created)
            except Exception:
                log.exception("resetting after the broker lost its data failed")
        return True

    def _set(self, up: bool, why: str) -> None:
        if up:
            self.last_contact = self.clock()
            if self._lost_logged:
                log.warning("broker %s reachable again", self.kafka.bootstrap_servers)
            self._lost_logged = False
        elif not self._lost_logged:
            log.warning(
                "broker %s unreachable (%s); consumption and commits wait for it",
                self.kafka.bootstrap_servers,
                why or "no answer",
            )
            self._lost_logged = True
        self.up = up
        if self.health is not None:
            self.health.broker_contact(up)

    async def _drop_client(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(admin.close(), timeout=1.0)

    @property
    def contact_age_s(self) -> float | None:
        return None if self.last_contact is None else max(0.0, self.clock() - self.last_contact)

    def readiness(self) -> tuple[bool, str]:
        """False once the broker has not answered for ``broker_unreachable_after_s``."""
        age = self.contact_age_s
        if age is None:
            return False, "no broker contact yet"
        if age > self.unreachable_after_s:
            return False, f"no broker contact for {age:.0f}s ({self.kafka.bootstrap_servers})"
        return True, "broker reachable"

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._drop_client()


async def rewind(consumer: Any) -> list[Any]:
    """After the broker lost its data: seek every assigned partition of an aiokafka consumer to
    its committed offset, or to the beginning when there is none or it lies beyond the end of the
    new log (a commit of the old log that landed on the new broker). Returns the partitions.

    Example (not run: needs a broker)::

        await rewind(loop.consumer)   # after the broker came back empty
    """
    from aiokafka.errors import IllegalStateError, KafkaError

    tps = list(consumer.assignment())
    if not tps:
        return tps
    try:
        ends = await consumer.end_offsets(tps)
    except (IllegalStateError, KafkaError) as e:
        log.info("rewind: end offsets unavailable (%s); seeking to the beginning", e)
        ends = {}
    for tp in tps:
        try:
            committed = await consumer.committed(tp)
            end = ends.get(tp)
            if committed is None or end is None or committed > end:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, committed)
        except (IllegalStateError, KafkaError) as e:  # revoked meanwhile, or the broker left
            log.info("rewind of %s skipped: %s", tp, e)
    return tps
