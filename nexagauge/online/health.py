"""Health of what the evaluator depends on: the judge's circuit breaker and broker contact.

:class:`HealthMetrics` adds the dependency series to the evaluator's registry
(``nexagauge_judge_breaker_state``, ``nexagauge_judge_breaker_openings_total``,
``nexagauge_broker_up``, ``nexagauge_broker_contact_age_seconds``,
``nexagauge_topics_recreated_total``; names in :mod:`nexagauge.emit.metric_names`).
:func:`attach_breaker` gives the service's LLM judge a
:class:`~nexagauge.judge.breaker.CircuitBreaker` configured from ``online.judge_breaker_*``.

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> m = HealthMetrics(CollectorRegistry())
    >>> m.breaker_changed("open")
    >>> m.registry.get_sample_value("nexagauge_judge_breaker_state")
    2.0
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from nexagauge.emit import metric_names as N
from nexagauge.judge.breaker import STATE_VALUE, CircuitBreaker, State
from nexagauge.settings import OnlineSettings


class HealthMetrics:
    """Dependency health series in ``registry`` (see module docstring)."""

    def __init__(
        self, registry: CollectorRegistry, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.breaker_state = Gauge(
            N.JUDGE_BREAKER_STATE,
            "Judge circuit breaker: 0 closed, 1 half-open (probing), 2 open (consumption paused).",
            registry=registry,
        )
        self.breaker_openings = Counter(
            N.JUDGE_BREAKER_OPENINGS,
            "Times the judge circuit breaker opened (transient judge failures).",
            registry=registry,
        )
        self.broker_up = Gauge(
            N.BROKER_UP, "1 when the last broker health check succeeded.", registry=registry
        )
        self.contact_age = Gauge(
            N.BROKER_CONTACT_AGE,
            "Seconds since the broker last answered a health check.",
            registry=registry,
        )
        self.topics_recreated = Counter(
            N.TOPICS_RECREATED,
            "Own topics re-created after they vanished from the broker.",
            ["topic"],
            registry=registry,
        )
        self._last_contact: float | None = None
        self.contact_age.set_function(self._age)

    def _age(self) -> float:
        return 0.0 if self._last_contact is None else max(0.0, self.clock() - self._last_contact)

    def breaker_changed(self, state: State) -> None:
        """The breaker's ``on_change`` callback."""
        self.breaker_state.set(STATE_VALUE[state])
        if state == "open":
            self.breaker_openings.inc()

    def broker_contact(self, up: bool) -> None:
        """Result of one broker health check."""
        self.broker_up.set(1 if up else 0)
        if up:
            self._last_contact = self.clock()

    def topic_recreated(self, topic: str) -> None:
        self.topics_recreated.labels(topic=topic).inc()


def attach_breaker(
    judge: Any, online: OnlineSettings, health: HealthMetrics | None = None
) -> CircuitBreaker | None:
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
