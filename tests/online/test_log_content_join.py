"""Content that arrives in OTLP log records, early or late, through the real decode path.

``opentelemetry-instrumentation-openai-v2`` in its default and "events" content modes writes the
prompt and the reply as GenAI log records, not on the chat span. The collector exports logs and
spans in separate batches (separate pipelines, topics, partitions), so a trace's records can
reach the evaluator before its spans, with them, or after its root ended. Crafted OTLP protobuf
messages as rotel writes them, the evaluator stage in process (real decoder, assembly, joins,
extraction, sampling, graph; fake emitter and clock), per ordering:

- records before the spans, or after them within ``trace_grace_s``: joined, evaluated once;
- records later than the grace but within ``online.log_content_wait_s``: the trace waited for
  them (its chat span carries no content), joined, evaluated once;
- records that never come: the trace is handed on after the wait and counted as
  ``content_missing``, never silently;
- records after the trace was handed on: counted by reason, never evaluated twice;
- offsets: every message is committed once its trace is done, contiguously, never before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord, TopicPartition

from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.graph.runtime import Runtime
from nexagauge.online.rekey import SIGNAL_HEADER, SIGNAL_LOGS, SIGNAL_TRACES
from nexagauge.online.stage import EvaluatorStage
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

from .otlp import logs_request, rand_tid, sid, span, traces_request
from .test_stage import Clock

TOPIC = "bytrace"
TP = TopicPartition(TOPIC, 0)
QUESTION = "When does the Lyon shop open on Sundays?"
ANSWER = "The Lyon shop opens at 8 am on Sundays."
SYSTEM = "You are the assistant of a bakery chain. Be brief."
LATE = "nexagauge_late_log_records_total"
SKIPPED = "nexagauge_skipped_total"


class Emitter:
    """Keeps the emitted cases (their text is what the judge would see)."""

    def __init__(self) -> None:
        self.cases: list[Any] = []

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        self.cases.append(case_result.case)


def late_logs(m: EvaluatorMetrics) -> dict[str, float]:
    """``nexagauge_late_log_records_total`` by reason, as /metrics shows it."""
    return {
        r: m.registry.get_sample_value(LATE, {"reason": r}) or 0.0
        for r in ("content_missing", "trace_done")
    }


def skipped(m: EvaluatorMetrics, reason: str) -> float:
    return m.registry.get_sample_value(SKIPPED, {"reason": reason, "node": ""}) or 0.0


def make_stage(
    clock: Clock, rate: float = 1.0, **online: Any
) -> tuple[EvaluatorStage, Emitter, EvaluatorMetrics]:
    s = Settings(
        kafka={"rekeyed_topic": TOPIC},
        online={
            "nodes": ["relevance"],
            "trace_grace_s": 0.5,
            "trace_inactivity_s": 30.0,
            "agent_signals": False,
            "early_discard": False,
            **online,
        },
        sampling={"default_rate": rate},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    em, metrics = Emitter(), EvaluatorMetrics()
    stage = EvaluatorStage(s, Runtime.create(s, use_cache=False), em, metrics=metrics, clock=clock)
    return stage, em, metrics


def rec(offset: int, value: bytes, signal: bytes) -> ConsumerRecord[Any, Any]:
    """A message of the re-keyed topic (the header says spans or log records)."""
    headers = [(SIGNAL_HEADER, signal)]
    return ConsumerRecord(TOPIC, 0, offset, 0, 0, None, value, None, 0, len(value), headers)


def v2_trace(t: bytes, mode: str) -> tuple[bytes, bytes]:
    """(spans message, log records message) of one openai-v2 turn: an app root span and the
    instrumentation's chat span, whose content sits in log records (``mode``: ``default`` =
    system/user/choice events, ``events`` = one operation-details record)."""
    chat_attrs: dict[str, Any] = {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
        C.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
    }
    chat_attrs[C.GEN_AI_SYSTEM if mode == "default" else C.GEN_AI_PROVIDER_NAME] = "openai"
    spans = [
        span(t, sid(1), "turn", {}, start=1_000, end=9_000),
        span(t, sid(2), "chat gpt-4o-mini", chat_attrs, parent=sid(1), start=2_000, end=8_000),
    ]
    if mode == "default":
        records = [
            {"trace_id": t, "span_id": sid(2), "event": C.EVENT_GEN_AI_SYSTEM_MESSAGE,
             "body": {"content": SYSTEM}, "time": 2_100},
            {"trace_id": t, "span_id": sid(2), "event": C.EVENT_GEN_AI_USER_MESSAGE,
             "body": {"content": QUESTION}, "time": 2_200},
            {"trace_id": t, "span_id": sid(2), "event": C.EVENT_GEN_AI_CHOICE,
             "body": {"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": ANSWER}}, "time": 7_900},
        ]  # fmt: skip
    else:
        parts = {"type": "text", "content": QUESTION}
        records = [
            {"trace_id": t, "span_id": sid(2), "time": 7_900,
             "event": C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS,
             "attrs": {
                 C.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "text", "content": SYSTEM}],
                 C.GEN_AI_INPUT_MESSAGES: [{"role": "user", "parts": [parts]}],
                 C.GEN_AI_OUTPUT_MESSAGES: [{"role": "assistant", "finish_reason": "stop",
                     "parts": [{"type": "text", "content": ANSWER}]}],
             }},
        ]  # fmt: skip
    return traces_request(spans, "rag-openai-v2"), logs_request(records, "rag-openai-v2")


async def step(stage: EvaluatorStage, clock: Clock, advance: float) -> None:
    """Let ``advance`` seconds pass, tick, and let started evaluations finish."""
    clock.t += advance
    await stage.tick()
    for _ in range(100):
        await asyncio.sleep(0.005)
        if stage.in_flight == 0 and not stage._ready:
            break


def committed(stage: EvaluatorStage) -> int | None:
    return stage.tracker.committable((TOPIC, 0))


def assert_evaluated_with_content(em: Emitter) -> None:
    [case] = em.cases
    assert case.output == ANSWER
    assert case.input == QUESTION
    assert SYSTEM in case.context_documents


MODES = ("default", "events")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("logs_first", [True, False], ids=["records_first", "spans_first"])
async def test_records_before_their_spans_or_within_the_grace_are_joined(
    mode: str, logs_first: bool
) -> None:
    clock = Clock()
    stage, em, _ = make_stage(clock)
    spans, logs = v2_trace(rand_tid(), mode)
    first, second = (logs, spans) if logs_first else (spans, logs)
    await stage.handle(TP, [rec(0, first, SIGNAL_LOGS if logs_first else SIGNAL_TRACES)])
    await step(stage, clock, 0.2)
    await stage.handle(TP, [rec(1, second, SIGNAL_TRACES if logs_first else SIGNAL_LOGS)])
    await step(stage, clock, 0.2)
    assert em.cases == [] and committed(stage) is None  # grace not over: nothing committed
    await step(stage, clock, 0.4)
    assert_evaluated_with_content(em)
    assert committed(stage) == 2
    assert stage.buffer.content_waits == 0


@pytest.mark.parametrize("mode", MODES)
async def test_records_later_than_the_grace_are_waited_for_and_joined(mode: str) -> None:
    """The defect: a trace whose chat span carries no content was handed on at root end +
    grace; records 1.5 s behind the spans (logs and traces exported in different batches) then
    found it done -- no case (``no_case``), the records counted as late *spans*."""
    clock = Clock()
    stage, em, m = make_stage(clock)
    spans, logs = v2_trace(rand_tid(), mode)
    await stage.handle(TP, [rec(0, spans, SIGNAL_TRACES)])
    for _ in range(3):
        await step(stage, clock, 0.5)
    assert em.cases == [] and committed(stage) is None  # still waiting for its content
    await stage.handle(TP, [rec(1, logs, SIGNAL_LOGS)])
    await step(stage, clock, 0.1)
    assert_evaluated_with_content(em)
    assert committed(stage) == 2
    assert late_logs(m) == {"content_missing": 0.0, "trace_done": 0.0}
    assert skipped(m, "no_case") == skipped(m, "content_missing") == 0.0
    assert m.registry.get_sample_value("nexagauge_late_spans_total") == 0.0


@pytest.mark.parametrize("mode", MODES)
async def test_content_that_never_comes_is_counted_and_later_records_are_not_evaluated(
    mode: str,
) -> None:
    """Handed on after grace + wait, counted as ``content_missing`` (not the vague
    ``no_case``); records that come after that are counted as late by that reason and never
    start a second evaluation; every offset is committed once."""
    clock = Clock()
    stage, em, m = make_stage(clock, log_content_wait_s=2.0)
    spans, logs = v2_trace(rand_tid(), mode)
    await stage.handle(TP, [rec(0, spans, SIGNAL_TRACES)])
    await step(stage, clock, 0.6)  # past the grace: waiting
    assert committed(stage) is None and len(stage.buffer) == 1
    await step(stage, clock, 1.8)  # 2.4 s: still within grace + wait
    assert committed(stage) is None
    await step(stage, clock, 0.2)  # 2.6 s: handed on without content
    assert em.cases == [] and committed(stage) == 1 and len(stage.buffer) == 0
    assert skipped(m, "content_missing") == 1.0 and skipped(m, "no_case") == 0.0
    n_records = 3 if mode == "default" else 1
    await stage.handle(TP, [rec(1, logs, SIGNAL_LOGS), rec(2, logs, SIGNAL_LOGS)])
    await step(stage, clock, 10.0)
    assert em.cases == [] and committed(stage) == 3
    assert late_logs(m) == {"content_missing": 2.0 * n_records, "trace_done": 0.0}
    assert m.registry.get_sample_value("nexagauge_late_spans_total") == 0.0


async def test_redelivered_records_of_an_evaluated_trace_are_counted_once_evaluated_once() -> None:
    clock = Clock()
    stage, em, m = make_stage(clock)
    spans, logs = v2_trace(rand_tid(), "events")
    await stage.handle(TP, [rec(0, logs, SIGNAL_LOGS), rec(1, spans, SIGNAL_TRACES)])
    await step(stage, clock, 0.6)
    assert_evaluated_with_content(em)
    await stage.handle(TP, [rec(2, logs, SIGNAL_LOGS), rec(3, spans, SIGNAL_TRACES)])
    await step(stage, clock, 10.0)
    assert len(em.cases) == 1 and committed(stage) == 4
    assert late_logs(m) == {"content_missing": 0.0, "trace_done": 1.0}
    assert m.registry.get_sample_value("nexagauge_late_spans_total") == 2.0


def _content_on_span(t: bytes) -> bytes:
    """openai-v2's latest experimental mode with content on the span (``SPAN_ONLY``)."""
    chat = {
        C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
        C.GEN_AI_PROVIDER_NAME: "openai",
        C.GEN_AI_INPUT_MESSAGES: '[{"role": "user", "parts": [{"type": "text", '
        f'"content": "{QUESTION}"}}]}}]',
        C.GEN_AI_OUTPUT_MESSAGES: '[{"role": "assistant", "parts": [{"type": "text", '
        f'"content": "{ANSWER}"}}]}}]',
    }
    return traces_request(
        [span(t, sid(1), "turn", {}, end=9_000), span(t, sid(2), "chat", chat, parent=sid(1))]
    )


