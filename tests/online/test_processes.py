"""Delivery guarantees across processes on a real broker: two consumers sharing partitions,
SIGTERM mid-stream, and a broker outage mid-stream.

Each evaluator is the real ``nexagauge serve`` service loop in its own process
(``tests/online/serve_runner.py``) with an emitter that records every emitted evaluation, so the
tests count by trace: no produced trace is lost, and duplicates stay within what at-least-once
allows (work finished but not yet committed when partitions moved or the process stopped).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .kafka_helpers import build_traces, produce, settings_dict, toml_config, topics

# processes driven against a clock (kills, SIGTERM and cuts mid-stream): never next to each other
# in a parallel run (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("online-delivery")]
REPO = Path(__file__).resolve().parents[2]


class Runner:
    """One evaluator process; ``record`` collects its emitted case ids."""

    def __init__(self, config: Path, record: Path, log: Path, emit_delay: float = 0.0) -> None:
        env = {**os.environ, "NEXAGAUGE_CONFIG": str(config), "PYTHONUNBUFFERED": "1"}
        self.log = log
        self.fh = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.online.serve_runner",
                "--record",
                str(record),
                "--emit-delay",
                str(emit_delay),
            ],
            cwd=REPO,
            env=env,
            stdout=self.fh,
            stderr=subprocess.STDOUT,
        )

    def terminate(self, within_s: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=within_s)
        finally:
            self.fh.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if not self.fh.closed:
            self.fh.close()


def recorded(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def wait_until(pred, within_s: float, runners: list[Runner]) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        for r in runners:
            if r.proc.poll() is not None:
                raise AssertionError(f"evaluator exited early: {r.log.read_text()[-3000:]}")
        time.sleep(0.1)
    return pred()


def _setup(broker: Any, tmp_path: Path, prefix: str, bootstrap: str | None = None, **online: Any):  # type: ignore[no-untyped-def]
    names = topics(prefix)
    asyncio.run(broker.create_topics({names["traces_topic"]: 4, names["logs_topic"]: 1}))
    cfg = toml_config(
        tmp_path / "nexagauge.toml", settings_dict(bootstrap or broker.bootstrap, names, **online)
    )
    return names, cfg


def test_two_consumers_share_partitions_and_lose_nothing(broker: Any, tmp_path: Path) -> None:
    names, cfg = _setup(broker, tmp_path, "two")
    rec = tmp_path / "evals.jsonl"
    runners = [Runner(cfg, rec, tmp_path / f"r{i}.log") for i in range(2)]
    try:
        # produce once both members own evaluator partitions (else one may finish alone)
        def both_assigned() -> bool:
            for r in runners:
                lines = [
                    ln
                    for ln in r.log.read_text().splitlines()
                    if "assigned [(" in ln and names["rekeyed_topic"] in ln
                ]
                if not lines:
                    return False
            return True

        assert wait_until(both_assigned, 60, runners)
        msgs, expected = build_traces(120, seed=1)
        asyncio.run(produce(broker.bootstrap, names["traces_topic"], msgs, 4, delay_s=0.02))
        ok = wait_until(lambda: {r["case"] for r in recorded(rec)} >= set(expected), 60, runners)
        got = recorded(rec)
        assert ok, f"evaluated {len({r['case'] for r in got})}/{len(expected)}"
        assert {r["case"] for r in got} == set(expected)
        pids = Counter(r["pid"] for r in got)
        assert len(pids) == 2, f"partitions were not shared: {pids}"
        dups = len(got) - len(expected)
        # duplicates only come from work re-read after a rebalance (the second member joining)
        assert dups <= len(expected) // 4, f"{dups} duplicates"
        for r in runners:
            assert r.terminate() == 0
    finally:
        for r in runners:
            r.kill()


def test_sigterm_mid_stream_drains_commits_and_hands_over(broker: Any, tmp_path: Path) -> None:
    names, cfg = _setup(broker, tmp_path, "term", max_in_flight=8)
    rec = tmp_path / "evals.jsonl"
    first = Runner(cfg, rec, tmp_path / "first.log", emit_delay=0.05)
    second: Runner | None = None
    try:
        msgs, expected = build_traces(150, seed=2)
        producer = subprocess.Popen(  # keep producing while the first evaluator stops
            [
                sys.executable,
                "-c",
                _PRODUCE_SNIPPET,
                broker.bootstrap,
                names["traces_topic"],
                str(tmp_path / "msgs.bin"),
                "0.15",
            ],
            cwd=REPO,
        )
        (tmp_path / "msgs.bin").write_bytes(b"".join(len(m).to_bytes(4, "big") + m for m in msgs))
        assert wait_until(lambda: len(recorded(rec)) >= 30, 60, [first])
        t0 = time.monotonic()
        assert first.terminate(within_s=40) == 0
        stop_s = time.monotonic() - t0
        assert "RUNNER EXIT 0" in first.log.read_text()
        n_first = len(recorded(rec))
        second = Runner(cfg, rec, tmp_path / "second.log")
        assert producer.wait(timeout=60) == 0
        ok = wait_until(lambda: {r["case"] for r in recorded(rec)} >= set(expected), 60, [second])
        got = recorded(rec)
        assert ok, f"evaluated {len({r['case'] for r in got})}/{len(expected)}"
        dups = len(got) - len(expected)
        assert dups <= 10, f"{dups} duplicates after a graceful stop"
        assert 0 < n_first < len(expected)
        assert stop_s < 20, f"graceful stop took {stop_s:.1f}s"
        assert second.terminate() == 0
    finally:
        first.kill()
        if second is not None:
            second.kill()


def test_broker_outage_mid_stream(broker: Any, tmp_path: Path) -> None:
    """Every client connection is cut (Tansu's proxy in front of the broker is restarted and stays
    down for a second): the evaluator reconnects, re-joins and evaluates every trace.

    Tansu keeps data in memory, so restarting the broker process itself would lose the topics;
    restarting the proxy gives clients the same experience (connections reset, requests fail,
    group coordinator gone) while the data survives.
    """
    from support.broker import TansuProxy

    with TansuProxy(broker) as proxy:
        names, cfg = _setup(broker, tmp_path, "outage", bootstrap=proxy.bootstrap)
        rec = tmp_path / "evals.jsonl"
        runner = Runner(cfg, rec, tmp_path / "r.log")
        try:
            msgs, expected = build_traces(100, seed=3)
            half = len(msgs) // 2
            asyncio.run(produce(broker.bootstrap, names["traces_topic"], msgs[:half], 4))
            assert wait_until(lambda: len(recorded(rec)) >= 10, 60, [runner])
            proxy.restart(down_s=1.0)
            asyncio.run(produce(broker.bootstrap, names["traces_topic"], msgs[half:], 4))
            ok = wait_until(
                lambda: {r["case"] for r in recorded(rec)} >= set(expected), 90, [runner]
            )
            got = recorded(rec)
            assert ok, f"evaluated {len({r['case'] for r in got})}/{len(expected)}"
            assert len(got) - len(expected) <= len(expected) // 2
            assert runner.terminate() == 0
            assert "Unable connect to node" in runner.log.read_text()  # the outage was real
        finally:
            runner.kill()


_PRODUCE_SNIPPET = r"""
import asyncio, random, sys, time
from pathlib import Path
from aiokafka import AIOKafkaProducer
bootstrap, topic, path = sys.argv[1:4]  # argv[4]: seconds between messages
p = Path(path)
while not p.exists() or p.stat().st_size == 0:
    time.sleep(0.05)
data = p.read_bytes(); msgs = []; i = 0
while i < len(data):
    n = int.from_bytes(data[i:i+4], "big"); msgs.append(data[i+4:i+4+n]); i += 4 + n
async def main():
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20, acks="all")
    await prod.start()
    rnd = random.Random(5)
    for m in msgs:
        await prod.send_and_wait(topic, m, partition=rnd.randrange(4))
        await asyncio.sleep(float(sys.argv[4]))
    await prod.stop()
asyncio.run(main())
"""
