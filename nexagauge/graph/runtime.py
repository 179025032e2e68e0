"""Shared services for one process: settings, judge, embeddings, node cache, CPU offloading.

A ``Runtime`` is created once (by the CLI or the online evaluator) and handed to every node via
``NodeContext.runtime``. Heavy services (embedding model, judge client) are created lazily so a run
that never needs them never pays for them.

Example:
    >>> rt = Runtime.create(Settings())
    >>> rt.judge_kind in ("llm", "local", None)
    True
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from nexagauge.settings import Settings

if TYPE_CHECKING:
    from nexagauge.graph.cache import NodeCache

P = ParamSpec("P")
T = TypeVar("T")

NO_JUDGE = "no judge configured"

#: CPU work on inputs shorter than this (characters) runs inline on the event loop: chunking and
#: de-duplicating a few thousand characters takes well under a millisecond, less than the thread
#: hand-off itself costs (submit, wake-up, result hand-back: ~0.1 ms of CPU each way)
INLINE_CPU_CHARS = 4000


@dataclass
class Runtime:
    """Process-wide services (see module docstring).

    Example:
        >>> rt = Runtime.create(Settings(judge={"mode": "none"}), use_cache=False)
        >>> (rt.judge_kind, rt.llm_unavailable())
        (None, 'no judge configured')
    """

    settings: Settings
    cache: NodeCache | None = None
    #: the judge backend (``nexagauge.judge``); ``None`` means judge nodes skip with NO_JUDGE
    judge: Any = None
    #: the embedding service (``nexagauge.judge.embeddings``), created on first use
    _embedder: Any = None
    _embedder_factory: Callable[[], Any] | None = None
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    @classmethod
    def create(
        cls, settings: Settings, *, use_cache: bool | None = None, service: bool = False
    ) -> Runtime:
        """Build the runtime from settings: cache, judge (LLM or local), lazy embeddings.

        ``service``: a long-running process (``nexagauge serve``), where ``cache.backend =
        "auto"`` means a bounded in-memory cache instead of files that would grow forever.
        """
        from nexagauge.graph.cache import MemoryStore, NodeCache

        c = settings.cache
        enabled = c.enabled if use_cache is None else use_cache
        cache = None
        if enabled:
            backend = c.backend if c.backend != "auto" else ("memory" if service else "disk")
            if backend == "memory":
                cache = NodeCache(memory=MemoryStore(int(c.memory_mb * 1024 * 1024)))
            else:
                cache = NodeCache(c.dir)
        rt = cls(settings=settings, cache=cache)
        rt.judge = _make_judge(settings, rt)
        return rt

    @property
    def judge_kind(self) -> str | None:
        """``"llm"``, ``"local"`` or ``None`` (no judge)."""
        return getattr(self.judge, "kind", None) if self.judge is not None else None

    def llm_unavailable(self) -> str | None:
        """Why nodes that need a real LLM cannot run now (no judge, or the local judge)."""
        if self.judge is None:
            return NO_JUDGE
        if not getattr(self.judge, "supports_llm_tasks", False):
            from nexagauge.judge.base import NEEDS_LLM

            return NEEDS_LLM
        return None

    @property
    def embedder(self) -> Any:
        """The process-wide embedding service (loaded on first use, then shared)."""
        if self._embedder is None:
            factory = self._embedder_factory or _default_embedder_factory(self.settings)
            self._embedder = factory()
        return self._embedder

    async def to_thread(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run CPU-bound work off the event loop (embeddings, ROUGE, METEOR)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="nexagauge-cpu")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def cpu(self, size: int, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn``: inline when its input is small (``size`` characters below
        :data:`INLINE_CPU_CHARS`), else off the event loop like :meth:`to_thread`."""
        if size < INLINE_CPU_CHARS:
            return fn(*args, **kwargs)
        return await self.to_thread(fn, *args, **kwargs)

    async def aclose(self) -> None:
        """Close the judge, this event loop's connections of the (process-wide, shared)
        embedding service - it reconnects on its next use - and the CPU pool."""
        close = getattr(self.judge, "aclose", None)
        if close is not None:
            await close()
        if self._embedder is not None:
            await self._embedder.aclose()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _make_judge(settings: Settings, rt: Runtime) -> Any:
    """Choose the judge backend: an LLM endpoint if configured, else the local judge, else none."""
    mode = settings.judge.mode
    if mode == "none":
        return None
    if mode == "llm" or (mode == "auto" and settings.judge.configured):
        try:
            from nexagauge.judge.llm.client import LLMJudge
        except ImportError:  # pragma: no cover - judge package not built yet
            return None
        from nexagauge.judge.llm.client import CACHE_NAMESPACE

        store = rt.cache.namespace(CACHE_NAMESPACE) if rt.cache is not None else None
        return LLMJudge(settings.judge, store=store)
    try:
        from nexagauge.judge.local.judge import LocalJudge
    except ImportError:
        return None
    # the judge gets what it needs, not the runtime: the shared embedder (built on first use)
    # and the CPU offload function
    return LocalJudge(settings, embedder_factory=lambda: rt.embedder, offload=rt.to_thread)


def _default_embedder_factory(settings: Settings) -> Callable[[], Any]:
    def make() -> Any:
        from nexagauge.judge.embeddings import create_embedder

        return create_embedder(settings.embeddings)

    return make
