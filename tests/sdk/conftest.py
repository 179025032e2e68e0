"""Fixtures of the SDK tests.

``NEXAGAUGE_SDK_STRICT=1`` is set before anything records a span: an internal SDK failure, which in
production is logged once and swallowed, fails the test instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ["NEXAGAUGE_SDK_STRICT"] = "1"

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

import nexagauge
from nexagauge.sdk import _errors

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)


class Recorder:
    """The in-memory exporter plus helpers to find spans by name."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    # typed Any: tests index span.attributes directly (OpenTelemetry types them Optional)
    @property
    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[Any]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str | None = None) -> Any:
        spans = self.spans if name is None else self.named(name)
        assert len(spans) == 1, (
            f"expected one span {name or ''}, got {[s.name for s in self.spans]}"
        )
        return spans[0]

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def rec() -> Iterator[Recorder]:
    """SDK configured with a synchronous in-memory exporter (spans visible right after the call)."""
    exporter = InMemorySpanExporter()
    nexagauge.configure(exporter=exporter, batch=False, set_global=False)
    _errors.set_strict(None)
    _errors.reset_logged()
    try:
        yield Recorder(exporter)
    finally:
        nexagauge.shutdown()
        _errors.set_strict(None)
        _errors.reset_logged()


def configure_with(exporter: InMemorySpanExporter, **kwargs: Any) -> Recorder:
    """Reconfigure the SDK for one test with extra ``configure`` options."""
    nexagauge.configure(exporter=exporter, batch=False, set_global=False, **kwargs)

    return Recorder(exporter)
