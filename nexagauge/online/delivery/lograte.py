"""Repeated log lines are rate limited: a broker outage must not flood the logs.

With the broker gone, aiokafka's clients log one ERROR per reconnect attempt and fetch - about
60 lines a second from one process (issue 14), burying everything else. :class:`RepeatFilter`
lets the first record of each kind through, then at most one per ``interval_s``; the next one
that passes says how many were held back. A kind is the logger, the level and the message
template with digits masked (``node 3``, ``127.0.0.1:9092`` and ``node 7`` are one kind).

Limited: WARNING and worse of other libraries (aiokafka, grpc, ...), ERROR and worse of
nexagauge itself. nexagauge's own WARNINGs pass: each names one record (a poison message at its
offset, a dropped span), and the dead-letter topic holds the same. INFO and DEBUG pass.

Example:
    >>> f = RepeatFilter(interval_s=10, clock=lambda: 0.0)
    >>> rec = lambda: logging.makeLogRecord({"name": "aiokafka", "levelno": 40,
    ...                                      "msg": "Unable connect to node %s", "args": (1,)})
    >>> [f.filter(rec()) for _ in range(3)], f.suppressed
    ([True, False, False], 2)
    >>> own = logging.makeLogRecord({"name": "nexagauge.online.rekey", "levelno": 30,
    ...                              "msg": "poison message %s", "args": (1,)})
    >>> all(f.filter(own) for _ in range(3))
    True
"""

from __future__ import annotations

import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

_DIGITS = re.compile(r"\d+")
#: kinds remembered (least recently seen are forgotten first)
MAX_KINDS = 1024


class RepeatFilter(logging.Filter):
    """Rate limit of repeated WARNING/ERROR/CRITICAL records (see module docstring)."""

    def __init__(
        self,
        interval_s: float = 10.0,
        *,
        min_level: int = logging.WARNING,
        own_min_level: int = logging.ERROR,
        own_prefix: str = "nexagauge",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.min_level = min_level
        self.own_min_level = own_min_level
        self.own_prefix = own_prefix
        self.clock = clock
        self.suppressed = 0
        self._kinds: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        own = record.name == self.own_prefix or record.name.startswith(self.own_prefix + ".")
        if record.levelno < (self.own_min_level if own else self.min_level):
            return True
        if self.interval_s <= 0:
            return True
        key = (record.name, record.levelno, _DIGITS.sub("#", str(record.msg)))
        now = self.clock()
        seen = self._kinds.get(key)
        if seen is not None and now - seen[0] < self.interval_s:
            seen[1] += 1
            self.suppressed += 1
            self._kinds.move_to_end(key)
            return False
        held = int(seen[1]) if seen is not None else 0
        self._kinds[key] = [now, 0]
        self._kinds.move_to_end(key)
        while len(self._kinds) > MAX_KINDS:
            self._kinds.popitem(last=False)
        if held:  # no "%" in the addition: safe with and without %-args
            record.msg = f"{record.msg} [{held} similar messages suppressed]"
        return True


def install_log_rate_limit(
    interval_s: float = 10.0, handlers: Iterable[logging.Handler] | None = None
) -> None:
    """Add one :class:`RepeatFilter` to ``handlers`` (default: the root logger's), once each."""
    for h in handlers if handlers is not None else logging.getLogger().handlers:
        if not any(isinstance(f, RepeatFilter) for f in h.filters):
            h.addFilter(RepeatFilter(interval_s))
