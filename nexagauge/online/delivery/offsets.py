"""Per-partition commit tracking for at-least-once delivery.

A Kafka message may contribute spans to several traces, and a trace may be assembled from several
messages. A message's offset is *done* when every trace it contributed to is done (evaluated and
emitted, skipped by sampling, or dead-lettered). The committable position of a partition is one
past the highest offset such that it and every offset delivered before it are done: never past an
unfinished message, so a crash re-delivers (and re-evaluates) at most the unfinished suffix.

Reference counting: :meth:`OffsetTracker.begin` registers a delivered message holding one guard
reference; each trace the message feeds adds a reference (:meth:`acquire`); the caller drops the
guard with :meth:`release` once the message is processed and each trace releases its references
when done.

Example:
    >>> t = OffsetTracker()
    >>> tp = ("spans", 0)
    >>> t.begin(tp, 10); t.begin(tp, 11)
    >>> t.acquire(tp, 10)          # offset 10 feeds an unfinished trace
    >>> t.release(tp, 10); t.release(tp, 11)
    >>> t.committable(tp) is None  # 11 is done but 10 is not
    True
    >>> t.release(tp, 10)          # the trace is done
    >>> t.committable(tp)
    12
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass
class _Partition:
    order: deque[int] = field(default_factory=deque)  # delivered offsets, ascending
    refs: dict[int, int] = field(default_factory=dict)
    position: int | None = None  # next offset to commit (one past the last done prefix)
    committed: int | None = None  # last position actually committed
    epoch: int = 0  # bumped when the partition is dropped or reset (stale releases ignored)


class OffsetTracker:
    """Reference-counted offsets per partition (see module docstring)."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, _Partition] = {}
        self._dropped: dict[TopicPartition, int] = {}

    def begin(self, tp: TopicPartition, offset: int) -> None:
        """Register a delivered message with one guard reference.

        A re-delivered offset at or below one already seen (a seek back after an error) is
        tracked again from scratch: the earlier state of the partition is discarded.
        """
        p = self._parts.get(tp)
        if p is None:
            p = self._parts[tp] = _Partition(epoch=self._dropped.pop(tp, -1) + 1)
        if p.order and offset <= p.order[-1]:
            self._parts[tp] = p = _Partition(committed=p.committed, epoch=p.epoch + 1)
        p.order.append(offset)
        p.refs[offset] = 1

    def acquire(self, tp: TopicPartition, offset: int) -> None:
        """Add a reference: the message at ``offset`` now feeds one more unfinished trace."""
        p = self._parts.get(tp)
        if p is not None and offset in p.refs:
            p.refs[offset] += 1

    def epoch(self, tp: TopicPartition) -> int:
        """The current epoch of ``tp``: pass it to :meth:`release` from long-running work."""
        p = self._parts.get(tp)
        return p.epoch if p else self._dropped.get(tp, 0)

    def release(self, tp: TopicPartition, offset: int, epoch: int | None = None) -> None:
        """Drop a reference; unknown partitions/offsets (revoked meanwhile) are ignored, and so
        are releases from an older ``epoch`` (work started before a revocation/reset)."""
        p = self._parts.get(tp)
        if p is None or (epoch is not None and epoch != p.epoch):
            return
        n = p.refs.get(offset)
        if n is None:
            return
        if n <= 0:  # a double release is a bug in the caller; never commit past it silently
            raise RuntimeError(f"offset {tp}@{offset} released more often than acquired")
        p.refs[offset] = n - 1
        while p.order and p.refs.get(p.order[0], 1) <= 0:
            done = p.order.popleft()
            del p.refs[done]
            p.position = done + 1

    def release_all(self, refs: Iterable[tuple[TopicPartition, int]]) -> None:
        for tp, off in refs:
            self.release(tp, off)

    def committable(self, tp: TopicPartition) -> int | None:
        """The position to commit for ``tp`` if it advanced since the last commit, else None."""
        p = self._parts.get(tp)
        if p is None or p.position is None or p.position == p.committed:
            return None
        return p.position

    def all_committable(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for tp in self._parts:
            pos = self.committable(tp)
            if pos is not None:
                out[tp] = pos
        return out

    def committed_position(self, tp: TopicPartition) -> int | None:
        """The last position committed for ``tp`` by this process (None before the first)."""
        p = self._parts.get(tp)
        return p.committed if p else None

    def mark_committed(self, tp: TopicPartition, position: int) -> None:
        p = self._parts.get(tp)
        if p is not None:
            p.committed = position

    def pending(self, tp: TopicPartition | None = None) -> int:
        """Number of delivered but unfinished messages (of one partition or all)."""
        if tp is not None:
            p = self._parts.get(tp)
            return len(p.order) if p else 0
        return sum(len(p.order) for p in self._parts.values())

    def drop(self, tps: Iterable[TopicPartition]) -> None:
        """Forget revoked partitions (their unfinished messages will be re-delivered elsewhere)."""
        for tp in tps:
            p = self._parts.pop(tp, None)
            if p is not None:
                self._dropped[tp] = p.epoch

    def partitions(self) -> list[TopicPartition]:
        return list(self._parts)
