"""Tansu on loopback for the online benchmarks: topic creation and a bulk producer.

The same broker the demo and the integration tests use (``nexagauge.demo.stack.EmbeddedBroker``);
:meth:`Broker.cpu_s` lets a benchmark report the broker's CPU next to the evaluator's.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path

MAX_MESSAGE = 8 * 1024 * 1024


class Broker:
    """Tansu on a free loopback port (the same broker the demo and integration tests use)."""

    def __init__(self) -> None:
        from nexagauge.demo.stack import EmbeddedBroker

        self._b = EmbeddedBroker()
        self.bootstrap = self._b.bootstrap

    @property
    def pid(self) -> int:
        return self._b.proc.pid if self._b.proc else -1

    def cpu_s(self) -> float:
        """CPU seconds the broker process has used so far (utime + stime)."""
        try:
            f = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    async def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics with the given partition counts and wait until the metadata shows
        every partition (the embedded broker's topic set-up, as the demo and the tests)."""
        await self._b.create_topics(topics)

    async def produce(
        self,
        topic: str,
        values: Sequence[bytes],
        partitions: int,
        *,
        keys: Sequence[bytes] | None = None,
    ) -> float:
        """Produce ``values`` (round-robin over partitions unless keyed); returns seconds taken."""
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            max_request_size=MAX_MESSAGE,
            linger_ms=5,
            max_batch_size=1024 * 1024,
            acks=1,
        )
        await p.start()
        t0 = time.perf_counter()
        try:
            futs = []
            for i, v in enumerate(values):
                if keys is not None:
                    futs.append(await p.send(topic, v, key=keys[i]))
                else:
                    futs.append(await p.send(topic, v, partition=i % partitions))
                if len(futs) >= 2000:
                    await asyncio.gather(*futs)
                    futs = []
            await asyncio.gather(*futs)
        finally:
            await p.stop()
        return time.perf_counter() - t0

    def close(self) -> None:
        self._b.cleanup()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
