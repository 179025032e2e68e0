"""Unit tests of the resilience parts: the log repeat limit, the shutdown deadline, and the broker
monitor against a port where no broker listens (real aiokafka admin client)."""

from __future__ import annotations

import asyncio
import logging
import time

from prometheus_client import CollectorRegistry

from nexagauge.emit.health import HealthMetrics
from nexagauge.online.delivery.broker import BrokerMonitor, TopicSpec
from nexagauge.online.delivery.lograte import RepeatFilter
from nexagauge.online.delivery.shutdown import Deadline
from nexagauge.settings import KafkaSettings


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _rec(msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": "aiokafka", "levelno": level, "levelname": "X", "msg": msg, "args": args}
    )


def test_repeated_errors_pass_once_per_interval_with_the_count_held_back() -> None:
    clock = Clock()
    f = RepeatFilter(interval_s=10, clock=clock)
    template = "Unable connect to node with id %s: [Errno 111] Connect call failed %s"
    passed = [f.filter(_rec(template, 111, ("127.0.0.1", p))) for p in range(60)]
    assert passed == [True] + [False] * 59  # one a second for a minute: one line
    # digits masked: a preformatted line naming another node and port is the same kind
    assert f.filter(_rec("Unable connect to node 111 at 127.0.0.1:9092"))
    assert not f.filter(_rec("Unable connect to node 7 at 127.0.0.1:19092"))
    clock.t = 10.5
    r = _rec(template, 111, ("127.0.0.1", 1))
    assert f.filter(r) and r.getMessage().endswith("[59 similar messages suppressed]")
    assert r.getMessage().startswith("Unable connect to node with id 111")
    assert f.filter(_rec("another message"))  # another kind passes at once
    assert all(f.filter(_rec(template, 1, 2, level=logging.INFO)) for _ in range(5))


def test_repeat_limit_zero_disables_it() -> None:
    f = RepeatFilter(interval_s=0)
    assert all(f.filter(_rec("x %s", i)) for i in range(5))


async def test_deadline_abandons_a_step_that_swallows_its_cancellation() -> None:
    """aiokafka's close paths can ignore a cancellation while waiting on a dead broker; with
    ``asyncio.wait_for`` the stop then hung (issue 14: SIGTERM not honoured within 60 s)."""
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue  # swallowed, like a library retry loop

    d = Deadline(0.3)
    t0 = time.monotonic()
    assert not await d.run(stubborn(), "stubborn step")
    assert await d.run(asyncio.sleep(0), "next step")  # the floor still lets quick steps run
    assert time.monotonic() - t0 < 1.0 and d.missed == ["stubborn step"]
    release.set()


async def test_monitor_reports_a_broker_that_does_not_answer() -> None:
    from support.broker import free_port

    clock = Clock()
    health = HealthMetrics(CollectorRegistry(), clock=clock)
    k = KafkaSettings(
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        health_check_interval_s=0.5,
        broker_unreachable_after_s=3.0,
    )
    mon = BrokerMonitor(k, [TopicSpec("t", 1)], health=health, clock=clock)
    assert mon.readiness() == (False, "no broker contact yet")
    t0 = time.monotonic()
    assert not await mon.check()  # refused: bounded by the interval, not aiokafka's 40 s
    assert time.monotonic() - t0 < 3.0
    assert health.registry.get_sample_value("nexagauge_broker_up") == 0.0
    # contact once, then silence: ready until broker_unreachable_after_s has passed
    mon._set(True, "")
    clock.t = 2.0
    assert mon.readiness()[0]
    assert health.registry.get_sample_value("nexagauge_broker_contact_age_seconds") == 2.0
    clock.t = 3.5
    ok, why = mon.readiness()
    assert not ok and why.startswith("no broker contact for 4s")
    await mon.stop()


def test_own_warnings_pass_own_errors_are_limited() -> None:
    f = RepeatFilter(interval_s=10, clock=Clock())

    def own(level: int) -> logging.LogRecord:
        return logging.makeLogRecord(
            {"name": "nexagauge.online.rekey", "levelno": level, "msg": "re-key %s", "args": (1,)}
        )

    assert all(f.filter(own(logging.WARNING)) for _ in range(5))  # one per poison message
    assert [f.filter(own(logging.ERROR)) for _ in range(3)] == [True, False, False]


async def test_a_poison_message_too_large_to_forward_is_referenced() -> None:
    import hashlib
    import json

    from nexagauge.online.delivery.dlq import DeadLetters, dlq_value_limit

    sent: list[dict[str, object]] = []

    class Producer:
        async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                                headers: list[tuple[str, bytes]] | None = None) -> None:  # fmt: skip
            sent.append({"value": value, "headers": dict(headers or [])})

    dlq = DeadLetters(Producer(), "dlq", max_value_bytes=dlq_value_limit(2048))
    big, small = b"x" * 5000, b"y" * 10
    for off, value in enumerate((big, small)):
        await dlq.poison(topic="spans", partition=0, offset=off, key=None, value=value,
                         reason="too_large", detail="too big")  # fmt: skip
    ref = json.loads(sent[0]["value"])  # type: ignore[arg-type]
    assert sent[0]["headers"]["nexagauge.dlq.payload"] == b"reference"  # type: ignore[index]
    assert ref == {"source": "spans/0/0", "size": 5000, "sha256": hashlib.sha256(big).hexdigest()}
    assert sent[1]["value"] == small  # small ones stay byte for byte
