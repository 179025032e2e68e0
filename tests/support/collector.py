"""A real OpenTelemetry collector with a Kafka exporter for tests: ``rotel`` (PyPI wheel).

Flags follow ``/work/shared/ENVIRONMENT.md``: without ``--traces-batch-max-size 512`` and a large
``--kafka-exporter-max-message-bytes`` this rotel build silently drops batches of LLM-sized
spans; a short batch timeout keeps tests fast. Messages are written unkeyed to random partitions
(spans of one trace may land on different partitions), like any collector without
``partition_traces_by_id``.

    with RotelCollector(broker.bootstrap, traces_topic="spans", logs_topic="logs") as col:
        exporter endpoint: col.grpc_endpoint ("http://127.0.0.1:P") or col.http_endpoint
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from support.broker import free_port


def rotel_bin() -> str:
    import rotel  # type: ignore[import-untyped]

    path = Path(rotel.__file__).parent / "rotel-agent"
    if not path.exists():
        raise FileNotFoundError(f"rotel-agent not found in {path.parent}")
    return str(path)


class RotelCollector:
    """rotel on free loopback ports: OTLP gRPC + HTTP in, Kafka (protobuf or json) out."""

    def __init__(
        self,
        brokers: str,
        *,
        traces_topic: str,
        logs_topic: str | None = None,
        fmt: str = "protobuf",
        max_message_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.grpc_port = free_port()
        self.http_port = free_port()
        self._dir = tempfile.mkdtemp(prefix="rotel-")
        self.log = Path(self._dir) / "rotel.log"
        args = [
            rotel_bin(),
            "start",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.http_port}",
            "--exporter",
            "kafka",
            "--kafka-exporter-brokers",
            brokers,
            "--kafka-exporter-traces-topic",
            traces_topic,
            "--kafka-exporter-format",
            fmt,
            "--traces-batch-max-size",
            "512",
            "--traces-batch-timeout",
            "50ms",
            "--logs-batch-max-size",
            "512",
            "--logs-batch-timeout",
            "50ms",
            "--kafka-exporter-max-message-bytes",
            str(max_message_bytes),
        ]
        if logs_topic:
            args += ["--kafka-exporter-logs-topic", logs_topic]
        fh = self.log.open("ab")
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            args, stdout=fh, stderr=subprocess.STDOUT, cwd=self._dir
        )
        fh.close()
        try:
            self._wait(self.grpc_port)
            self._wait(self.http_port)
        except BaseException:
            self.stop()
            raise

    def _wait(self, port: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"rotel exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return
            time.sleep(0.05)
        raise TimeoutError(f"rotel not listening on {port}: {self.log.read_text()[-2000:]}")

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)

    def __enter__(self) -> RotelCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
