"""The conversation stage: ``conversation_relevance`` scored incrementally as turns arrive.

The evaluator produces one :class:`~nexagauge.online.conversations.turns.TurnRecord` per evaluated turn to
``kafka.turns_topic`` keyed by conversation id (:mod:`nexagauge.online.conversations.turns`), so every turn of a
conversation reaches exactly one member of this stage's consumer group
(``<group_id>-conversations``), which keeps the conversation's state
(:mod:`nexagauge.online.conversations.state`).

Per new turn the stage judges ONLY the window(s) the turn adds
(:func:`~nexagauge.nodes.conversation_relevance.new_windows`) in one judge call
(:func:`~nexagauge.nodes.conversation_relevance.judge_windows`), updates the running score
(relevant windows / windows so far; in ``scale_1_5`` mode the mean normalized window score) and
emits it through the :class:`~nexagauge.emit.emitter.Emitter`: the ``conversation_relevance``
score in ``nexagauge_score`` and an evaluation span, child of the turn's span. Its config
fingerprint is the conversation config's, so it never collides with the turn's own evaluation;
a redelivered turn is deduplicated by the emitter on ``(trace, span, metric, fingerprint)``.

**One owner.** Online, when this stage runs it is the only producer of ``conversation_relevance``:
the evaluator stage removes the metric from its per-trace node set
(:func:`~nexagauge.online.conversations.turns.trace_nodes`), so a GenAI chat span whose input messages carry
the history is not judged a second time, and the score is the same for every instrumentation.

**Budget and limits.** Every judge call goes through the service's judge client (its request/
token rate limits and concurrency) and the evaluator's :class:`~nexagauge.online.ingest.sampling.Limiter`
(USD budgets per hour/day and evaluations per second): a turn over budget keeps its place as
context but its window is not judged (skipped with the limiter's reason, e.g. ``budget_hour``),
and the judge spend of every judged window is recorded in the same budget.

**State that survives restarts and rebalances.** After a turn is emitted its conversation's new
state is written to a compacted changelog topic co-partitioned with the turns topic
(:class:`~nexagauge.online.delivery.changelog.Changelog`), and only then is the turn's offset released for
commit. On partition assignment the stage restores the partition's conversations from the
changelog before consuming it (Kafka Streams' restore step).

Ordering. Turns of a conversation may be produced out of order. A turn waits
``online.conversation_reorder_s`` after arrival; when it is due, it and every earlier-timed
pending turn are judged in turn-time order. A turn that arrives after a later turn was judged is
*late*: inserted at its place and judged, but windows already judged are not re-judged; a late
turn older than every kept turn is skipped (``late_turn``); a turn id seen before is skipped
(``duplicate_turn``), so redelivery never double counts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka import ConsumerRecord, TopicPartition

from nexagauge.emit.target import EvaluationTarget
from nexagauge.graph.skips import SkipTally
from nexagauge.nodes.conversation_relevance import METRIC
from nexagauge.online.conversations.judging import judge_turn, turn_result
from nexagauge.online.conversations.state import DUPLICATE, LATE, Added, ConversationState
from nexagauge.online.conversations.turns import (
    BadTurn,
    TurnPublisher,
    TurnRecord,
    conversation_fingerprint,
    conversations_possible,
)
from nexagauge.online.delivery.consumer import LagHooks
from nexagauge.online.delivery.offsets import OffsetTracker
from nexagauge.schema.case import ConversationRelevanceConfig

if TYPE_CHECKING:
    from nexagauge.online.delivery.changelog import Changelog
    from nexagauge.settings import Settings

log = logging.getLogger(__name__)

INVALID = "invalid_turn"
#: how long an assignment retries a failing changelog restore before going on without the state
RESTORE_PATIENCE_S = 60.0
DISABLED = "conversation_relevance disabled"

__all__ = [
    "DUPLICATE",
    "INVALID",
    "LATE",
    "Added",
    "BadTurn",
    "ConversationStage",
    "ConversationState",
    "TurnPublisher",
    "TurnRecord",
    "conversation_fingerprint",
    "conversations_possible",
]


def state_key(conversation_id: str, fingerprint: str) -> str:
    """The changelog key of a conversation's state (JSON pair: never ambiguous)."""
    return json.dumps([conversation_id, fingerprint], separators=(",", ":"))


