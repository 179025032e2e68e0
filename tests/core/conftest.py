"""Fixtures of the core tests: sample data paths and a runner for the real ``nexagauge`` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import nexagauge

DATA = Path(nexagauge.__file__).parent / "data"
SAMPLE = DATA / "sample.jsonl"
SAMPLE_BAD = DATA / "sample_bad.jsonl"


def nexagauge_command() -> list[str]:
    """The installed console script (falls back to ``python -m nexagauge`` in a bare checkout)."""
    script = Path(sys.executable).with_name("nexagauge")
    if script.exists():
        return [str(script)]
    found = shutil.which("nexagauge")
    return [found] if found else [sys.executable, "-m", "nexagauge"]


@dataclass
class Completed:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def _env(cache_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_"))}
    env.update(
        NEXAGAUGE_JUDGE_MODE="none",  # judge nodes skip with "no judge configured": deterministic
        NEXAGAUGE_CACHE_DIR=str(cache_dir),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


Runner = Callable[..., Completed]


@pytest.fixture
def cli(tmp_path: Path) -> Runner:
    """Run ``nexagauge ARGS`` in ``tmp_path`` with a private cache; returns rc/stdout/stderr."""

    def run(
        *args: str, cache_dir: Path | None = None, timeout: float = 120, **env: str
    ) -> Completed:
        e = _env(cache_dir or tmp_path / "cache")
        e.update(env)
        p = subprocess.run(
            [*nexagauge_command(), *args],
            cwd=tmp_path,
            env=e,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Completed(p.returncode, p.stdout, p.stderr)

    return run


@dataclass
class SampleRun:
    result: Completed
    out: Path
    cache: Path


@pytest.fixture(scope="module")
def refmatch_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleRun]:
    """One real ``nexagauge run refmatch`` over the bundled sample (shared: it loads WordNet)."""
    base = tmp_path_factory.mktemp("refmatch")
    out, cache = base / "out", base / "cache"
    p = subprocess.run(
        [*nexagauge_command(), "run", "refmatch", "--input", str(SAMPLE), "--output-dir", str(out)],
        cwd=base,
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=300,
    )
    yield SampleRun(Completed(p.returncode, p.stdout, p.stderr), out, cache)
