"""Real parts: a real executor run emitted as evaluation spans over OTLP (gRPC and HTTP) to a
loopback receiver, and /metrics scraped by a real Prometheus."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client import CollectorRegistry
from support.otlp_receiver import OtlpReceiver, ReceivedSpan
from support.prometheus import PrometheusServer, require_binary

from nexagauge.emit.emitter import Emitter
from nexagauge.emit.http import MetricsServer
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter, build_exporter
from nexagauge.emit.target import EvaluationTarget, config_fingerprint
from nexagauge.sdk import conventions as C
from nexagauge.settings import EmitSettings, Settings

from .conftest import judged_result, refmatch_result

pytestmark = pytest.mark.integration


def _app_span(exporter_settings: EmitSettings) -> tuple[str, str, int]:
    """Export one application span (the one being evaluated) with the real OTLP exporter."""
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(build_exporter(exporter_settings)))
    with provider.get_tracer("app").start_as_current_span("chat gpt-4o") as s:
        ctx = s.get_span_context()
    provider.shutdown()
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", time.time_ns()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
async def test_evaluation_span_and_result_events_over_otlp(protocol: str, tmp_path: Path) -> None:
    """The evaluation span (child of the evaluated span) and one ``gen_ai.evaluation.result``
    log record per metric **in the evaluated span's context** reach a real OTLP receiver (the
    real opentelemetry-proto services); the span carries no result events (no double count)
    and a redelivery exports nothing again."""
    with OtlpReceiver() as rx:
        endpoint = rx.endpoint_grpc if protocol == "grpc" else rx.endpoint_http
        emit = EmitSettings.model_validate({"otlp_endpoint": endpoint, "otlp_protocol": protocol})
        trace_id, span_id, end_ns = _app_span(emit)
        settings = Settings(cache={"dir": tmp_path}, emit=emit.model_dump())
        metrics = EvaluatorMetrics(CollectorRegistry())
        emitter = Emitter(metrics, EvaluationSpanWriter.from_settings(settings.emit), settings)
        t = EvaluationTarget(
            trace_id=trace_id,
            span_id=span_id,
            service="checkout-bot",
            span_name="chat gpt-4o",
            end_time_unix_nano=end_ns,
            model="gpt-4o",
            config_fingerprint=config_fingerprint(["relevance", "grounding"], {}, "gpt-4o-mini"),
        )
        await emitter.emit(t, judged_result(grounding_error="TimeoutError: judge timed out"))
        await emitter.emit(t, judged_result())  # redelivery: not exported again
        assert await emitter.spans.aflush(10_000)
        got = await asyncio.to_thread(
            rx.wait_for_spans, lambda s: s.name == "nexagauge.evaluation", 10.0
        )
        logs = await asyncio.to_thread(
            rx.wait_for_logs, lambda r: r.event_name == C.GEN_AI_EVALUATION_RESULT_EVENT, 10.0, 2
        )
        await emitter.aclose()
        sample = metrics.registry.get_sample_value
        assert sample("nexagauge_evaluation_spans_total", {"outcome": "exported"}) == 1.0
        assert sample("nexagauge_evaluation_events_total", {"outcome": "exported"}) == 2.0
        assert sample("nexagauge_evaluation_events_total", {"outcome": "failed"}) == 0.0
        app: ReceivedSpan = next(s for s in rx.spans if s.name == "chat gpt-4o")
        assert len(got) == 1
        ev = got[0]
        assert ev.trace_id == app.trace_id == trace_id
        assert ev.parent_span_id == app.span_id == span_id
        assert ev.transport == ("grpc" if protocol == "grpc" else "http")
        assert ev.resource["service.name"] == "nexagauge-evaluator"
        assert ev.scope_name == "nexagauge.emit"
        assert ev.status_code == 2  # ERROR: grounding failed
        assert ev.attributes[C.NG_EVALUATION_SCORE_PREFIX + "answer_relevancy"] == 0.75
        assert ev.attributes[C.NG_EVALUATION_STATUS] == "failed"
        assert not [e for e in ev.events if e.name == C.GEN_AI_EVALUATION_RESULT_EVENT]

        assert len(logs) == 2 and len(rx.logs) == 2  # one per metric, once
        for r in logs:  # in the context of the evaluated span, not of the evaluation span
            assert (r.trace_id, r.span_id) == (app.trace_id, app.span_id)
            assert r.transport == ev.transport and r.scope_name == "nexagauge.emit"
            assert r.resource["service.name"] == "nexagauge-evaluator"
            assert r.severity_text == "INFO" and r.body is None
        by_name = {r.attributes[C.GEN_AI_EVALUATION_NAME]: r.attributes for r in logs}
        assert by_name["answer_relevancy"] == {
            C.GEN_AI_EVALUATION_NAME: "answer_relevancy",
            C.GEN_AI_EVALUATION_SCORE_VALUE: 0.75,
            C.GEN_AI_EVALUATION_SCORE_LABEL: "pass",
            C.GEN_AI_EVALUATION_EXPLANATION: "3 of 4 claims answer the question.",
        }
        assert by_name["grounding"] == {
            C.GEN_AI_EVALUATION_NAME: "grounding",
            C.GEN_AI_EVALUATION_EXPLANATION: "TimeoutError: judge timed out",
            C.ERROR_TYPE: "TimeoutError",
        }


async def test_result_events_as_span_events_instead(tmp_path: Path) -> None:
    """``result_events = "span_events"``: the results ride on the evaluation span; no logs."""
    with OtlpReceiver(http=False) as rx:
        emit = {"otlp_endpoint": rx.endpoint_grpc, "result_events": "span_events"}
        settings = Settings(cache={"dir": tmp_path}, emit=emit)
        emitter = Emitter(
            EvaluatorMetrics(CollectorRegistry()),
            EvaluationSpanWriter.from_settings(settings.emit),
            settings,
        )
        assert emitter.spans.events is None
        t = EvaluationTarget(
            "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "svc", "chat", time.time_ns()
        )
        await emitter.emit(t, judged_result())
        assert await emitter.spans.aflush(10_000)
        (ev,) = await asyncio.to_thread(
            rx.wait_for_spans, lambda s: s.name == "nexagauge.evaluation", 10.0
        )
        await emitter.aclose()
        names = [e.attributes[C.GEN_AI_EVALUATION_NAME] for e in ev.events]
        assert names == ["answer_relevancy", "grounding"]
        assert rx.logs == []


@pytest.mark.slow
async def test_real_executor_result_scraped_by_prometheus(tmp_path: Path) -> None:
    prom_bin = require_binary("prometheus")
    result = await refmatch_result()  # a real executor run: scan -> refmatch -> eval -> report
    report = result.report
    assert report is not None
    settings = Settings(
        cache={"dir": tmp_path}, emit={"metrics_port": 0, "span_exporter": "memory"}
    )
    metrics = EvaluatorMetrics.from_settings(settings.emit, CollectorRegistry())
    emitter = Emitter(metrics, EvaluationSpanWriter.from_settings(settings.emit), settings)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    t = EvaluationTarget(
        trace_id,
        "00f067aa0ba902b7",
        "faq-bot",
        "answer",
        time.time_ns() - 2 * 10**9,
        model="gpt-4o",
    )
    await emitter.emit(t, result)
    assert emitter.spans.events is not None
    events = [r.log_record for r in emitter.spans.events.memory.get_finished_logs()]
    assert [e.attributes[C.GEN_AI_EVALUATION_NAME] for e in events] == list(report.scores)  # type: ignore[attr-defined, index]

    # the real prometheus, with exemplar storage on (what Grafana's exemplar links need)
    wrapper = tmp_path / "prometheus-with-exemplars"
    wrapper.write_text(f'#!/bin/sh\nexec {prom_bin} --enable-feature=exemplar-storage "$@"\n')
    wrapper.chmod(0o755)
    async with MetricsServer.from_settings(metrics, settings.emit) as srv:
        prom = PrometheusServer(
            targets={"nexagauge": [f"127.0.0.1:{srv.port}"]}, binary=str(wrapper)
        )
        await asyncio.to_thread(prom.start)
        try:
            res = await asyncio.to_thread(
                prom.wait_for, 'nexagauge_score_count{metric="rouge1", service="faq-bot"}', 30.0
            )
            assert res[0]["metric"]["span_name"] == "answer"
            assert res[0]["metric"]["model"] == "gpt-4o"
            assert float(res[0]["value"][1]) == 1.0
            got = await asyncio.to_thread(
                prom.query, 'sum by (metric) (nexagauge_score_sum{service="faq-bot"})'
            )
            sums = {r["metric"]["metric"]: float(r["value"][1]) for r in got}
            for name, score in report.scores.items():  # type: ignore[attr-defined]
                assert sums[name] == pytest.approx(score)
            ok = await asyncio.to_thread(prom.query, 'nexagauge_evaluations_total{status="ok"}')
            assert float(ok[0]["value"][1]) == 1.0
            lat = await asyncio.to_thread(prom.query, "nexagauge_evaluation_latency_seconds_count")
            assert float(lat[0]["value"][1]) == 1.0
            health = await asyncio.to_thread(prom.targets_health)
            assert list(health.values()) == ["up"]
            # the exemplar of the score (scraped in OpenMetrics) links the bucket to the trace
            now = time.time()
            ex = await asyncio.to_thread(
                prom._get,
                "/api/v1/query_exemplars",
                {
                    "query": 'nexagauge_score_bucket{metric="rouge1"}',
                    "start": f"{now - 600:.3f}",
                    "end": f"{now + 60:.3f}",
                },
            )
            labels_seen = [e["labels"] for series in ex for e in series["exemplars"]]
            assert {"trace_id": trace_id, "span_id": "00f067aa0ba902b7"} in labels_seen
            # no trace id ever became a label
            labels = await asyncio.to_thread(prom.label_values, "trace_id")
            assert labels == []
        finally:
            await asyncio.to_thread(prom.stop)
    await emitter.aclose()
