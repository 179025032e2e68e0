"""The conversation stage: ``conversation_relevance`` scored incrementally as turns arrive.

Why a repartition. The evaluator consumes spans keyed by *trace* id, so the turns (traces) of one
conversation land on different partitions and, with several evaluator processes, on different
consumers. No single consumer sees the whole conversation. Like a Kafka Streams repartition, the
evaluator therefore produces a small :class:`TurnRecord` per evaluated turn (conversation id,
turn time = the turn span's end, trace/span ids, input, output, labels, the conversation config
and its fingerprint) to ``kafka.turns_topic`` **keyed by conversation id**. Kafka's key
partitioning sends every turn of a conversation to one partition, hence to exactly one member of
the conversation stage's consumer group (``<group_id>-conversations``), which keeps the
conversation's state. Windows are therefore complete and correct with any number of evaluator or
conversation consumers; with one process owning every partition the same code runs unchanged.

Per new turn the stage judges ONLY the window(s) the turn adds
(:func:`~nexagauge.nodes.conversation_relevance.new_windows`, per-turn windows) in one judge call
(:func:`~nexagauge.nodes.conversation_relevance.judge_windows`), updates the running score
(relevant windows / windows so far; in ``scale_1_5`` mode the mean normalized window score) and
emits it through the :class:`~nexagauge.emit.emitter.Emitter`: the ``conversation_relevance``
score in ``nexagauge_score`` and an evaluation span, child of the turn's span, whose
``score.conversation_relevance`` is the running score and whose explanation names the window and
its verdict. Its config fingerprint is the conversation config's (not the trace evaluation's), so
it never collides with the turn's own evaluation; a redelivered turn is deduplicated by the
emitter on ``(trace, span, conversation_relevance, fingerprint)``.

State (in memory, bounded): an LRU of ``online.conversation_states`` conversations, each holding
its last ``window_size`` turns ordered by (turn time, turn id), the ids it has seen (bounded) and
the running counters.

Ordering. Turns of a conversation may be produced out of order (their traces complete at
different times on different evaluator consumers). A turn waits ``online.conversation_reorder_s``
after arrival; when it is due, it and every earlier-timed pending turn are judged in turn-time
order. A turn that still arrives after a later turn was judged is *late*: it is inserted at its
place (its window is its own predecessors) and judged, but windows already judged are not
re-judged; a late turn older than every kept turn of a trimmed conversation has no context left
and is skipped (``late_turn``). A turn id seen before is skipped (``duplicate_turn``), so
redelivery never double counts.

At-least-once: an offset of the turns topic is released (hence committable) only after the
turn's window was emitted (or the turn skipped); a crash re-delivers the unfinished suffix.
Limits (documented in docs/online.md): the state is not persisted, so after a restart or a
rebalance a conversation continues from its next turn with a fresh running score and without
earlier context; an evicted conversation likewise. Without an LLM judge (none, or the local
judge) every turn is counted as skipped with the reason and nothing is emitted.

Example:
    >>> s = ConversationState(size=2)
    >>> t = lambda i: TurnRecord("c", i, f"{i:032x}", f"{i:016x}", "q", "a", "svc", "chat")
    >>> [a.windows for a in (s.add(t(1)), s.add(t(2)), s.add(t(3)))]
    [[Window(start=0, end=0)], [Window(start=0, end=1)], [Window(start=1, end=2)]]
    >>> s.add(t(2))
    'duplicate_turn'
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, overload

from aiokafka import ConsumerRecord, TopicPartition

from nexagauge.emit.target import EvaluationTarget, config_fingerprint
from nexagauge.nodes.conversation_relevance import (
    CATEGORY,
    METRIC,
    PROMPT,
    Window,
    judge_windows,
    new_windows,
    score_windows,
    window_score,
)
from nexagauge.online.offsets import OffsetTracker
from nexagauge.schema.case import ConversationRelevanceConfig, EvalCase, ScoringMode, Turn

if TYPE_CHECKING:
    from nexagauge.online.extract import ExtractedCase
    from nexagauge.settings import Settings

log = logging.getLogger(__name__)

DUPLICATE = "duplicate_turn"
LATE = "late_turn"
INVALID = "invalid_turn"
DISABLED = "conversation_relevance disabled"


# --------------------------------------------------------------------------------------------
# the turn record (the repartition topic's message)
# --------------------------------------------------------------------------------------------
class BadTurn(ValueError):
    """A turns-topic message that is not a valid :class:`TurnRecord` (names the field)."""


@dataclass(frozen=True)
class TurnRecord:
    """One turn of a conversation, as produced to ``kafka.turns_topic`` (JSON, key = conversation).

    Example:
        >>> r = TurnRecord("c1", 5, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331",
        ...                "hi", "hello", "svc", "chat")
        >>> TurnRecord.from_bytes(r.to_bytes()) == r
        True
    """

    conversation_id: str
    time_ns: int
    trace_id: str
    span_id: str
    input: str
    output: str
    service: str
    span_name: str
    model: str | None = None
    #: the ``conversation_relevance`` block of the turn's case (window size, mode, rubric ...)
    config: dict[str, Any] = field(default_factory=dict)
    #: :func:`conversation_fingerprint` of ``config`` and the judge model
    fingerprint: str = ""

    @property
    def turn_id(self) -> str:
        return f"{self.trace_id}:{self.span_id}"

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes | None) -> TurnRecord:
        """Parse and validate a message value; :class:`BadTurn` names the offending field."""
        if not data:
            raise BadTurn("empty turn record")
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadTurn(f"turn record is not JSON: {e}") from None
        if not isinstance(d, dict):
            raise BadTurn("turn record: expected a JSON object")
        strings = ("conversation_id", "trace_id", "span_id", "input", "output", "service")
        for k in (*strings, "span_name"):
            if not isinstance(d.get(k), str):
                raise BadTurn(f"turn record field {k!r}: expected a string")
        for k in ("conversation_id", "trace_id", "span_id"):
            if not d[k]:
                raise BadTurn(f"turn record field {k!r}: empty")
        t = d.get("time_ns")
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            raise BadTurn("turn record field 'time_ns': expected a non-negative integer")
        if d.get("model") is not None and not isinstance(d["model"], str):
            raise BadTurn("turn record field 'model': expected a string or null")
        cfg = d.get("config", {})
        if not isinstance(cfg, dict):
            raise BadTurn("turn record field 'config': expected an object")
        try:
            ConversationRelevanceConfig.model_validate(cfg)
        except ValueError as e:
            raise BadTurn(f"turn record field 'config': {e}") from None
        fp = d.get("fingerprint", "")
        if not isinstance(fp, str):
            raise BadTurn("turn record field 'fingerprint': expected a string")
        return cls(
            conversation_id=d["conversation_id"],
            time_ns=t,
            trace_id=d["trace_id"],
            span_id=d["span_id"],
            input=d["input"],
            output=d["output"],
            service=d["service"],
            span_name=d["span_name"],
            model=d.get("model"),
            config=cfg,
            fingerprint=fp,
        )


def conversation_fingerprint(cfg: ConversationRelevanceConfig, judge_model: str | None) -> str:
    """Fingerprint of what produces an online conversation score (config, prompt, judge model).

    Example:
        >>> a = conversation_fingerprint(ConversationRelevanceConfig(), "m")
        >>> a == conversation_fingerprint(ConversationRelevanceConfig(window_size=3), "m")
        False
    """
    from nexagauge.judge.promptlib import load_prompt

    knobs = {"online": "incremental", "prompt": load_prompt(PROMPT).id}
    knobs.update(cfg.model_dump(mode="json"))
    return config_fingerprint([METRIC], knobs, judge_model)


def wants_conversation(nodes: Sequence[str] | None) -> bool:
    """Whether a node selection (``None`` = every metric node) includes conversation relevance."""
    return nodes is None or METRIC in nodes


def conversations_possible(settings: Settings) -> bool:
    """Whether any sampling decision can include conversation relevance (the stage is needed)."""
    if not settings.online.conversations:
        return False
    if wants_conversation(settings.online.nodes):
        return True
    return any(r.nodes is not None and METRIC in r.nodes for r in settings.sampling.rules)


def turn_record(ec: ExtractedCase, judge_model: str | None) -> TurnRecord | None:
    """The turn record of an extracted case, or ``None`` (no conversation id, no input, or
    conversation relevance disabled for the case)."""
    case = ec.case
    cfg = case.conversation_relevance
    if not ec.conversation_id or case.input is None or not cfg.enabled:
        return None
    return TurnRecord(
        conversation_id=ec.conversation_id,
        time_ns=int(ec.span.end_ns),
        trace_id=ec.span.trace_hex,
        span_id=ec.span.span_hex,
        input=case.input,
        output=case.output,
        service=ec.span.service,
        span_name=ec.span.name,
        model=ec.model,
        config=cfg.model_dump(mode="json"),
        fingerprint=conversation_fingerprint(cfg, judge_model),
    )


class TurnPublisher:
    """Produces turn records keyed by conversation id (the evaluator stage calls :meth:`publish`).

    Args:
        producer: an ``AIOKafkaProducer`` (anything with ``send_and_wait(topic, value, key=)``).
        topic: ``kafka.turns_topic``.
        judge_model: the conversation judge model (part of the fingerprint), ``None`` without judge.
        default_nodes: ``online.nodes`` (the node set of a decision without its own ``nodes``).
    """

    def __init__(
        self,
        producer: Any,
        topic: str,
        judge_model: str | None,
        default_nodes: Sequence[str] | None = None,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.judge_model = judge_model
        self.default_nodes = tuple(default_nodes) if default_nodes is not None else None
        self.published = 0

    async def publish(self, ec: ExtractedCase, nodes: Sequence[str] | None) -> bool:
        """Produce the turn of ``ec`` if its decision includes conversation relevance."""
        if not wants_conversation(nodes if nodes is not None else self.default_nodes):
            return False
        rec = turn_record(ec, self.judge_model)
        if rec is None:
            return False
        await self.producer.send_and_wait(
            self.topic, rec.to_bytes(), key=rec.conversation_id.encode("utf-8")
        )
        self.published += 1
        return True


# --------------------------------------------------------------------------------------------
# per-conversation state
# --------------------------------------------------------------------------------------------
class TurnTail(Sequence[Turn]):
    """The kept turns of a conversation, indexed by their position in the whole conversation.

    ``judge_windows`` numbers turns by index, so the judge sees "turn 7" for the conversation's
    7th turn even though only the last few are kept; indexes before ``base`` are gone.
    """

    def __init__(self, base: int, turns: Sequence[TurnRecord]) -> None:
        self.base = base
        self._turns = [Turn(input=t.input, output=t.output) for t in turns]

    def __len__(self) -> int:
        return self.base + len(self._turns)

    @overload
    def __getitem__(self, i: int) -> Turn: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Turn]: ...
    def __getitem__(self, i: int | slice) -> Turn | Sequence[Turn]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not self.base <= i < len(self):
            raise IndexError(f"turn {i} is not kept (kept: {self.base}..{len(self) - 1})")
        return self._turns[i - self.base]

    def __iter__(self) -> Iterator[Turn]:
        raise TypeError("iterate over range(base, len(tail)) instead: earlier turns are not kept")


@dataclass
class Added:
    """A turn accepted into a conversation: its index, the window(s) to judge, the turns they need."""

    index: int
    windows: list[Window]
    tail: TurnTail
    late: bool = False


class ConversationState:
    """Bounded state of one conversation (see module docstring).

    ``size`` is the window size W; the last W turns are kept (what the next window needs), plus
    ``memory`` recently seen turn ids for deduplication.
    """

    def __init__(self, size: int, memory: int | None = None) -> None:
        if size < 1:
            raise ValueError("window size must be >= 1")
        self.size = size
        self.turns: list[TurnRecord] = []
        self._keys: list[tuple[int, str]] = []
        self.n_turns = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._memory = memory if memory is not None else max(64, 8 * size)
        self.windows = 0
        self.total = 0.0
        self.late = 0

    @property
    def base(self) -> int:
        """Index (in the whole conversation) of the oldest kept turn."""
        return self.n_turns - len(self.turns)

    @property
    def score(self) -> float | None:
        """Running score: relevant windows / windows so far (None before the first window)."""
        return self.total / self.windows if self.windows else None

    def seen(self, turn_id: str) -> bool:
        return turn_id in self._seen or any(t.turn_id == turn_id for t in self.turns)

    def add(self, turn: TurnRecord) -> Added | str:
        """Insert ``turn`` in (time, id) order; the windows it adds, or a skip reason."""
        if self.seen(turn.turn_id):
            return DUPLICATE
        key = (turn.time_ns, turn.turn_id)
        if self.turns and key < self._keys[0] and self.base > 0:
            self._remember(turn.turn_id)
            return LATE
        pos = bisect.bisect(self._keys, key)
        n_before = self.n_turns
        base = self.base
        self.turns.insert(pos, turn)
        self._keys.insert(pos, key)
        self.n_turns += 1
        self._remember(turn.turn_id)
        index = base + pos
        late = pos < len(self.turns) - 1
        if late:
            self.late += 1
            windows = [Window(max(base, index - self.size + 1), index)]
        else:
            windows = new_windows(n_before, self.n_turns, self.size)
        tail = TurnTail(base, self.turns)
        while len(self.turns) > self.size:
            self.turns.pop(0)
            self._keys.pop(0)
        return Added(index=index, windows=windows, tail=tail, late=late)

    def record(self, scores: Sequence[float]) -> float | None:
        """Count judged windows' normalized scores; returns the running score."""
        self.windows += len(scores)
        self.total += sum(scores)
        return self.score

    def _remember(self, turn_id: str) -> None:
        self._seen[turn_id] = None
        while len(self._seen) > self._memory:
            self._seen.popitem(last=False)


