"""Helpers of the Kafka integration tests: produce OTLP traces the way a collector without
trace-id keying does (spans of one trace in different messages and partitions), read topics,
and settings for the evaluator under test."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from nexagauge.settings import Settings

from .otlp import rand_tid, sdk_turn, sid, traces_request


def topics(prefix: str = "t") -> dict[str, str]:
    """Fresh names for every topic and group the evaluator uses (its ``[kafka]`` table): tests
    share the session's broker, never a topic (``kafka_broker`` in ``tests/conftest.py``)."""
    u = uuid.uuid4().hex[:8]
    return {
        "traces_topic": f"{prefix}-spans-{u}",
        "logs_topic": f"{prefix}-logs-{u}",
        "rekeyed_topic": f"{prefix}-bytrace-{u}",
        "dlq_topic": f"{prefix}-dlq-{u}",
        "turns_topic": f"{prefix}-turns-{u}",
        "conversation_changelog_topic": f"{prefix}-turns-changelog-{u}",
        "emitted_topic": f"{prefix}-emitted-{u}",
        "group_id": f"{prefix}-group-{u}",
    }


def settings_dict(bootstrap: str, names: dict[str, str], **online: Any) -> dict[str, Any]:
    return {
        "kafka": {
            "bootstrap_servers": bootstrap,
            **names,
            "fetch_max_wait_ms": 20,
            "topic_partitions": 4,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
        },
        "online": {
            "nodes": ["relevance"],
            "trace_grace_s": 0.2,
            "trace_inactivity_s": 3.0,
            "commit_interval_s": 0.2,
            "drain_timeout_s": 10.0,
            **online,
        },
        "sampling": {"default_rate": 1.0},
        "judge": {"mode": "none"},
        "cache": {"enabled": False},
        "emit": {"metrics_port": 0},
    }


def make_settings(bootstrap: str, names: dict[str, str], **online: Any) -> Settings:
    return Settings(**settings_dict(bootstrap, names, **online))


def toml_config(path: Path, d: dict[str, Any]) -> Path:
    """Write settings as TOML (flat tables of scalars and lists are all these tests need)."""

    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = []
    for section, kv in d.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {val(v)}" for k, v in kv.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


#: the judge key the end-to-end configs carry (tests check it never reaches a log or a record)
E2E_JUDGE_KEY = "sk-test-judge-key-not-real-0001"


def serve_settings(
    *,
    bootstrap: str,
    names: dict[str, str],
    judge_url: str,
    otlp_endpoint: str,
    metrics_port: int,
    online: dict[str, Any],
    kafka: dict[str, Any] | None = None,
    sampling: dict[str, Any] | None = None,
    judge: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings an end-to-end ``nexagauge serve`` test starts from (pass to
    :func:`toml_config`): fresh topics ``names`` on a 3-partition broker with short fetch waits,
    every case sampled, an LLM judge at ``judge_url`` (one retry), no cache, evaluation spans and
    records to ``otlp_endpoint``; ``online``/``kafka``/``sampling``/``judge`` add or override keys.
    """
    return {
        "kafka": {
            "bootstrap_servers": bootstrap,
            **names,
            "fetch_max_wait_ms": 20,
            "topic_partitions": 3,
            **(kafka or {}),
        },
        "online": {"trace_inactivity_s": 5.0, "commit_interval_s": 0.2, **online},
        "sampling": {"default_rate": 1.0, **(sampling or {})},
        "judge": {
            "base_url": judge_url,
            "api_key": E2E_JUDGE_KEY,
            "mode": "llm",
            "max_retries": 1,
            **(judge or {}),
        },
        "cache": {"enabled": False},
        "emit": {
            "otlp_endpoint": otlp_endpoint,
            "metrics_port": metrics_port,
            "dedupe_journal": False,
        },
    }


def write_serve_config(
    directory: Path,
    broker: Any,
    names: dict[str, str],
    *,
    judge_server: Any,
    receiver: Any,
    metrics_port: int,
    partitions: dict[str, int] | None = None,
    **settings: Any,
) -> Path:
    """Create an end-to-end test's fresh topics on ``broker`` (default: the traces topic with 3
    partitions, the logs topic with 1) and write its ``nexagauge serve`` config to
    ``directory``: :func:`serve_settings` with the judge at ``judge_server.base_url`` and
    evaluation output to the OTLP ``receiver``; ``settings``: its ``online``/``kafka``/``sampling``/
    ``judge`` keys."""
    asyncio.run(
        broker.create_topics(partitions or {names["traces_topic"]: 3, names["logs_topic"]: 1})
    )
    return toml_config(
        directory / "nexagauge.toml",
        serve_settings(
            bootstrap=broker.bootstrap,
            names=names,
            judge_url=judge_server.base_url,
            otlp_endpoint=receiver.endpoint_grpc,
            metrics_port=metrics_port,
            **settings,
        ),
    )


def build_traces(n: int, seed: int = 0) -> tuple[list[bytes], list[str]]:
    """Messages holding spans of ``n`` traces, each trace split over two messages.

    Returns (messages, expected case ids). Children of a group of traces go into one message,
    their roots into another, so every message mixes traces and every trace spans messages.
    """
    rnd = random.Random(seed)
    msgs: list[bytes] = []
    expected: list[str] = []
    group: list[list[dict[str, Any]]] = []
    for i in range(n):
        t = rand_tid()
        spans = sdk_turn(t, f"Question {i}?", f"Answer {i}.", docs=[f"Document {i}."])
        group.append(spans)
        expected.append(f"{t.hex()}:{sid(1).hex()}")
        if len(group) == 5 or i == n - 1:
            msgs.append(traces_request([g[1] for g in group]))
            msgs.append(traces_request([g[0] for g in group]))
            group = []
    _ = rnd
    return msgs, expected


async def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    partitions: int,
    *,
    seed: int = 0,
    delay_s: float = 0.0,
) -> None:
    """Produce without keys to random partitions (as rotel does)."""
    rnd = random.Random(seed)
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20, acks="all")
    await p.start()
    try:
        for v in values:
            await p.send_and_wait(topic, v, partition=rnd.randrange(partitions))
            if delay_s:
                await asyncio.sleep(delay_s)
    finally:
        await p.stop()


async def read_all(bootstrap: str, topic: str, expect: int, within_s: float = 20.0) -> list[Any]:
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=20,
        max_partition_fetch_bytes=8 << 20,
    )
    await c.start()
    out: list[Any] = []
    try:
        parts = c.partitions_for_topic(topic) or set()
        for _ in range(50):
            if parts:
                break
            await c._client.force_metadata_update()
            parts = c.partitions_for_topic(topic) or set()
            await asyncio.sleep(0.1)
        c.assign([TopicPartition(topic, p) for p in parts])
        deadline = time.monotonic() + within_s
        while len(out) < expect and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=200)
            for recs in batch.values():
                out.extend(recs)
    finally:
        await c.stop()
    return out


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        out = {}
        for p in range(partitions):
            out[p] = await c.committed(TopicPartition(topic, p)) or 0
        return out
    finally:
        await c.stop()


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await c.end_offsets(tps)
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        await c.stop()
