"""Re-evaluate dead-lettered evaluations after a fix (``nexagauge dlq replay``).

A failed evaluation's dead letter (:mod:`nexagauge.online.delivery.dlq`, record version 2) carries its
case, the evaluated span's identity and the node set it ran. :func:`replay_dead_letters` reads the
DLQ topic from the replay group's committed position (or from the beginning) until it is idle,
and for each such record:

1. builds the executor of the same node set (:class:`~nexagauge.online.plans.Executors`), so the
   configuration fingerprint - hence every evaluation id
   (``trace/span/metric/fingerprint``) - is the one ``serve`` would have used;
2. evaluates the case (the judge behind the same circuit breaker as ``serve``: a judge blip
   waits, it does not fail the replay);
3. emits the result as ``serve`` would (evaluation span + metrics, idempotent per evaluation id:
   replaying twice counts nothing twice), or, when it still fails, dead-letters it again (a new
   record at the end of the topic) unless ``emit_failed`` finalises it as a failed evaluation;
4. commits the replay group's offsets once every outcome is durable (emitted, or re-dead-
   lettered and acknowledged by the broker).

A record this run dead-lettered again carries the run's id (``nexagauge.dlq.replay_run``): when
the replay meets one it stops reading that partition and commits only up to it, so a still-failing
case is tried once per run and left for the next. (The end is found by reading until idle, not
from the end offsets at start: some Kafka-compatible brokers under-report them for multi-record
batches.)

Poison messages (raw OTLP the decoder rejected) and records without a case (too large,
``kafka.dlq_payload = "reference"``, or written before record version 2) are counted as not
replayable, by reason; they are never consumed silently.

Example (not run: needs a broker)::

    stats = await replay_dead_letters(load_settings())
    print(stats.summary())
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from nexagauge.emit.target import EvaluationTarget
from nexagauge.graph.runtime import Runtime
from nexagauge.online.delivery.consumer import client_kwargs
from nexagauge.online.delivery.dlq import (
    HEADER_PAYLOAD,
    HEADER_REASON,
    HEADER_REPLAY_RUN,
    HEADER_SOURCE,
    RECORD_VERSION,
    DeadLetters,
    FailedCase,
    dlq_value_limit,
)
from nexagauge.online.delivery.health import attach_breaker
from nexagauge.online.plans import Executors
from nexagauge.schema.case import EvalCase
from nexagauge.schema.scrub import CaseScrubber
from nexagauge.settings import Settings

log = logging.getLogger(__name__)

#: reasons of dead letters that hold an evaluation (the others are poison messages)
REPLAYABLE_REASONS = frozenset({"evaluation_failed", "emit_failed"})


@dataclass
class ReplayStats:
    """What a replay did (``summary()`` is what the CLI prints)."""

    read: int = 0
    evaluated: int = 0  # evaluated and emitted (duplicates of earlier emissions included)
    failed_again: int = 0  # dead-lettered again (still failing)
    emitted_failed: int = 0  # still failing, emitted as failed (``emit_failed=True``)
    replayable: int = 0  # records holding a case (what a dry run reports)
    republished: int = 0  # poison messages sent back to their source topic (``poison=True``)
    crashed: int = 0  # replays that raised (then nothing is committed: the next replay retries)
    not_replayable: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # first few error texts of failures

    def skip(self, why: str) -> None:
        self.not_replayable[why] = self.not_replayable.get(why, 0) + 1

    def summary(self) -> str:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(self.not_replayable.items()))
        crashed = f", {self.crashed} crashed (offsets not committed)" if self.crashed else ""
        return (
            f"read {self.read} dead letters ({self.replayable} replayable): "
            f"{self.evaluated} evaluated and emitted, "
            f"{self.failed_again} failed again (dead-lettered again), "
            f"{self.emitted_failed} emitted as failed, "
            f"{self.republished} poison messages republished, "
            f"{sum(self.not_replayable.values())} not replayable"
            + (f" ({skipped})" if skipped else "")
            + crashed
        )


def _header(rec: ConsumerRecord[Any, Any], name: str) -> str | None:
    for k, v in rec.headers or ():
        if k == name:
            return bytes(v).decode("utf-8", "replace")
    return None


@dataclass(frozen=True)
class _PoisonRef:
    """Where a poison message came from and the digest of its bytes."""

    topic: str
    partition: int
    offset: int
    sha256: str
    raw: bytes | None  # the message itself when the record holds it (payload ``raw``)


def _poison_ref(rec: ConsumerRecord[Any, Any]) -> _PoisonRef | None:
    """The source of a poison record (raw: its value; reference: ``{source, size, sha256}``)."""
    source = _header(rec, HEADER_SOURCE) or ""
    if (_header(rec, HEADER_PAYLOAD) or "raw") == "raw":
        raw = bytes(rec.value or b"")
        digest = hashlib.sha256(raw).hexdigest()
    else:
        try:
            ref = json.loads(rec.value or b"")
            source, digest, raw = str(ref["source"]), str(ref["sha256"]), None
        except (ValueError, KeyError, TypeError):
            return None
    topic, _, rest = source.rpartition("/")
    topic, _, part = topic.rpartition("/")
    try:
        return _PoisonRef(topic, int(part), int(rest), digest, raw) if topic else None
    except ValueError:
        return None


async def _read_source(consumer: AIOKafkaConsumer, ref: _PoisonRef) -> bytes | None:
    """The original message of a referenced poison record, if its topic still retains it."""
    tp = TopicPartition(ref.topic, ref.partition)
    consumer.assign([tp])
    consumer.seek(tp, ref.offset)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        batch = await consumer.getmany(tp, timeout_ms=500, max_records=1)
        for rec in batch.get(tp, []):
            if rec.offset == ref.offset and rec.value is not None:
                value = bytes(rec.value)
                return value if hashlib.sha256(value).hexdigest() == ref.sha256 else None
            return None  # the offset is gone (retention): the next record came back
    return None


def parse_dead_letter(rec: ConsumerRecord[Any, Any]) -> tuple[dict[str, Any] | None, str]:
    """The replayable body of a DLQ record, or ``None`` and why not."""
    reason = _header(rec, HEADER_REASON) or "unknown"
    if reason not in REPLAYABLE_REASONS:
        return None, f"poison:{reason}"
    try:
        body = json.loads(rec.value or b"")
    except ValueError:
        return None, "unreadable_record"
    if not isinstance(body, dict) or int(body.get("version") or 1) < RECORD_VERSION:
        return None, "no_case:old_record"
    if not isinstance(body.get("case"), dict):
        return None, "no_case:omitted"
    return body, reason


class Replayer:
    """Evaluates and emits the cases of dead letters (one per :meth:`replay` call)."""

    def __init__(
        self,
        settings: Settings,
        runtime: Runtime,
        emitter: Any,
        dlq: DeadLetters,
        *,
        emit_failed: bool = False,
        run_id: str = "",
    ) -> None:
        self.settings = settings
        self.run_id = run_id
        self.executors = Executors(settings, runtime)
        #: a dead letter written before evaluator-side scrubbing may hold raw text: scrubbed again
        self.scrubber = CaseScrubber(secrets=settings.online.scrub, pii=settings.online.scrub_pii)
        self.emitter = emitter
        self.dlq = dlq
        self.emit_failed = emit_failed
        self.stats = ReplayStats()

    async def replay(self, body: Mapping[str, Any], reason: str) -> None:
        """Evaluate one dead letter's case; emit it, or dead-letter it again."""
        from nexagauge.online.cases import errors_of

        nodes = body.get("nodes")
        ex, fp = self.executors.get(tuple(nodes) if nodes is not None else None)
        t = body.get("target") or {}
        target = EvaluationTarget(
            trace_id=str(body["trace_id"]),
            span_id=str(body["span_id"]),
            service=str(t.get("service") or "unknown"),
            span_name=str(t.get("span_name") or ""),
            end_time_unix_nano=int(t.get("end_time_unix_nano") or 0),
            model=t.get("model"),
            conversation_id=t.get("conversation_id"),
            sampling_rule=str(t.get("sampling_rule") or "default"),
            config_fingerprint=fp,
        )
        if body.get("config_fingerprint") and body["config_fingerprint"] != fp:
            log.warning(
                "dead letter %s was evaluated under configuration %s, replayed under %s "
                "(its evaluation ids change with it)",
                target.case_id,
                body["config_fingerprint"],
                fp,
            )
        try:
            case = self.scrubber.scrub(EvalCase.model_validate(body["case"]))
        except ValueError as e:
            log.warning("dead letter %s: its case is not valid (%s); skipped", target.case_id, e)
            self.stats.skip("invalid_case")
            return
        started = time.time_ns()
        result = await ex.run_case(case, 0)
        errors = errors_of(result)
        if errors and not self.emit_failed:
            await self.dlq.failed_evaluation(
                trace_id=target.trace_id,
                span_id=target.span_id,
                config_fingerprint=fp,
                errors=errors,
                reason=reason,
                payload=FailedCase(
                    case=case.model_dump(mode="json"),
                    target=t,
                    nodes=nodes,
                    sources=[tuple(s) for s in body.get("sources") or []],
                    max_case_bytes=self.settings.online.dlq_max_case_bytes,
                ),
                extra_headers=[(HEADER_REPLAY_RUN, self.run_id.encode())],
            )
            self.stats.failed_again += 1
            if len(self.stats.errors) < 5:
                self.stats.errors.append(f"{target.case_id}: " + "; ".join(errors.values()))
            return
        await self.emitter.emit(target, result, started_ns=started)
        if errors:
            self.stats.emitted_failed += 1
        else:
            self.stats.evaluated += 1


