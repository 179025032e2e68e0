"""Wiring of the judge's circuit breaker into the online service.

:func:`attach_breaker` gives the service's LLM judge a
:class:`~nexagauge.judge.llm.breaker.CircuitBreaker` configured from ``online.judge_breaker_*``,
reporting its state to :class:`~nexagauge.emit.health.HealthMetrics`.

Example:
    >>> from nexagauge.settings import OnlineSettings
    >>> attach_breaker(None, OnlineSettings()) is None   # no LLM judge: nothing to guard
    True
"""

from __future__ import annotations

from typing import Any

from nexagauge.judge.llm.breaker import CircuitBreaker
from nexagauge.settings import OnlineSettings


def attach_breaker(judge: Any, online: OnlineSettings, health: Any = None) -> CircuitBreaker | None:
    """Give an LLM judge (anything with ``breaker`` and ``probe``) a circuit breaker.

    Returns ``None`` (nothing attached) for judges without one (the local judge, none) or when
    ``online.judge_breaker`` is off.
    """
    if not online.judge_breaker or judge is None or not hasattr(judge, "breaker"):
        return None
    probe = getattr(judge, "probe", None)
    breaker = CircuitBreaker(
        window=online.judge_breaker_window,
        failure_ratio=online.judge_breaker_failure_ratio,
        cooldown_s=online.judge_breaker_cooldown_s,
        max_cooldown_s=online.judge_breaker_max_cooldown_s,
        probe=probe if callable(probe) else None,
        on_change=health.breaker_changed if health is not None else None,
    )
    judge.breaker = breaker
    if health is not None:
        health.breaker_changed("closed")
    return breaker
