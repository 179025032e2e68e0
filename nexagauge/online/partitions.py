"""What the evaluation stage does when its partitions change hands or the member stops.

:class:`PartitionLifecycle` is the part of :class:`~nexagauge.online.stage.EvaluatorStage` that
keeps delivery exact across rebalances and shutdown: new partitions restore their emitted keys
before they are read (:mod:`nexagauge.online.delivery.markers`), revoked ones are fenced and their
traces' sources stripped (their queued cases are left to the new owner), and a drain lets running
evaluations finish within a deadline, cancelling the rest so they are re-delivered, never lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from aiokafka import TopicPartition

from nexagauge.online.cases import _Active
from nexagauge.online.ingest.assembly import Trace, TraceBuffer, Trigger
from nexagauge.online.ingest.extract import ExtractedCase
from nexagauge.online.ingest.sampling import Decision, Limiter

log = logging.getLogger(__name__)

__all__ = ["PartitionLifecycle"]


class PartitionLifecycle:
    """Rebalance and shutdown methods of the evaluation stage (see module docstring).

    The attributes below are the stage's; they are declared here so this part type-checks alone.
    """

    keys: Any
    buffer: TraceBuffer
    limiter: Limiter
    _active: dict[bytes, _Active]
    _ready: deque[tuple[_Active, ExtractedCase, Decision]]
    _starting: list[deque[tuple[Trace, Trigger]]]
    _side: set[asyncio.Task[Any]]

    async def assigned(self, tps: Sequence[TopicPartition]) -> None:
        """Restore the emitted keys of new partitions (they stay paused until this returns)."""
        if self.keys is not None:
            await self.keys.assigned([(tp.topic, tp.partition) for tp in tps])

    async def fence(self, tps: Sequence[TopicPartition]) -> None:
        """Before revocation: record no more outputs of these partitions (markers.py)."""
        if self.keys is not None:
            await self.keys.fence((tp.topic, tp.partition) for tp in tps)

    def revoked(self, tps: Sequence[TopicPartition]) -> None:
        by_topic: dict[str, set[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        for topic, parts in by_topic.items():
            self.buffer.drop_sources(topic, parts)
            waiting = [t for pending in self._starting for t, _ in pending]
            for trace in [a.trace for a in self._active.values()] + waiting:
                kept = {s for s in trace.sources if not (s[0] == topic and s[1] in parts)}
                if trace.sources and not kept:
                    # its outputs are fenced (markers.py): if the partition comes back to this
                    # member, the re-read spans must assemble the trace again, not count as late
                    self.buffer.forget_done(trace.trace_id)
                trace.sources = kept
        # queued cases of traces that lost every source: the new owner evaluates them
        keep = [(a, ec, d) for a, ec, d in self._ready if a.trace.sources]
        for a, _, _ in self._ready:
            if not a.trace.sources:
                self.limiter.cancel()
                a.remaining -= 1
                if a.remaining == 0:
                    self._active.pop(a.trace.trace_id, None)
        self._ready = deque(keep)

    async def drain(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending: set[Any] = set()
        while True:  # queued cases start as running ones finish (within the deadline)
            tasks = [t for a in self._active.values() for t in a.tasks if not t.done()]
            tasks += [t for t in self._side if not t.done()]
            left = deadline - time.monotonic()
            if not tasks or left <= 0:
                pending = set(tasks)
                break
            await asyncio.wait(tasks, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        for _ in self._ready:  # never started: not released, re-delivered after the restart
            self.limiter.cancel()
        self._ready.clear()
        for t in pending:
            t.cancel()
        if pending:
            log.warning(
                "drain deadline: %d evaluations cancelled (re-delivered later)", len(pending)
            )
            await asyncio.gather(*pending, return_exceptions=True)
