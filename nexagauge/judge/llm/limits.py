"""Client-side limits for judge calls: concurrency, requests per minute, tokens per minute.

:class:`RateLimiter` is a pair of token buckets refilled continuously (capacity = one minute's
allowance). ``acquire(tokens)`` waits until both buckets can pay; a single request larger than
the whole token budget is let through alone (when the bucket is full) rather than blocking forever.

Example:
    >>> import asyncio
    >>> lim = RateLimiter(requests_per_minute=600, tokens_per_minute=None)
    >>> asyncio.run(lim.acquire(100))
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class _Bucket:
    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.clock = clock
        self.t = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
        self.t = now

    def wait_time(self, amount: float) -> float:
        self._refill()
        need = min(amount, self.capacity)  # an oversized request waits for a full bucket
        if self.level >= need:
            return 0.0
        return (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self._refill()
        self.level -= amount  # may go negative for oversized requests: later calls wait longer


class RateLimiter:
    """Requests- and tokens-per-minute limiter shared by all judge calls of a process."""

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._req = _Bucket(requests_per_minute, clock) if requests_per_minute else None
        self._tok = _Bucket(tokens_per_minute, clock) if tokens_per_minute else None
        self._lock: asyncio.Lock | None = None

    @property
    def active(self) -> bool:
        return self._req is not None or self._tok is not None

    async def acquire(self, tokens: float) -> None:
        """Wait until one request of ``tokens`` estimated tokens fits both budgets, then pay."""
        if not self.active:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # FIFO: waiters are served in arrival order
            while True:
                wait = 0.0
                if self._req is not None:
                    wait = max(wait, self._req.wait_time(1))
                if self._tok is not None:
                    wait = max(wait, self._tok.wait_time(tokens))
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            if self._req is not None:
                self._req.take(1)
            if self._tok is not None:
                self._tok.take(tokens)

    def refund(self, tokens: float) -> None:
        """Give back over-estimated tokens once the real usage is known (may be negative)."""
        if self._tok is not None:
            self._tok.level = min(self._tok.capacity, self._tok.level + tokens)
