"""Declaring Prometheus series in one registry, one call per series.

A series is its name (:mod:`nexagauge.emit.metric_names`), its help text, its label names and,
for a histogram, its buckets; :class:`Series` binds the registry once so that a metrics class
says only that (``AgentMetrics``, ``HealthMetrics``).

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> s = Series(CollectorRegistry())
    >>> c = s.counter("demo_calls_total", "Calls, by outcome.", ("outcome",))
    >>> c.labels(outcome="ok").inc()
    >>> s.registry.get_sample_value("demo_calls_total", {"outcome": "ok"})
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass(frozen=True)
class Series:
    """Makes counters, gauges and histograms in ``registry`` (label names, then buckets)."""

    registry: CollectorRegistry

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, labels, registry=self.registry)

    def histogram(
        self, name: str, doc: str, labels: tuple[str, ...], *, buckets: Sequence[float]
    ) -> Histogram:
        return Histogram(name, doc, labels, buckets=buckets, registry=self.registry)
