"""``set_all`` leaves a span as ``set_attributes`` would, and takes its direct path only when that
is exact (the SDK's span, no value-length limit, room under the count limit, plain values)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

from nexagauge.sdk import span_attrs
from nexagauge.sdk.span_attrs import set_all

CASES: list[dict[str, Any]] = [
    {"gen_ai.operation.name": "invoke_workflow", "gen_ai.input.messages": "x" * 500},
    {"b": True, "i": 3, "f": 0.5, "s": "", "t": ("a", "b")},
    {"list": ["a", "b"]},  # a list: OpenTelemetry stores a tuple
    {"none": None, "s": "kept"},  # None: dropped by validation
    {"": "empty key", "s": "v"},
    {"mixed": ("a", 1)},
    {"nested": {"k": "v"}},
    {"obj": object()},
]


class _Str(str):
    def __str__(self) -> str:
        return "custom"


def _twins(limits: SpanLimits | None = None) -> tuple[Any, Any]:
    tracer = TracerProvider(span_limits=limits or SpanLimits()).get_tracer("t")
    return tracer.start_span("a"), tracer.start_span("b")


def _state(span: Any) -> tuple[dict[str, Any], int]:
    return dict(span.attributes), span.dropped_attributes


@pytest.mark.parametrize("attrs", [*CASES, {"sub": _Str("x")}])
@pytest.mark.parametrize(
    "limits",
    [None, SpanLimits(max_span_attribute_length=4), SpanLimits(max_span_attributes=2)],
    ids=["no-limits", "value-length", "count"],
)
def test_same_span_as_set_attributes(attrs: dict[str, Any], limits: SpanLimits | None) -> None:
    ours, theirs = _twins(limits)
    ours.set_attribute("already", "there")
    theirs.set_attribute("already", "there")
    set_all(ours, attrs)
    theirs.set_attributes(attrs)
    assert _state(ours) == _state(theirs)
    ours.end()
    theirs.end()
    assert _state(ours) == _state(theirs)


def test_direct_path_skips_validation_when_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default limits and plain values: no call into OpenTelemetry's validating insert."""
    span, _ = _twins()
    calls: list[Any] = []
    monkeypatch.setattr(BoundedAttributes, "_set_items", lambda self, a: calls.append(a))
    set_all(span, CASES[0])
    assert calls == []
    assert dict(span.attributes) == CASES[0]


@pytest.mark.parametrize("attrs", CASES[2:])
def test_other_values_take_the_public_path(
    attrs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    span, _ = _twins()
    calls: list[Any] = []
    monkeypatch.setattr(type(span), "set_attributes", lambda self, a: calls.append(a))
    set_all(span, attrs)
    assert calls == [attrs]


def test_ended_span_is_left_alone_with_opentelemetrys_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    span, _ = _twins()
    span.end()
    with caplog.at_level(logging.WARNING):
        set_all(span, {"late": "x"})
    assert "late" not in span.attributes
    assert "ended span" in caplog.text


def test_non_sdk_span_and_unknown_layout_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    set_all(otel_trace.INVALID_SPAN, {"a": "b"})  # a no-op span: its own no-op set_attributes

    class Odd(type(_twins()[0])):  # type: ignore[misc]
        def set_attributes(self, attributes: Any) -> None:
            self.seen = dict(attributes)

    span = _twins()[0]
    span.__class__ = Odd
    set_all(span, {"a": "b"})
    assert span.seen == {"a": "b"}
    assert span_attrs._LAYOUT[Odd] is False
