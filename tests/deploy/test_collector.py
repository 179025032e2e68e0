"""collector/config.yaml: OTLP in, Kafka (by trace id) and Jaeger out, consistent with nexagauge.

No official collector binary is installable here, so the configuration is checked as data against
the kafka exporter's documented keys of the pinned contrib release and against the evaluator's
settings (topics, encoding, message size).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from support.prometheus import REPO

from nexagauge.settings import KafkaSettings

CONFIG = REPO / "collector" / "config.yaml"


@pytest.fixture(scope="module")
def cfg() -> dict[str, Any]:
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def _kind(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def test_receivers_accept_otlp_grpc_and_http(cfg: dict[str, Any]) -> None:
    protos = cfg["receivers"]["otlp"]["protocols"]
    assert protos["grpc"]["endpoint"].endswith(":4317")
    assert protos["http"]["endpoint"].endswith(":4318")
    # large spans (prompts + documents) exceed gRPC's 4 MiB default
    assert protos["grpc"]["max_recv_msg_size_mib"] >= 8
    assert cfg["receivers"]["otlp/evaluations"]["protocols"]["grpc"]["endpoint"].endswith(":4319")


def test_kafka_exporters_match_the_evaluator_settings(cfg: dict[str, Any]) -> None:
    k = KafkaSettings()
    traces, logs = cfg["exporters"]["kafka/traces"], cfg["exporters"]["kafka/logs"]
    assert traces["traces"] == {"topic": k.traces_topic, "encoding": k.encoding}
    assert logs["logs"] == {"topic": k.logs_topic, "encoding": k.encoding}
    assert k.encoding == "otlp_proto"
    assert traces["partition_traces_by_id"] is True
    assert logs["partition_logs_by_trace_id"] is True
    assert "partition_logs_by_resource_attributes" not in logs  # mutually exclusive
    for e in (traces, logs):
        # per-signal blocks replaced the deprecated top-level topic/encoding keys
        assert "topic" not in e and "encoding" not in e
        size = e["producer"]["max_message_bytes"]
        assert 4 * 1024 * 1024 <= size <= k.max_message_bytes, (
            "producer.max_message_bytes must fit LLM-sized batches and the evaluator's fetch size"
        )
        # aiokafka decodes gzip without optional packages
        assert e["producer"].get("compression", "none") in {"none", "gzip"}


def test_batches_stay_below_the_message_limit(cfg: dict[str, Any]) -> None:
    b = cfg["processors"]["batch"]
    assert 0 < b["send_batch_size"] <= b["send_batch_max_size"] <= 1024


def test_pipelines_reference_defined_components_and_use_all(cfg: dict[str, Any]) -> None:
    pipes = cfg["service"]["pipelines"]
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    for name, p in pipes.items():
        for section in used:
            for comp in p.get(section, []):
                assert comp in cfg[section], f"pipeline {name}: {comp} is not defined"
                used[section].add(comp)
        assert p["processors"][0] == "memory_limiter", f"{name}: memory_limiter must be first"
        assert "batch" in p["processors"]
    for section, comps in used.items():
        assert set(cfg[section]) == comps, f"unused {section}: {set(cfg[section]) - comps}"
    assert set(cfg["service"]["extensions"]) == set(cfg.get("extensions", {}))


def test_every_span_reaches_jaeger_and_only_app_data_reaches_kafka(cfg: dict[str, Any]) -> None:
    pipes = cfg["service"]["pipelines"]
    app = pipes["traces"]
    assert {"kafka/traces", "otlp_grpc/jaeger"} <= set(app["exporters"])
    assert app["receivers"] == ["otlp"]
    ev = pipes["traces/evaluations"]
    assert ev["receivers"] == ["otlp/evaluations"]
    assert ev["exporters"] == ["otlp_grpc/jaeger"], "evaluation spans must not loop into Kafka"
    assert pipes["logs"]["exporters"] == ["kafka/logs"]
    jaeger = cfg["exporters"]["otlp_grpc/jaeger"]
    assert jaeger["tls"]["insecure"] is True
    # `otlp` is the deprecated alias of `otlp_grpc` in recent collector releases
    assert not any(_kind(e) == "otlp" for e in cfg["exporters"])


def test_environment_placeholders_are_set_by_compose(cfg: dict[str, Any]) -> None:
    text = CONFIG.read_text(encoding="utf-8")
    needed = set(re.findall(r"\$\{env:(\w+)\}", text))
    assert needed == {"KAFKA_BROKERS", "JAEGER_OTLP_ENDPOINT"}
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = compose["services"]["collector"]["environment"]
    assert needed <= set(env)
    assert env["JAEGER_OTLP_ENDPOINT"] == "jaeger:4317"
