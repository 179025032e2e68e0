"""Evaluation spans leave in batches (issue 33): the export thread lingers a moment after the
first span of a batch, so one export carries the evaluations of that window (each OTLP POST
costs ~1 ms of CPU), and every span is still confirmed with its own outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from nexagauge.emit.confirm import ConfirmingSpanProcessor, confirm_next_end


class Recorder(SpanExporter):
    def __init__(self, ok: bool = True) -> None:
        self.batches: list[int] = []
        self.ok = ok
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock:
            self.batches.append(len(spans))
        return SpanExportResult.SUCCESS if self.ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return None


def _end_spans(provider: TracerProvider, n: int, gap_s: float = 0.0) -> list[bool]:
    tracer = provider.get_tracer("t")
    futures = []
    for _ in range(n):
        span = tracer.start_span("ev")
        with confirm_next_end() as fut:
            span.end()
        futures.append(fut)
        if gap_s:
            time.sleep(gap_s)
    return [f.result(timeout=5) for f in futures]


def test_spans_ended_within_the_linger_leave_in_one_export_each_confirmed() -> None:
    rec = Recorder()
    proc = ConfirmingSpanProcessor(rec, linger_s=0.3)
    provider = TracerProvider()
    provider.add_span_processor(proc)
    try:
        assert _end_spans(provider, 8, gap_s=0.005) == [True] * 8
        assert rec.batches == [8]
    finally:
        provider.shutdown()


def test_a_full_batch_does_not_wait_for_the_linger() -> None:
    rec = Recorder()
    proc = ConfirmingSpanProcessor(rec, max_batch=4, linger_s=30.0)
    provider = TracerProvider()
    provider.add_span_processor(proc)
    try:
        t0 = time.monotonic()
        assert _end_spans(provider, 8) == [True] * 8
        assert time.monotonic() - t0 < 5 and sum(rec.batches) == 8 and max(rec.batches) == 4
    finally:
        provider.shutdown()


def test_failed_export_is_confirmed_false_for_every_span_of_the_batch() -> None:
    rec = Recorder(ok=False)
    provider = TracerProvider()
    provider.add_span_processor(ConfirmingSpanProcessor(rec, linger_s=0.2))
    try:
        assert _end_spans(provider, 3) == [False] * 3 and rec.batches == [3]
    finally:
        provider.shutdown()


def test_shutdown_exports_what_is_queued_without_waiting_out_the_linger() -> None:
    rec = Recorder()
    proc = ConfirmingSpanProcessor(rec, linger_s=30.0)
    provider = TracerProvider()
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("t")
    with confirm_next_end() as fut:
        tracer.start_span("ev").end()
    t0 = time.monotonic()
    provider.shutdown()
    assert time.monotonic() - t0 < 5 and fut.result(timeout=1) is True and rec.batches == [1]


def test_a_steady_trickle_leaves_in_a_few_exports_a_second() -> None:
    """Spans 0.1 s apart (longer than the linger) share exports: a batch starts at most every
    ``min_interval_s``; before, each span left in its own POST."""
    rec = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(ConfirmingSpanProcessor(rec, linger_s=0.02, min_interval_s=0.5))
    try:
        assert _end_spans(provider, 12, gap_s=0.1) == [True] * 12
        assert sum(rec.batches) == 12 and len(rec.batches) <= 4
    finally:
        provider.shutdown()


def test_a_span_after_a_quiet_interval_waits_only_the_linger() -> None:
    rec = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(ConfirmingSpanProcessor(rec, linger_s=0.0, min_interval_s=0.3))
    tracer = provider.get_tracer("t")
    try:
        assert _end_spans(provider, 1) == [True]
        time.sleep(0.4)
        t0 = time.monotonic()
        with confirm_next_end() as fut:
            tracer.start_span("ev").end()
        assert fut.result(timeout=5) is True and time.monotonic() - t0 < 0.2
        assert rec.batches == [1, 1]
    finally:
        provider.shutdown()


def test_by_default_a_trickle_leaves_in_about_one_export_a_second() -> None:
    """Defaults (``EXPORT_INTERVAL_S`` 1 s): 10 spans over ~0.9 s share two exports (the
    first span's after the linger, then the rest a second later; 0.5 s made three)."""
    rec = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(ConfirmingSpanProcessor(rec))
    try:
        assert _end_spans(provider, 10, gap_s=0.1) == [True] * 10
        assert sum(rec.batches) == 10 and len(rec.batches) <= 2
    finally:
        provider.shutdown()


def test_a_batch_at_the_target_size_does_not_wait_out_the_interval() -> None:
    """A busy evaluator's spans leave every ``batch_target`` spans, not every interval (they
    hold their evaluation slot until confirmed); below the target the interval holds them."""
    rec = Recorder()
    provider = TracerProvider()
    proc = ConfirmingSpanProcessor(rec, linger_s=0.0, min_interval_s=30.0, batch_target=4)
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("t")
    try:
        assert _end_spans(provider, 1) == [True]  # the interval starts now
        t0 = time.monotonic()
        assert _end_spans(provider, 4) == [True] * 4
        assert time.monotonic() - t0 < 5 and rec.batches == [1, 4]
        with confirm_next_end() as fut:
            tracer.start_span("ev").end()
        time.sleep(0.3)
        assert not fut.done()  # one span, below the target: waits for the interval
    finally:
        provider.shutdown()
    assert fut.result(timeout=1) is True and rec.batches == [1, 4, 1]
