"""A loopback TCP proxy that can cut the network: every connection through it is reset and new
ones are refused until :meth:`TcpProxy.restore` (stdlib threads only).

For a Kafka broker the proxy must also be the *advertised* address (clients connect to what the
metadata says, not to the bootstrap address): :class:`ProxiedTansu` starts Tansu listening on its
own port and advertising the proxy's.

Usage::

    with TcpProxy(upstream_port) as proxy:     # listens on proxy.port
        proxy.cut(); ...; proxy.restore()
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from support.broker import TansuBroker, free_port, tansu_bin


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream_port`` (see module docstring)."""

    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port or free_port()
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.connections = 0
        self.restore()

    def restore(self) -> None:
        """Listen (again) and forward new connections."""
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(64)
        self._listener = srv
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def cut(self) -> None:
        """Reset every connection and refuse new ones."""
        srv, self._listener = self._listener, None
        if srv is not None:
            with contextlib.suppress(OSError):
                srv.shutdown(socket.SHUT_RDWR)
            srv.close()
        with self._lock:
            socks, self._socks = self._socks, set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                s.close()

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                client, _ = srv.accept()
            except OSError:
                return  # cut
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            up.settimeout(None)
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._listener is not srv:  # cut meanwhile
                    client.close()
                    up.close()
                    return
                self._socks |= {client, up}
                self.connections += 1
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._socks -= {src, dst}

    def close(self) -> None:
        self.cut()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProxiedTansu(TansuBroker):
    """Tansu listening on its own port, advertising ``advertised_port`` (a :class:`TcpProxy`)."""

    def __init__(self, advertised_port: int) -> None:
        self.advertised_port = advertised_port
        super().__init__()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.advertised_port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        adv = f"tcp://127.0.0.1:{self.advertised_port}"
        argv = [tansu_bin(), "broker", "--listener-url", url, "--advertised-listener-url", adv]
        self.spawn(argv, self.port, env={"RUST_LOG": "warn"})


def proxied_broker() -> Any:
    """(broker, proxy): clients use ``broker.bootstrap`` (the proxy)."""
    adv = free_port()
    broker = ProxiedTansu(adv)
    return broker, TcpProxy(broker.port, adv)
