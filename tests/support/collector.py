"""A real OpenTelemetry collector with a Kafka exporter for tests: ``rotel`` (PyPI wheel).

The package's embedded collector (``nexagauge.demo.stack.EmbeddedCollector``, as ``nexagauge
demo`` runs it) with the suite's names. Its flags follow ``/work/shared/ENVIRONMENT.md``: without
``--traces-batch-max-size 512`` and a large ``--kafka-exporter-max-message-bytes`` this rotel
build silently drops batches of LLM-sized spans; a short batch timeout keeps tests fast. Messages
are written unkeyed to random partitions (spans of one trace may land on different partitions),
like any collector without ``partition_traces_by_id``.

    with RotelCollector(broker.bootstrap, traces_topic="spans", logs_topic="logs") as col:
        exporter endpoint: col.grpc_endpoint ("http://127.0.0.1:P") or col.http_endpoint
"""

from __future__ import annotations

from nexagauge.demo.stack import EmbeddedCollector


class RotelCollector(EmbeddedCollector):
    """rotel on free loopback ports (OTLP gRPC + HTTP in, ``otlp_proto`` Kafka messages out),
    listening on both when the constructor returns; ``with`` stops it and removes its temp dir."""

    def __init__(
        self,
        brokers: str,
        *,
        traces_topic: str,
        logs_topic: str | None = None,
        logs_batch_timeout_ms: int | None = None,
    ) -> None:
        """``logs_batch_timeout_ms``: hold log records that long (default: as spans, 50 ms)."""
        super().__init__(
            brokers, traces_topic, logs_topic, logs_batch_timeout_ms=logs_batch_timeout_ms
        )

    @property
    def grpc_endpoint(self) -> str:
        return self.otlp_grpc_endpoint

    @property
    def http_endpoint(self) -> str:
        return self.otlp_http_endpoint

    def __enter__(self) -> RotelCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
