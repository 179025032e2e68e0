"""Content-addressed caches: an atomic on-disk store, a bounded in-memory store, and the
node-result cache on top of either.

Disk (:class:`ContentStore`) is for runs that end: re-running a dataset, CI regression checks
and ``estimate`` reuse every node result and judge answer. Memory (:class:`MemoryStore`, an LRU
bounded in bytes) is for the long-running ``nexagauge serve``: identical content (a FAQ bot's
repeated question and answer, a redelivered trace) is still judged once, but a service that runs
for months does not fill its disk with one file per node per evaluation (writing them cost serve
11.0 vs 8.3 ms of CPU per evaluation, ``bench/online_latency.py``; ``cache.backend``: ``auto`` =
disk for the CLI, memory for ``serve``).

Keys are SHA-256 hex digests of a canonical JSON of everything that determines a result (node,
case fingerprint, node config, implementation/prompt version, model, upstream outputs). Values are
written to a temp file in the same directory and ``os.replace``-d into place, so concurrent writers
(threads, tasks or processes) never produce a torn file: the last complete write wins and every
reader sees either nothing or a whole entry. A corrupt entry (e.g. disk full) is treated as a miss
and removed.

Example:
    >>> import tempfile
    >>> store = ContentStore(tempfile.mkdtemp())
    >>> k = store.key({"node": "refmatch", "case": "abc"})
    >>> store.put(k, b"{}"); store.get(k)
    b'{}'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

_MAGIC = b"NGC1\n"
M = TypeVar("M", bound=BaseModel)


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) of plain data and pydantic models."""

    def default(o: Any) -> Any:
        if isinstance(o, BaseModel):
            return o.model_dump(mode="json")
        if isinstance(o, set | frozenset):
            return sorted(o)
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"cannot canonicalize {type(o).__name__}")

    return json.dumps(
        obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=default
    )


@dataclass(frozen=True)
class CacheStats:
    entries: int
    bytes: int
    namespaces: dict[str, int]


class BlobStore(Protocol):
    """What the caches need from a store: bytes by content key."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> None: ...


class MemoryStore:
    """A thread-safe LRU of content key -> bytes, bounded by the total size of its values.

    Keys are the same SHA-256 digests the disk store uses (they already include the node or the
    judge call they belong to, so namespaces can share one store and one budget).

    Example:
        >>> m = MemoryStore(max_bytes=10)
        >>> m.put("a" * 64, b"12345"); m.put("b" * 64, b"67890"); m.put("c" * 64, b"x")
        >>> (m.get("a" * 64), m.get("c" * 64), m.bytes)
        (None, b'x', 6)
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.bytes = 0
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: bytes) -> None:
        if len(value) > self.max_bytes:
            return  # larger than the whole budget: not worth evicting everything for
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= len(old)
            # evict before adding, so that ``bytes`` (read without the lock, e.g. for metrics)
            # never shows more than the budget, not even between two statements of a put
            while self._data and self.bytes + len(value) > self.max_bytes:
                _, dropped = self._data.popitem(last=False)
                self.bytes -= len(dropped)
            self._data[key] = value
            self.bytes += len(value)

    def __len__(self) -> int:
        return len(self._data)


