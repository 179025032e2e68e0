"""The turn record: one evaluated turn of a conversation, produced to ``kafka.turns_topic``.

The evaluator consumes spans keyed by *trace* id, so the turns of one conversation land on
different partitions. After a turn is evaluated, :class:`TurnPublisher` produces a small
:class:`TurnRecord` keyed by **conversation id** (a Kafka Streams style repartition), so every turn
of a conversation reaches the one member of the conversation stage
(:mod:`nexagauge.online.conversations.stage`) that owns the conversation's state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from nexagauge.emit.target import config_fingerprint
from nexagauge.nodes.conversation_relevance import METRIC, PROMPT
from nexagauge.schema.case import ConversationRelevanceConfig

if TYPE_CHECKING:
    from nexagauge.online.ingest.extract import ExtractedCase
    from nexagauge.settings import Settings


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
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise BadTurn(f"turn record is not JSON: {type(e).__name__}") from None
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: Any) -> TurnRecord:
        """Validate a decoded turn record (also the turns kept in a changelog state)."""
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


def trace_nodes(nodes: Sequence[str] | None, metric_nodes: Sequence[str]) -> tuple[str, ...]:
    """The per-trace node set when the conversation stage owns ``conversation_relevance``.

    Online, one path owns the metric (docs/online.md, "One owner"): with the conversation stage
    running, the per-trace graph never judges it, whatever the instrumentation put in the span's
    input messages. ``nodes`` is a decision's node selection (``None`` = every metric node).

    Example:
        >>> trace_nodes(None, ["relevance", "conversation_relevance", "grounding"])
        ('relevance', 'grounding')
        >>> trace_nodes(["conversation_relevance"], ["relevance", "conversation_relevance"])
        ()
    """
    base = tuple(nodes) if nodes is not None else tuple(metric_nodes)
    return tuple(n for n in base if n != METRIC)
