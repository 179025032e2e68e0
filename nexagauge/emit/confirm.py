"""A span processor that tells the writer of each span whether its export succeeded.

OpenTelemetry's ``BatchSpanProcessor`` queues ended spans and exports them later on its thread;
nobody learns whether a given span reached the backend. The online evaluator must know: an
evaluation may be counted in Prometheus, marked as emitted (deduplication) and its Kafka offset
committed only *after* its evaluation span is durable, or a crash in between loses the
evaluation for good (a redelivery would be suppressed as "already emitted").

:class:`ConfirmingSpanProcessor` exports on one background thread in *natural* batches: the
thread takes whatever has queued up (at most ``max_batch`` spans), exports it, and resolves a
:class:`concurrent.futures.Future` per span with the outcome (``True``: the exporter returned
``SUCCESS``). While an export runs, new spans queue up and go in the next batch, so throughput
scales with load without a fixed schedule delay. The caller attaches a future to the span it is
about to end with :func:`confirm_next_end` (a context variable read in :meth:`on_end`, which runs
synchronously inside ``span.end()``); async callers await it with ``asyncio.wrap_future``.

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    >>> mem = InMemorySpanExporter()
    >>> p = TracerProvider(); proc = ConfirmingSpanProcessor(mem); p.add_span_processor(proc)
    >>> span = p.get_tracer("t").start_span("s")
    >>> with confirm_next_end() as done:
    ...     span.end()
    >>> done.result(timeout=5), len(mem.get_finished_spans())
    (True, 1)
    >>> p.shutdown()
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

#: default linger of a batch (see :class:`ConfirmingSpanProcessor`): the evaluation waits this much
#: longer for its confirmation; at 40 evaluations/s one POST carries ~4 instead of ~1-2
EXPORT_LINGER_S = 0.1
#: default shortest time between the starts of two exports while fewer than
#: :data:`EXPORT_BATCH_TARGET` spans are queued: at most one POST a second at a low rate, so
#: at a steady 8 evaluations/s one carries ~8 (each OTLP POST costs ~0.5 ms of CPU on top of
#: ~0.05 ms per span); a span after a quiet second still waits only the linger
EXPORT_INTERVAL_S = 1.0
#: default queue length at which a batch leaves without waiting out the interval (the linger
#: still applies): above ~32 evaluations/s exports start every ~32 spans, so a busy evaluator's
#: evaluations do not wait a whole interval for their confirmation (and hold their slot)
EXPORT_BATCH_TARGET = 32

_pending_confirmation: contextvars.ContextVar[Future[bool] | None] = contextvars.ContextVar(
    "nexagauge_export_confirmation", default=None
)


@contextlib.contextmanager
def confirm_next_end() -> Iterator[Future[bool]]:
    """A future resolved with the export outcome of the span ended inside the ``with`` block."""
    fut: Future[bool] = Future()
    token = _pending_confirmation.set(fut)
    try:
        yield fut
    finally:
        _pending_confirmation.reset(token)


def confirm_inline(ok: bool) -> None:
    """Resolve the pending confirmation of an export running inside ``span.end()`` itself.

    A synchronous processor (``SimpleSpanProcessor``) exports within ``span.end()``, in the
    caller's context: its exporter calls this so that the span's writer learns the outcome too.
    """
    fut = _pending_confirmation.get()
    if fut is not None and not fut.done():
        fut.set_result(ok)


class ConfirmingSpanProcessor(SpanProcessor):
    """Batches ended spans to ``exporter`` on a thread and confirms each one (module docstring).

    Args:
        exporter: the span exporter (OTLP in production; it retries transient errors itself).
        max_batch: most spans per ``export`` call.
        linger_s: how long the thread waits after the first span of a batch for more to join it
            (at most until ``max_batch`` are queued): one POST carries the evaluations of that
            window instead of one or two each (each POST costs ~0.5 ms of CPU). ``0``: export
            whatever is queued at once.
        min_interval_s: a batch also waits until this long after the previous export started
            (at most until ``batch_target`` are queued): a steady trickle of evaluations leaves
            in one POST a second rather than one POST each. ``0``: no such wait.
        batch_target: queued spans that end the ``min_interval_s`` wait (not the linger).
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_batch: int = 512,
        linger_s: float = EXPORT_LINGER_S,
        min_interval_s: float = EXPORT_INTERVAL_S,
        batch_target: int = EXPORT_BATCH_TARGET,
    ) -> None:
        self.exporter = exporter
        self.max_batch = max(1, max_batch)
        self.linger_s = max(0.0, linger_s)
        self.min_interval_s = max(0.0, min_interval_s)
        self.batch_target = min(max(1, batch_target), self.max_batch)
        self._last_start = float("-inf")
        self._queue: deque[tuple[ReadableSpan, Future[bool] | None]] = deque()
        self._cond = threading.Condition()
        self._exporting = 0
        self._shutdown = False
        self._thread = threading.Thread(target=self._run, name="nexagauge-span-export", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        fut = _pending_confirmation.get()
        with self._cond:
            if self._shutdown:
                if fut is not None and not fut.done():
                    fut.set_result(False)
                return
            self._queue.append((span, fut))
            n = len(self._queue)
            if n == 1 or n == self.batch_target or n >= self.max_batch:
                self._cond.notify_all()  # wake the idle thread, or end its wait early

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._shutdown:
                    self._cond.wait()
                if not self._queue:
                    return  # shut down and drained
                lingered = time.monotonic() + self.linger_s
                spaced = self._last_start + self.min_interval_s
                while len(self._queue) < self.max_batch and not self._shutdown:
                    # the interval holds a batch only until it reaches the target size
                    due = lingered if len(self._queue) >= self.batch_target else spaced
                    left = max(lingered, due) - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                n = min(len(self._queue), self.max_batch)
                batch = [self._queue.popleft() for _ in range(n)]
                self._exporting += 1
                self._last_start = time.monotonic()
            try:
                result = self.exporter.export([s for s, _ in batch])
                ok = result == SpanExportResult.SUCCESS
            except Exception:
                log.exception("evaluation span export raised")
                ok = False
            for _, fut in batch:
                if fut is not None and not fut.done():
                    fut.set_result(ok)
            with self._cond:
                self._exporting -= 1
                self._cond.notify_all()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every queued span has been through an export attempt."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            while self._queue or self._exporting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def shutdown(self) -> None:
        """Export what is queued, stop the thread, shut the exporter down. Idempotent."""
        with self._cond:
            if self._shutdown:
                return
            self._shutdown = True
            self._cond.notify_all()
        self._thread.join(timeout=60)
        self.exporter.shutdown()
