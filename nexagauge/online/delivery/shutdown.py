"""A shutdown deadline: every step of a graceful stop gets what is left of one time budget.

``nexagauge serve`` promises to end within ``online.drain_timeout_s`` of SIGTERM, whatever the
broker or the collector do. A step that does not finish in its share (a consumer leaving the group
of a dead broker, a producer flushing into nowhere) is cancelled and logged, and the stop goes on
with the next step: the uncommitted work is re-delivered, which at-least-once delivery allows.

Example:
    >>> import asyncio
    >>> async def main():
    ...     d = Deadline(0.2)
    ...     done = await d.run(asyncio.sleep(0.01), "fast step")
    ...     slow = await d.run(asyncio.sleep(5), "slow step")
    ...     return done, slow, d.left() < 0.05
    >>> asyncio.run(main())
    (True, False, True)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class Deadline:
    """``total_s`` from now; :meth:`run` bounds a step by what is left (at least ``floor_s``)."""

    def __init__(
        self, total_s: float, *, floor_s: float = 0.05, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.clock = clock
        self.end = clock() + max(0.0, total_s)
        self.floor_s = floor_s
        self.missed: list[str] = []

    def left(self, reserve_s: float = 0.0) -> float:
        """Seconds left (minus ``reserve_s`` kept for later steps), never below zero."""
        return max(0.0, self.end - self.clock() - reserve_s)

    async def run(self, step: Awaitable[Any], what: str, *, reserve_s: float = 0.0) -> bool:
        """Await ``step`` within the time left; False (logged) when it did not finish in time
        or raised. A late step is cancelled and *not* waited for: aiokafka's close paths can
        swallow a cancellation and keep waiting on a dead broker."""
        budget = max(self.floor_s, self.left(reserve_s))
        task = asyncio.ensure_future(step)
        done, _ = await asyncio.wait({task}, timeout=budget)
        if not done:
            task.cancel()
            self.missed.append(what)
            log.warning("shutdown: %s did not finish within %.1fs; abandoned", what, budget)
            return False
        if task.cancelled():
            return False
        exc = task.exception()
        if exc is not None:
            log.error("shutdown: %s failed: %r", what, exc)
            return False
        return True
