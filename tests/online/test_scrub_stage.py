"""Issue 31 in process: third-party traces (OpenInference, Traceloop: recorded verbatim, never
seen by the SDK's scrubber) are scrubbed when their case is extracted, before the graph (judge,
cache key), the dead-letter topic and the turns topic see them; ``online.scrub_pii`` adds
personal data; ``online.scrub = false`` turns it off. Log lines follow ``scrub_pii`` too,
third-party loggers and validation messages that echo a value included."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from support.sensitive import (
    PERSONAL,
    PERSONAL_FRAGMENTS,
    SECRET_FRAGMENTS,
    SECRETS,
    SENTENCES,
    leaks,
)

from nexagauge.graph.executor import CaseResult, NodeOutcome
from nexagauge.online.conversations.turns import TurnPublisher
from nexagauge.online.delivery import redact
from nexagauge.online.ingest.extract import extract_cases_with_errors
from nexagauge.sdk import conventions as C

from .otlp import rand_tid, sid, span, traces_request
from .test_stage import TP, Clock, Emitter, Producer, make_stage, record, settle


def openinference_turn(t: bytes, kind: str, conversation: str) -> list[dict[str, Any]]:
    q, ctx, a = SENTENCES[kind]
    chain = {
        C.OI_SPAN_KIND: "CHAIN",
        C.OI_INPUT_VALUE: q,
        C.OI_OUTPUT_VALUE: a,
        C.OI_SESSION_ID: conversation,
    }
    retriever = {
        C.OI_SPAN_KIND: "RETRIEVER",
        C.OI_RETRIEVAL_DOCUMENTS_PREFIX + "0.document.content": ctx,
    }
    return [
        span(t, sid(1), "chat", chain, end=5_000),
        span(t, sid(2), "retrieve", retriever, parent=sid(1), end=3_000),
    ]


def traceloop_turn(t: bytes, kind: str) -> list[dict[str, Any]]:
    q, _, a = SENTENCES[kind]
    attrs = {
        C.TRACELOOP_SPAN_KIND: "workflow",
        C.TRACELOOP_ENTITY_INPUT: json.dumps({"args": [q], "kwargs": {}}),
        C.TRACELOOP_ENTITY_OUTPUT: json.dumps(a),
    }
    return [span(t, sid(1), "support_bot.workflow", attrs, end=5_000)]


class Recording:
    """An executor that records the case it is given and fails it (so it is dead-lettered)."""

    def __init__(self) -> None:
        self.cases: list[Any] = []

    async def run_case(self, case: Any, index: int) -> CaseResult:
        self.cases.append(case)
        outcome = NodeOutcome("relevance", "error", "BadRequestError: content filter")
        return CaseResult(index, case.case_id, case=case, outcomes={"relevance": outcome})


async def _run(**online: Any) -> tuple[list[str], Producer]:
    """Every kind through the stage (both libraries); the texts that left: cases the graph got,
    dead letters and turn records."""
    clock, prod = Clock(), Producer()
    stage = make_stage(Emitter(), clock, prod, **online)
    ex = Recording()
    stage._executor = lambda nodes: (ex, "fp")  # type: ignore[method-assign, assignment, return-value]
    stage.turns = TurnPublisher(prod, "turns", None, ["relevance", "conversation_relevance"])
    spans = []
    for i, kind in enumerate(SENTENCES):
        spans += openinference_turn(rand_tid(), kind, f"conv-{i}")
        spans += traceloop_turn(rand_tid(), kind)
    await stage.handle(TP, [record(0, traces_request(spans))])
    await settle(stage, clock)
    assert len(ex.cases) == 2 * len(SENTENCES)
    out = [c.model_dump_json() for c in ex.cases]
    out += [json.dumps(m, default=repr) for m in prod.sent]
    assert any(m["topic"] == "turns" for m in prod.sent)
    assert any(m["topic"] == "dlq" for m in prod.sent)
    return out, prod


async def test_third_party_cases_are_scrubbed_before_graph_dlq_and_turns() -> None:
    texts, _ = await _run()
    assert [t for t in texts if leaks(t, SECRET_FRAGMENTS)] == []
    # personal data stays by default (scrub_pii off) -- and the placeholders are stable
    assert any(leaks(t, PERSONAL_FRAGMENTS) for t in texts)
    case = next(json.loads(t) for t in texts if "api_key#1" in t and '"output"' in t)
    assert "[scrubbed:api_key#1]" in case["input"] and "[scrubbed:api_key#1]" in case["output"]


async def test_scrub_pii_removes_personal_data_too() -> None:
    texts, _ = await _run(scrub_pii=True)
    assert [t for t in texts if leaks(t, SECRET_FRAGMENTS + PERSONAL_FRAGMENTS)] == []


async def test_scrub_off_leaves_cases_as_recorded() -> None:
    texts, _ = await _run(scrub=False)
    assert any(leaks(t, SECRET_FRAGMENTS) for t in texts)


def test_extracted_third_party_case_carries_the_raw_values() -> None:
    """The precondition: extraction itself keeps what the library recorded (so the stage must
    scrub; the SDK never saw this text)."""
    from nexagauge.online.ingest.assembly import TraceBuffer

    buf = TraceBuffer(grace_s=0, inactivity_s=1, max_traces=10, max_spans=100)
    from nexagauge.online.ingest.decode import decode_traces

    t = rand_tid()
    batch = decode_traces(traces_request(traceloop_turn(t, "openai_key")), "otlp_proto")
    for sp in batch.spans:
        buf.add_span(sp, ("t", 0, 0), 0.0, 0.0)
    [(trace, _)] = buf.poll(100.0, 100.0)
    cases, _ = extract_cases_with_errors(trace)
    assert SECRETS["openai_key"] in (cases[0].case.input or "")


# -- log lines ----------------------------------------------------------------------------------
@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """A root handler with the redaction filter, as ``serve -vv`` installs it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    redact.install_log_redaction([handler])
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
        redact.configure_redaction(pii=False)


