"""EvaluatorMetrics: every declared series exists, labels are bounded, exemplars are exposed."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from nexagauge.emit import metric_names as N
from nexagauge.emit.prometheus import OTHER, EvaluatorMetrics, LabelLimiter, exposition
from nexagauge.settings import EmitSettings

from .conftest import SPAN_ID, TRACE_ID, sample

OM = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def _declared_names() -> list[str]:
    return [v for k, v in vars(N).items() if k.isupper() and isinstance(v, str) and k != "PREFIX"]


def test_every_metric_name_is_registered(metrics: EvaluatorMetrics) -> None:
    body, _ = metrics.exposition("text/plain")
    text = body.decode()
    helped = set(re.findall(r"^# HELP (\S+)", text, re.M))
    for name in _declared_names():
        assert name in helped, f"{name} from metric_names.py is not exposed"


def test_fresh_registries_do_not_collide() -> None:
    a, b = EvaluatorMetrics(CollectorRegistry()), EvaluatorMetrics(CollectorRegistry())
    a.late_spans(3)
    assert sample(a, "nexagauge_late_spans_total") == 3.0
    assert sample(b, "nexagauge_late_spans_total") == 0.0
    EvaluatorMetrics()  # a private registry by default: never the global one


def test_cardinality_cap_turns_new_values_into_other(registry: CollectorRegistry) -> None:
    m = EvaluatorMetrics(registry, max_label_values=3)
    seen = [m.labels_for(f"svc-{i}", "chat", "gpt-4o")["service"] for i in range(10)]
    assert seen[:3] == ["svc-0", "svc-1", "svc-2"]
    assert set(seen[3:]) == {OTHER}
    assert m.labels_for("svc-1", "chat", "gpt-4o")["service"] == "svc-1"  # kept values stay
    for i in range(10):
        m.record_score("answer_relevancy", m.labels_for(f"svc-{i}", "chat", "m"), 0.5)
    services = {
        s.labels["service"]
        for fam in registry.collect()
        if fam.name == N.SCORE
        for s in fam.samples
        if s.name.endswith("_count")
    }
    assert services == {"svc-0", "svc-1", "svc-2", OTHER}


def test_label_allowlist_and_value_allowlist(registry: CollectorRegistry) -> None:
    s = EmitSettings(label_allowlist=["service", "model"], label_values={"model": ["gpt-4o"]})
    m = EvaluatorMetrics.from_settings(s, registry)
    assert m.labels_for("svc", "chat with user 123", "gpt-4o") == {
        "service": "svc",
        "span_name": "",  # dimension switched off
        "model": "gpt-4o",
    }
    assert m.labels_for("svc", "x", "llama-3-8b")["model"] == OTHER
    assert m.labels_for(None, None, None)["service"] == "unknown"


def test_label_values_are_truncated() -> None:
    lim = LabelLimiter(None, 5)
    assert len(lim("span_name", "x" * 10_000)) == 128


def test_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_label_values"):
        LabelLimiter(None, 0)


def test_enum_labels_are_bounded(metrics: EvaluatorMetrics) -> None:
    metrics.trace_assembled("root_end")
    metrics.trace_assembled("some new trigger")
    metrics.set_budget("week", 3.0, False)
    assert sample(metrics, "nexagauge_traces_assembled_total", trigger="root_end") == 1.0
    assert sample(metrics, "nexagauge_traces_assembled_total", trigger=OTHER) == 1.0
    assert sample(metrics, "nexagauge_budget_remaining_usd", window=OTHER) == 3.0


def test_free_form_reasons_are_capped(registry: CollectorRegistry) -> None:
    m = EvaluatorMetrics(registry, max_reason_values=2)
    for r in ("max_traces", "x", "y", "z", "w"):
        m.trace_evicted(r)
    evicted = "nexagauge_evicted_traces_total"
    assert sample(m, evicted, reason="max_traces") == 1.0  # known reasons never use the cap
    assert sample(m, evicted, reason="x") == sample(m, evicted, reason="y") == 1.0
    assert sample(m, evicted, reason=OTHER) == 2.0


def test_skip_reasons_are_codes_never_free_text(registry: CollectorRegistry) -> None:
    """``skipped_total{reason}`` holds only SkipReason codes: texts are mapped to theirs."""
    m = EvaluatorMetrics(registry)
    for r in (
        "rate_limit",
        "budget_hour",
        "needs an LLM judge (the local judge cannot run this metric)",
        "conversation_relevance disabled",
        "something new",
    ):
        m.skip(r)
    m.skip("not eligible: no context", node="grounding")
    skipped = "nexagauge_skipped_total"
    assert sample(m, skipped, reason="rate_limit", node="") == 1.0
    assert sample(m, skipped, reason="budget_hour", node="") == 1.0
    assert sample(m, skipped, reason="judge_unsupported", node="") == 1.0
    assert sample(m, skipped, reason="disabled", node="") == 1.0
    assert sample(m, skipped, reason="other", node="") == 1.0
    assert sample(m, skipped, reason="not_eligible", node="grounding") == 1.0
    from nexagauge.graph.skips import SkipReason

    reasons = {
        s.labels["reason"] for f in registry.collect() for s in f.samples if s.name == skipped
    }
    assert reasons <= {r.value for r in SkipReason}


def test_pipeline_helpers(metrics: EvaluatorMetrics) -> None:
    m = metrics
    m.spans_consumed("otlp_spans", 10)
    m.messages_consumed("otlp_spans")
    m.trace_sampled("errors")
    m.trace_not_sampled(4)
    m.late_spans()
    m.trace_evicted("max_traces", 2)
    m.set_buffer(7, 70)
    m.set_consumer_lag("otlp_spans", 3, 120)
    m.dead_lettered("undecodable")
    m.set_in_flight(5)
    m.set_paused_partitions(2)
    m.judge_call("relevance", "gpt-4o-mini", "ok", latency_s=0.3)
    m.judge_call("relevance", "gpt-4o-mini", "error")
    m.set_budget("hour", 1.25, False)
    m.set_budget("day", -2.0, True)
    expect = {
        ("nexagauge_spans_consumed_total", (("topic", "otlp_spans"),)): 10.0,
        ("nexagauge_messages_consumed_total", (("topic", "otlp_spans"),)): 1.0,
        ("nexagauge_traces_sampled_total", (("rule", "errors"),)): 1.0,
        ("nexagauge_traces_not_sampled_total", ()): 4.0,
        ("nexagauge_late_spans_total", ()): 1.0,
        ("nexagauge_evicted_traces_total", (("reason", "max_traces"),)): 2.0,
        ("nexagauge_buffer_traces", ()): 7.0,
        ("nexagauge_buffer_spans", ()): 70.0,
        ("nexagauge_consumer_lag", (("topic", "otlp_spans"), ("partition", "3"))): 120.0,
        ("nexagauge_dlq_messages_total", (("reason", "undecodable"),)): 1.0,
        ("nexagauge_evaluations_in_flight", ()): 5.0,
        ("nexagauge_paused_partitions", ()): 2.0,
        (
            "nexagauge_judge_calls_total",
            (("node", "relevance"), ("model", "gpt-4o-mini"), ("outcome", "ok")),
        ): 1.0,
        (
            "nexagauge_judge_calls_total",
            (("node", "relevance"), ("model", "gpt-4o-mini"), ("outcome", "error")),
        ): 1.0,
        (
            "nexagauge_judge_latency_seconds_count",
            (("node", "relevance"), ("model", "gpt-4o-mini")),
        ): 1.0,
        ("nexagauge_budget_remaining_usd", (("window", "hour"),)): 1.25,
        ("nexagauge_budget_remaining_usd", (("window", "day"),)): 0.0,
        ("nexagauge_budget_exhausted", (("window", "day"),)): 1.0,
        ("nexagauge_budget_exhausted", (("window", "hour"),)): 0.0,
    }
    for (name, labels), value in expect.items():
        assert sample(m, name, **dict(labels)) == value, name
    m.forget_partition("otlp_spans", 3)
    m.forget_partition("otlp_spans", 99)  # unknown: no error
    assert sample(m, "nexagauge_consumer_lag", topic="otlp_spans", partition="3") is None


def test_score_is_clamped_and_bucketed(metrics: EvaluatorMetrics) -> None:
    labels = metrics.labels_for("svc", "chat", "gpt-4o")
    metrics.record_score("grounding", labels, 0.55)
    metrics.record_score("grounding", labels, 1.7)  # clamped to 1.0
    b = {**labels, "metric": "grounding"}
    assert sample(metrics, "nexagauge_score_bucket", **b, le="0.5") == 0.0
    assert sample(metrics, "nexagauge_score_bucket", **b, le="0.6") == 1.0
    assert sample(metrics, "nexagauge_score_bucket", **b, le="1.0") == 2.0
    assert sample(metrics, "nexagauge_score_sum", **b) == pytest.approx(1.55)


def test_exemplars_only_in_openmetrics(metrics: EvaluatorMetrics) -> None:
    labels = metrics.labels_for("svc", "chat", "gpt-4o")
    metrics.record_score("answer_relevancy", labels, 0.83, TRACE_ID, SPAN_ID)
    body, ctype = exposition(metrics.registry, OM)
    assert ctype.startswith("application/openmetrics-text")
    text = body.decode()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    buckets = [s for s in families[N.SCORE].samples if s.name == "nexagauge_score_bucket"]
    with_ex = [s for s in buckets if s.exemplar is not None]
    assert len(with_ex) == 1
    ex = with_ex[0]
    assert ex.labels["le"] == "0.9"
    assert ex.exemplar.labels == {"trace_id": TRACE_ID, "span_id": SPAN_ID}
    assert ex.exemplar.value == pytest.approx(0.83)
    # the classic text format has no exemplars (and is what a plain client gets)
    plain, ptype = exposition(metrics.registry, None)
    assert ptype.startswith("text/plain")
    assert TRACE_ID not in plain.decode()


def test_exemplars_can_be_switched_off(registry: CollectorRegistry) -> None:
    m = EvaluatorMetrics(registry, exemplars=False)
    m.record_score("x", m.labels_for("s", "n", "m"), 0.5, TRACE_ID)
    assert TRACE_ID not in m.exposition(OM)[0].decode()


def test_trace_ids_are_never_labels(metrics: EvaluatorMetrics) -> None:
    labels = metrics.labels_for("svc", "chat", "gpt-4o")
    metrics.record_score("answer_relevancy", labels, 0.4, TRACE_ID, SPAN_ID)
    metrics.record_evaluation("ok", labels, 3.0, 1.0, TRACE_ID, SPAN_ID)
    for fam in metrics.registry.collect():
        for s in fam.samples:
            assert TRACE_ID not in s.labels.values()
            assert SPAN_ID not in s.labels.values()


def test_label_values_from_app_data_never_carry_secrets() -> None:
    """Service, span and model names come from the app's spans: a secret in one is scrubbed
    (also when it straddles the length cut) before it becomes a label value."""
    lim = LabelLimiter()
    token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
    for raw in (f"svc {token}", "x" * 120 + token, f"key=AKIAIOSFODNN7EXAMPLE {token}"):
        v = lim("service", raw)
        assert token[:10] not in v and "AKIAIOSFODNN" not in v, v
        assert "[scrubbed" in v or v.startswith("x" * 120), v
        assert lim("service", raw) == v  # stable: one label value per raw value


def test_sampling_rules_of_the_configuration_start_at_zero() -> None:
    """A burst sampled before Prometheus' first scrape would otherwise start the series at its
    final value: ``rate()`` 0, and the "Sampling share" panel empty (seen with concurrent apps
    in tests/online/test_instrumented_e2e.py)."""
    from nexagauge.emit.zero import start_for_service
    from nexagauge.settings import Settings

    m = EvaluatorMetrics()
    start_for_service(m, Settings(sampling={"rules": [{"name": "vip", "service": "a"}]}), None)
    for rule in ("default", "error", "vip"):
        assert m.registry.get_sample_value("nexagauge_traces_sampled_total", {"rule": rule}) == 0
