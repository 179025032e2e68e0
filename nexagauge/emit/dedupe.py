"""Idempotent emission: a bounded window of emitted keys, optionally journaled on disk.

A key is :meth:`EvaluationTarget.dedupe_key` (trace id, span id, metric, config fingerprint), stored
as a 128-bit hash. :class:`DedupeWindow` is an LRU of the last ``capacity`` keys;
:class:`DedupeJournal` appends the keys of every counted emission to a file so that a process
restarted on the same volume loads the recent keys back and does not count a redelivered
evaluation twice.

What this does and does not guarantee (also in docs/emit.md):

* same process: a key seen within the last ``capacity`` keys is never counted twice;
* restart on the same volume with the journal: the same, for keys journaled before the crash (the
  journal is written after the evaluation span's export is confirmed and *before* the counters
  move; each append is flushed to the OS, which survives a process crash; ``fsync=True`` also
  survives a power loss);
* several processes appending to one journal file are safe (appends and compaction hold an
  exclusive ``flock``), but each process reads the others' keys only when it starts;
* different volumes / different consumers of the group: not by the window or journal; the
  online service adds an :class:`EmittedKeyStore` shared by the whole consumer group (a compacted
  Kafka topic, :mod:`nexagauge.online.delivery.markers`) that the emitter consults and writes instead of
  the journal, so a redelivery is suppressed by whichever member owns its partition.

Example:
    >>> w = DedupeWindow(2)
    >>> w.add("a"), w.add("a"), w.add("b"), w.add("c"), "a" in w
    (True, False, True, True, False)
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

_HEX = frozenset("0123456789abcdef")


def key_hash(key: str) -> str:
    """128-bit hex hash of a dedupe key (what the window and the journal store)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).hexdigest()


class EmittedKeyStore(Protocol):
    """A durable record of emitted keys shared by every member of a consumer group.

    The online service implements it on a compacted Kafka topic
    (:class:`nexagauge.online.delivery.markers.EmittedKeys`); the emitter consults :meth:`contains` before
    exporting and calls :meth:`mark` after the evaluation span is durable, before counting.
    """

    def contains(self, key_hash: str) -> bool:
        """Whether the key was recorded (by any member, for the partitions this one owns)."""

    async def mark(self, key_hashes: Sequence[str], origin: Any) -> bool:
        """Record the keys durably; ``False`` (nothing recorded) when ``origin``'s partition is no
        longer owned by this member, so the new owner evaluates and counts the trace."""


class DedupeWindow:
    """LRU set of the last ``capacity`` key hashes (not thread-safe: event-loop use only)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"dedupe window capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._keys: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key_hash(key) in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def has_hash(self, h: str) -> bool:
        """Whether the key hash ``h`` is in the window (no LRU refresh)."""
        return h in self._keys

    def add(self, key: str) -> bool:
        """Insert ``key``; ``True`` when it was new (``False``: a duplicate, refreshed)."""
        return self.add_hash(key_hash(key))

    def add_hash(self, h: str) -> bool:
        if h in self._keys:
            self._keys.move_to_end(h)
            return False
        self._keys[h] = None
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)
        return True

    def hashes(self) -> list[str]:
        """The stored hashes, oldest first."""
        return list(self._keys)


class DedupeJournal:
    """Append-only file of key hashes, one per line, compacted to the last ``capacity`` lines.

    All methods block on file I/O: async callers run them with ``asyncio.to_thread``.
    """

    def __init__(self, path: str | Path, capacity: int, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.capacity = capacity
        self.fsync = fsync
        self._lock = threading.Lock()
        self._appended = 0
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    def _flock(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def load(self) -> list[str]:
        """The last ``capacity`` valid hashes in the file (a torn last line is ignored)."""
        with self._lock:
            if not self.path.exists():
                return []
            fd = self._flock()
            try:
                lines = self.path.read_text("ascii", errors="replace").splitlines()
            finally:
                os.close(fd)
        good = [ln for ln in lines if len(ln) == 32 and set(ln) <= _HEX]
        if len(good) != len(lines):
            log.warning(
                "dedupe journal %s: ignored %d malformed lines", self.path, len(lines) - len(good)
            )
        self._appended = len(good)
        return good[-self.capacity :]

    def append(self, hashes: Iterable[str]) -> None:
        """Append hashes (flushed to the OS; fsynced when configured); compacts when large."""
        data = "".join(f"{h}\n" for h in hashes)
        if not data:
            return
        with self._lock:
            fd = self._flock()
            try:
                f = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(f, data.encode("ascii"))
                    if self.fsync:
                        os.fsync(f)
                finally:
                    os.close(f)
                self._appended += data.count("\n")
                if self._appended > 2 * self.capacity:
                    self._compact()
            finally:
                os.close(fd)

    def _compact(self) -> None:
        # caller holds both locks; keep the newest `capacity` lines, replace atomically
        lines = self.path.read_text("ascii", errors="replace").splitlines()
        keep = [ln for ln in lines if len(ln) == 32 and set(ln) <= _HEX][-self.capacity :]
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(f"{h}\n" for h in keep), "ascii")
        if self.fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._appended = len(keep)
