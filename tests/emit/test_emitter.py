"""Emitter: scores, claims, evaluations, latency, judge usage; idempotent per evaluation key."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from nexagauge.emit.dedupe import DedupeJournal, DedupeWindow, key_hash
from nexagauge.emit.emitter import Emitter, default_journal_path
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.graph.executor import CaseResult
from nexagauge.schema.results import CostEstimate
from nexagauge.settings import EmitSettings, Settings

from .conftest import END_NS, SPAN_ID, TRACE_ID, judged_result, sample, target

LABELS = {"service": "checkout-bot", "span_name": "chat gpt-4o", "model": "gpt-4o"}
NOW = END_NS / 1e9 + 4.0  # scores emitted 4 s after the evaluated span ended


def make_emitter(settings: Settings | EmitSettings) -> Emitter:
    return Emitter(
        EvaluatorMetrics(CollectorRegistry()),
        EvaluationSpanWriter.in_memory(),
        settings,
        clock=lambda: NOW,
    )


def score_count(e: Emitter, metric: str) -> float | None:
    return sample(e.metrics, "nexagauge_score_count", metric=metric, **LABELS)


def evaluations(e: Emitter, status: str = "ok") -> float | None:
    return sample(e.metrics, "nexagauge_evaluations_total", status=status, **LABELS)


async def test_emit_records_everything(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(), judged_result())
    m = e.metrics
    assert score_count(e, "answer_relevancy") == 1.0
    assert sample(m, "nexagauge_score_sum", metric="answer_relevancy", **LABELS) == 0.75
    assert score_count(e, "grounding") == 1.0
    claims = "nexagauge_claims_total"
    assert sample(m, claims, metric="answer_relevancy", verdict="ACCEPTED", **LABELS) == 3.0
    assert sample(m, claims, metric="answer_relevancy", verdict="REJECTED", **LABELS) == 1.0
    assert sample(m, claims, metric="grounding", verdict="ACCEPTED", **LABELS) == 1.0
    assert evaluations(e) == 1.0
    assert sample(m, "nexagauge_evaluation_latency_seconds_count") == 1.0
    assert sample(m, "nexagauge_evaluation_latency_seconds_sum") == pytest.approx(4.0)
    assert sample(m, "nexagauge_last_evaluation_timestamp_seconds") == NOW
    tok = "nexagauge_judge_tokens_total"
    j = {"node": "relevance", "model": "gpt-4o-mini"}
    assert sample(m, tok, **j, direction="input") == 900.0
    assert sample(m, tok, **j, direction="output") == 120.0
    assert sample(m, "nexagauge_judge_cost_usd_total", **j) == pytest.approx(0.0021)
    assert (
        sample(m, "nexagauge_judge_cost_usd_total", node="grounding", model="gpt-4o-mini") == 0.001
    )
    spans = e.spans.memory.get_finished_spans()
    assert len(spans) == 1
    assert dict(spans[0].attributes or {})["nexagauge.evaluation.judge_model"] == "gpt-4o-mini"
    assert spans[0].end_time == int(NOW * 1e9)


async def test_emit_twice_counts_once(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(), judged_result())
    await e.emit(target(), judged_result())
    assert score_count(e, "answer_relevancy") == 1.0
    assert evaluations(e) == 1.0
    assert sample(
        e.metrics, "nexagauge_judge_cost_usd_total", node="relevance", model="gpt-4o-mini"
    ) == pytest.approx(0.0021)
    assert sample(e.metrics, "nexagauge_duplicate_evaluations_total") == 1.0
    assert len(e.spans.memory.get_finished_spans()) == 1  # not exported again


async def test_concurrent_duplicates_count_once(settings: Settings) -> None:
    e = make_emitter(settings)
    await asyncio.gather(*(e.emit(target(), judged_result()) for _ in range(5)))
    assert score_count(e, "answer_relevancy") == 1.0
    assert sample(e.metrics, "nexagauge_duplicate_evaluations_total") == 4.0


async def test_other_span_or_config_is_a_new_evaluation(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(), judged_result())
    await e.emit(target(span_id="00f067aa0ba902b7"), judged_result())
    await e.emit(target(config_fingerprint="new-config"), judged_result())
    assert score_count(e, "answer_relevancy") == 3.0
    assert evaluations(e) == 3.0


async def test_restart_with_journal_counts_once(settings: Settings) -> None:
    first = make_emitter(settings)
    await first.emit(target(), judged_result())
    assert first.journal is not None
    assert first.journal.path == default_journal_path(settings.cache.dir)
    assert first.journal.path.exists()
    # a new process on the same volume: fresh registry, same journal
    second = make_emitter(settings)
    await second.emit(target(), judged_result())
    assert score_count(second, "answer_relevancy") is None
    assert evaluations(second) is None
    assert sample(second.metrics, "nexagauge_duplicate_evaluations_total") == 1.0
    assert second.spans.memory.get_finished_spans() == ()
    # but a different evaluation is counted
    await second.emit(target(span_id="00f067aa0ba902b7"), judged_result())
    assert evaluations(second) == 1.0


async def test_restart_without_journal_counts_again(tmp_path: Path) -> None:
    """What is NOT deduplicated: a restart without a journal (documented)."""
    s = Settings(cache={"dir": tmp_path}, emit={"dedupe_journal": False})
    first, second = make_emitter(s), make_emitter(s)
    await first.emit(target(), judged_result())
    await second.emit(target(), judged_result())
    assert score_count(first, "answer_relevancy") == score_count(second, "answer_relevancy") == 1.0
    assert not (tmp_path / "emit").exists()


async def test_failed_metric(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(), judged_result(grounding_error="TimeoutError: judge"))
    assert evaluations(e, "failed") == 1.0
    assert (
        evaluations(e, "ok") == 0.0
    )  # created at zero with the failed one: a rate of 0, not "No data"
    assert score_count(e, "grounding") is None  # no score is never a 0
    assert score_count(e, "answer_relevancy") == 1.0


async def test_case_error_and_skipped_nodes(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(), CaseResult(0, None, error="record 0: output: missing"))
    assert evaluations(e, "failed") == 1.0
    res = judged_result(with_summary=False)
    from nexagauge.graph.executor import NodeOutcome
    from nexagauge.schema.results import RedteamMetrics

    res.outcomes["redteam"] = NodeOutcome(
        "redteam", "skipped", "no judge configured", RedteamMetrics()
    )
    await e.emit(target(span_id="00f067aa0ba902b7"), res)
    skipped = "nexagauge_skipped_total"
    assert sample(e.metrics, skipped, reason="no_judge", node="redteam") == 1.0
    attrs = dict(e.spans.memory.get_finished_spans()[-1].attributes or {})
    assert attrs["nexagauge.evaluation.skipped.redteam"] == "no_judge"
    assert attrs["nexagauge.evaluation.skip_reason.redteam"] == "no judge configured"


async def test_cached_nodes_count_as_cached_calls(settings: Settings) -> None:
    from nexagauge.graph.executor import NodeOutcome

    res = judged_result()
    o = res.outcomes["relevance"]
    assert o.output is not None
    res.outcomes["relevance"] = NodeOutcome(
        "relevance",
        "ok",
        None,
        o.output.model_copy(update={"cost": CostEstimate()}),
        cached=True,
        original_cost=CostEstimate(cost=0.002, input_tokens=900),
    )
    e = make_emitter(settings)
    await e.emit(target(), res)
    j = {"node": "relevance", "model": "gpt-4o-mini"}
    assert sample(e.metrics, "nexagauge_judge_calls_total", **j, outcome="cached") == 1.0
    assert sample(e.metrics, "nexagauge_judge_cost_usd_total", **j) == 0.0  # nothing spent now


async def test_local_judge_model_label(settings: Settings) -> None:
    res = judged_result()
    summary = res.outcomes["eval"].output
    variant = "local:all-MiniLM-L6-v2 lexicon=builtin.v1 calibration=cal.x"
    res.outcomes["eval"].output = summary.model_copy(  # type: ignore[union-attr]
        update={"judge": "local", "judge_model": variant}
    )
    e = make_emitter(settings)
    await e.emit(target(), res)
    assert (
        sample(
            e.metrics,
            "nexagauge_judge_tokens_total",
            node="relevance",
            model="local",
            direction="input",
        )
        == 900.0
    )
    # the evaluation span names the variant that judged (the metric label stays "local")
    (span,) = e.spans.memory.get_finished_spans()
    assert dict(span.attributes or {})["nexagauge.evaluation.judge_model"] == variant


async def test_emitter_with_emit_settings_only(tmp_path: Path) -> None:
    e = make_emitter(EmitSettings(dedupe_journal_path=tmp_path / "j"))
    await e.emit(target(), judged_result())
    assert (tmp_path / "j").read_text().count("\n") == 3  # evaluation + 2 metrics
    assert sample(
        e.metrics, "nexagauge_judge_cost_usd_total", node="relevance", model="unknown"
    ) == pytest.approx(0.0021)
    with pytest.raises(TypeError, match="settings"):
        Emitter(e.metrics, e.spans, {"emit": {}})


async def test_journal_write_failure_still_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    e = make_emitter(EmitSettings(dedupe_journal_path=blocker / "sub" / "journal"))
    await e.emit(target(), judged_result())
    assert evaluations(e) == 1.0
    assert "journal" in caplog.text


async def test_latency_unknown_end_time(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(end_time_unix_nano=0), judged_result())
    assert sample(e.metrics, "nexagauge_evaluation_latency_seconds_count") == 0.0
    assert evaluations(e) == 1.0


async def test_exemplar_on_emitted_score(settings: Settings) -> None:
    e = make_emitter(settings)
    await e.emit(target(), judged_result())
    text = e.metrics.exposition("application/openmetrics-text")[0].decode()
    line = next(
        ln for ln in text.splitlines() if ln.startswith("nexagauge_score_bucket") and "#" in ln
    )
    assert f'trace_id="{TRACE_ID}"' in line and f'span_id="{SPAN_ID}"' in line


# -- dedupe window / journal ------------------------------------------------------------------
def test_window_is_bounded_lru() -> None:
    w = DedupeWindow(3)
    for k in "abc":
        assert w.add(k)
    assert not w.add("a")  # refreshes a
    assert w.add("d")  # evicts b (least recent)
    assert "b" not in w and "a" in w and len(w) == 3
    with pytest.raises(ValueError):
        DedupeWindow(0)


def test_journal_compaction_and_torn_lines(tmp_path: Path) -> None:
    j = DedupeJournal(tmp_path / "j", capacity=4)
    hashes = [key_hash(str(i)) for i in range(20)]
    for h in hashes:
        j.append([h])
    lines = (tmp_path / "j").read_text().splitlines()
    assert len(lines) <= 9  # compacted: never more than 2 x capacity + 1
    assert lines[-1] == hashes[-1]
    with open(tmp_path / "j", "a") as f:
        f.write("deadbe")  # a crash mid-append
    again = DedupeJournal(tmp_path / "j", capacity=4)
    assert again.load() == hashes[-4:]
    assert not os.path.exists(tmp_path / "j.tmp")


async def test_window_smaller_than_journal_keeps_newest(tmp_path: Path) -> None:
    s = EmitSettings(dedupe_journal_path=tmp_path / "j", dedupe_window=3)
    first = make_emitter(s)
    await first.emit(target(span_id="0000000000000001"), judged_result())
    await first.emit(target(span_id="0000000000000002"), judged_result())
    second = make_emitter(s)
    await second.emit(target(span_id="0000000000000002"), judged_result())  # newest: deduped
    await second.emit(target(span_id="0000000000000001"), judged_result())  # aged out: counted
    assert evaluations(second) == 1.0


async def test_span_export_outcomes_are_counted(settings: Settings) -> None:
    """A refused export is counted as failed and the evaluation is NOT counted or journaled
    (not durable): emit raises, and a retry after the exporter recovers counts it once."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from nexagauge.emit.spans import SpanExportError

    refuse = [True]

    class Flaky(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.FAILURE if refuse[0] else SpanExportResult.SUCCESS

    ok = make_emitter(settings)
    await ok.emit(target(), judged_result())
    assert sample(ok.metrics, "nexagauge_evaluation_spans_total", outcome="exported") == 1.0
    for batch in (False, True):  # synchronous processor and the confirming batch processor
        refuse[0] = True
        s = Settings(cache={"dir": settings.cache.dir / f"other-{batch}"})
        bad = Emitter(
            EvaluatorMetrics(CollectorRegistry()), EvaluationSpanWriter(Flaky(), batch=batch), s
        )
        with pytest.raises(SpanExportError):
            await bad.emit(target(), judged_result())
        assert sample(bad.metrics, "nexagauge_evaluation_spans_total", outcome="failed") == 1.0
        assert evaluations(bad) is None  # nothing counted ...
        assert bad.journal is not None and await asyncio.to_thread(bad.journal.load) == []
        refuse[0] = False
        assert await bad.emit(target(), judged_result())  # ... until the export succeeds
        assert evaluations(bad) == 1.0
        assert not await bad.emit(target(), judged_result())
        assert evaluations(bad) == 1.0
        await bad.aclose()


def test_from_settings_wires_everything(tmp_path: Path) -> None:
    s = Settings(
        cache={"dir": tmp_path},
        emit={"span_exporter": "memory", "max_label_values": 7, "service_name": "ev"},
    )
    e = Emitter.from_settings(s)
    assert e.metrics.limiter.max_values == 7
    assert e.spans.on_export == e.metrics.evaluation_spans_exported
    assert e.journal is not None and e.journal.path == tmp_path / "emit" / "dedupe-journal"
    given = EvaluatorMetrics(CollectorRegistry())
    assert Emitter.from_settings(s, metrics=given).metrics is given
    e.spans.shutdown()


async def test_counted_only_after_export_is_confirmed(tmp_path: Path) -> None:
    """Issue 14 item 1: the evaluation is counted and journaled only once its span export is
    confirmed, and the wait never blocks the event loop. A process that dies while the span is
    still queued (simulated: the emit is abandoned, a new emitter starts on the same journal)
    evaluates the redelivered trace again instead of suppressing it as already emitted."""
    import threading

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    release = threading.Event()
    exported: list[str] = []

    class Stuck(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            release.wait(10)
            exported.extend(f"{s.context.span_id:016x}" for s in spans)
            return SpanExportResult.SUCCESS

    s = EmitSettings(dedupe_journal_path=tmp_path / "j")
    w = EvaluationSpanWriter(Stuck(), batch=True)
    e = Emitter(EvaluatorMetrics(CollectorRegistry()), w, s)
    ticks = 0
    ten_ticks = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
            if ticks >= 10:
                ten_ticks.set()

    t = asyncio.ensure_future(ticker())
    pending = [
        asyncio.ensure_future(e.emit(target(span_id=f"{i + 1:016x}"), judged_result()))
        for i in range(3)
    ]
    # the loop runs while the export is stuck (for up to 10 s): ten ticks come within 5 s however
    # loaded the machine (a fixed 0.3 s window failed once on a busy CI host: 1 tick)
    await asyncio.wait_for(ten_ticks.wait(), 5)
    assert ticks >= 10 and not release.is_set()
    assert not any(p.done() for p in pending)
    assert evaluations(e) is None and not (tmp_path / "j").exists()  # nothing counted/journaled
    # "kill -9" now: a restarted process on the same volume sees no record of the evaluation
    restarted = make_emitter(s)
    assert await restarted.emit(target(span_id=f"{1:016x}"), judged_result())
    assert evaluations(restarted) == 1.0
    release.set()
    assert all(await asyncio.gather(*pending))
    t.cancel()
    assert evaluations(e) == 3.0 and len(exported) == 3
    assert (tmp_path / "j").read_text().count("\n") == 4 * 3  # 3 + 1 evaluations, 3 keys each
    await e.aclose()


async def test_journal_io_runs_off_the_loop(tmp_path: Path) -> None:
    """A slow disk delays only the emit call that waits for it, never the event loop."""
    import time as _time

    e = make_emitter(EmitSettings(dedupe_journal_path=tmp_path / "j"))
    assert e.journal is not None
    slow = e.journal.append

    def slow_append(hashes):  # type: ignore[no-untyped-def]
        # a write that lasts until the event loop has ticked ten times (at most 10 s): on the
        # loop's thread it would last the full 10 s with no tick; a fixed 0.5 s could see fewer
        # than ten ticks on a loaded machine although the loop never waited for it
        deadline = _time.monotonic() + 10
        while ticks < 10 and _time.monotonic() < deadline:
            _time.sleep(0.01)
        slow(hashes)

    e.journal.append = slow_append  # type: ignore[method-assign]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.ensure_future(ticker())
    await e.emit(target(), judged_result())
    t.cancel()
    assert ticks >= 10  # the loop kept running during the write
    assert evaluations(e) == 1.0
