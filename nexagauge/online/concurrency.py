"""How many evaluations run at once: an AIMD limit between a floor and ``online.max_in_flight``.

A fixed number of slots is wrong both ways: too few and a member idles while the judge could
answer more (32 slots of ~0.65 s evaluations cap a member at ~49/s though its CPU allows ~80/s);
too many and a slow or rate-limited judge gets a pile of requests that only wait in its queue
(and in ours), each one holding a trace's offsets. :class:`AdaptiveLimit` finds the number from
what the evaluations themselves report, the way TCP finds a window:

Decisions are taken once per *round*, a limit's worth of completions (about one round trip), on
the round's mean latency, so one slow evaluation on a busy machine moves nothing:

- **additive increase**: a round whose mean latency is at most ``tolerance`` times the best recent
  evaluation latency (the baseline), with the limit used up for most of it, grows the limit by
  one, up to the ceiling; until the first round above ``tolerance`` it grows by one per good
  completion instead (doubling per round trip: TCP's slow start), so a member reaches its working
  point within seconds of starting;
- **multiplicative decrease**: a round whose mean latency is above ``backoff_latency`` times the
  baseline (the judge, its queue or our own event loop is the bottleneck now) cuts the limit to
  ``decrease`` of itself; a round in which the judge *throttled* (HTTP 429, timeouts, 5xx: the
  judge client retried) halves it; never below the floor.

The baseline is the lowest latency of the last two windows of ``window`` completions, so it
follows a judge that became slower for good instead of backing off forever.

Example:
    >>> lim = AdaptiveLimit(floor=4, ceiling=16)
    >>> for _ in range(12):  # slow start: +1 per good completion
    ...     lim.completed(0.6)
    >>> lim.value
    16
    >>> for _ in range(4):  # the judge answers 429: the round ends halved
    ...     lim.completed(0.6, throttled=True)
    >>> lim.value
    8
"""

from __future__ import annotations

import math
from typing import Any


class AdaptiveLimit:
    """An AIMD concurrency limit (see module docstring).

    Args:
        floor: the lowest limit (at least 1).
        ceiling: the highest limit (``online.max_in_flight``).
        initial: where it starts (default: the floor).
        tolerance: a round's mean latency up to ``tolerance`` x baseline lets the limit grow.
        backoff_latency: a round's mean latency above ``backoff_latency`` x baseline cuts it.
        decrease: the factor of a latency cut (a throttling judge halves the limit).
        window: completions per baseline window.
    """

    def __init__(
        self,
        floor: int,
        ceiling: int,
        *,
        initial: int | None = None,
        tolerance: float = 1.5,
        backoff_latency: float = 2.5,
        decrease: float = 0.8,
        window: int = 200,
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.floor = max(1, min(floor, self.ceiling))
        self._value = float(min(self.ceiling, max(self.floor, initial or self.floor)))
        self.tolerance = tolerance
        self.backoff_latency = max(backoff_latency, tolerance)
        self.decrease = decrease
        self.window = max(1, window)
        self._min_now = math.inf
        self._min_before = math.inf
        self._seen = 0
        self._slow_start = True
        #: the current round (a limit's worth of completions): count, latency sum, throttled,
        #: completions that found the limit used up
        self._n = 0
        self._sum = 0.0
        self._throttled = False
        self._at_limit = 0
        #: decreases so far (by cause), for tests and logs
        self.cuts = {"latency": 0, "throttled": 0}

    @classmethod
    def for_online(cls, o: Any) -> AdaptiveLimit:
        """The limit ``OnlineSettings`` ask for: adaptive between ``min_in_flight`` and
        ``max_in_flight``, or fixed at ``max_in_flight`` (``adaptive_concurrency = false``)."""
        floor = o.min_in_flight if o.adaptive_concurrency else o.max_in_flight
        return cls(floor, o.max_in_flight)

    @property
    def value(self) -> int:
        """The number of evaluations that may run now."""
        return int(self._value)

    @property
    def baseline_s(self) -> float:
        """The best recent evaluation latency (``inf`` before the first completion)."""
        return min(self._min_now, self._min_before)

    def completed(
        self, latency_s: float, *, throttled: bool = False, at_limit: bool = True
    ) -> None:
        """Account one finished evaluation: its latency, whether the judge throttled it, and
        whether the limit was used up (a limit that was not reached learns nothing: it grows
        only when it is what holds evaluations back).

        Decisions are taken per round (a limit's worth of completions) on the round's mean
        latency, so one slow evaluation on a busy machine moves nothing; in slow start a good
        completion grows the limit at once."""
        self._seen += 1
        if latency_s < self._min_now:
            self._min_now = latency_s
        if self._seen >= self.window:
            self._min_before, self._min_now, self._seen = self._min_now, math.inf, 0
        self._n += 1
        self._sum += latency_s
        self._throttled |= throttled
        self._at_limit += at_limit
        base = self.baseline_s
        if (
            self._slow_start
            and at_limit
            and not throttled
            and latency_s <= self.tolerance * base
            and self._value < self.ceiling
        ):
            self._value = min(float(self.ceiling), self._value + 1.0)
        if self._n < self._value:
            return
        mean = self._sum / self._n
        if self._throttled:
            self._cut(0.5, "throttled")
        elif mean > self.backoff_latency * base:
            self._cut(self.decrease, "latency")
        elif mean > self.tolerance * base:
            self._slow_start = False  # the knee: from here on, additive steps
        elif self._at_limit * 2 >= self._n and not self._slow_start:
            self._value = min(float(self.ceiling), self._value + 1.0)
        self._n, self._sum, self._throttled, self._at_limit = 0, 0.0, False, 0

    def _cut(self, factor: float, why: str) -> None:
        self._value = max(float(self.floor), math.floor(self._value * factor))
        self._slow_start = False
        self.cuts[why] += 1
