"""Per-call overhead of ``@nexagauge.trace`` against a hand-written OpenTelemetry span.

Both sides run in the same process, on the same ``TracerProvider`` (``BatchSpanProcessor`` feeding
an exporter that drops spans, so the network is not measured), with a 500-character input and a
500-character output. The baseline is what a developer would write by hand to record the same
attributes: ``start_as_current_span`` + the GenAI input/output messages as JSON + operation name,
workflow name and SDK version. ``@nexagauge.trace`` additionally picks the input argument, reads
the session, scrubs input and output for secrets and checks the size limit.

Rounds alternate baseline / traced (order flipped every round) and the median of per-round
ns/call is reported, which keeps the comparison fair on a noisy shared machine.

Run: ``python bench/sdk_overhead.py`` (about a minute) or ``--quick`` (a few seconds).
Target: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import nexagauge
from nexagauge.sdk import conventions as C

TEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889. Locally nicknamed La dame de fer, it was constructed as the centrepiece "
    "of the 1889 World's Fair, and to crown the centennial anniversary of the French Revolution. "
    "Although initially criticised by some of France's leading artists and intellectuals for its "
    "design, it has since become a global cultural icon of France and one of the most recognisable "
    "structures in the world."
)
INPUT = (TEXT * 2)[:500]
OUTPUT = (TEXT[::-1] * 2)[:500]


class DropExporter(SpanExporter):
    """Accepts and discards spans (the benchmark measures the call path, not the network)."""

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def app(question: str) -> str:
    return OUTPUT


def make_baseline(provider: TracerProvider) -> Callable[[str], str]:
    tracer = provider.get_tracer("hand-written")
    version = nexagauge.__version__

    def baseline(question: str) -> str:
        with tracer.start_as_current_span("app") as span:
            span.set_attributes(
                {
                    C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_WORKFLOW,
                    C.NG_SDK_VERSION: version,
                    C.GEN_AI_WORKFLOW_NAME: "app",
                    C.GEN_AI_INPUT_MESSAGES: json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": question}]}]
                    ),
                }
            )
            result = app(question)
            span.set_attribute(
                C.GEN_AI_OUTPUT_MESSAGES,
                json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": result}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            )
            return result

    return baseline


def per_call_ns(fn: Callable[[str], str], n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn(INPUT)
    return (time.perf_counter_ns() - start) / n


def run(rounds: int, n: int) -> dict[str, float]:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=1 << 16))
    nexagauge.configure(tracer_provider=provider)
    baseline = make_baseline(provider)
    traced = nexagauge.trace(app)
    # sanity: both record the same attribute set
    for fn in (baseline, traced):
        fn(INPUT)
    base_s: list[float] = []
    traced_s: list[float] = []
    plain_s: list[float] = []
    per_call_ns(baseline, n)  # warm-up
    per_call_ns(traced, n)
    gc.collect()
    for r in range(rounds):
        pair = [(baseline, base_s), (traced, traced_s)]
        if r % 2:
            pair.reverse()
        for fn, out in pair:
            out.append(per_call_ns(fn, n))
        plain_s.append(per_call_ns(app, n))
        provider.force_flush()
    provider.shutdown()
    base = statistics.median(base_s)
    trc = statistics.median(traced_s)
    ratios = [t / b for t, b in zip(traced_s, base_s, strict=True)]
    return {
        "plain_ns": statistics.median(plain_s),
        "baseline_ns": base,
        "traced_ns": trc,
        "ratio": trc / base,
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds (smoke run)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None, help="calls per round")
    args = parser.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 31)
    calls = args.calls or (500 if args.quick else 3000)
    res = run(rounds, calls)
    print(
        f"python {sys.version.split()[0]}, {rounds} rounds x {calls} calls, 500-char input/output"
    )
    print(f"plain function          : {res['plain_ns']:10.0f} ns/call")
    print(f"hand-written OTel span  : {res['baseline_ns']:10.0f} ns/call")
    print(f"@nexagauge.trace        : {res['traced_ns']:10.0f} ns/call")
    print(
        f"ratio traced/baseline   : {res['ratio']:10.3f}  (per-round min {res['ratio_min']:.3f}, "
        f"max {res['ratio_max']:.3f}; target <= 1.2)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
