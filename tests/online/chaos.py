"""Helpers of the chaos tests: real ``nexagauge serve`` processes, an OTLP receiver that kills an
exporting process "just after an export", and per-trace accounting of outputs and metrics.

Every member is the real CLI (``python -m nexagauge serve``) with its own config file and metrics
port, exporting evaluation spans over OTLP/gRPC to one :class:`~support.otlp_receiver.OtlpReceiver`
in the test process. Each member's resource carries ``nexagauge.member=<name>``, so the receiver
knows which process sent an export.

Exact counting under kill -9: a killed process's counters die with it, so a test must know what
it had counted. :class:`KillAfterExport` kills a member from inside the receiver's export handler,
after the spans are stored and before the reply: the member's only export thread is blocked on
that reply, and nothing is counted before its export is confirmed, so once evaluations confirmed
earlier have finished recording (milliseconds; :func:`settled_scrape`), a scrape taken there (the
event loop still serves ``/metrics``) is exactly what the member had counted when it died.
"""

from __future__ import annotations

import copy
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from nexagauge.demo.stack import free_port
from nexagauge.sdk import conventions as C

from .kafka_helpers import toml_config

REPO = Path(__file__).resolve().parents[2]
MEMBER_ATTR = "nexagauge.member"


class Member:
    """One ``nexagauge serve`` process (see module docstring)."""

    def __init__(self, name: str, cfg: dict[str, Any], tmp: Path) -> None:
        self.name = name
        self.port = free_port()
        d = copy.deepcopy(cfg)
        d.setdefault("emit", {})["metrics_port"] = self.port
        path = toml_config(tmp / f"{name}.toml", d)
        self.log = tmp / f"{name}.log"
        self._fh = self.log.open("ab")
        env = {
            **os.environ,
            "NEXAGAUGE_CONFIG": str(path),
            "PYTHONUNBUFFERED": "1",
            "OTEL_RESOURCE_ATTRIBUTES": f"{MEMBER_ATTR}={name}",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nexagauge", "-v", "serve"],
            cwd=REPO,
            env=env,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
        )
        #: last /metrics scrape (metric sample name -> sum over label sets)
        self.last: dict[str, float] = {}

    def scrape(self, timeout: float = 3.0) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[s.name] = out.get(s.name, 0.0) + float(s.value)
        self.last = out
        return out

    def try_scrape(self) -> dict[str, float] | None:
        try:
            return self.scrape()
        except OSError:
            return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        if not self._fh.closed:
            self._fh.close()

    def terminate(self, within_s: float = 30.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=within_s)
        finally:
            if not self._fh.closed:
                self._fh.close()

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


class KillAfterExport:
    """Receiver hook: after the ``nth`` export request of ``member`` is stored, scrape the member
    (exact counts, see module docstring), wait ``pause_s`` (its event loop keeps fetching, judging,
    committing: a random moment for everything but counting) and SIGKILL it before the reply."""

    def __init__(self, member: Member, nth: int, pause_s: float = 0.0) -> None:
        self.member = member
        self.nth = nth
        self.pause_s = pause_s
        self.seen = 0
        self.snapshot: dict[str, float] | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, spans: list[Any]) -> None:
        if not spans or spans[0].resource.get(MEMBER_ATTR) != self.member.name:
            return
        with self._lock:
            if self.done.is_set():
                return
            self.seen += 1
            if self.seen < self.nth:
                return
            if self.pause_s:
                time.sleep(self.pause_s)
            self.snapshot = settled_scrape(self.member)
            self.member.proc.send_signal(signal.SIGKILL)
            self.done.set()


def settled_scrape(member: Member, settle_s: float = 0.3) -> dict[str, float]:
    """Scrape until two scrapes ``settle_s`` apart agree: evaluations whose export was confirmed
    before the member's export thread blocked finish recording and counting within
    milliseconds; nothing else can be counted while the export is held."""
    last = member.scrape()
    for _ in range(20):
        time.sleep(settle_s)
        now = member.scrape()
        if now.get("nexagauge_evaluations_total") == last.get("nexagauge_evaluations_total"):
            return now
        last = now
    raise AssertionError("the member kept counting while its export was held")


def chain(*hooks: Callable[[list[Any]], None]) -> Callable[[list[Any]], None]:
    def run(spans: list[Any]) -> None:
        for h in hooks:
            h(spans)

    return run


def evaluation_spans(rx: Any) -> list[Any]:
    return [s for s in rx.spans if s.name == C.NG_EVALUATION_SPAN_NAME]


def outputs_by_trace(rx: Any) -> dict[str, set[str]]:
    """Evaluated trace id -> the distinct evaluation span ids received for it."""
    out: dict[str, set[str]] = {}
    for s in evaluation_spans(rx):
        out.setdefault(s.attributes[C.NG_EVALUATION_TRACE_ID], set()).add(s.span_id)
    return out


def random_kill_points(seed: int, n: int, lo: int = 1, hi: int = 6) -> list[tuple[int, float]]:
    rnd = random.Random(seed)
    return [(rnd.randint(lo, hi), rnd.choice([0.0, rnd.uniform(0.0, 0.3)])) for _ in range(n)]


def wait_for(pred: Callable[[], bool], within_s: float, members: list[Member]) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        for m in members:
            if not m.alive() and m.proc.returncode not in (-signal.SIGKILL,):
                raise AssertionError(f"{m.name} exited: {m.tail()}")
        time.sleep(0.1)
    return pred()


def counted(snapshots: list[dict[str, float]], name: str) -> float:
    """``sum()`` over members (and dead incarnations' last exact scrapes) of one metric."""
    return sum(s.get(name, 0.0) for s in snapshots)


def duplicates_report(rx: Any) -> Counter[str]:
    return Counter(s.attributes[C.NG_EVALUATION_TRACE_ID] for s in evaluation_spans(rx))
