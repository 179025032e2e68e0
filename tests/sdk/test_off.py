"""Tracing off means a plain call: no span, no capture, no scrubbing (issue 16).

Off is: no tracer provider anywhere (no ``configure()``, none set globally), ``OTEL_SDK_DISABLED=true``
with or without ``configure()``, ``configure(enabled=False)``. "No capture work" is checked with
arguments that count every time the SDK looks at them. The cost (<= 1 us per call) is measured in
bench/sdk_overhead.py, not here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge

REPO = Path(__file__).resolve().parents[2]

# A traced call whose arguments and result count every attribute the SDK reads from them.
_PROBE = """
import os, sys
import nexagauge
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

looked = []

class Probe:
    def __getattribute__(self, name):
        looked.append(name)
        return object.__getattribute__(self, name)
    def __repr__(self):
        looked.append("repr")
        return "Probe()"

exporter = InMemorySpanExporter()
if sys.argv[1] == "configure":
    nexagauge.configure(exporter=exporter, batch=False, set_global=False)

@nexagauge.trace
def answer(question, context):
    nexagauge.add_context([Probe()])
    return Probe()

answer(Probe(), [Probe(), Probe()])
print(len(exporter.get_finished_spans()), len(looked))
"""


def _probe(mode: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "OTEL_SDK_DISABLED"}
    environ.update(env)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=REPO,
        check=True,
    )
    return out.stdout.strip()


def test_no_provider_anywhere_is_off() -> None:
    assert _probe("plain") == "0 0"


def test_otel_sdk_disabled_without_configure_is_off() -> None:
    assert _probe("plain", OTEL_SDK_DISABLED="true") == "0 0"


def test_otel_sdk_disabled_with_configure_is_off() -> None:
    assert _probe("configure", OTEL_SDK_DISABLED="true") == "0 0"


def test_the_probe_sees_capture_work_when_tracing_is_on() -> None:
    """The probe is sensitive: with tracing on, the same call is captured."""
    spans, looked = _probe("configure").split()
    assert spans == "1" and int(looked) > 0


def test_configure_enabled_false_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    nexagauge.configure(exporter=exporter, batch=False, set_global=False, enabled=False)
    try:
        seen: list[str] = []

        class Probe:
            def __getattribute__(self, name: str) -> object:
                seen.append(name)
                return object.__getattribute__(self, name)

        @nexagauge.trace
        def answer(question: object, context: object) -> object:
            nexagauge.add_context([Probe()])
            nexagauge.set_eval_knobs(grounding={"include_reasoning": True})
            return Probe()

        answer(Probe(), [Probe()])
        assert exporter.get_finished_spans() == ()
        assert seen == []
    finally:
        nexagauge.shutdown()
