"""Fixtures of the judge area: a loopback OpenAI-compatible server and judges pointed at it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)

from support.openai_server import OpenAIServer  # noqa: E402

from nexagauge.judge.llm.client import LLMJudge  # noqa: E402
from nexagauge.settings import JudgeSettings  # noqa: E402

#: tiny backoff so retry tests take milliseconds
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_retries": 3, "timeout_s": 5.0}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest_asyncio.fixture
async def make_judge(
    server: OpenAIServer, tmp_path: Path
) -> AsyncIterator[Callable[..., LLMJudge]]:
    made: list[LLMJudge] = []

    def make(cache: bool = False, **overrides: Any) -> LLMJudge:
        s = JudgeSettings(base_url=server.base_url, api_key="test-key", **{**FAST, **overrides})
        j = LLMJudge(s, cache_dir=tmp_path / "judge-cache" if cache else None)
        made.append(j)
        return j

    yield make
    for j in made:
        await j.aclose()