@pytest.mark.parametrize(
    ("online", "sampling_rate", "content_on_span"),
    [
        ({}, 1.0, True),  # the span carries its content: nothing to wait for
        ({"consume_logs": False}, 1.0, False),  # no logs topic: nothing can come
        ({"log_content_wait_s": 0.0}, 1.0, False),  # switched off
        ({}, 0.0, False),  # never sampled: not held for content it would not use
    ],
)
async def test_traces_that_cannot_get_log_content_are_not_held(
    online: dict[str, Any], sampling_rate: float, content_on_span: bool
) -> None:
    clock = Clock()
    stage, em, m = make_stage(clock, sampling_rate, **online)
    t = rand_tid()
    spans = _content_on_span(t) if content_on_span else v2_trace(t, "events")[0]
    await stage.handle(TP, [rec(0, spans, SIGNAL_TRACES)])
    await step(stage, clock, 0.6)
    assert committed(stage) == 1 and len(stage.buffer) == 0
    assert stage.buffer.content_waits == 0
    if content_on_span:
        assert [c.output for c in em.cases] == [ANSWER]
    assert skipped(m, "content_missing") == 0.0


async def test_the_wait_stands_still_while_partitions_are_paused() -> None:
    """Behind paused partitions (backpressure) the records sit unread: the wait is timed on the
    inactivity clock, which stops meanwhile, so a pause does not use it up."""
    clock = Clock()
    stage, em, m = make_stage(clock, log_content_wait_s=2.0)
    spans, logs = v2_trace(rand_tid(), "events")
    await stage.handle(TP, [rec(0, spans, SIGNAL_TRACES)])
    await step(stage, clock, 0.6)  # past the grace: waiting
    stage.on_paused(1)
    await step(stage, clock, 30.0)
    stage.on_paused(0)
    await step(stage, clock, 1.0)
    assert len(stage.buffer) == 1 and committed(stage) is None
    await stage.handle(TP, [rec(1, logs, SIGNAL_LOGS)])
    await step(stage, clock, 0.1)
    assert_evaluated_with_content(em)
    assert committed(stage) == 2 and skipped(m, "content_missing") == 0.0


