"""Broker trouble on real parts (Tansu, ``nexagauge serve`` / the service, aiokafka), each bounded:

- a dead broker: ``/readyz`` turns 503 naming the lost contact, ``nexagauge_broker_up`` drops to
  0 and the contact age grows, the log is not flooded (repeats are rate limited), and SIGTERM
  ends the real ``nexagauge serve`` process within the drain timeout (it hung > 60 s before);
- a broker restarted empty: the service re-creates its own topics, rewinds its consumers to the
  new logs and evaluates new traces (0 of them before);
- a network cut through a loopback TCP proxy (the broker keeps its data): readiness and the metric
  report the cut, and after it every trace is evaluated, none lost.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nexagauge.graph.runtime import Runtime
from nexagauge.online.service import OnlineService
from nexagauge.settings import Settings

from .kafka_helpers import build_traces, make_settings, produce, settings_dict, toml_config, topics

# processes driven against a clock (kills, SIGTERM and cuts mid-stream): never next to each other
# in a parallel run (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("online-delivery")]
REPO = Path(__file__).resolve().parents[2]
HEALTH = {"health_check_interval_s": 0.5, "broker_unreachable_after_s": 2.0}


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode()
    except OSError:
        return 0, ""


def _sample(text: str, name: str) -> float | None:
    m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


class Recorder:
    def __init__(self) -> None:
        self.cases: list[str] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        self.cases.append(target.case_id)


async def _topics(bootstrap: str) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


class SpanCases:
    """Case ids of the evaluation spans the service's real emitter exported (in memory)."""

    def __init__(self, svc: OnlineService) -> None:
        self.svc = svc

    @property
    def cases(self) -> list[str]:
        em = self.svc.emitter
        if em is None:
            return []
        spans = em.spans.memory.get_finished_spans()  # type: ignore[attr-defined]
        return [f"{s.context.trace_id:032x}:{s.parent.span_id:016x}" for s in spans if s.parent]


async def wait_for(pred: Any, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())