async def replay_dead_letters(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    emitter: Any = None,
    from_beginning: bool = False,
    limit: int | None = None,
    emit_failed: bool = False,
    dry_run: bool = False,
    poison: bool = False,
) -> ReplayStats:
    """Replay the DLQ topic up to its current end (see module docstring); returns what it did.

    The replay group is ``<kafka.group_id>-dlq-replay``; its committed offsets make a second
    replay start after the first (``from_beginning`` re-reads everything: evaluation ids keep it
    idempotent). ``limit`` stops after that many records (the rest stays for the next replay);
    ``dry_run`` only counts (no evaluation, no commit). ``poison``: also send every poison
    message kept byte for byte (``kafka.dlq_payload = "raw"``) back to the topic it came from,
    for ``serve`` to read again after a fix of what rejected it (a raised
    ``kafka.max_message_bytes``, a decoder fix); one that is still rejected comes back to the DLQ,
    and this run stops at it.
    """
    k, o = settings.kafka, settings.online
    own_runtime, own_emitter = runtime is None, emitter is None
    if runtime is None and not dry_run:
        runtime = Runtime.create(settings, service=True)
    if emitter is None and not dry_run:
        from nexagauge.emit.emitter import Emitter

        emitter = Emitter.from_settings(settings)
    consumer = AIOKafkaConsumer(
        group_id=f"{k.group_id}-dlq-replay",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=max(k.max_message_bytes, 1024 * 1024),
        fetch_max_wait_ms=k.fetch_max_wait_ms,
        **client_kwargs(k),
    )
    producer = AIOKafkaProducer(
        max_request_size=k.max_message_bytes, acks="all", **client_kwargs(k)
    )
    await consumer.start()
    await producer.start()
    breaker = None
    stats = ReplayStats()
    source_reader: AIOKafkaConsumer | None = None  # reads the originals of referenced poison
    try:
        await consumer.topics()  # a metadata refresh: a fresh client may not know the topic yet
        parts = consumer.partitions_for_topic(k.dlq_topic) or set()
        tps = [TopicPartition(k.dlq_topic, p) for p in sorted(parts)]
        if not tps:
            return stats
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        secrets = [x.get_secret_value() for x in (settings.judge.api_key, k.sasl_password) if x]
        dlq = DeadLetters(
            producer,
            k.dlq_topic,
            secrets,
            payload=k.dlq_payload,
            max_value_bytes=dlq_value_limit(k.max_message_bytes),
        )
        run_id = uuid.uuid4().hex
        replayer: Replayer | None = None
        if not dry_run:
            assert runtime is not None
            breaker = attach_breaker(runtime.judge, o)
            replayer = Replayer(
                settings, runtime, emitter, dlq, emit_failed=emit_failed, run_id=run_id
            )
            replayer.stats = stats
        sem = asyncio.Semaphore(o.max_in_flight)
        tasks: set[asyncio.Task[None]] = set()
        done_to: dict[TopicPartition, int] = {}
        stopped: set[TopicPartition] = set()  # reached this run's own re-dead-letters
        republished: set[str] = set()  # sha256 of the poison values this run sent back

        async def one(body: dict[str, Any], reason: str) -> None:
            assert replayer is not None
            async with sem:
                try:
                    await replayer.replay(body, reason)
                except Exception as e:
                    log.exception(
                        "replay of %s/%s failed", body.get("trace_id"), body.get("span_id")
                    )
                    stats.crashed += 1
                    if len(stats.errors) < 5:
                        stats.errors.append(f"{body.get('trace_id')}: {type(e).__name__}: {e}")

        idle_ms = max(500, 5 * k.fetch_max_wait_ms)
        while limit is None or stats.read < limit:
            batch = await consumer.getmany(timeout_ms=idle_ms, max_records=100)
            if not any(batch.values()):
                if tasks:  # replays in flight may still dead-letter again: wait, read once more
                    await asyncio.wait(set(tasks))
                    continue
                break
            for tp, recs in batch.items():
                for rec in recs:
                    if tp in stopped or (limit is not None and stats.read >= limit):
                        break
                    ref = _poison_ref(rec) if republished else None
                    ours = _header(rec, HEADER_REPLAY_RUN) == run_id or (
                        ref is not None and ref.sha256 in republished  # sent back, rejected again
                    )
                    if ours:
                        stopped.add(tp)  # left (uncommitted) for the next replay
                        consumer.pause(tp)
                        break
                    stats.read += 1
                    done_to[tp] = rec.offset + 1
                    body, why = parse_dead_letter(rec)
                    if body is None and poison and why.startswith("poison:"):
                        ref = _poison_ref(rec)
                        if ref is None:
                            stats.skip(f"{why}:no_source")
                        elif dry_run:
                            stats.skip(f"{why}:would_republish")
                        else:
                            if ref.raw is None:
                                if source_reader is None:
                                    source_reader = AIOKafkaConsumer(
                                        enable_auto_commit=False,
                                        max_partition_fetch_bytes=64 * 1024 * 1024,
                                        **client_kwargs(k),
                                    )
                                    await source_reader.start()
                                value = await _read_source(source_reader, ref)
                            else:
                                value = ref.raw
                            if value is None:
                                stats.skip(f"{why}:source_gone")
                                continue
                            await producer.send_and_wait(ref.topic, value=value, key=rec.key)
                            republished.add(ref.sha256)
                            stats.republished += 1
                        continue
                    if body is None:
                        stats.skip(why)
                        continue
                    stats.replayable += 1
                    if replayer is not None:
                        t = asyncio.ensure_future(one(body, why))
                        tasks.add(t)
                        t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        if not dry_run and done_to and not stats.crashed:
            await consumer.commit(done_to)
        return stats
    finally:
        if source_reader is not None:
            await source_reader.stop()
        if breaker is not None:
            await breaker.aclose()
        await consumer.stop()
        await producer.stop()
        if own_runtime and runtime is not None:
            await runtime.aclose()
        close = getattr(emitter, "aclose", None) if own_emitter else None
        if close is not None:
            await close()  # flushes the evaluation spans