@dataclass
class _Pending:
    turn: TurnRecord
    tp: tuple[str, int]
    offset: int
    epoch: int
    received: float


@dataclass
class _Conversation:
    state: ConversationState
    cfg: ConversationRelevanceConfig
    tp: tuple[str, int]
    pending: list[_Pending] = field(default_factory=list)
    ready: deque[_Pending] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        return not self.pending and not self.ready and self.task is None

    def queued_ids(self) -> Iterator[str]:
        for p in (*self.pending, *self.ready):
            yield p.turn.turn_id


@dataclass
class ConversationStats(SkipTally):
    """Plain counters (tests read them; Prometheus gets skips and scores via the emitter)."""

    messages: int = 0
    turns: int = 0
    judged: int = 0
    judge_calls: int = 0
    emitted: int = 0
    failed: int = 0
    late: int = 0
    evicted: int = 0
    restored: int = 0


@dataclass(eq=False, repr=False)
class ConversationStage(LagHooks):
    """Consumer-loop handler of ``kafka.turns_topic`` (see module docstring); identity equality.

    Example (not run: needs a broker)::

        stage = ConversationStage(settings, runtime, emitter, metrics=metrics)
        loop = ConsumerLoop(settings.kafka, [settings.kafka.turns_topic],
                            f"{settings.kafka.group_id}-conversations", stage)
    """

    settings: Settings
    runtime: Any
    emitter: Any
    _: KW_ONLY
    metrics: Any = None
    dlq: Any = None
    clock: Callable[[], float] = time.monotonic
    #: the evaluator's :class:`~nexagauge.online.ingest.sampling.Limiter` (budgets, evaluations/s)
    limiter: Any = None
    changelog: Changelog | None = None
    tracker: OffsetTracker = field(init=False, default_factory=OffsetTracker)
    stats: ConversationStats = field(init=False, default_factory=ConversationStats)
    states: OrderedDict[tuple[str, str], _Conversation] = field(
        init=False, default_factory=OrderedDict
    )
    _waiting: set[tuple[str, str]] = field(init=False, default_factory=set)
    _queued: int = field(init=False, default=0)
    _flush: bool = field(init=False, default=False)
    _cfgs: dict[str, ConversationRelevanceConfig] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.o = self.settings.online
        self._sem = asyncio.Semaphore(self.o.max_in_flight)

    # -- consumer-loop hooks ----------------------------------------------------------------
    async def handle(self, tp: TopicPartition, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        key = (tp.topic, tp.partition)
        now = self.clock()
        for rec in records:
            self.tracker.begin(key, rec.offset)
            self.stats.messages += 1
            try:
                turn = TurnRecord.from_bytes(rec.value)
            except BadTurn as e:
                log.warning("bad turn record %s/%d@%d: %s", tp.topic, tp.partition, rec.offset, e)
                self._skip(INVALID)
                self.tracker.release(key, rec.offset)
                continue
            conv = self._conversation(turn, key)
            if conv.state.seen(turn.turn_id) or turn.turn_id in set(conv.queued_ids()):
                self._skip(DUPLICATE)
                self.tracker.release(key, rec.offset)
                continue
            self.stats.turns += 1
            conv.pending.append(
                _Pending(turn, key, rec.offset, self.tracker.epoch(key), now)
            )  # the guard reference of ``begin`` is the turn's: released once emitted
            self._queued += 1
            self._waiting.add((turn.conversation_id, turn.fingerprint))
        if self.metrics is not None:
            self.metrics.messages_consumed(tp.topic, len(records))

    async def tick(self) -> None:
        now = self.clock()
        for ck in list(self._waiting):
            conv = self.states.get(ck)
            if conv is None:
                self._waiting.discard(ck)
                continue
            if conv.pending:
                wait = self.o.conversation_reorder_s
                due = [p for p in conv.pending if self._flush or now - p.received >= wait]
                if due:
                    cut = max((p.turn.time_ns, p.turn.turn_id) for p in due)
                    go = [p for p in conv.pending if (p.turn.time_ns, p.turn.turn_id) <= cut]
                    conv.pending = [p for p in conv.pending if p not in go]
                    conv.ready.extend(sorted(go, key=lambda p: (p.turn.time_ns, p.turn.turn_id)))
            if conv.ready and conv.task is None:
                conv.task = asyncio.ensure_future(self._work(conv))
            if not conv.pending:
                self._waiting.discard(ck)

    def saturated(self) -> bool:
        return self._queued >= self.o.conversation_max_pending

    async def assigned(self, tps: Sequence[TopicPartition]) -> None:
        """Restore the conversations of newly assigned partitions from the changelog."""
        if self.changelog is None:
            return
        topic = self.settings.kafka.turns_topic
        parts = sorted(tp.partition for tp in tps if tp.topic == topic)
        restored = None
        delay, deadline = 0.2, time.monotonic() + RESTORE_PATIENCE_S
        while restored is None:  # the partitions stay paused: retrying costs only latency
            try:
                restored = await self.changelog.restore(parts)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if time.monotonic() + delay > deadline:  # never block the group forever
                    log.error("conversation state of partitions %s not restored: %s", parts, e)
                    return
                log.warning("restore of partitions %s failed (%s); retrying", parts, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        n = 0
        for part, values in restored.items():
            for key, value in values.items():
                try:
                    cid, fp = json.loads(key)
                    cfg = ConversationRelevanceConfig.model_validate(value["config"])
                    state = ConversationState.from_dict(value["state"])
                except (ValueError, TypeError, KeyError) as e:
                    log.warning("changelog %s/%d key %.80r: %s", topic, part, key, e)
                    continue
                ck = (str(cid), str(fp))
                if ck not in self.states:
                    self.states[ck] = _Conversation(state, cfg, (topic, part))
                    n += 1
        self.stats.restored += n
        if n:
            log.info("restored %d conversations of partitions %s", n, parts)

    @property
    def queued(self) -> int:
        """Turns received but not yet emitted or skipped."""
        return self._queued

    def revoked(self, tps: Sequence[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in tps}
        for ck, conv in list(self.states.items()):
            if conv.tp in gone:
                self._queued -= len(conv.pending) + len(conv.ready)
                conv.pending, conv.ready = [], deque()
                del self.states[ck]
                self._waiting.discard(ck)

    async def drain(self, timeout_s: float) -> None:
        self._flush = True  # judge turns still waiting for the reorder delay now
        try:
            await self.tick()
        finally:
            self._flush = False
        tasks = [c.task for c in self.states.values() if c.task is not None and not c.task.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for t in pending:
            t.cancel()
        if pending:
            log.warning("drain deadline: %d conversations cancelled (re-delivered)", len(pending))
            await asyncio.gather(*pending, return_exceptions=True)

    # -- state ------------------------------------------------------------------------------
    def _config(self, turn: TurnRecord) -> ConversationRelevanceConfig:
        fp = turn.fingerprint
        cfg = self._cfgs.get(fp)
        if cfg is None:
            if len(self._cfgs) > 256:
                self._cfgs.clear()
            cfg = self._cfgs[fp] = ConversationRelevanceConfig.model_validate(turn.config)
        return cfg

    def _conversation(self, turn: TurnRecord, tp: tuple[str, int]) -> _Conversation:
        ck = (turn.conversation_id, turn.fingerprint)
        conv = self.states.get(ck)
        if conv is not None:
            self.states.move_to_end(ck)
            conv.tp = tp
            return conv
        cfg = self._config(turn)
        conv = self.states[ck] = _Conversation(ConversationState(cfg.window_size), cfg, tp)
        if len(self.states) > self.o.conversation_states:
            for old, c in list(self.states.items()):
                if len(self.states) <= self.o.conversation_states:
                    break
                if old != ck and c.idle:
                    del self.states[old]
                    self.stats.evicted += 1
        return conv

    def _skip(self, reason: str) -> None:
        self.stats.skip(reason)
        if self.metrics is not None:
            self.metrics.skip(reason)

    # -- judging and emission ---------------------------------------------------------------
    async def _work(self, conv: _Conversation) -> None:
        """Process the conversation's ready turns one at a time (windows depend on order)."""
        try:
            while conv.ready:
                p = conv.ready[0]
                try:
                    done = await self._process(conv, p.turn)
                except asyncio.CancelledError:
                    raise  # drain deadline: not released -> not committed -> re-delivered
                except Exception:  # one bad turn never stops the conversation or the stage
                    log.exception("conversation turn %s failed", p.turn.turn_id)
                    self.stats.failed += 1
                    done = True
                if conv.ready and conv.ready[0] is p:
                    conv.ready.popleft()
                    self._queued -= 1
                if done:
                    self.tracker.release(p.tp, p.offset, p.epoch)
        finally:
            conv.task = None

    async def _process(self, conv: _Conversation, turn: TurnRecord) -> bool:
        """Judge and emit one turn; True when its offset may be released."""
        why = self.runtime.llm_unavailable() if self.runtime is not None else "no judge configured"
        if why is not None:
            self._skip(why)
            return True
        if not conv.cfg.enabled:
            self._skip(DISABLED)
            return True
        added = conv.state.add(turn)
        if isinstance(added, str):
            self._skip(added)
            return True
        if added.late:
            self.stats.late += 1
        cfg = conv.cfg
        why = self.limiter.try_acquire() if self.limiter is not None else None
        if why is not None:  # over budget / rate: the turn stays as context, its window unjudged
            self._skip(why)
            return await self._save(conv, turn)
        spent = 0.0
        try:
            metric, cost, elapsed, started = await self._judge(conv, added)
            spent = cost.cost
        finally:
            if self.limiter is not None:
                self.limiter.finish(spent)
        if not await self._emit(turn, cfg, metric, cost, started, elapsed):
            return False
        return await self._save(conv, turn)

    async def _save(self, conv: _Conversation, turn: TurnRecord) -> bool:
        """Write the conversation's state to the changelog (before the offset is released)."""
        if self.changelog is None:
            return True
        ck = (turn.conversation_id, turn.fingerprint)
        if self.states.get(ck) is not conv:
            return False  # revoked meanwhile: the new owner re-reads the turn
        value = {"config": conv.cfg.model_dump(mode="json"), "state": conv.state.to_dict()}
        try:
            await self.changelog.write(conv.tp[1], state_key(*ck), value)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("conversation state of %.80r not saved (%s): re-delivered", ck[0], e)
            return False
        return True

    async def _judge(self, conv: _Conversation, added: Added) -> tuple[Any, Any, float, int]:
        """Judge the windows ``added`` brings; (metric result, cost, seconds, start ns)."""
        started = time.time_ns()
        t0 = time.monotonic()
        async with self._sem:
            metric, cost, ok = await judge_turn(self.runtime.judge, conv.cfg, conv.state, added)
        self.stats.judge_calls += 1
        if ok:
            self.stats.judged += 1
        else:
            self.stats.failed += 1
        return metric, cost, time.monotonic() - t0, started

    async def _emit(
        self,
        turn: TurnRecord,
        cfg: ConversationRelevanceConfig,
        metric: Any,
        cost: Any,
        started_ns: int,
        elapsed_s: float,
    ) -> bool:
        target, result = turn_result(turn, cfg, metric, cost, elapsed_s)
        delay = 0.2
        for attempt in range(1, self.o.emit_attempts + 1):
            try:
                await self.emitter.emit(target, result, started_ns=started_ns)
                self.stats.emitted += 1
                return True
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if attempt == self.o.emit_attempts:
                    log.error("conversation score of %s not emitted: %s", target.case_id, e)
                    return await self._dead_letter(target, str(e))
                await asyncio.sleep(delay)
                delay *= 2
        return False  # pragma: no cover (the loop returns)

    async def _dead_letter(self, target: EvaluationTarget, error: str) -> bool:
        if self.dlq is None:
            return True  # nowhere to keep it (unit tests): counted as failed, offset released
        try:
            await self.dlq.failed_evaluation(
                trace_id=target.trace_id,
                span_id=target.span_id,
                config_fingerprint=target.config_fingerprint,
                errors={METRIC: error},
                reason="emit_failed",
            )
        except Exception:
            log.exception("could not dead-letter the conversation score of %s", target.case_id)
            return False  # keep the offset: re-delivered after a restart
        if self.metrics is not None:
            self.metrics.dead_lettered("emit_failed")
        return True