def test_log_lines_with_pii_on_hold_no_personal_value(captured: io.StringIO) -> None:
    redact.configure_redaction(pii=True)
    values = [*PERSONAL.values(), *SECRETS.values(), f"DB_PASSWORD={SECRETS['db_password']}"]
    values.remove(SECRETS["db_password"])  # a password alone is a word; after its key, a secret
    # aiokafka at -vv prints each produced record
    logging.getLogger("aiokafka.producer.sender").debug("produced %r", [v.encode() for v in values])
    logging.getLogger("nexagauge.online.stage").info("no case for %s", " / ".join(values))
    out = captured.getvalue()
    assert leaks(out, PERSONAL_FRAGMENTS + SECRET_FRAGMENTS) == [], out


async def test_invalid_knob_value_echoed_by_validation_is_scrubbed(
    captured: io.StringIO,
) -> None:
    """An invalid ``nexagauge.eval`` knob value is echoed by the validation message (``(got
    'AKIA...')``): the span is rejected and the message logged, without the value."""
    redact.configure_redaction(pii=True)
    clock = Clock()
    stage = make_stage(Emitter(), clock, scrub_pii=True)
    for value in (SECRETS["aws_key_id"], PERSONAL["email"], PERSONAL["iban"]):
        q, _, a = SENTENCES["openai_key"]
        attrs = {
            C.OI_SPAN_KIND: "CHAIN",
            C.OI_INPUT_VALUE: q,
            C.OI_OUTPUT_VALUE: a,
            C.NG_EVAL_RELEVANCE: json.dumps({"scoring_mode": value}),
        }
        spans = [span(rand_tid(), sid(1), "chat", attrs, end=5_000)]
        await stage.handle(TP, [record(0, traces_request(spans))])
    await settle(stage, clock)
    out = captured.getvalue()
    assert "no case for" in out and "got" in out
    assert leaks(out, SECRET_FRAGMENTS + PERSONAL_FRAGMENTS) == [], out
