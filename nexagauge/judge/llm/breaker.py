"""A circuit breaker for the judge endpoint: an outage pauses work instead of failing it.

The online evaluator (``nexagauge serve``) attaches one :class:`CircuitBreaker` to its judge
(:attr:`nexagauge.judge.llm.client.LLMJudge.breaker`). Every HTTP attempt reports its outcome:

- ``record(ok=True)``: the endpoint answered (2xx, or a permanent 4xx: it is up, the request was
  wrong);
- ``record(ok=False)``: a *transient* failure (HTTP 5xx, 429, 408/409/425, a timeout, a refused or
  dropped connection).

**Closed** (normal): requests flow. When at least ``failure_ratio`` of the last ``window``
outcomes are transient failures, the breaker **opens**: :meth:`admit` (awaited before every
attempt) blocks, the evaluator pauses consumption (its ``saturated()`` is true while the breaker
is not closed) and a background task **probes** the endpoint after ``cooldown_s`` (then doubling up
to ``max_cooldown_s``). A successful probe - or any success of a request that was already in
flight - **closes** it: waiters go on and consumption resumes. While the breaker is attached the
judge client never gives up on a transient error (it waits here and retries), so an outage costs
time, never an evaluation; only permanent failures reach the dead-letter topic.

Without a probe callable, the breaker closes after each cooldown and the next real request is
the probe (it re-opens at once when the outage goes on).

Example:
    >>> import asyncio
    >>> async def demo():
    ...     b = CircuitBreaker(window=4, failure_ratio=0.75, cooldown_s=0.01)
    ...     for _ in range(4):
    ...         b.record(ok=False)
    ...     opened = b.state
    ...     b.record(ok=True)  # an answer while open: the endpoint is back
    ...     await b.admit()    # returns at once when closed
    ...     await b.aclose()
    ...     return opened, b.state, b.opened
    >>> asyncio.run(demo())
    ('open', 'closed', 1)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Literal

log = logging.getLogger(__name__)

State = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """Closed / open / half-open breaker over transient judge failures (see module docstring).

    Args:
        window: number of most recent attempt outcomes considered.
        failure_ratio: share of transient failures in a full window that opens the breaker.
        cooldown_s: wait before the first probe after opening (doubles per failed probe).
        max_cooldown_s: cap of the probe interval.
        probe: ``async () -> bool`` sending one minimal request; ``True`` when the endpoint
            answered (see :meth:`nexagauge.judge.llm.client.LLMJudge.probe`).
        on_change: called with the new state on every transition (metrics, logs).
    """

    def __init__(
        self,
        *,
        window: int = 20,
        failure_ratio: float = 0.8,
        cooldown_s: float = 1.0,
        max_cooldown_s: float = 30.0,
        probe: Callable[[], Awaitable[bool]] | None = None,
        on_change: Callable[[State], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window < 1 or not 0.0 < failure_ratio <= 1.0:
            raise ValueError("window >= 1 and 0 < failure_ratio <= 1 required")
        self.window = window
        self.failure_ratio = failure_ratio
        self.cooldown_s = cooldown_s
        self.max_cooldown_s = max(max_cooldown_s, cooldown_s)
        self.probe = probe
        self.on_change = on_change
        self.clock = clock
        self.state: State = "closed"
        #: times the breaker opened, probes sent, and when it last opened (monotonic clock)
        self.opened = 0
        self.probes = 0
        self.opened_at: float | None = None
        self._outcomes: deque[bool] = deque(maxlen=window)
        self._closed: asyncio.Event | None = None
        self._recovered: asyncio.Event | None = None  # set (then replaced) at each closing
        self._prober: asyncio.Task[None] | None = None

    # -- reporting ----------------------------------------------------------------------------
    def record(self, *, ok: bool) -> None:
        """Report one attempt: ``ok`` (the endpoint answered) or a transient failure."""
        if ok:
            if self.state != "closed":
                self._close("a request succeeded")
            self._outcomes.append(False)
            return
        if self.state != "closed":
            return  # the probe decides while open
        self._outcomes.append(True)
        n = len(self._outcomes)
        if n >= self.window and sum(self._outcomes) >= self.failure_ratio * n:
            self._open()

    @property
    def is_closed(self) -> bool:
        return self.state == "closed"

    @property
    def open_for_s(self) -> float:
        """Seconds since the breaker opened (0 when closed)."""
        if self.state == "closed" or self.opened_at is None:
            return 0.0
        return max(0.0, self.clock() - self.opened_at)

    def describe(self) -> str:
        """One line for readiness details and logs."""
        if self.state == "closed":
            return "judge circuit closed"
        return (
            f"judge circuit {self.state.replace('_', '-')} for {self.open_for_s:.0f}s "
            f"(consumption paused, probing the judge)"
        )

    # -- waiting ------------------------------------------------------------------------------
    async def admit(self) -> None:
        """Return when requests may be sent (at once while closed)."""
        while self.state != "closed":
            await self._event().wait()

    async def pause(self, delay_s: float) -> None:
        """Sleep ``delay_s`` (a retry backoff), returning early when the circuit closes after
        having been open: waiting requests go on as soon as the judge is back."""
        if self._recovered is None:
            self._recovered = asyncio.Event()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._recovered.wait(), timeout=max(0.0, delay_s))

    # -- transitions --------------------------------------------------------------------------
    def _event(self) -> asyncio.Event:
        if self._closed is None:
            self._closed = asyncio.Event()
            if self.state == "closed":
                self._closed.set()
        return self._closed

    def _set(self, state: State) -> None:
        if state == self.state:
            return
        self.state = state
        if self.on_change is not None:
            try:
                self.on_change(state)
            except Exception:  # metrics must never break the breaker
                log.exception("circuit breaker state callback failed")

    def _open(self) -> None:
        self.opened += 1
        self.opened_at = self.clock()
        self._event().clear()
        self._set("open")
        log.warning(
            "judge circuit opened: %d of the last %d judge requests failed transiently; "
            "pausing consumption and probing the judge",
            sum(self._outcomes),
            len(self._outcomes),
        )
        if self._prober is None or self._prober.done():
            self._prober = asyncio.ensure_future(self._probe_loop())

    def _close(self, why: str) -> None:
        was = self.open_for_s
        self._outcomes.clear()
        self._set("closed")
        self._event().set()
        if self._recovered is not None:
            self._recovered.set()
            self._recovered = None
        log.warning("judge circuit closed after %.1fs (%s); resuming", was, why)

    async def _probe_loop(self) -> None:
        delay = self.cooldown_s
        while self.state != "closed":
            await asyncio.sleep(delay)
            if self.state == "closed":
                return
            if self.probe is None:
                self._close("cooldown over; the next request probes")
                return
            self._set("half_open")
            self.probes += 1
            try:
                ok = await self.probe()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info("judge probe failed: %s", e)
                ok = False
            if self.state == "closed":
                return  # a request in flight succeeded meanwhile
            if ok:
                self._close("probe answered")
                return
            self._set("open")
            delay = min(delay * 2, self.max_cooldown_s)
            log.info("judge still unavailable; next probe in %.1fs", delay)

    async def aclose(self) -> None:
        """Stop probing (shutdown) and release waiters' wait by leaving the state as is."""
        if self._prober is not None and not self._prober.done():
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
        self._prober = None