def test_dead_broker_is_visible_quiet_and_sigterm_exits_within_the_drain_timeout(
    tmp_path: Path,
) -> None:
    from support.broker import TansuBroker, free_port

    names = topics("dead")
    port = free_port()
    drain = 4.0
    with TansuBroker() as broker:
        asyncio.run(broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1}))
        d = settings_dict(broker.bootstrap, names, drain_timeout_s=drain)
        d["kafka"].update(HEALTH)
        d["emit"] = {"metrics_port": port, "span_exporter": "none", "dedupe_journal": False}
        cfg = toml_config(tmp_path / "nexagauge.toml", d)
        log_path = tmp_path / "serve.log"
        with log_path.open("wb") as log:
            serve = subprocess.Popen(
                [sys.executable, "-m", "nexagauge", "serve", "--config", str(cfg)],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while _get(port, "/readyz")[0] != 200:
                assert serve.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "serve never became ready"
                time.sleep(0.2)
            assert _sample(_get(port, "/metrics")[1], "nexagauge_broker_up") == 1.0
            broker.stop()
            deadline = time.monotonic() + 10
            while (ready := _get(port, "/readyz"))[0] != 503:
                assert time.monotonic() < deadline, f"/readyz still {ready} with the broker dead"
                time.sleep(0.2)
            assert "no broker contact" in ready[1]
            metrics = _get(port, "/metrics")[1]
            assert _sample(metrics, "nexagauge_broker_up") == 0.0
            age = _sample(metrics, "nexagauge_broker_contact_age_seconds")
            assert age is not None and age >= 2.0
            # the log is not flooded: ~60 ERROR lines a second from aiokafka before
            before = log_path.read_text().count("\n")
            time.sleep(5)
            lines = log_path.read_text().splitlines()[before:]
            assert len(lines) < 40, "\n".join(lines[-40:])
            t0 = time.monotonic()
            serve.send_signal(signal.SIGTERM)
            rc = serve.wait(timeout=drain + 10)
            took = time.monotonic() - t0
            assert took <= drain + 1.5, f"SIGTERM took {took:.1f}s (drain timeout {drain}s)"
            assert rc in (0, 1)
        finally:
            if serve.poll() is None:
                serve.kill()
                serve.wait()


async def test_broker_restarted_empty_gets_its_topics_back_and_new_traces_evaluated() -> None:
    from support.broker import TansuBroker

    from nexagauge.emit.prometheus import EvaluatorMetrics

    names = topics("empty")
    with TansuBroker() as broker:
        await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
        d = settings_dict(broker.bootstrap, names, drain_timeout_s=4.0)
        d["kafka"].update(HEALTH)
        d["emit"] = {"span_exporter": "memory", "dedupe_journal": False}
        settings = Settings(**d)
        metrics = EvaluatorMetrics()
        # the real emitter (built by the service): group-wide emitted keys on their own topic
        svc = OnlineService(
            settings,
            runtime=Runtime.create(settings, use_cache=False),
            metrics=metrics,
            serve_http=False,
        )
        rec = SpanCases(svc)
        await svc.start()
        stop = asyncio.Event()
        runner = asyncio.ensure_future(svc.run_until(stop))
        try:
            msgs, exp1 = build_traces(10, seed=1)
            await produce(broker.bootstrap, names["traces_topic"], msgs, 2)
            assert await wait_for(lambda: set(rec.cases) >= set(exp1), 30)
            broker.restart()  # in-memory storage: every topic, message and offset is gone
            await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
            msgs, exp2 = build_traces(10, seed=1)  # same partitions as before: same offsets
            await produce(broker.bootstrap, names["traces_topic"], msgs, 2)
            assert await wait_for(lambda: set(rec.cases) >= set(exp1) | set(exp2), 40), (
                f"{len(set(rec.cases) & set(exp2))}/10 new traces evaluated"
            )
            assert svc.monitor is not None
            # the DLQ (no client touches it) is re-created by the monitor; the others may be
            # auto-created by the broker on a client's metadata request first: all exist again
            assert names["dlq_topic"] in svc.monitor.recreated
            recreated = metrics.registry.get_sample_value(
                "nexagauge_topics_recreated_total", {"topic": names["dlq_topic"]}
            )
            assert recreated == 1.0
            own = {names["dlq_topic"], names["rekeyed_topic"], settings.kafka.emitted_topic}
            assert own <= await _topics(broker.bootstrap)
            assert not [c for c, n in Counter(rec.cases).items() if n > 1]
            assert svc.readiness()[0]
        finally:
            stop.set()
            await runner


async def test_network_cut_is_reported_and_loses_nothing() -> None:
    from support.tcp_proxy import proxied_broker

    from nexagauge.emit.prometheus import EvaluatorMetrics

    names = topics("cut")
    broker, proxy = proxied_broker()
    with broker, proxy:
        await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
        settings = make_settings(broker.bootstrap, names, drain_timeout_s=4.0)
        settings.kafka = settings.kafka.model_copy(update=HEALTH)
        rec, metrics = Recorder(), EvaluatorMetrics()
        svc = OnlineService(
            settings,
            runtime=Runtime.create(settings, use_cache=False),
            emitter=rec,
            metrics=metrics,
            serve_http=False,
        )
        await svc.start()
        stop = asyncio.Event()
        runner = asyncio.ensure_future(svc.run_until(stop))
        try:
            msgs, exp1 = build_traces(20, seed=3)
            await produce(broker.bootstrap, names["traces_topic"], msgs, 2)
            assert await wait_for(lambda: len(set(rec.cases)) >= 5, 30)
            assert proxy.connections > 0  # every client goes through the proxy
            proxy.cut()  # mid-stream: fetches, produces and commits fail
            assert await wait_for(lambda: not svc.readiness()[0], 10), svc.readiness()
            assert "no broker contact" in svc.readiness()[1]
            assert metrics.registry.get_sample_value("nexagauge_broker_up") == 0.0
            age = metrics.registry.get_sample_value("nexagauge_broker_contact_age_seconds")
            assert age is not None and age >= 2.0
            await asyncio.sleep(3)  # a few seconds of outage
            proxy.restore()
            assert await wait_for(lambda: svc.readiness()[0], 20), svc.readiness()
            assert metrics.registry.get_sample_value("nexagauge_broker_up") == 1.0
            msgs, exp2 = build_traces(10, seed=4)
            await produce(broker.bootstrap, names["traces_topic"], msgs, 2)
            expected = set(exp1) | set(exp2)
            assert await wait_for(lambda: set(rec.cases) >= expected, 40), (
                f"{len(set(rec.cases) & expected)}/{len(expected)} evaluated"
            )
            assert svc.monitor is not None and svc.monitor.recreated == []  # data was kept
        finally:
            stop.set()
            await runner
