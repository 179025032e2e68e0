"""Evaluation spans: child of the evaluated span, same trace; one ``gen_ai.evaluation.result``
per metric, as a log record in the evaluated span's context (default) or as a span event."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from nexagauge.emit.spans import EvaluationSpanWriter, bounded, build_exporter, evaluation_span_id
from nexagauge.emit.target import EvaluationTarget
from nexagauge.emit.view import EvaluationView, MetricView, evaluation_view
from nexagauge.graph.executor import CaseResult
from nexagauge.sdk import conventions as C
from nexagauge.settings import EmitSettings

from .conftest import FINGERPRINT, SPAN_ID, TRACE_ID, judged_result, target


def _only_span(w: EvaluationSpanWriter):  # type: ignore[no-untyped-def]
    spans = w.memory.get_finished_spans()
    assert len(spans) == 1
    return spans[0]


def _write(w: EvaluationSpanWriter, t: EvaluationTarget, v: EvaluationView, **kw: Any) -> str:
    """What the emitter does for a new evaluation: the span, then the results (at its end)."""
    sid = w.write(t, v, **kw)
    end = w.memory.get_finished_spans()[-1].end_time
    w.write_results(t, v.metrics, at_ns=end)
    return sid


def _results(w: EvaluationSpanWriter) -> list[dict[str, Any]]:
    """The ``gen_ai.evaluation.result`` attributes the writer emitted, in order: the log records
    (checked to be in the evaluated span's context), or the span events in span-events mode."""
    if w.events is None:
        evs = [e for e in _only_span(w).events if e.name == C.GEN_AI_EVALUATION_RESULT_EVENT]
        return [dict(e.attributes or {}) for e in evs]
    assert not _only_span(w).events  # never both: a backend would count each result twice
    out = []
    for r in w.events.memory.get_finished_logs():
        rec = r.log_record
        assert rec.event_name == C.GEN_AI_EVALUATION_RESULT_EVENT
        assert (f"{rec.trace_id:032x}", f"{rec.span_id:016x}") == (TRACE_ID, SPAN_ID)
        assert rec.timestamp == _only_span(w).end_time
        out.append(dict(rec.attributes or {}))
    return out


def test_parent_child_linkage_and_ids(writer: EvaluationSpanWriter) -> None:
    t = target()
    sid = writer.write(t, evaluation_view(judged_result()), end_ns=2_000_000_000_000_000_000)
    s = _only_span(writer)
    assert s.name == C.NG_EVALUATION_SPAN_NAME == "nexagauge.evaluation"
    assert s.kind == SpanKind.INTERNAL
    assert f"{s.context.trace_id:032x}" == TRACE_ID
    assert s.parent is not None
    assert f"{s.parent.trace_id:032x}" == TRACE_ID
    assert f"{s.parent.span_id:016x}" == SPAN_ID
    assert s.parent.is_remote
    assert f"{s.context.span_id:016x}" == sid
    assert int(sid, 16) == evaluation_span_id(TRACE_ID, SPAN_ID, FINGERPRINT)
    assert s.context.trace_flags.sampled
    assert s.end_time == 2_000_000_000_000_000_000
    assert s.start_time == s.end_time - int(1.5e9)  # slowest node ran 1.5 s
    assert s.resource.attributes["service.name"] == "nexagauge-evaluator"


def test_span_id_is_deterministic_and_config_dependent(writer: EvaluationSpanWriter) -> None:
    v = evaluation_view(judged_result())
    a = writer.write(target(), v)
    b = writer.write(target(), v)
    c = writer.write(target(config_fingerprint="other-config"), v)
    assert a == b != c
    # other spans of the provider still get random ids
    with writer.tracer.start_as_current_span("unrelated") as u:
        assert f"{u.get_span_context().span_id:016x}" not in (a, c)


@pytest.mark.parametrize("span_events", [False, True], ids=["log-events", "span-events"])
def test_attributes_and_events(span_events: bool) -> None:
    writer = EvaluationSpanWriter.in_memory(span_events=span_events)
    assert (writer.events is None) == span_events
    _write(writer, target(), evaluation_view(judged_result()), judge_model="gpt-4o-mini")
    s = _only_span(writer)
    a = s.attributes
    assert a[C.NG_EVALUATION_SCORE_PREFIX + "answer_relevancy"] == 0.75
    assert a[C.NG_EVALUATION_SCORE_PREFIX + "grounding"] == 0.5
    assert a[C.NG_EVALUATION_TRACE_ID] == TRACE_ID
    assert a[C.NG_EVALUATION_SPAN_ID] == SPAN_ID
    assert a[C.NG_EVALUATION_CASE_ID] == f"{TRACE_ID}:{SPAN_ID}"
    assert a[C.NG_EVALUATION_CONFIG_FINGERPRINT] == FINGERPRINT
    assert a[C.NG_EVALUATION_JUDGE_MODEL] == "gpt-4o-mini"
    assert a[C.NG_EVALUATION_COST_USD] == 0.0031
    assert a[C.NG_EVALUATION_STATUS] == "ok"
    assert a[C.GEN_AI_CONVERSATION_ID] == "session-42"
    assert s.status.status_code == StatusCode.UNSET
    events = _results(writer)
    assert len(events) == 2
    rel, gr = events
    assert rel == {
        C.GEN_AI_EVALUATION_NAME: "answer_relevancy",
        C.GEN_AI_EVALUATION_SCORE_VALUE: 0.75,
        C.GEN_AI_EVALUATION_SCORE_LABEL: "pass",
        C.GEN_AI_EVALUATION_EXPLANATION: "3 of 4 claims answer the question.",
    }
    assert gr == {
        C.GEN_AI_EVALUATION_NAME: "grounding",
        C.GEN_AI_EVALUATION_SCORE_VALUE: 0.5,
        C.GEN_AI_EVALUATION_SCORE_LABEL: "fail",
    }
    assert C.ERROR_TYPE not in a
    writer.shutdown()


def test_failed_metric_has_error_type(writer: EvaluationSpanWriter) -> None:
    res = judged_result(grounding_error="TimeoutError: judge timed out after 60s")
    _write(writer, target(), evaluation_view(res))
    s = _only_span(writer)
    rel, gr = _results(writer)
    assert gr[C.GEN_AI_EVALUATION_NAME] == "grounding"
    assert gr[C.ERROR_TYPE] == "TimeoutError"
    assert C.GEN_AI_EVALUATION_SCORE_VALUE not in gr
    assert C.GEN_AI_EVALUATION_SCORE_LABEL not in gr
    assert gr[C.GEN_AI_EVALUATION_EXPLANATION] == "TimeoutError: judge timed out after 60s"
    assert C.ERROR_TYPE not in rel
    a = s.attributes
    assert (
        a[C.NG_EVALUATION_ERROR_PREFIX + "grounding"] == "TimeoutError: judge timed out after 60s"
    )
    assert C.NG_EVALUATION_SCORE_PREFIX + "grounding" not in a
    assert a[C.NG_EVALUATION_STATUS] == "failed"
    assert a[C.ERROR_TYPE] == "TimeoutError"
    assert s.status.status_code == StatusCode.ERROR
    assert "grounding" in (s.status.description or "")


def test_record_error_span(writer: EvaluationSpanWriter) -> None:
    writer.write(target(), evaluation_view(CaseResult(0, None, error="record 0: output: missing")))
    s = _only_span(writer)
    assert s.attributes[C.ERROR_TYPE] == "RecordError"
    assert s.status.status_code == StatusCode.ERROR
    assert list(s.events) == []


def test_explanation_is_bounded() -> None:
    w = EvaluationSpanWriter.in_memory(max_explanation_chars=50)
    try:
        _write(w, target(), evaluation_view(judged_result(reasoning="why " * 1000)))
        ex = _results(w)[0][C.GEN_AI_EVALUATION_EXPLANATION]
        assert isinstance(ex, str)
        assert len(ex) == 50 and ex.endswith("…")
    finally:
        w.shutdown()
    assert bounded("abc", 3) == "abc" and bounded("abcd", 3) == "ab…" and bounded("x", 0) is None


def test_explanations_can_be_left_out_but_errors_stay() -> None:
    w = EvaluationSpanWriter.in_memory(include_explanation=False)
    try:
        _write(w, target(), evaluation_view(judged_result(grounding_error="ValueError: x")))
        rel, gr = _results(w)
        assert C.GEN_AI_EVALUATION_EXPLANATION not in rel
        assert gr[C.GEN_AI_EVALUATION_EXPLANATION] == "ValueError: x"
    finally:
        w.shutdown()


def test_unsampled_parent_still_exported(writer: EvaluationSpanWriter) -> None:
    _write(writer, target(trace_flags=0), evaluation_view(judged_result()))
    s = _only_span(writer)
    assert s.context.trace_flags.sampled
    assert len(_results(writer)) == 2


def test_ratio_label_when_no_threshold(writer: EvaluationSpanWriter) -> None:
    v = EvaluationView(
        metrics=[MetricView("answer_relevancy", "relevance", 0.75, accepted=3, rejected=1)]
    )
    _write(writer, target(), v)
    (ev,) = _results(writer)
    assert ev[C.GEN_AI_EVALUATION_SCORE_LABEL] == "3/4 ACCEPTED"


def test_disabled_writer_and_settings() -> None:
    w = EvaluationSpanWriter.from_settings(EmitSettings(span_exporter="none"))
    assert w.exporter is None
    assert len(w.write(target(), EvaluationView())) == 16
    w.shutdown()
    m = EvaluationSpanWriter.from_settings(EmitSettings(span_exporter="memory", service_name="ev"))
    m.write(target(), EvaluationView())
    assert m.memory.get_finished_spans()[0].resource.attributes["service.name"] == "ev"
    m.shutdown()


def test_build_exporter_protocols() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as G
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as H

    g = build_exporter(EmitSettings(otlp_endpoint="http://127.0.0.1:4317"))
    assert isinstance(g, G)
    g.shutdown()
    h = build_exporter(
        EmitSettings(otlp_endpoint="http://127.0.0.1:4318", otlp_protocol="http/protobuf")
    )
    assert isinstance(h, H)
    assert h._endpoint == "http://127.0.0.1:4318/v1/traces"
    h.shutdown()


def test_build_log_exporter_protocols() -> None:
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as G
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as H

    from nexagauge.emit.events import EvaluationEventWriter, build_log_exporter

    g = build_log_exporter(EmitSettings(otlp_endpoint="http://127.0.0.1:4317"))
    assert isinstance(g, G)
    g.shutdown()
    h = build_log_exporter(
        EmitSettings(otlp_endpoint="http://127.0.0.1:4318", otlp_protocol="http/protobuf")
    )
    assert isinstance(h, H)
    assert h._endpoint == "http://127.0.0.1:4318/v1/logs"
    h.shutdown()
    assert EvaluationEventWriter.from_settings(EmitSettings(result_events="span_events")) is None
    assert EvaluationEventWriter.from_settings(EmitSettings(result_events="none")) is None
    none = EvaluationSpanWriter.from_settings(EmitSettings(result_events="none"))
    assert none.events is None and not none.span_events
    none.shutdown()
