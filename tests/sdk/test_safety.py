"""Never break the app: exceptions, SDK failures, exporter failures, nasty values, limits, secrets."""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import json
import logging
import re
import time
import traceback
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import nexagauge
from nexagauge.sdk import _errors, spans, streams
from nexagauge.sdk import conventions as C
from nexagauge.sdk.scrubbing import Scrubber, ScrubRule
from nexagauge.sdk.serialize import CIRCULAR, to_jsonable, to_text

from .conftest import Recorder, configure_with


def _in(span: Any) -> str:
    msgs = json.loads(span.attributes[C.GEN_AI_INPUT_MESSAGES])
    return "".join(p.get("content", "") for m in msgs for p in m["parts"])


def _out(span: Any) -> str:
    msgs = json.loads(span.attributes[C.GEN_AI_OUTPUT_MESSAGES])
    return "".join(p.get("content", "") for p in msgs[0]["parts"])


# -- user exceptions -----------------------------------------------------------------------------


class PaymentError(Exception):
    pass


def test_user_exception_is_reraised_unchanged_and_recorded(rec: Recorder) -> None:
    original = PaymentError("card declined for key sk-abcdefghijklmnopqrstuv")

    @nexagauge.trace(name="pay")
    def pay(question: str) -> str:
        raise original

    with pytest.raises(PaymentError) as info:
        pay("q")
    assert info.value is original
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "pay"  # the user's frame is still where it was raised
    span = rec.one("pay")
    assert span.status.status_code == otel_trace.StatusCode.ERROR
    assert span.attributes[C.ERROR_TYPE] == f"{__name__}.PaymentError"
    (event,) = [e for e in span.events if e.name == C.EXCEPTION_EVENT]
    assert event.attributes[C.EXCEPTION_TYPE].endswith("PaymentError")
    assert "card declined" in event.attributes[C.EXCEPTION_MESSAGE]
    assert "sk-abcdef" not in event.attributes[C.EXCEPTION_MESSAGE]  # scrubbed
    assert "sk-abcdef" not in (span.status.description or "")
    assert "raise original" in event.attributes[C.EXCEPTION_STACKTRACE]
    assert _in(span) == "q"


