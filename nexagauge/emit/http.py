"""The evaluator's HTTP endpoint: ``/metrics``, ``/healthz``, ``/readyz`` on asyncio streams.

No framework (stdlib ``asyncio.start_server``): one request per connection, ``GET``/``HEAD`` only,
request head bounded (8 KiB) and timed out (10 s), so a slow or hostile client cannot hold the
event loop or memory. Responses are bounded too, because a ``/metrics`` body can be megabytes and
a client that never reads would otherwise pin its own copy in the socket's write buffer forever:

* at most ``max_connections`` (256) connections are served at once; more get a short 503;
* at most ``max_metrics_responses`` (4) ``/metrics`` bodies are written at once; a scrape waits
  for a slot up to ``write_stall_s`` and then gets a 503 (Prometheus retries next interval);
* bodies are written in 64 KiB chunks: a chunk the client has not taken within ``write_stall_s``
  (10 s), or a response not finished within ``response_deadline_s`` (60 s), closes the
  connection. So a response never buffers more than a chunk beyond what the socket holds;
* scrapes that arrive while a rendering is in progress share it (one rendering, one body).

Memory held for responses is thus at most ``max_metrics_responses`` bodies plus a chunk per
connection, whatever the clients do; :attr:`MetricsServer.stats` counts what was cut off. Binds to ``EmitSettings.metrics_host`` (loopback by default) and
``metrics_port`` (0 picks a free port: see :attr:`MetricsServer.port`).

* ``/metrics``: the registry, in OpenMetrics (with exemplars) when the ``Accept`` header asks for
  ``application/openmetrics-text`` (Prometheus does), else the classic text format. Rendering
  runs in a worker thread.
* ``/healthz``: 200 while the process and its event loop answer.
* ``/readyz``: 200 when the readiness callback says ready (the consumer: partitions assigned and
  not stalled), else 503 with the callback's reason. The callback may be sync or async and return
  a ``bool`` or ``(bool, reason)``; an exception means not ready.

Example:
    >>> import asyncio
    >>> from nexagauge.emit.prometheus import EvaluatorMetrics
    >>> async def main():
    ...     srv = MetricsServer(EvaluatorMetrics(), host="127.0.0.1", port=0)
    ...     await srv.start()
    ...     r, w = await asyncio.open_connection("127.0.0.1", srv.port)
    ...     w.write(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
    ...     line = await r.readline()
    ...     w.close()
    ...     await srv.stop()
    ...     return line
    >>> asyncio.run(main())
    b'HTTP/1.1 200 OK\\r\\n'
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from prometheus_client.exposition import choose_encoder

from nexagauge.emit.prometheus import EvaluatorMetrics, exposition

log = logging.getLogger(__name__)

ReadinessResult: TypeAlias = bool | tuple[bool, str]
#: The consumer's readiness check (sync or async).
Readiness: TypeAlias = Callable[[], ReadinessResult | Awaitable[ReadinessResult]]

MAX_HEAD_BYTES = 8 * 1024
HEAD_TIMEOUT_S = 10.0
#: connections served at once (more get a 503 and are closed)
MAX_CONNECTIONS = 256
#: /metrics bodies written at once (each may be megabytes)
MAX_METRICS_RESPONSES = 4
#: a chunk the client does not take within this time closes the connection
WRITE_STALL_S = 10.0
#: a whole response must be written within this time
RESPONSE_DEADLINE_S = 60.0
#: bodies are written this much at a time (the transport buffers at most about one chunk)
WRITE_CHUNK = 64 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_TEXT = "text/plain; charset=utf-8"


class MetricsServer:
    """Serves the evaluator's metrics and health endpoints (see module docstring).

    Args:
        metrics: the process's :class:`EvaluatorMetrics` (its registry is served).
        host, port: where to listen (``port=0``: a free port, read :attr:`port` after start).
        readiness: the consumer's readiness callback; ``None``: ready once started.
        max_connections, max_metrics_responses, write_stall_s, response_deadline_s: the response
            bounds of the module docstring (defaults: the module constants).
    """

    def __init__(
        self,
        metrics: EvaluatorMetrics,
        *,
        host: str = "127.0.0.1",
        port: int = 9464,
        readiness: Readiness | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_metrics_responses: int = MAX_METRICS_RESPONSES,
        write_stall_s: float = WRITE_STALL_S,
        response_deadline_s: float = RESPONSE_DEADLINE_S,
    ) -> None:
        self.metrics = metrics
        self.host = host
        self._port = port
        self.readiness = readiness
        self.max_connections = max_connections
        self.write_stall_s = write_stall_s
        self.response_deadline_s = response_deadline_s
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._metrics_slots = asyncio.Semaphore(max_metrics_responses)
        self._rendering: dict[str, asyncio.Future[tuple[bytes, str]]] = {}
        #: responses cut off: ``too_many_connections``, ``busy`` (no /metrics slot in time),
        #: ``write_stalled``, ``write_deadline``
        self.stats: dict[str, int] = {
            "too_many_connections": 0,
            "busy": 0,
            "write_stalled": 0,
            "write_deadline": 0,
        }

    @property
    def open_connections(self) -> int:
        """Connections being served now."""
        return len(self._conns)

    def buffered_bytes(self) -> int:
        """Bytes waiting in the connections' write buffers now (bounded: see module docstring)."""
        total = 0
        for w in self._writers:
            with contextlib.suppress(Exception):
                total += w.transport.get_write_buffer_size()
        return total

    @classmethod
    def from_settings(
        cls, metrics: EvaluatorMetrics, emit: Any, readiness: Readiness | None = None
    ) -> MetricsServer:
        """Build from ``EmitSettings`` (``metrics_host``, ``metrics_port``)."""
        return cls(metrics, host=emit.metrics_host, port=emit.metrics_port, readiness=readiness)

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving (returns once listening)."""
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._handle, self.host, self._port, limit=MAX_HEAD_BYTES
        )
        log.info("metrics endpoint on %s", self.url)

    async def aclose(self) -> None:
        """Same as :meth:`stop`."""
        await self.stop()

    async def stop(self) -> None:
        """Stop listening and close open connections. Idempotent."""
        srv, self._server = self._server, None
        if srv is None:
            return
        srv.close()
        for t in list(self._conns):
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._conns, return_exceptions=True)
        await srv.wait_closed()

    async def __aenter__(self) -> MetricsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- request handling ---------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._conns) >= self.max_connections:
            self.stats["too_many_connections"] += 1
            # a tiny answer fits any socket buffer: written without waiting for the client
            body = b"too many connections\n"
            writer.write(_head(503, len(body), _TEXT) + body)
            writer.close()
            return
        if task is not None:
            self._conns.add(task)
        self._writers.add(writer)
        try:
            await self._serve_one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except _WriteCutOff as e:
            self.stats[e.why] += 1
            log.info("metrics endpoint: closed a client that does not read (%s)", e.why)
            writer.transport.abort()  # drop what it never read; close() would wait to flush
        except Exception:
            log.exception("metrics endpoint: request failed")
        finally:
            if task is not None:
                self._conns.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), self.write_stall_s)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            await self._send(writer, 431, b"request head too large\n", _TEXT, head_only=False)
            return
        except (TimeoutError, asyncio.IncompleteReadError):
            return
        if len(head) > MAX_HEAD_BYTES:
            await self._send(writer, 431, b"request head too large\n", _TEXT, head_only=False)
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await self._send(writer, 400, b"bad request line\n", _TEXT, head_only=False)
            return
        method, target, _version = parts
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            await self._send(
                writer, 405, b"only GET and HEAD\n", _TEXT, head_only=False, allow=True
            )
            return
        head_only = method == "HEAD"
        if path == "/metrics":
            await self._serve_metrics(writer, headers.get("accept"), head_only)
        elif path == "/healthz":
            await self._send(writer, 200, b"ok\n", _TEXT, head_only=head_only)
        elif path == "/readyz":
            ready, reason = await self._ready()
            await self._send(
                writer, 200 if ready else 503, (reason + "\n").encode(), _TEXT, head_only=head_only
            )
        else:
            await self._send(writer, 404, b"not found\n", _TEXT, head_only=head_only)

    async def _serve_metrics(
        self, writer: asyncio.StreamWriter, accept: str | None, head_only: bool
    ) -> None:
        """``/metrics`` under a response slot (at most ``max_metrics_responses`` bodies held)."""
        try:
            await asyncio.wait_for(self._metrics_slots.acquire(), self.write_stall_s)
        except TimeoutError:
            self.stats["busy"] += 1
            await self._send(writer, 503, b"busy: too many scrapes at once\n", _TEXT, head_only)
            return
        try:
            body, ctype = await self._render(accept)
            await self._send(writer, 200, body, ctype, head_only=head_only)
        finally:
            self._metrics_slots.release()

    async def _render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition for ``accept``; scrapes arriving during a rendering share its result."""
        _, ctype = choose_encoder(accept or "")
        pending = self._rendering.get(ctype)
        if pending is None:
            pending = asyncio.ensure_future(
                asyncio.to_thread(exposition, self.metrics.registry, accept)
            )
            self._rendering[ctype] = pending
            pending.add_done_callback(lambda _f: self._rendering.pop(ctype, None))
        return await asyncio.shield(pending)

    async def _ready(self) -> tuple[bool, str]:
        if self.readiness is None:
            return True, "ready"
        try:
            res = self.readiness()
            if inspect.isawaitable(res):
                res = await res
        except Exception as e:
            return False, f"readiness check failed: {type(e).__name__}: {e}"
        if isinstance(res, tuple):
            ok, why = bool(res[0]), str(res[1])
            return ok, why or ("ready" if ok else "not ready")
        return bool(res), "ready" if res else "not ready"

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        ctype: str,
        head_only: bool,
        *,
        allow: bool = False,
    ) -> None:
        """Write a response in chunks, each taken by the client within ``write_stall_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.response_deadline_s
        data = memoryview(_head(status, len(body), ctype, allow=allow))
        chunks = [data] if head_only else [data, memoryview(body)]
        for view in chunks:
            for at in range(0, len(view), WRITE_CHUNK):
                writer.write(view[at : at + WRITE_CHUNK])
                left = deadline - loop.time()
                try:
                    await asyncio.wait_for(writer.drain(), min(self.write_stall_s, left))
                except TimeoutError:
                    raise _WriteCutOff(
                        "write_deadline" if left <= self.write_stall_s else "write_stalled"
                    ) from None


class _WriteCutOff(Exception):
    """A client did not take its response in time (``why``: the stats key)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _head(status: int, length: int, ctype: str, *, allow: bool = False) -> bytes:
    head = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
        f"Content-Type: {ctype}",
        f"Content-Length: {length}",
        "Cache-Control: no-store",
        "Connection: close",
    ]
    if allow:
        head.append("Allow: GET, HEAD")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


async def start_server(
    emit: Any, metrics: EvaluatorMetrics, *, ready: Readiness | None = None
) -> MetricsServer:
    """Start a :class:`MetricsServer` from ``EmitSettings``; stop it with ``await server.stop()``.

    Example::

        server = await start_server(settings.emit, metrics, ready=lambda: consumer.ready)
    """
    server = MetricsServer.from_settings(metrics, emit, readiness=ready)
    await server.start()
    return server
