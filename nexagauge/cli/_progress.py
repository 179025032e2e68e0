"""A dependency-free progress bar on stderr for long runs.

Shown only when stderr is a terminal or ``--progress`` is given (so logs and CI output stay clean).
The total is the ``--limit`` when given, otherwise the fraction of the input file read so far
(streaming input has no record count up front). Redraws at most ~10 times a second.

Example:
    >>> import io
    >>> buf = io.StringIO()
    >>> p = Progress(buf, total=2, enabled=True, min_interval=0.0)
    >>> p.update(1, failed=0); p.close()
    >>> "1/2" in buf.getvalue()
    True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TextIO


@dataclass(eq=False)
class Progress:
    """Draws ``[#####.....] 12/40 cases  3 failed  4.1/s  ETA 7s`` on one line of ``stream``."""

    stream: TextIO
    _: KW_ONLY
    total: int | None = None
    fraction: Callable[[], float | None] | None = None
    enabled: bool = True
    width: int = 28
    min_interval: float = 0.1
    start: float = field(init=False, default_factory=time.monotonic)
    done: int = field(init=False, default=0)
    failed: int = field(init=False, default=0)
    _last: float = field(init=False, default=0.0)
    _drawn: bool = field(init=False, default=False)
    _erase: str = field(init=False, default="")

    def __post_init__(self) -> None:
        # erase-to-end-of-line only on a terminal (a forced --progress into a log stays plain)
        isatty = getattr(self.stream, "isatty", None)
        self._erase = "\x1b[K" if callable(isatty) and isatty() else ""

    def update(self, done: int, failed: int = 0) -> None:
        self.done, self.failed = done, failed
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.min_interval:
            return
        self._last = now
        self._draw(now)

    def _frac(self) -> float | None:
        if self.total:
            return min(1.0, self.done / self.total)
        if self.fraction is not None:
            f = self.fraction()
            return None if f is None else max(0.0, min(1.0, f))
        return None

    def _draw(self, now: float) -> None:
        elapsed = max(1e-9, now - self.start)
        rate = self.done / elapsed
        frac = self._frac()
        parts = []
        if frac is not None:
            filled = int(frac * self.width)
            parts.append("[" + "#" * filled + "." * (self.width - filled) + "]")
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        parts.append(f"{count} cases")
        if self.failed:
            parts.append(f"{self.failed} failed")
        parts.append(f"{rate:.1f}/s")
        if frac and 0 < frac < 1:
            parts.append(f"ETA {elapsed * (1 - frac) / frac:.0f}s")
        self.stream.write("\r" + "  ".join(parts) + self._erase)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Draw the final state and end the line."""
        if not self.enabled:
            return
        self._draw(time.monotonic())
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