async def test_async_user_exception_and_cancellation(rec: Recorder) -> None:
    import asyncio

    @nexagauge.trace(name="afail")
    async def fail(question: str) -> str:
        raise KeyError("k")

    @nexagauge.trace(name="slow")
    async def slow(question: str) -> str:
        await asyncio.sleep(10)
        return "never"

    with pytest.raises(KeyError):
        await fail("q")
    task = asyncio.create_task(slow("q"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rec.one("afail").attributes[C.ERROR_TYPE] == "KeyError"
    assert rec.one("slow").attributes[C.ERROR_TYPE] == "asyncio.exceptions.CancelledError"


def test_exception_with_broken_str_is_still_recorded(rec: Recorder) -> None:
    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    @nexagauge.trace(name="weird")
    def f(question: str) -> str:
        raise Weird()

    with pytest.raises(Weird):
        f("q")
    assert rec.one("weird").attributes[C.ERROR_TYPE].endswith("Weird")


# -- SDK-internal failures -----------------------------------------------------------------------


def _break_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> Any:
        raise ZeroDivisionError("sdk bug")

    monkeypatch.setattr(spans, "Call", boom)


def test_internal_failure_is_swallowed_and_logged_once_in_production(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _errors.set_strict(False)
    _break_start(monkeypatch)

    @nexagauge.trace(name="f")
    def f(question: str) -> str:
        return question + "!"

    with caplog.at_level(logging.WARNING, logger="nexagauge.sdk"):
        assert [f("a"), f("b"), f("c")] == ["a!", "b!", "c!"]
    logged = [r for r in caplog.records if "internal failure in start span" in r.getMessage()]
    assert len(logged) == 1
    assert rec.spans == []  # the call ran untraced


def test_internal_failure_raises_under_strict_mode(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _break_start(monkeypatch)

    @nexagauge.trace(name="f")
    def f(question: str) -> str:
        return question

    with pytest.raises(_errors.SDKInternalError, match="sdk bug"):
        f("a")


def test_internal_failure_at_span_end_still_returns_and_ends_span(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _errors.set_strict(False)

    def boom(*a: Any, **k: Any) -> None:
        raise ValueError("end bug")

    monkeypatch.setattr(spans, "record_texts", boom)

    @nexagauge.trace(name="f")
    def f(question: str) -> str:
        return "result"

    assert f("q") == "result"
    assert rec.one("f").end_time is not None


def test_internal_failure_in_stream_chunk_keeps_stream_flowing(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _errors.set_strict(False)

    def boom(chunk: Any) -> str:
        raise ValueError("chunk bug")

    monkeypatch.setattr(streams, "chunk_text", boom)

    @nexagauge.trace(name="g")
    def g(question: str) -> Iterator[str]:
        yield "a"
        yield "b"

    assert list(g("q")) == ["a", "b"]
    assert rec.one("g").attributes[C.NG_STREAM_CHUNK_COUNT] == 2


# -- exporter failures ---------------------------------------------------------------------------


class ExplodingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector down")

    def shutdown(self) -> None:
        raise RuntimeError("shutdown failed too")


@pytest.mark.parametrize("batch", [False, True])
def test_exporter_failure_never_reaches_the_caller(batch: bool) -> None:
    exporter = ExplodingExporter()
    nexagauge.configure(exporter=exporter, batch=batch, set_global=False)
    try:

        @nexagauge.trace
        def f(question: str) -> str:
            return "fine"

        assert [f("q") for _ in range(5)] == ["fine"] * 5
        assert nexagauge.force_flush(5000) in (True, False)
        assert exporter.calls >= 1
    finally:
        nexagauge.shutdown()


def test_unreachable_collector_does_not_block_the_call() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nexagauge.configure(
        endpoint=f"http://127.0.0.1:{port}", protocol="http/protobuf", set_global=False, timeout=1
    )
    try:

        @nexagauge.trace
        def f(question: str) -> str:
            return "fine"

        start = time.perf_counter()
        for _ in range(20):
            assert f("q") == "fine"
        assert time.perf_counter() - start < 1.0  # export happens on the batch thread
    finally:
        nexagauge.shutdown(timeout_millis=100)


# -- serialization -------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"


class Model(BaseModel):
    name: str
    blob: bytes


@dataclasses.dataclass
class Node:
    label: str
    child: Any = None


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


class BrokenMapping(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("items exploded")


def test_nasty_values_never_raise() -> None:
    node = Node("root")
    node.child = node
    loop: list[Any] = [1]
    loop.append(loop)
    value = {
        "model": Model(name="m", blob=b"\x00\xff"),
        "node": node,
        "loop": loop,
        "np_scalar": np.float32(0.5),
        "np_array": np.arange(4).reshape(2, 2),
        "np_huge": np.zeros(10_000),
        "bytes": b"hello",
        "bad_bytes": b"\xff\xfe",
        "set": {3, 1, 2},
        "frozen": frozenset({"a"}),
        "enum": Color.RED,
        "decimal": Decimal("1.10"),
        "nan": float("nan"),
        "broken": BrokenRepr(),
        "brokenmap": BrokenMapping(a=1),
        "gen": (i for i in range(3)),
        ("tuple", "key"): 1,
        "exc": ValueError("bad"),
        "ip": ipaddress.ip_address("10.0.0.1"),
        "pattern": re.compile(r"\d+"),
        "deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    }
    text = to_text(value)
    data = json.loads(text)
    assert data["model"] == {"name": "m", "blob": "base64:AP8="}
    assert data["node"] == {"label": "root", "child": CIRCULAR}
    assert data["loop"] == [1, CIRCULAR]
    assert data["np_scalar"] == 0.5 and data["np_array"] == [[0, 1], [2, 3]]
    assert data["np_huge"].startswith("<numpy array shape=(10000,)")
    assert data["bytes"] == "hello" and data["bad_bytes"].startswith("base64:")
    assert data["set"] == [1, 2, 3] and data["frozen"] == ["a"]
    assert data["enum"] == "red" and data["decimal"] == "1.10" and data["nan"] == "nan"
    assert data["broken"] == "<unrepresentable BrokenRepr object>"
    assert data["brokenmap"] == "{'a': 1}"  # only the broken container degrades to its repr
    assert data["gen"].startswith("<generator object")  # never consumed
    assert data["exc"] == {"type": "ValueError", "message": "'bad'"}
    assert data["ip"] == "10.0.0.1" and data["pattern"] == "\\d+"
    assert "<max depth reached>" in text
    assert to_jsonable(BrokenMapping(a=1)) is not None


def test_traced_call_with_nasty_arguments_and_result(rec: Recorder) -> None:
    node = Node("n")
    node.child = node

    @nexagauge.trace(name="nasty", input_arg="payload")
    def f(payload: Any) -> Any:
        return {"self": node, "arr": np.ones(2), "raw": BrokenRepr()}

    result = f({"x": BrokenRepr(), "s": {1}})
    assert result["self"] is node
    span = rec.one("nasty")
    assert json.loads(_in(span)) == {"x": "<unrepresentable BrokenRepr object>", "s": [1]}
    assert json.loads(_out(span))["arr"] == [1.0, 1.0]


# -- size limit ----------------------------------------------------------------------------------


def test_values_over_the_limit_are_truncated_with_marker_and_length() -> None:
    r = configure_with(InMemorySpanExporter(), max_value_length=200)
    try:

        @nexagauge.trace(name="big")
        def f(question: str) -> str:
            nexagauge.add_context("d" * 1000)
            return "o" * 5000

        f("q" * 300)
        span = r.one("big")
        assert _in(span) == "q" * 200 + C.TRUNCATION_MARKER_TEMPLATE.format(original=300)
        assert _out(span) == "o" * 200 + C.TRUNCATION_MARKER_TEMPLATE.format(original=5000)
        docs = json.loads(span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS])
        assert docs[0]["content"].startswith("d" * 200 + "...[truncated")
        assert set(span.attributes[C.NG_TRUNCATED]) == {
            C.GEN_AI_INPUT_MESSAGES,
            C.GEN_AI_OUTPUT_MESSAGES,
            C.GEN_AI_RETRIEVAL_DOCUMENTS,
        }
        assert span.attributes[C.NG_ORIGINAL_LENGTH_PREFIX + C.GEN_AI_INPUT_MESSAGES] == 300
        assert span.attributes[C.NG_ORIGINAL_LENGTH_PREFIX + C.GEN_AI_OUTPUT_MESSAGES] == 5000
        assert span.attributes[C.NG_ORIGINAL_LENGTH_PREFIX + C.GEN_AI_RETRIEVAL_DOCUMENTS] == 1000
        # the JSON stays valid although the text was cut
        json.loads(span.attributes[C.GEN_AI_INPUT_MESSAGES])
    finally:
        nexagauge.shutdown()


def test_values_under_the_limit_are_not_marked(rec: Recorder) -> None:
    @nexagauge.trace(name="small")
    def f(question: str) -> str:
        return "short"

    f("q")
    assert C.NG_TRUNCATED not in rec.one("small").attributes


def test_too_small_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_value_length"):
        nexagauge.configure(exporter=InMemorySpanExporter(), max_value_length=10)


# -- scrubbing -----------------------------------------------------------------------------------

SECRETS = [
    ("use sk-proj-abcdefghijklmnopqrstuvwx please", "api_key"),
    ("aws AKIAIOSFODNN7EXAMPLE ok", "api_key"),
    ("gh token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key"),
    ("Authorization: Bearer abc123def456ghi789jkl", "bearer_token"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "authorization"),
    ("curl -H 'bearer abcdefghijklmnop1234567890'", "bearer_token"),
    ('{"password": "hunter2"}', "password"),
    ("login with password=hunter2&user=bob", "password"),
    ("My password is hunter2", "password"),
    ("MY PASSWORD IS hunter2", "password"),  # the gate once looked for lower-case "assword" only
    ("postgres://admin:s3cr3t@db.internal:5432/app", "password"),
    ("client_secret: abcd1234efgh", "secret"),
    ("https://api.example.com/v1?token=abcd1234efgh5678", "secret"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcdefghij\n-----END RSA PRIVATE KEY-----",
        "private_key",
    ),
]


@pytest.mark.parametrize(("text", "rule"), SECRETS)
def test_default_secret_rules(text: str, rule: str) -> None:
    scrubbed, marks = Scrubber().scrub("attr", text)
    assert f"[scrubbed:{rule}]" in scrubbed
    assert marks is not None and f"attr:{rule}" in marks
    for secret in ("hunter2", "s3cr3t", "AKIAIOSFODNN7EXAMPLE", "abc123def456", "MIIEow"):
        assert secret not in scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "The bearer of bad news passed the key test; tokens are words.",
        "Paris is the capital of France: population 2,1 million (2020).",
        "Contact: the front desk. Ratio = 3:2. Skip-gram models use embeddings.",
        "Password policies are important for security.",
        "Set max token: 256 and temperature=0.2 for the call.",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Scrubber(pii=True).scrub("a", text) == (text, None)


def test_pii_rules_are_opt_in() -> None:
    text = "mail jane.doe@example.com, card 4111 1111 1111 1111, order 1234 5678 9012 3456"
    assert Scrubber().scrub("a", text) == (text, None)
    scrubbed, marks = Scrubber(pii=True).scrub("a", text)
    assert (
        scrubbed == "mail [scrubbed:email], card [scrubbed:card_number], order 1234 5678 9012 3456"
    )
    assert marks == ["a:email", "a:card_number"]


def test_scrubbing_on_spans_marks_what_was_scrubbed() -> None:
    r = configure_with(InMemorySpanExporter(), scrub_pii=True)
    try:

        @nexagauge.trace(name="s")
        def f(question: str) -> str:
            nexagauge.add_context({"id": "d", "content": "root password=toor"})
            return "reach me at bob@example.com"

        f("my key is sk-abcdefghijklmnopqrstuvwx")
        span = r.one("s")
        assert "sk-abc" not in span.attributes[C.GEN_AI_INPUT_MESSAGES]
        assert "bob@example.com" not in span.attributes[C.GEN_AI_OUTPUT_MESSAGES]
        assert "toor" not in span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS]
        assert set(span.attributes[C.NG_SCRUBBED]) == {
            f"{C.GEN_AI_INPUT_MESSAGES}:api_key",
            f"{C.GEN_AI_OUTPUT_MESSAGES}:email",
            f"{C.GEN_AI_RETRIEVAL_DOCUMENTS}:password",
        }
    finally:
        nexagauge.shutdown()


def test_scrub_hook_custom_rules_and_disabling() -> None:
    seen: list[str] = []

    def hook(attribute: str, value: str) -> str:
        seen.append(attribute)
        return value.replace("ACME-", "[internal]-")

    r = configure_with(
        InMemorySpanExporter(),
        scrub_hook=hook,
        scrub_rules=[ScrubRule("ticket", r"\bTICKET-\d+\b", raw_triggers=("TICKET-",))],
    )
    try:

        @nexagauge.trace(name="h")
        def f(question: str) -> str:
            return "see ACME-42 and TICKET-99"

        f("q")
        span = r.one("h")
        assert _out(span) == "see [internal]-42 and [scrubbed:ticket]"
        assert set(span.attributes[C.NG_SCRUBBED]) == {
            f"{C.GEN_AI_OUTPUT_MESSAGES}:ticket",
            f"{C.GEN_AI_OUTPUT_MESSAGES}:hook",
        }
        assert C.GEN_AI_INPUT_MESSAGES in seen
    finally:
        nexagauge.shutdown()
    r = configure_with(InMemorySpanExporter(), scrub=False)
    try:

        @nexagauge.trace(name="raw")
        def g(question: str) -> str:
            return "password=hunter2"

        g("q")
        assert _out(r.one("raw")) == "password=hunter2"
    finally:
        nexagauge.shutdown()


def test_failing_hook_drops_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    def hook(attribute: str, value: str) -> str:
        raise RuntimeError("hook bug")

    r = configure_with(InMemorySpanExporter(), scrub_hook=hook)
    _errors.set_strict(False)
    try:

        @nexagauge.trace(name="hf")
        def f(question: str) -> str:
            return "possibly sensitive"

        assert f("q") == "possibly sensitive"
        span = r.one()  # the hook sees every recorded text, the span name included: fail closed
        assert span.name == "[scrubbed:hook_error]"
        assert _out(span) == "[scrubbed:hook_error]"
        assert f"{C.GEN_AI_OUTPUT_MESSAGES}:hook_error" in span.attributes[C.NG_SCRUBBED]
        assert "span.name:hook_error" in span.attributes[C.NG_SCRUBBED]
        # what the SDK itself writes stays readable for the evaluator
        assert span.attributes[C.GEN_AI_OPERATION_NAME] == C.OPERATION_INVOKE_WORKFLOW
        assert span.attributes[C.NG_SDK_VERSION] == nexagauge.__version__
    finally:
        _errors.set_strict(None)
        nexagauge.shutdown()


def test_invalid_custom_rule_is_rejected_at_configure() -> None:
    with pytest.raises(ValueError, match="scrub rule 'bad'"):
        nexagauge.configure(exporter=InMemorySpanExporter(), scrub_rules=[ScrubRule("bad", "(")])


def test_pandas_like_frames_are_bounded() -> None:
    class FakeFrame:  # duck type of pandas.DataFrame (pandas is not a dependency)
        __module__ = "pandas.core.frame"
        columns = ("a",)

        def __init__(self, n: int) -> None:
            self.n = n

        def __len__(self) -> int:
            return self.n

        def head(self, k: int) -> FakeFrame:
            return FakeFrame(min(k, self.n))

        def to_dict(self, orient: str) -> list[dict[str, int]]:
            assert orient == "records"
            return [{"a": i} for i in range(self.n)]

    data = to_jsonable(FakeFrame(1000))
    assert data[:2] == [{"a": 0}, {"a": 1}]
    assert len(data) == 101 and data[-1] == "...900 more rows"