class ContentStore:
    """An atomic content-addressed blob store in a directory (``<dir>/<ns>/<k[:2]>/<k>``)."""

    def __init__(self, root: str | os.PathLike[str], namespace: str = "default") -> None:
        self.root = Path(root)
        self.namespace = namespace
        self.dir = self.root / namespace

    @staticmethod
    def key(parts: Mapping[str, Any]) -> str:
        return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        if len(key) < 8 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"invalid cache key {key!r}")
        return self.dir / key[:2] / key

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return None
        if not data.startswith(_MAGIC):
            self._discard(path)
            return None
        body = data[len(_MAGIC) :]
        nl = body.find(b"\n")
        if nl < 0:
            self._discard(path)
            return None
        digest, payload = body[:nl].decode("ascii", "replace"), body[nl + 1 :]
        if hashlib.sha256(payload).hexdigest()[:16] != digest:
            self._discard(path)  # torn or corrupted entry: a miss, never a wrong answer
            return None
        return payload

    def put(self, key: str, value: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = _MAGIC + hashlib.sha256(value).hexdigest()[:16].encode() + b"\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=f".{os.getpid()}")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(value)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _discard(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()


class NodeCache:
    """Node results cached by (node, case fingerprint, node config, version, model, upstream).

    Example:
        >>> import tempfile
        >>> from nexagauge.schema.results import NodeMetrics
        >>> cache = NodeCache(tempfile.mkdtemp())
        >>> k = cache.key(node="refmatch", version="1", case="fp", config={}, upstream={})
        >>> cache.put(k, NodeMetrics()); cache.get(k, NodeMetrics) == NodeMetrics()
        True
    """

    NAMESPACE = "nodes"
    #: case fingerprints an in-memory cache remembers having seen (see :meth:`admits`)
    SIGHTINGS = 16_384

    def __init__(
        self, root: str | os.PathLike[str] | None = None, *, memory: MemoryStore | None = None
    ) -> None:
        #: the cache directory (``None`` for an in-memory cache)
        self.root = Path(root) if root is not None else None
        self.memory = memory
        self.store: BlobStore
        if memory is not None and root is None:
            self.store = memory
        elif root is not None and memory is None:
            self.store = ContentStore(root, self.NAMESPACE)
        else:
            raise ValueError("NodeCache needs either a directory or a MemoryStore")
        self.hits = 0
        self.misses = 0
        #: cases evaluated without node keys (first sightings in memory, see :meth:`admits`)
        self.unkeyed = 0
        self._sightings: OrderedDict[str, None] = OrderedDict()
        self._sightings_lock = threading.Lock()

    def admits(self, case: str) -> bool:
        """Whether the nodes of the case with fingerprint ``case`` should look up and store
        their results, i.e. whether a result of it can be here at all.

        On disk, always (another run may have stored it). In memory, only from a case's second
        sighting among the last :data:`SIGHTINGS` cases: a case this process has not seen
        cannot hit, and keying every node of every case (a digest of each upstream output, a
        canonical JSON of each key, a serialized copy of each output) cost about a fifth of the
        graph's CPU per online evaluation, where nearly every trace is new. A repeated case is
        stored on its second sighting and served from its third; the judge answers of its first
        are stored regardless (the judge's own cache), so a repeat never pays a judge call.

        Example:
            >>> c = NodeCache(memory=MemoryStore(1 << 20))
            >>> [c.admits("fp1"), c.admits("fp1"), c.admits("fp2"), c.admits("fp1")]
            [False, True, False, True]
        """
        if self.memory is None or self.root is not None:
            return True
        with self._sightings_lock:
            seen = self._sightings
            if case in seen:
                seen.move_to_end(case)
                return True
            seen[case] = None
            if len(seen) > self.SIGHTINGS:
                seen.popitem(last=False)
            self.unkeyed += 1
            return False

    def namespace(self, name: str) -> BlobStore:
        """A store for other cached results of the same lifetime (judge answers, GEval steps):
        its own directory on disk, the shared budget in memory."""
        if self.memory is not None:
            return self.memory
        assert self.root is not None
        return ContentStore(self.root, name)

    def key(
        self,
        *,
        node: str,
        version: str,
        case: str,
        config: Mapping[str, Any],
        upstream: Mapping[str, Any],
    ) -> str:
        return ContentStore.key(
            {"node": node, "version": version, "case": case, "config": config, "upstream": upstream}
        )

    def get(self, key: str, model: type[M]) -> M | None:
        raw = self.store.get(key)
        if raw is None:
            self.misses += 1
            return None
        try:
            value = model.model_validate_json(raw)
        except ValidationError:
            self.misses += 1  # an entry from an incompatible model version: recompute
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: BaseModel) -> None:
        self.store.put(key, value.model_dump_json().encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# Inspection (``nexagauge cache``)
# ---------------------------------------------------------------------------------------------
def _entries(root: Path) -> Iterator[tuple[str, Path]]:
    if not root.is_dir():
        return
    for ns in sorted(p for p in root.iterdir() if p.is_dir()):
        for sub in ns.iterdir():
            if sub.is_dir():
                for f in sub.iterdir():
                    if f.is_file() and not f.name.startswith(".tmp-"):
                        yield ns.name, f


def cache_stats(root: str | os.PathLike[str]) -> CacheStats:
    entries = 0
    size = 0
    per_ns: dict[str, int] = {}
    for ns, f in _entries(Path(root)):
        entries += 1
        size += f.stat().st_size
        per_ns[ns] = per_ns.get(ns, 0) + 1
    return CacheStats(entries=entries, bytes=size, namespaces=per_ns)


def clear_cache(
    root: str | os.PathLike[str], namespace: str | None = None, older_than_s: float | None = None
) -> int:
    """Delete cache entries (all, one namespace, or older than N seconds). Returns the count."""
    root = Path(root)
    if not root.is_dir():
        return 0
    now = time.time()
    removed = 0
    if namespace is None and older_than_s is None:
        removed = sum(1 for _ in _entries(root))
        shutil.rmtree(root, ignore_errors=True)
        return removed
    for ns, f in list(_entries(root)):
        if namespace is not None and ns != namespace:
            continue
        if older_than_s is not None and now - f.stat().st_mtime < older_than_s:
            continue
        try:
            f.unlink()
            removed += 1
        except OSError:
            pass
    return removed
