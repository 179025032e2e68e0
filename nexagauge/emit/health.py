"""Health of what the evaluator depends on, as Prometheus series: the judge's circuit breaker and
broker contact (names in :mod:`nexagauge.emit.metric_names`).

:class:`HealthMetrics` lives in the evaluator's registry (``EvaluatorMetrics.health``):
``nexagauge_judge_breaker_state``, ``nexagauge_judge_breaker_openings_total``,
``nexagauge_broker_up``, ``nexagauge_broker_contact_age_seconds``,
``nexagauge_topics_recreated_total``. The online service feeds it (``nexagauge.online.delivery.broker``,
``nexagauge.online.delivery.health``).

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

from prometheus_client import CollectorRegistry

from nexagauge.emit import metric_names as N
from nexagauge.emit.series import Series

#: value of ``nexagauge_judge_breaker_state`` per breaker state (``nexagauge.judge.llm.breaker``)
BREAKER_STATE_VALUE = {"closed": 0, "half_open": 1, "open": 2}


class HealthMetrics:
    """Dependency health series in ``registry`` (see module docstring)."""

    def __init__(
        self, registry: CollectorRegistry, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.registry = registry
        self.clock = clock
        s = Series(registry)
        self.breaker_state = s.gauge(
            N.JUDGE_BREAKER_STATE,
            "Judge circuit breaker: 0 closed, 1 half-open (probing), 2 open (consumption paused).",
        )
        self.breaker_openings = s.counter(
            N.JUDGE_BREAKER_OPENINGS,
            "Times the judge circuit breaker opened (transient judge failures).",
        )
        self.broker_up = s.gauge(N.BROKER_UP, "1 when the last broker health check succeeded.")
        self.contact_age = s.gauge(
            N.BROKER_CONTACT_AGE, "Seconds since the broker last answered a health check."
        )
        self.topics_recreated = s.counter(
            N.TOPICS_RECREATED,
            "Own topics re-created after they vanished from the broker.",
            ("topic",),
        )
        self._last_contact: float | None = None
        self.contact_age.set_function(self._age)

    def _age(self) -> float:
        return 0.0 if self._last_contact is None else max(0.0, self.clock() - self._last_contact)

    def breaker_changed(self, state: str) -> None:
        """The breaker's ``on_change`` callback."""
        self.breaker_state.set(BREAKER_STATE_VALUE[state])
        if state == "open":
            self.breaker_openings.inc()

    def broker_contact(self, up: bool) -> None:
        """Result of one broker health check."""
        self.broker_up.set(1 if up else 0)
        if up:
            self._last_contact = self.clock()

    def own_topic(self, topic: str) -> None:
        """Start the re-creation counter of an own topic at 0 (the series exists before any)."""
        self.topics_recreated.labels(topic=topic)

    def topic_recreated(self, topic: str) -> None:
        self.topics_recreated.labels(topic=topic).inc()
