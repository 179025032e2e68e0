"""Fixtures of the agent-signal tests (issue 30 items 3, 5, 7): agent runs built by hand (the
extraction that fills ``EvalCase.agent`` from traces is tested in ``tests/agents``)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)


import os  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import nexagauge  # noqa: E402
from nexagauge.sdk import _errors  # noqa: E402


class Spans:
    """The SDK's finished spans (synchronous in-memory export), by name."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def named(self, name: str) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def one(self, name: str) -> Any:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.exporter.get_finished_spans()]
        return found[0]


@pytest.fixture
def sdk_spans() -> Iterator[Spans]:
    """The SDK configured to a synchronous in-memory exporter; an internal SDK error fails the
    test (strict mode). A test may call :func:`reconfigure` for other ``configure`` options."""
    exporter = InMemorySpanExporter()
    os.environ["NEXAGAUGE_SDK_STRICT"] = "1"
    nexagauge.configure(exporter=exporter, batch=False, set_global=False)
    _errors.set_strict(None)
    _errors.reset_logged()
    try:
        yield Spans(exporter)
    finally:
        nexagauge.shutdown()
        _errors.reset_logged()


def reconfigure(spans: Spans, **options: Any) -> None:
    """Configure the SDK again, same exporter, with other ``configure`` options."""
    nexagauge.configure(exporter=spans.exporter, batch=False, set_global=False, **options)
