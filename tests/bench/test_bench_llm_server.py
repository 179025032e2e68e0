"""The benchmarks' loopback judge (bench/llm_server.py) drops an answer without a traceback when
its client has gone: the scale-out bench stops members with judge calls in flight, and each one
printed a ``BrokenPipeError`` traceback (32 in one run) before."""

from __future__ import annotations

import socket
import struct
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _llm_child import LlmServer


def test_client_gone_before_the_answer_is_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    server = LlmServer(50)  # answers after 50 ms: the client has reset its connection by then
    try:
        host, port = server.url.removeprefix("http://").split(":")
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        for _ in range(10):
            conn = socket.create_connection((host, int(port)))
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            conn.close()
        time.sleep(0.5)
        assert server.proc.poll() is None  # still serving
    finally:
        server.close()
    assert "Traceback" not in capfd.readouterr().err
