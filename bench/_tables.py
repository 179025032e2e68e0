"""Numbers for benchmark reports: nearest-rank percentiles and plain-text/Markdown tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def percentile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))
    return s[k]


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table (right-aligned numbers), also valid Markdown."""
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| "
        + " | ".join(c.rjust(w) if _num(c) else c.ljust(w) for c, w in zip(r, widths, strict=True))
        + " |"
        for r in cells
    ]
    return "\n".join([line, sep, *body])


def _num(s: str) -> bool:
    return bool(s) and (s[0].isdigit() or s[0] in "-.") and not s.startswith("--")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:
            return "n/a"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
