"""What the judge's calls cost: token usage of each answer, priced, and the instance counters.

Usage comes from the response's ``usage`` object; an endpoint that omits it is counted offline
(cl100k) so the cost is never silently zero. Prices come from
:class:`~nexagauge.judge.llm.pricing.PriceTable`. Every priced answer also adds to the judge's
:class:`JudgeStats`, so the totals a benchmark reads are the sums of the per-call costs.

Example:
    >>> from nexagauge.judge.llm.pricing import PriceTable
    >>> stats = JudgeStats()
    >>> est = account({"usage": {"prompt_tokens": 10, "completion_tokens": 2}}, "{}", [],
    ...               "gpt-4o-mini", PriceTable.load(None), stats)
    >>> (est.input_tokens, est.output_tokens, stats.input_tokens)
    (10.0, 2.0, 10)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nexagauge.judge.llm.pricing import PriceTable
from nexagauge.judge.tokens import count_message_tokens, count_tokens
from nexagauge.schema.results import CostEstimate


@dataclass
class JudgeStats:
    """Counters of one judge instance (benchmarks and reports read them)."""

    requests: int = 0  # HTTP requests sent (retries and re-asks included)
    cache_hits: int = 0
    retries: int = 0
    reasks: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    by_node: dict[str, int] = field(default_factory=dict)


def account(
    resp: dict[str, Any],
    content: str | None,
    messages: list[dict[str, str]],
    model: str,
    prices: PriceTable,
    stats: JudgeStats,
) -> CostEstimate:
    """Price one answer (``resp`` the completion, ``content`` its text, ``messages`` what was
    sent) with ``model``'s prices, and add its tokens and cost to ``stats``."""
    usage = resp.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    pin, pout = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(pin, int | float):
        tin = float(pin)
        tout = float(pout) if isinstance(pout, int | float) else 0.0
    else:  # endpoint without usage: count offline so the cost is not silently zero
        tin = float(count_message_tokens(messages))
        tout = float(count_tokens(content or ""))
    cost = prices.cost(model, tin, tout)
    stats.input_tokens += int(tin)
    stats.output_tokens += int(tout)
    stats.cost += cost
    return CostEstimate(cost=cost, input_tokens=tin, output_tokens=tout)
