"""``nexagauge serve`` as a subprocess for end-to-end tests: start, wait until ready, stop.

    with ServeProcess(config_path, metrics_port, tmp_path / "serve.log", verbosity=2) as srv:
        ...                       # the service consumes; srv.alive() while it runs
    assert srv.rc == 0, srv.log_text()[-3000:]

Stops with SIGTERM (a graceful drain) and kills it after ``stop_timeout_s``; the log (stdout and
stderr) is kept in ``log_path``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[2]


def ready(url: str) -> bool:
    """Whether ``url`` answers 200 (``/readyz``)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status) == 200
    except OSError:
        return False


class ServeProcess:
    """One ``python -m nexagauge -v... serve --config CONFIG`` process (see module docstring)."""

    def __init__(
        self,
        config: Path,
        metrics_port: int,
        log_path: Path,
        *,
        verbosity: int = 1,
        env: dict[str, str] | None = None,
        ready_timeout_s: float = 60.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.args = [sys.executable, "-m", "nexagauge", "-" + "v" * verbosity, "serve"]
        self.args += ["--config", str(config)]
        self.url = f"http://127.0.0.1:{metrics_port}/readyz"
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.rc: int | None = None

    def __enter__(self) -> ServeProcess:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        try:
            deadline = time.monotonic() + self.ready_timeout_s
            while not ready(self.url):
                assert self.alive(), self.log_text()[-3000:]
                assert time.monotonic() < deadline, "serve never became ready"
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """SIGTERM, then kill after ``stop_timeout_s``; the exit status (-9 when killed)."""
        if self.proc is None or self.rc is not None:
            return self.rc
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.rc = self.proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.rc = -9
        return self.rc

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")
