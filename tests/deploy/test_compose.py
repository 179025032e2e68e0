"""docker-compose.yml validated offline (no Docker engine here): services, pinned images, mounted
files, and agreement of ports, topics and sizes with collector/, dashboards/ and the settings."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from support.prometheus import REPO, require_binary

from nexagauge.settings import EmitSettings, KafkaSettings, Settings

COMPOSE = REPO / "docker-compose.yml"
SERVICES = {
    "kafka",
    "kafka-init",
    "collector",
    "evaluator",
    "demo-app",
    "prometheus",
    "grafana",
    "jaeger",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def svc(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _env(s: dict[str, Any]) -> dict[str, Any]:
    env = s.get("environment", {})
    if isinstance(env, list):
        return dict(e.split("=", 1) if "=" in e else (e, None) for e in env)
    return dict(env)


def _default(value: str) -> str:
    """``${VAR:-default}`` -> ``default`` (what compose uses when VAR is unset)."""
    m = re.fullmatch(r"\$\{\w+:-([^}]*)\}", str(value))
    return m.group(1) if m else str(value)


def _published(s: dict[str, Any]) -> dict[int, int]:
    out = {}
    for p in s.get("ports", []):
        host, _, cont = str(p).rpartition(":")
        out[int(cont)] = int(host)
    return out


def test_all_services_present(svc: dict[str, dict[str, Any]]) -> None:
    assert set(svc) == SERVICES


def test_images_are_pinned(svc: dict[str, dict[str, Any]]) -> None:
    for name, s in svc.items():
        if "build" in s:
            assert s["build"]["context"] == "." and s["build"]["dockerfile"] == "Dockerfile"
            continue
        image = s["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d+\.\d+", tag), (
            f"{name}: image {image!r} is not pinned to a version"
        )
    # the demo app runs from the evaluator's image (same Dockerfile, cached layers)
    assert svc["demo-app"]["build"] == svc["evaluator"]["build"]
    froms = re.findall(r"^FROM\s+(\S+)", (REPO / "Dockerfile").read_text(), re.M)
    assert froms and all(re.search(r":\d+\.\d+\.\d+", f) for f in froms), froms
    expected = {
        "kafka": "apache/kafka",
        "collector": "otel/opentelemetry-collector-contrib",
        "prometheus": "prom/prometheus",
        "grafana": "grafana/grafana",
        "jaeger": "jaegertracing/all-in-one",
    }
    for name, repo in expected.items():
        assert svc[name]["image"].startswith(repo + ":"), name


def test_mounted_files_exist(svc: dict[str, dict[str, Any]]) -> None:
    for name, s in svc.items():
        for v in s.get("volumes", []):
            src = str(v).split(":", 1)[0]
            if not src.startswith("."):
                continue  # named volume
            path = (REPO / src).resolve()
            assert path.exists(), f"{name}: mounted {src} does not exist"
            if path.is_dir():
                assert any(path.iterdir()), f"{name}: mounted directory {src} is empty"


def test_dockerfile_copies_existing_paths() -> None:
    text = (REPO / "Dockerfile").read_text()
    for line in re.findall(r"^COPY\s+(.+)$", text, re.M):
        *srcs, _dest = line.split()
        for src in srcs:
            assert (REPO / src).exists(), (
                f"Dockerfile copies {src}, which does not exist (the image build would fail)"
            )
    assert re.search(r'ENTRYPOINT \["nexagauge"\]', text) and 'CMD ["serve"]' in text
    assert "torch==$TORCH_VERSION" in text and "download.pytorch.org/whl/cpu" in text
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_topics_agree_with_collector_and_settings(svc: dict[str, dict[str, Any]]) -> None:
    k = KafkaSettings()
    collector = yaml.safe_load((REPO / "collector" / "config.yaml").read_text())
    ex = collector["exporters"]
    init = _env(svc["kafka-init"])
    topics = dict(t.split(":") for t in init["TOPICS"].split())
    assert set(topics) == {k.traces_topic, k.logs_topic, k.rekeyed_topic, k.dlq_topic}
    assert ex["kafka/traces"]["traces"]["topic"] == k.traces_topic
    assert ex["kafka/logs"]["logs"]["topic"] == k.logs_topic
    ev = _env(svc["evaluator"])
    assert ev["NEXAGAUGE_KAFKA_TRACES_TOPIC"] == k.traces_topic
    assert ev["NEXAGAUGE_KAFKA_LOGS_TOPIC"] == k.logs_topic
    # trace-id keyed messages: every partition of otlp_spans holds whole traces
    assert ex["kafka/traces"]["partition_traces_by_id"] is True
    assert ev["NEXAGAUGE_ONLINE_REKEY"] == "false"
    assert _env(svc["kafka"])["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    script = REPO / svc["kafka-init"]["volumes"][0].split(":")[0]
    assert "--if-not-exists" in script.read_text()
    deps = svc["collector"]["depends_on"]
    assert deps["kafka-init"]["condition"] == "service_completed_successfully"
    assert svc["evaluator"]["depends_on"]["kafka-init"]["condition"] == (
        "service_completed_successfully"
    )


def test_brokers_and_message_sizes_agree(svc: dict[str, dict[str, Any]]) -> None:
    kafka = _env(svc["kafka"])
    internal = [
        a for a in kafka["KAFKA_ADVERTISED_LISTENERS"].split(",") if a.startswith("INTERNAL://")
    ]
    assert internal == ["INTERNAL://kafka:9092"]
    assert _env(svc["collector"])["KAFKA_BROKERS"] == "kafka:9092"
    assert _env(svc["evaluator"])["NEXAGAUGE_KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert _env(svc["kafka-init"])["BOOTSTRAP"] == "kafka:9092"
    collector = yaml.safe_load((REPO / "collector" / "config.yaml").read_text())
    producer = max(
        collector["exporters"][e]["producer"]["max_message_bytes"]
        for e in ("kafka/traces", "kafka/logs")
    )
    broker = int(kafka["KAFKA_MESSAGE_MAX_BYTES"])
    topic = int(_env(svc["kafka-init"])["MAX_MESSAGE_BYTES"])
    consumer = int(_env(svc["evaluator"])["NEXAGAUGE_KAFKA_MAX_MESSAGE_BYTES"])
    assert producer <= broker and producer <= topic, "broker/topic would reject collector batches"
    assert producer <= consumer, "the evaluator's fetch size must hold one collector message"
    assert int(kafka["KAFKA_REPLICA_FETCH_MAX_BYTES"]) >= broker


def test_ports_agree(svc: dict[str, dict[str, Any]]) -> None:
    emit = EmitSettings()
    ev = _env(svc["evaluator"])
    port = int(ev["NEXAGAUGE_EMIT_METRICS_PORT"])
    assert port == emit.metrics_port == 9464
    assert ev["NEXAGAUGE_EMIT_METRICS_HOST"] == "0.0.0.0", (
        "127.0.0.1 is unreachable from Prometheus"
    )
    assert _published(svc["evaluator"]) == {port: port}
    prom = yaml.safe_load((REPO / "dashboards" / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "nexagauge-evaluator"]
    assert job["static_configs"][0]["targets"] == [f"evaluator:{port}"]
    assert prom["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    assert any(
        v.startswith("./dashboards/prometheus/rules:/etc/prometheus/rules")
        for v in svc["prometheus"]["volumes"]
    )
    assert {4317, 4318} <= set(_published(svc["collector"]))
    assert _env(svc["demo-app"])["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4317"
    assert ev["NEXAGAUGE_EMIT_OTLP_ENDPOINT"] == "http://collector:4319"
    assert _env(svc["jaeger"])["COLLECTOR_OTLP_ENABLED"] == "true"
    ds = yaml.safe_load(
        (
            REPO / "dashboards" / "grafana" / "provisioning" / "datasources" / "datasources.yml"
        ).read_text()
    )
    urls = {d["type"]: d["url"] for d in ds["datasources"]}
    assert urls == {"prometheus": "http://prometheus:9090", "jaeger": "http://jaeger:16686"}
    retention = next(a for a in svc["prometheus"]["command"] if "retention.time" in a)
    days = re.search(r"(\d+)d", retention)
    assert days and int(days.group(1)) >= 8, "the baseline needs 7 days"


def test_evaluator_environment_is_valid_settings(
    svc: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in [v for v in os.environ if v.startswith(("NEXAGAUGE_", "OPENAI_"))]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)  # no ./nexagauge.toml
    env = _env(svc["evaluator"])
    for name, value in env.items():
        if not name.startswith("NEXAGAUGE_"):
            continue
        section, _, field = name.removeprefix("NEXAGAUGE_").lower().partition("_")
        assert section in Settings.model_fields, f"{name}: no settings section {section!r}"
        sub = Settings.model_fields[section].annotation
        assert isinstance(sub, type) and issubclass(sub, BaseModel), name
        assert field in sub.model_fields, f"{name}: {section} has no field {field!r}"
        if value is not None:  # None = passed through from the user's shell
            monkeypatch.setenv(name, _default(value))
    s = Settings()
    assert s.kafka.bootstrap_servers == "kafka:9092"
    assert s.online.rekey is False
    assert s.emit.metrics_host == "0.0.0.0" and s.emit.metrics_port == 9464
    assert s.emit.otlp_endpoint == "http://collector:4319"
    assert s.sampling.default_rate == 1.0
    assert s.judge.base_url is None, "no judge configured unless the user sets one"
    for name in ("NEXAGAUGE_JUDGE_BASE_URL", "NEXAGAUGE_JUDGE_API_KEY"):
        assert env[name] is None, f"{name} must come from the user's environment"


def test_docker_compose_config_validates() -> None:
    exe = require_binary("docker-compose")
    r = subprocess.run(
        [exe, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, cwd=REPO
    )
    assert r.returncode == 0, r.stdout + r.stderr
