"""Permanent failures are dead-lettered with their case, and ``nexagauge dlq replay`` evaluates
them after the fix - on real parts: Tansu, the service, the real ``openai`` client over loopback
HTTP, the real CLI exporting evaluation spans to an OTLP receiver.

Per case id: the good traces are evaluated once by ``serve``; the broken ones are never emitted by
``serve``, stay dead-lettered while the judge still rejects them, are evaluated once by the
replay after the fix, and a replay from the beginning emits each exactly once more in total.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nexagauge.online.replay import replay_dead_letters
from nexagauge.online.service import OnlineService
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

from .kafka_helpers import produce, read_all, settings_dict, toml_config, topics
from .otlp import rand_tid, sdk_turn, sid, traces_request

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self) -> None:
        self.cases: list[str] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        self.cases.append(target.case_id)


async def wait_for(pred: Any, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())


def _traces(n: int, broken: set[int]) -> tuple[list[bytes], list[str], list[str]]:
    msgs, good, bad = [], [], []
    for i in range(n):
        t = rand_tid()
        q = f"BROKEN question {i}?" if i in broken else f"Question {i}?"
        msgs.append(traces_request(sdk_turn(t, q, f"Answer {i}.", docs=[f"Doc {i}."])))
        (bad if i in broken else good).append(f"{t.hex()}:{sid(1).hex()}")
    return msgs, good, bad


def test_permanent_failures_are_replayed_after_the_fix(broker: Any, tmp_path: Path) -> None:
    from support.openai_server import OpenAIServer, Reply
    from support.otlp_receiver import OtlpReceiver

    names = topics("replay")
    asyncio.run(broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1}))
    state = {"broken": True}

    def judge_handler(req: Any) -> Reply | None:
        if state["broken"] and "BROKEN" in req.text:  # e.g. a prompt the model rejects
            return Reply(status=400, error_message="context_length_exceeded")
        return None

    with OpenAIServer(handler=judge_handler) as judge, OtlpReceiver() as rx:
        d = settings_dict(broker.bootstrap, names)
        d["judge"] = {"mode": "llm", "base_url": judge.base_url, "api_key": "sk-test-key-123456"}
        d["emit"] = {"otlp_endpoint": rx.endpoint_grpc, "dedupe_journal": False}
        settings = Settings(**d)
        msgs, good, bad = _traces(8, broken={1, 4, 6})

        async def serve_phase() -> None:
            rec = Recorder()
            svc = OnlineService(settings, emitter=rec, serve_http=False)
            await svc.start()
            stop = asyncio.Event()
            runner = asyncio.ensure_future(svc.run_until(stop))
            try:
                await produce(broker.bootstrap, names["traces_topic"], msgs, 2)
                assert svc.stage is not None
                assert await wait_for(
                    lambda: set(rec.cases) >= set(good) and svc.stage.stats.failed == 3, 30
                ), (rec.cases, svc.stage.stats)
                await asyncio.sleep(0.5)
                assert sorted(rec.cases) == sorted(good)  # the broken ones are not emitted
            finally:
                stop.set()
                await runner

        asyncio.run(serve_phase())

        # still broken: every dead letter is dead-lettered again, nothing emitted
        rec1 = Recorder()
        s1 = asyncio.run(replay_dead_letters(settings, emitter=rec1))
        assert (s1.read, s1.replayable, s1.failed_again, s1.evaluated) == (3, 3, 3, 0), s1
        assert rec1.cases == [] and "context_length_exceeded" in s1.errors[0]

        state["broken"] = False  # the fix
        rec2 = Recorder()
        s2 = asyncio.run(replay_dead_letters(settings, emitter=rec2))
        assert (s2.read, s2.evaluated, s2.failed_again) == (3, 3, 0), s2  # the re-dead-lettered
        assert sorted(rec2.cases) == sorted(bad)
        s3 = asyncio.run(replay_dead_letters(settings, emitter=Recorder()))
        assert s3.read == 0  # committed: a second replay has nothing to do

        # the CLI, from the beginning (6 dead letters for 3 cases), through the real emitter
        cfg = toml_config(tmp_path / "nexagauge.toml", {k: v for k, v in d.items() if v})
        env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        dry = subprocess.run(
            [sys.executable, "-m", "nexagauge", "dlq", "replay", "--config", str(cfg),
             "--from-beginning", "--dry-run"],
            cwd=REPO, capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert dry.returncode == 0, dry.stderr[-2000:]
        assert "read 6 dead letters (6 replayable)" in dry.stdout, dry.stdout
        cli = subprocess.run(
            [sys.executable, "-m", "nexagauge", "dlq", "replay", "--config", str(cfg),
             "--from-beginning"],
            cwd=REPO, capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr[-2000:]
        assert "6 evaluated and emitted" in cli.stdout, cli.stdout
        evals = rx.wait_for_spans(
            lambda s: s.name == C.NG_EVALUATION_SPAN_NAME, timeout=20, count=3
        )
        time.sleep(0.5)  # nothing more arrives: the duplicates were not exported
        evals = [s for s in rx.spans if s.name == C.NG_EVALUATION_SPAN_NAME]
        by_case = Counter(f"{s.trace_id}:{s.parent_span_id}" for s in evals)
        assert by_case == Counter(bad), by_case  # each replayed case exactly once


def test_poison_messages_go_back_to_their_topic_after_the_fix(broker: Any) -> None:
    """A message over ``kafka.max_message_bytes`` is dead-lettered as a reference (the producer
    cannot forward it: before, it was never dead-lettered and its partition never committed past
    it); after the limit is raised, ``replay --poison`` reads the original from its topic, sends it
    back, and ``serve`` evaluates its trace."""
    names = topics("poison")
    asyncio.run(broker.create_topics({names["traces_topic"]: 1, names["logs_topic"]: 1}))
    big_t, small_t = rand_tid(), rand_tid()
    big = traces_request(sdk_turn(big_t, "Long question?", "A long answer. " * 200))
    small = traces_request(sdk_turn(small_t, "Q?", "A."))
    assert len(small) < 1024 < len(big)
    strict = Settings(**settings_dict(broker.bootstrap, names))
    strict.kafka = strict.kafka.model_copy(update={"max_message_bytes": 1024})
    fixed = Settings(**settings_dict(broker.bootstrap, names))
    rec = Recorder()

    async def serve_until(settings: Settings, done: Any) -> OnlineService:
        svc = OnlineService(settings, emitter=rec, serve_http=False)
        await svc.start()
        stop = asyncio.Event()
        runner = asyncio.ensure_future(svc.run_until(stop))
        try:
            assert await wait_for(lambda: done(svc), 30), (rec.cases, svc.rekey_stage.poison)
        finally:
            stop.set()
            await runner
        return svc

    async def first() -> None:
        await produce(broker.bootstrap, names["traces_topic"], [small, big], 1)
        await serve_until(strict, lambda s: len(rec.cases) == 1 and s.rekey_stage.poison == 1)

    asyncio.run(first())
    assert rec.cases == [f"{small_t.hex()}:{sid(1).hex()}"]
    # the message was too large to forward: the DLQ holds a reference, the original stays put
    [dl] = asyncio.run(read_all(broker.bootstrap, names["dlq_topic"], 1))
    assert dict(dl.headers)["nexagauge.dlq.payload"] == b"reference" and len(dl.value) < 300
    dry = asyncio.run(replay_dead_letters(fixed, emitter=Recorder(), poison=True, dry_run=True))
    assert dry.not_replayable == {"poison:too_large:would_republish": 1}, dry
    stats = asyncio.run(replay_dead_letters(fixed, emitter=Recorder(), poison=True))
    assert (stats.read, stats.republished) == (1, 1), stats
    big_case = f"{big_t.hex()}:{sid(1).hex()}"
    asyncio.run(serve_until(fixed, lambda s: big_case in rec.cases))
    assert sorted(rec.cases) == sorted([f"{small_t.hex()}:{sid(1).hex()}", big_case])
