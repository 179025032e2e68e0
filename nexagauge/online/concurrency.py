"""How many evaluations run at once: an AIMD limit between a floor and ``online.max_in_flight``.

A fixed number of slots is wrong both ways: too few and a member idles while the judge could
answer more (32 slots of ~0.65 s evaluations cap a member at ~49/s though its CPU allows ~80/s);
too many and a slow or rate-limited judge gets a pile of requests that only wait in its queue
(and in ours), each one holding a trace's offsets. :class:`AdaptiveLimit` finds the number from
what the evaluations themselves report, the way TCP finds a window:

- **additive increase**: while the limit is used up and evaluations take no longer than
  ``tolerance`` times the best recent evaluation latency, the limit grows by one per limit's
  worth of completions (about one per round trip), up to the ceiling; until its first decrease it
  grows by one per completion (doubling per round trip: TCP's slow start), so a member reaches its
  working point within seconds of starting;
- **multiplicative decrease**: an evaluation that took longer than ``backoff_latency`` times that
  baseline (the judge, its queue or our own event loop is the bottleneck now) cuts the limit to
  ``decrease`` of itself; a judge that is *throttling* (HTTP 429, timeouts, 5xx: the judge client
  retried) halves it. At most one decrease per limit's worth of completions, so one slow burst
  does not collapse it; never below the floor.

The baseline is the lowest latency of the last two windows of ``window`` completions, so it
follows a judge that became slower for good instead of backing off forever.

Example:
    >>> lim = AdaptiveLimit(floor=4, ceiling=16, initial=4)
    >>> for _ in range(200):
    ...     lim.completed(0.6)
    >>> lim.value
    16
    >>> lim.completed(0.6, throttled=True); lim.value
    8
"""

from __future__ import annotations

import math


class AdaptiveLimit:
    """An AIMD concurrency limit (see module docstring).

    Args:
        floor: the lowest limit (at least 1).
        ceiling: the highest limit (``online.max_in_flight``).
        initial: where it starts (default: the floor).
        tolerance: latency up to ``tolerance`` x baseline lets the limit grow.
        backoff_latency: latency above ``backoff_latency`` x baseline cuts it.
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
        #: completions since the last decrease (decreases are at least a limit's worth apart)
        self._since_cut = 0
        self._slow_start = True
        #: decreases so far (by cause), for tests and logs
        self.cuts = {"latency": 0, "throttled": 0}

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
        only when it is what holds evaluations back)."""
        self._seen += 1
        self._since_cut += 1
        if latency_s < self._min_now:
            self._min_now = latency_s
        if self._seen >= self.window:
            self._min_before, self._min_now, self._seen = self._min_now, math.inf, 0
        base = self.baseline_s
        can_cut = self._since_cut >= self._value
        if throttled:
            if can_cut:
                self._cut(0.5, "throttled")
            return
        if latency_s > self.backoff_latency * base:
            if can_cut:
                self._cut(self.decrease, "latency")
        elif at_limit and latency_s <= self.tolerance * base and self._value < self.ceiling:
            step = 1.0 if self._slow_start else 1.0 / self._value
            self._value = min(float(self.ceiling), self._value + step)

    def _cut(self, factor: float, why: str) -> None:
        self._value = max(float(self.floor), math.floor(self._value * factor))
        self._since_cut = 0
        self._slow_start = False
        self.cuts[why] += 1