async def test_a_revoked_partition_drops_a_waiting_trace_for_its_next_owner() -> None:
    """A trace waiting for its records when its partition is revoked is dropped, not handed on
    nor remembered as done: the new owner (or this member, re-assigned) assembles it anew."""
    clock = Clock()
    stage, em, _ = make_stage(clock)
    spans, logs = v2_trace(rand_tid(), "default")
    await stage.handle(TP, [rec(0, spans, SIGNAL_TRACES)])
    await step(stage, clock, 1.0)
    assert stage.buffer.content_waits == 1
    stage.revoked([TP])
    assert len(stage.buffer) == 0 and em.cases == []
    await stage.handle(TP, [rec(0, spans, SIGNAL_TRACES), rec(1, logs, SIGNAL_LOGS)])
    await step(stage, clock, 0.6)
    assert_evaluated_with_content(em)


def test_late_log_reasons_are_the_labels_of_their_series() -> None:
    from nexagauge.emit.labels import LATE_LOG_REASONS
    from nexagauge.online.ingest import assembly

    assert assembly.LATE_LOG_REASONS == LATE_LOG_REASONS
    assert late_logs(EvaluatorMetrics()) == {"content_missing": 0.0, "trace_done": 0.0}


def test_which_spans_wait_for_log_content() -> None:
    """Only an ended GenAI LLM span with no output of any vocabulary on it (attributes or an
    operation-details span event) and no output record joined yet."""
    from nexagauge.online.ingest.assembly import Trace
    from nexagauge.online.ingest.decode import LogRef, decode_traces
    from nexagauge.online.ingest.logwait import LOG_CONTENT_MARK_KEYS, awaits_log_content

    t = rand_tid()
    chat = {C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT}
    out = {C.GEN_AI_OUTPUT_MESSAGES: "[]"}
    cases = {
        "content in log records": (span(t, sid(2), "chat", chat), True),
        "not ended": (span(t, sid(2), "chat", chat, end=0), False),
        "content on the span": (span(t, sid(2), "chat", {**chat, **out}), False),
        "content in a span event": (
            span(t, sid(2), "chat", chat,
                 events=[(C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS, out)]),
            False,
        ),
        "legacy completion": (
            span(t, sid(2), "chat", {**chat, "gen_ai.completion.0.content": "A."}), False
        ),
        "SDK span": (span(t, sid(2), "chat", {**chat, C.NG_SDK_VERSION: "0.1.0"}), False),
        "embeddings": (span(t, sid(2), "e", {C.GEN_AI_OPERATION_NAME: "embeddings"}), False),
        "OpenInference LLM": (span(t, sid(2), "llm", {C.OI_SPAN_KIND: "LLM"}), False),
    }  # fmt: skip
    for what, (sp, waits) in cases.items():
        [s] = decode_traces(traces_request([sp]), wanted=LOG_CONTENT_MARK_KEYS).spans
        trace = Trace(t, 0.0, 0.0, spans={s.span_id: s})
        assert awaits_log_content(trace) is waits, what
        trace.logs.append(LogRef(t, sid(2), C.EVENT_GEN_AI_USER_MESSAGE, 1))
        assert awaits_log_content(trace) is waits, what  # an input record is not the output
        trace.logs.append(LogRef(t, sid(3), C.EVENT_GEN_AI_CHOICE, 1))
        assert awaits_log_content(trace) is waits, what  # another span's output
        trace.logs.append(LogRef(t, sid(2), C.EVENT_GEN_AI_CHOICE, 1))
        assert awaits_log_content(trace) is False, what