# --------------------------------------------------------------------------------------------
# the stage
# --------------------------------------------------------------------------------------------
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
class ConversationStats:
    """Plain counters (tests read them; Prometheus gets skips and scores via the emitter)."""

    messages: int = 0
    turns: int = 0
    judged: int = 0
    judge_calls: int = 0
    emitted: int = 0
    failed: int = 0
    late: int = 0
    evicted: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


class ConversationStage:
    """Consumer-loop handler of ``kafka.turns_topic`` (see module docstring).

    Example (not run: needs a broker)::

        stage = ConversationStage(settings, runtime, emitter, metrics=metrics)
        loop = ConsumerLoop(settings.kafka, [settings.kafka.turns_topic],
                            f"{settings.kafka.group_id}-conversations", stage)
    """

    def __init__(
        self,
        settings: Settings,
        runtime: Any,
        emitter: Any,
        *,
        metrics: Any = None,
        dlq: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.o = settings.online
        self.runtime = runtime
        self.emitter = emitter
        self.metrics = metrics
        self.dlq = dlq
        self.clock = clock
        self.tracker = OffsetTracker()
        self.stats = ConversationStats()
        self.states: OrderedDict[tuple[str, str], _Conversation] = OrderedDict()
        self._waiting: set[tuple[str, str]] = set()
        self._queued = 0
        self._flush = False
        self._sem = asyncio.Semaphore(self.o.max_in_flight)
        self._cfgs: dict[str, ConversationRelevanceConfig] = {}

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

    def report_lag(self, tp: TopicPartition, lag: int) -> None:
        if self.metrics is not None:
            self.metrics.set_consumer_lag(tp.topic, tp.partition, lag)

    def forget_lag(self, tp: TopicPartition) -> None:
        if self.metrics is not None:
            self.metrics.forget_partition(tp.topic, tp.partition)

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
        scale = cfg.scoring_mode is ScoringMode.SCALE
        judge = self.runtime.judge
        started = time.time_ns()
        t0 = time.monotonic()
        async with self._sem:
            verdicts, cost, error = await judge_windows(
                judge,
                added.tail,
                added.windows,
                scale=scale,
                reasoning=cfg.include_reasoning,
                rubric=cfg.rubric_prompt,
            )
        self.stats.judge_calls += 1
        meta: dict[str, Any] = {
            "judge": judge.kind,
            "model": judge.model,
            "window_size": cfg.window_size,
            "turn_index": added.index,
            "online": "incremental",
        }
        if verdicts is None:
            from nexagauge.schema.results import MetricResult

            self.stats.failed += 1
            metric = MetricResult.failed(
                METRIC, CATEGORY, error or "no verdicts", windows=conv.state.windows, **meta
            )
        else:
            self.stats.judged += 1
            metric = self._scored(conv.state, added, verdicts, scale, meta)
        return await self._emit(turn, cfg, metric, cost, started, time.monotonic() - t0)

    def _scored(
        self,
        state: ConversationState,
        added: Added,
        verdicts: list[dict[str, Any]],
        scale: bool,
        meta: dict[str, Any],
    ) -> Any:
        from nexagauge.schema.results import MetricResult

        _, rows = score_windows(added.tail, added.windows, verdicts, scale)
        running = state.record([window_score(v, scale)[0] for v in verdicts])
        assert running is not None
        words = []
        for r in rows:
            s, e = r["window"]
            text = f"turn {e + 1} (window turns {s + 1}-{e + 1}): {r['verdict']}"
            if r.get("reason"):
                text += f" - {r['reason']}"
            words.append(text)
        words.append(
            f"running score {running:.3f} over {state.windows} windows"
            + (" (late turn: later windows were not re-judged)" if added.late else "")
        )
        rows.append({"reasoning": "; ".join(words)})
        return MetricResult(
            name=METRIC,
            category=CATEGORY,
            score=running,
            result=rows,
            meta={**meta, "windows": state.windows, "relevant": state.total, "late": added.late},
        )

    async def _emit(
        self,
        turn: TurnRecord,
        cfg: ConversationRelevanceConfig,
        metric: Any,
        cost: Any,
        started_ns: int,
        elapsed_s: float,
    ) -> bool:
        from nexagauge.graph.executor import CaseResult, NodeOutcome
        from nexagauge.schema.results import ConversationMetrics

        target = EvaluationTarget(
            trace_id=turn.trace_id,
            span_id=turn.span_id,
            service=turn.service,
            span_name=turn.span_name,
            end_time_unix_nano=turn.time_ns,
            model=turn.model,
            conversation_id=turn.conversation_id,
            sampling_rule="conversation",
            config_fingerprint=turn.fingerprint,
        )
        case = EvalCase(
            case_id=target.case_id,
            input=turn.input,
            output=turn.output,
            conversation_relevance=cfg,
        )
        out = ConversationMetrics(metrics=[metric], cost=cost)
        result = CaseResult(
            index=0,
            case_id=target.case_id,
            case=case,
            outcomes={METRIC: NodeOutcome(METRIC, "ok", output=out, elapsed_s=elapsed_s)},
        )
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


# --------------------------------------------------------------------------------------------
# wiring (called by OnlineService.start)
# --------------------------------------------------------------------------------------------
async def ensure_topic(kafka: Any, topic: str) -> None:
    """Create ``topic`` with ``kafka.topic_partitions`` partitions when missing."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    from nexagauge.online.consumer import client_kwargs

    admin = AIOKafkaAdminClient(**client_kwargs(kafka))
    await admin.start()
    try:
        if topic not in set(await admin.list_topics()):
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [NewTopic(topic, kafka.topic_partitions, kafka.replication_factor)]
                )
    finally:
        await admin.close()


async def attach_conversations(service: Any, dlq: Any = None) -> ConversationStage | None:
    """Wire the conversation stage into a starting ``OnlineService``: the evaluator stage gets a
    :class:`TurnPublisher`, and a consumer loop of ``kafka.turns_topic`` (group
    ``<group_id>-conversations``) drives a :class:`ConversationStage`. ``None`` when no sampling
    decision can include conversation relevance (or ``online.conversations`` is off)."""
    from nexagauge.online.consumer import ConsumerLoop

    s = service.settings
    k, o = s.kafka, s.online
    if not conversations_possible(s):
        return None
    if k.create_topics:
        await ensure_topic(k, k.turns_topic)
    judge_model = s.judge.for_node(METRIC).model if service.runtime.judge is not None else None
    service.stage.turns = TurnPublisher(service._producer, k.turns_topic, judge_model, o.nodes)
    stage = ConversationStage(s, service.runtime, service.emitter, metrics=service.metrics, dlq=dlq)
    service.loops.append(
        ConsumerLoop(
            k,
            [k.turns_topic],
            f"{k.group_id}-conversations",
            stage,
            commit_interval_s=o.commit_interval_s,
        )
    )
    return stage
