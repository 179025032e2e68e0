"""`import nexagauge` stays light (stdlib + OpenTelemetry); evaluator names resolve lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nexagauge

HEAVY = ("pydantic", "pydantic_settings", "aiokafka", "openai", "torch", "numpy", "tiktoken")


def test_import_loads_no_heavy_dependency() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import nexagauge"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    modules = {
        line.split("|")[-1].strip().split(".")[0]
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "nexagauge" in modules and "opentelemetry" in modules
    loaded = sorted(m for m in HEAVY if m in modules)
    assert not loaded, f"`import nexagauge` imported {loaded}"


def test_import_and_trace_do_not_load_heavy_modules_at_runtime() -> None:
    code = (
        "import sys, nexagauge\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "nexagauge.configure(exporter=InMemorySpanExporter(), batch=False, set_global=False)\n"
        "@nexagauge.trace\n"
        "def f(question):\n"
        "    nexagauge.add_context({'id': 1, 'text': 'doc'})\n"
        "    return {'answer': 'x'}\n"
        "with nexagauge.session(session_id='s'):\n"
        "    f('q')\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def test_public_api() -> None:
    for name in nexagauge.__all__:
        assert getattr(nexagauge, name) is not None, name
    assert callable(nexagauge.trace) and callable(nexagauge.configure)
    assert callable(nexagauge.add_context) and callable(nexagauge.session)


def test_lazy_evaluator_exports() -> None:
    assert set(nexagauge._LAZY) >= {"EvalCase", "parse_record", "Settings"}
    from nexagauge.schema.case import EvalCase

    assert nexagauge.EvalCase is EvalCase
    assert "EvalCase" in dir(nexagauge)
    with pytest.raises(AttributeError, match="no attribute 'DoesNotExist'"):
        _ = nexagauge.DoesNotExist


#: what OpenTelemetry itself imports (its own dependencies), besides the standard library
OTEL_DEPS = {
    "opentelemetry",
    "typing_extensions",
    "importlib_metadata",
    "zipp",
    "deprecated",
    "wrapt",
}


def test_import_and_trace_load_only_stdlib_and_opentelemetry() -> None:
    """Every module loaded by `import nexagauge` + a traced call is stdlib or OpenTelemetry's."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import nexagauge\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "nexagauge.configure(exporter=InMemorySpanExporter(), batch=False, set_global=False)\n"
        "@nexagauge.trace\n"
        "def f(question, context):\n"
        "    with nexagauge.retrieval(query=question) as r:\n"
        "        r.add([{'id': 1, 'text': 'doc', 'metadata': {'token': 'x'}}])\n"
        "    raise ValueError('boom')\n"
        "try:\n"
        "    f('q', ['c'])\n"
        "except ValueError:\n"
        "    pass\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", "import site; site.main()\n" + code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    third_party = set(eval(out.stdout.strip()))  # a printed list of names
    assert "nexagauge" in third_party and "opentelemetry" in third_party
    unexpected = third_party - OTEL_DEPS - {"nexagauge"}
    assert not unexpected, f"the SDK path loaded {sorted(unexpected)}"