def test_a_waiting_trace_evicted_or_inactive_is_handed_on_as_content_missing() -> None:
    from nexagauge.online.ingest.assembly import TraceBuffer
    from nexagauge.online.ingest.decode import decode_logs, decode_traces
    from nexagauge.online.ingest.logwait import LOG_CONTENT_MARK_KEYS, awaits_log_content

    for how in ("evicted", "inactivity"):
        buf = TraceBuffer(
            grace_s=0.5,
            inactivity_s=3.0,
            max_traces=1,
            content_wait_s=10.0,
            awaits_content=awaits_log_content,
        )
        first, other = rand_tid(), rand_tid()
        spans, logs = v2_trace(first, "default")
        for s in decode_traces(spans, wanted=LOG_CONTENT_MARK_KEYS).spans:
            buf.add_span(s, ("t", 0, 0), now=0.0)
        assert buf.poll(now=1.0) == [] and buf.content_waits == 1
        if how == "evicted":
            other_spans = decode_traces(v2_trace(other, "default")[0]).spans
            buf.add_span(other_spans[0], ("t", 0, 1), now=1.5)
            [(t, trigger)] = buf.poll(now=1.5)
        else:
            [(t, trigger)] = buf.poll(now=4.5)
        assert (t.trace_id, trigger, t.content_missing) == (first, how, True)
        assert buf.content_missing == 1
        for lg in decode_logs(logs).logs:
            assert buf.add_log(lg, ("t", 0, 2), now=5.0) == "late"
        assert buf.late_logs == {"content_missing": 3, "trace_done": 0}
