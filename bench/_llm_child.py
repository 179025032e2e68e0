"""``bench/llm_server.py`` (the loopback OpenAI-compatible judge) as a child process.

The benchmark reads the server's port from its first line, asks it for the calls and tokens it
counted (``GET /stats``) and resets the counters between tools (``POST /reset``).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from _traces import CASES, ROOT


class LlmServer:
    """bench/llm_server.py (the loopback OpenAI-compatible judge) in a child process."""

    def __init__(self, latency_ms: float) -> None:
        import sys

        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "llm_server.py"),
                "--cases",
                str(CASES),
                "--latency-ms",
                str(latency_ms),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"judge server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def stats(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/stats", timeout=30) as r:
            return dict(json.loads(r.read()))

    def reset(self) -> None:
        """Forget every counted request (between tools of one benchmark run)."""
        import urllib.request

        req = urllib.request.Request(self.url + "/reset", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=30):
            pass

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
