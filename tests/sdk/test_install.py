"""A tracing-only install: the base requirements are OpenTelemetry only; the evaluator is an extra.

An app that only traces runs ``pip install nexagauge`` and must not receive pydantic, aiokafka,
openai, nltk... (issue 16). These tests read the wheel metadata setuptools builds from
pyproject.toml (what pip would install) and check that the ``nexagauge`` command explains what is
missing when the evaluator extra is not installed.
"""

from __future__ import annotations

import email
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OTEL_ONLY = ("opentelemetry-",)


def _name(requirement: str) -> str:
    for sep in ("[", ">", "<", "=", "!", "~", ";", " "):
        requirement = requirement.split(sep, 1)[0]
    return requirement.strip().lower()


def _built_metadata(tmp_path: Path) -> email.message.Message:
    """The METADATA file of the wheel setuptools would build from this checkout."""
    code = (
        "import os, sys\n"
        "from setuptools import build_meta\n"
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        pytest.fail(f"building the wheel metadata failed:\n{out.stderr[-2000:]}")
    dist_info = tmp_path / out.stdout.strip().splitlines()[-1]
    return email.message_from_string((dist_info / "METADATA").read_text("utf-8"))


def test_base_requirements_are_opentelemetry_only(tmp_path: Path) -> None:
    meta = _built_metadata(tmp_path)
    requires = meta.get_all("Requires-Dist") or []
    base = [r for r in requires if "extra ==" not in r]
    assert base, "no base requirement: the SDK needs OpenTelemetry"
    assert all(_name(r).startswith(OTEL_ONLY) for r in base), base
    assert {_name(r) for r in base} >= {"opentelemetry-api", "opentelemetry-sdk"}
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"evaluator", "demo", "dev", "embeddings"} <= extras
    evaluator = {_name(r) for r in requires if 'extra == "evaluator"' in r}
    assert {"pydantic", "aiokafka", "openai"} <= evaluator


def test_demo_and_dev_extras_install_the_evaluator() -> None:
    """README command 1 (`.[demo]`) and the test command (`.[embeddings,dev]`) get everything."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"]
    for extra in ("demo", "dev", "embeddings"):
        assert any(r.startswith("nexagauge[") and "evaluator" in r for r in extras[extra]), (
            f"the {extra} extra does not pull in the evaluator"
        )
    readme = (REPO / "README.md").read_text("utf-8")
    assert "'.[demo]'" in readme or "'nexagauge[demo]'" in readme


_BLOCK = (
    "import sys\n"
    "for name in ('pydantic', 'pydantic_settings', 'aiokafka', 'openai', 'yaml', 'tiktoken'):\n"
    "    sys.modules[name] = None  # as if the evaluator extra were not installed\n"
)


@pytest.mark.parametrize(
    "argv",
    [["run", "--input", "{data}", "relevance"], ["estimate", "--input", "{data}", "relevance"]],
)
def test_cli_without_the_evaluator_says_what_to_install(tmp_path: Path, argv: list[str]) -> None:
    data = tmp_path / "cases.jsonl"
    data.write_text('{"question": "q", "answer": "a"}\n', "utf-8")
    args = [a.format(data=data) for a in argv]
    code = _BLOCK + f"from nexagauge.cli.main import main\nsys.exit(main({args!r}))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 2, out.stderr
    assert "pip install 'nexagauge[evaluator]'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_tracing_works_without_the_evaluator() -> None:
    """`import nexagauge` + `@nexagauge.trace` record a span with the evaluator's modules absent."""
    code = _BLOCK + (
        "import nexagauge\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exp = InMemorySpanExporter()\n"
        "nexagauge.configure(exporter=exp, batch=False, set_global=False)\n"
        "@nexagauge.trace\n"
        "def answer(question):\n"
        "    nexagauge.add_context([{'id': 'd1', 'text': 'Paris'}])\n"
        "    return 'Paris'\n"
        "answer('capital of France?')\n"
        "print(len(exp.get_finished_spans()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
