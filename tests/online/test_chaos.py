"""Chaos tests of delivery (issue 14) on real parts: Tansu, the real ``nexagauge serve`` CLI in
subprocesses, evaluation spans exported over OTLP/gRPC to a loopback receiver, every member's
``/metrics`` scraped. Each asserts per trace id: evaluated exactly once in the outputs (one
evaluation span id per trace; a re-export after a crash carries the same deterministic id) and
counted exactly once in ``sum()`` over members' metrics, nothing lost.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .chaos import (
    MEMBER_ATTR,
    KillAfterExport,
    Member,
    counted,
    evaluation_spans,
    outputs_by_trace,
    random_kill_points,
    settled_scrape,
    wait_for,
)
from .kafka_helpers import build_traces, produce, settings_dict, topics

# processes driven against a clock (kills, SIGTERM and cuts mid-stream): never next to each other
# in a parallel run (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("online-delivery")]

EVALS = "nexagauge_evaluations_total"


@pytest.fixture()
def receiver() -> Iterator[Any]:
    from support.otlp_receiver import OtlpReceiver

    with OtlpReceiver(http=False) as rx:
        yield rx


def _config(broker: Any, rx: Any, tmp: Path, prefix: str, **online: Any) -> tuple[dict, dict]:  # type: ignore[type-arg]
    names = topics(prefix)
    asyncio.run(broker.create_topics({names["traces_topic"]: 4, names["logs_topic"]: 1}))
    # a member killed mid-stream delays the other half of a split trace by up to the session
    # timeout (3 s here) + a rebalance: the inactivity timeout must exceed that (docs/online.md)
    online.setdefault("trace_inactivity_s", 15.0)
    d = settings_dict(broker.bootstrap, names, **online)
    d["kafka"]["session_timeout_ms"] = 3000  # a killed member's partitions move sooner
    d["emit"] = {"otlp_endpoint": rx.endpoint_grpc, "otlp_timeout_s": 10}
    d["cache"] = {"enabled": False, "dir": str(tmp / "volume")}  # one volume: restarts reuse it
    return names, d


class _Producer(threading.Thread):
    """Produces while members start, crash and restart, so exports spread over the test: one
    message every ``delay_s`` until :meth:`hurry`, then the rest at once."""

    def __init__(self, broker: Any, names: dict[str, str], msgs: list[bytes], delay_s: float):
        super().__init__(daemon=True)
        self.args = (broker.bootstrap, names["traces_topic"], msgs)
        self.delay_s = delay_s
        self._hurry = threading.Event()
        self.start()

    def hurry(self) -> None:
        self._hurry.set()

    def run(self) -> None:
        bootstrap, topic, msgs = self.args
        for i, m in enumerate(msgs):
            asyncio.run(produce(bootstrap, topic, [m], 4, seed=i))
            if not self._hurry.is_set():
                self._hurry.wait(self.delay_s)


def _background_produce(
    broker: Any, names: dict[str, str], msgs: list[bytes], delay_s: float
) -> _Producer:
    return _Producer(broker, names, msgs, delay_s)


def _assert_exactly_once(rx: Any, expected: list[str], snapshots: list[dict[str, float]]) -> None:
    outs = outputs_by_trace(rx)
    want = {c.split(":")[0] for c in expected}
    assert set(outs) == want, f"missing evaluations: {len(want - set(outs))}/{len(want)}"
    twice = {t: ids for t, ids in outs.items() if len(ids) != 1}
    assert not twice, f"traces with several distinct evaluation span ids: {twice}"
    assert counted(snapshots, EVALS) == len(want), [s.get(EVALS) for s in snapshots]


def test_kill_9_at_random_moments_loses_and_double_counts_nothing(
    broker: Any, receiver: Any, tmp_path: Path
) -> None:
    """Issue 14 item 1: a member is killed with SIGKILL twice just after an export reached the
    receiver (before the member learned it), at a random export and a random moment of its event
    loop, and once from outside at a random moment; each restart re-emits what was not recorded
    and suppresses what was. The counts of the members killed after an export are exact (see
    chaos.py); the one killed from outside may have counted after its last scrape, so for it the
    check is that nothing is counted twice (its inferred total is at least what it showed)."""
    names, cfg = _config(broker, receiver, tmp_path, "kill9")
    msgs, expected = build_traces(150, seed=11)
    members: list[Member] = []
    snapshots: list[dict[str, float]] = []
    r_last: dict[str, float] = {}
    producer = _background_produce(broker, names, msgs, delay_s=0.6)
    try:
        for i, (nth, pause) in enumerate(random_kill_points(seed=7, n=2, hi=3)):
            m = Member(f"m{i}", cfg, tmp_path)
            members.append(m)
            hook = KillAfterExport(m, nth, pause)
            receiver.on_traces = hook
            assert hook.done.wait(60), f"{m.name}: {hook.seen}/{nth} exports: {m.tail()}"
            m.proc.wait(10)
            assert hook.snapshot is not None
            snapshots.append(hook.snapshot)
            if i == 0:  # between the two: a kill from outside at a random moment
                r = Member("r", cfg, tmp_path)
                members.append(r)
                rnd = random.Random(5)

                def exported() -> bool:
                    return any(
                        sp.resource.get(MEMBER_ATTR) == "r" for sp in evaluation_spans(receiver)
                    )

                assert wait_for(exported, 60, [r]), r.tail()
                until = time.monotonic() + rnd.uniform(0.0, 1.5)
                while time.monotonic() < until:
                    r_last = r.try_scrape() or r_last
                    time.sleep(0.05)
                r.kill()
        receiver.on_traces = None
        producer.hurry()
        last = Member("last", cfg, tmp_path)
        members.append(last)
        want = {c.split(":")[0] for c in expected}

        producer.join(60)
        ok = wait_for(lambda: set(outputs_by_trace(receiver)) >= want, 60, [last])
        assert ok, f"{len(outputs_by_trace(receiver))}/{len(want)} evaluated: {last.tail()}"
        final = settled_scrape(last, settle_s=1.0)  # every output counted: nothing moves
        r_total = len(want) - counted([*snapshots, final], EVALS)  # what r counted, inferred
        assert r_total >= r_last.get(EVALS, 0.0), (r_total, r_last.get(EVALS))
        _assert_exactly_once(receiver, expected, [*snapshots, final, {EVALS: r_total}])
        assert last.terminate() == 0
    finally:
        for m in members:
            m.kill()


def test_two_members_rebalance_and_kill_count_once_over_the_group(
    broker: Any, receiver: Any, tmp_path: Path
) -> None:
    """Issue 14 item 2: member a runs alone, b joins (rebalance: a fences and hands partitions
    over), then b is killed -9 just after an export; a takes b's partitions back, restores the
    emitted keys and re-emits only what b had not recorded. Every trace: one evaluation span id,
    and ``sum(nexagauge_evaluations_total)`` over the members (b's exact last scrape) equals the
    number of traces. Each member has its own volume: the dedupe is the Kafka topic's."""
    names, cfg = _config(broker, receiver, tmp_path, "group")
    msgs, expected = build_traces(100, seed=12)
    want = {c.split(":")[0] for c in expected}
    producer = _background_produce(broker, names, msgs, delay_s=0.7)
    a = b = None
    try:
        cfg_a = {**cfg, "cache": {"enabled": False, "dir": str(tmp_path / "vol-a")}}
        cfg_b = {**cfg, "cache": {"enabled": False, "dir": str(tmp_path / "vol-b")}}
        a = Member("a", cfg_a, tmp_path)
        assert wait_for(lambda: len(outputs_by_trace(receiver)) >= 5, 60, [a]), a.tail()
        b = Member("b", cfg_b, tmp_path)
        hook = KillAfterExport(b, nth=random_kill_points(seed=3, n=1, hi=3)[0][0] + 1)
        receiver.on_traces = hook
        assert hook.done.wait(60), f"b: {hook.seen} exports: {b.tail()}"
        b.proc.wait(10)
        receiver.on_traces = None
        assert hook.snapshot is not None and hook.snapshot.get(EVALS, 0) > 0
        producer.hurry()
        producer.join(60)

        def done() -> bool:
            s = a.try_scrape()
            return (
                s is not None
                and set(outputs_by_trace(receiver)) >= want
                and (counted([hook.snapshot or {}, s], EVALS) >= len(want))
            )

        ok = wait_for(done, 60, [a])
        missing = sorted(want - set(outputs_by_trace(receiver)))
        info = {k: v for k, v in (a.try_scrape() or {}).items() if k.endswith("_total")}
        assert ok, f"{len(want) - len(missing)}/{len(want)} evaluated, missing {missing} {info}"
        _assert_exactly_once(receiver, expected, [hook.snapshot, a.scrape()])
        assert a.terminate() == 0
    finally:
        for m in (a, b):
            if m is not None:
                m.kill()


def test_slow_judge_and_a_burst_lose_nothing_and_respect_max_in_flight(
    broker: Any, receiver: Any, tmp_path: Path
) -> None:
    """Issue 14 item 3: a burst of split traces against a slow judge (loopback OpenAI server, real
    openai client): at most ``max_in_flight`` evaluations ever run, partitions are paused while
    saturated (the gauge shows it), and no trace is lost although the saturation outlasts the
    inactivity timeout many times over (the assembly clock stands still while paused)."""
    from support.openai_server import OpenAIServer

    def slow(_req: Any) -> None:
        time.sleep(0.3)  # then the smart answer
        return None

    with OpenAIServer(handler=slow) as judge:
        names, cfg = _config(
            broker, receiver, tmp_path, "burst", max_in_flight=3, trace_inactivity_s=1.0
        )
        cfg["judge"] = {
            "base_url": judge.base_url,
            "api_key": "sk-test-not-a-real-key-123456",
            "mode": "llm",
            "max_retries": 1,
        }
        msgs, expected = build_traces(40, seed=13)
        want = {c.split(":")[0] for c in expected}
        m = Member("m", cfg, tmp_path)
        peaks = {"in_flight": 0.0, "paused": 0.0}
        stop = threading.Event()

        def scrape() -> None:
            while not stop.is_set():
                s = m.try_scrape()
                if s is not None:
                    peaks["in_flight"] = max(
                        peaks["in_flight"], s.get("nexagauge_evaluations_in_flight", 0.0)
                    )
                    peaks["paused"] = max(
                        peaks["paused"], s.get("nexagauge_paused_partitions", 0.0)
                    )
                time.sleep(0.1)

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        try:
            asyncio.run(produce(broker.bootstrap, names["traces_topic"], msgs, 4))

            def done() -> bool:
                s = m.try_scrape()
                return s is not None and counted([s], EVALS) >= len(want)

            ok = wait_for(done, 90, [m])
            final = m.scrape()
            missing = want - set(outputs_by_trace(receiver))
            assert ok, f"{len(want) - len(missing)}/{len(want)} evaluated; {final.get(EVALS)}"
            stop.set()
            scraper.join(5)
            _assert_exactly_once(receiver, expected, [final])
            assert final.get("nexagauge_late_spans_total", 0.0) == 0.0
            assert 0 < peaks["in_flight"] <= 3, peaks
            assert peaks["paused"] > 0, peaks
            assert judge.stats.requests >= len(want)
            assert m.terminate() == 0
        finally:
            stop.set()
            m.kill()
