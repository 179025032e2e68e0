"""Per-call overhead of ``@nexagauge.trace`` against a hand-written OpenTelemetry span.

Both sides run in the same process, on the same ``TracerProvider`` (``BatchSpanProcessor`` feeding
an exporter that drops spans, so the network is not measured), with a 500-character input and a
500-character output. The baseline is what a developer would write by hand to record the same
attributes: ``start_as_current_span`` + the GenAI input/output messages as JSON + operation name,
workflow name and SDK version. ``@nexagauge.trace`` additionally picks the input argument, reads
the session, scrubs input and output for secrets and checks the size limit.

Two baselines: the *idiomatic* one (``start_as_current_span`` + ``json.dumps``, what the OpenTelemetry
docs show) and a *tuned* one (``start_span`` + manual context attach/detach + the same C string
encoder the SDK uses), so the SDK's own overhead is visible without flattering it.

Rounds alternate the variants (order rotated every round) and the median of per-round ns/call is
reported, both in wall-clock time and in process CPU time (the latter is robust on a loaded shared
machine, where wall time includes time the process was not scheduled; it includes the batch
exporter thread, identical for all variants).

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
from nexagauge.sdk import config as sdk_config
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


def make_tuned_baseline(provider: TracerProvider) -> Callable[[str], str]:
    from json.encoder import encode_basestring

    from opentelemetry import context, trace

    tracer = provider.get_tracer("hand-written-tuned")
    version = nexagauge.__version__
    head_in = '[{"role":"user","parts":[{"type":"text","content":'
    head_out = '[{"role":"assistant","parts":[{"type":"text","content":'

    def tuned(question: str) -> str:
        span = tracer.start_span(
            "app",
            attributes={
                C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_WORKFLOW,
                C.NG_SDK_VERSION: version,
                C.GEN_AI_WORKFLOW_NAME: "app",
                C.GEN_AI_INPUT_MESSAGES: head_in + encode_basestring(question) + "}]}]",
            },
        )
        token = context.attach(trace.set_span_in_context(span))
        try:
            result = app(question)
        finally:
            context.detach(token)
        span.set_attributes(
            {
                C.GEN_AI_OUTPUT_MESSAGES: head_out
                + encode_basestring(result)
                + '}],"finish_reason":"stop"}]'
            }
        )
        span.end()
        return result

    return tuned


def per_call_ns(fn: Callable[[str], str], n: int) -> tuple[float, float]:
    """(wall ns/call, process CPU ns/call)."""
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(n):
        fn(INPUT)
    return (time.perf_counter_ns() - start) / n, (time.process_time_ns() - cpu) / n


def run(rounds: int, n: int) -> dict[str, dict[str, float]]:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=1 << 16))
    nexagauge.configure(tracer_provider=provider, scrub=False)
    state_noscrub = sdk_config.STATE
    nexagauge.configure(tracer_provider=provider)
    state_default = sdk_config.STATE
    traced = nexagauge.trace(name="app")(app)
    variants: dict[str, Callable[[str], str]] = {
        "baseline": make_baseline(provider),
        "tuned": make_tuned_baseline(provider),
        "traced": traced,
        "traced_noscrub": traced,
    }
    states = {"traced_noscrub": state_noscrub}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    for name, fn in variants.items():  # warm-up
        sdk_config.STATE = states.get(name, state_default)
        per_call_ns(fn, n)
    gc.collect()
    names = list(variants)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            sdk_config.STATE = states.get(name, state_default)
            w, c = per_call_ns(variants[name], n)
            wall[name].append(w)
            cpu[name].append(c)
        provider.force_flush()
    plain = statistics.median(per_call_ns(app, n)[0] for _ in range(5))
    provider.shutdown()
    out: dict[str, dict[str, float]] = {"plain": {"wall": plain, "cpu": plain}}
    for name in names:
        out[name] = {"wall": statistics.median(wall[name]), "cpu": statistics.median(cpu[name])}
    for sdk in ("traced", "traced_noscrub"):
        for base in ("baseline", "tuned"):
            key = f"ratio_{sdk}_{base}"
            out[key] = {}
            for kind, series in (("wall", wall), ("cpu", cpu)):
                ratios = [t / b for t, b in zip(series[sdk], series[base], strict=True)]
                out[key][kind] = out[sdk][kind] / out[base][kind]
                out[key][f"{kind}_p25"] = statistics.quantiles(ratios, n=4)[0]
                out[key][f"{kind}_p75"] = statistics.quantiles(ratios, n=4)[2]
    return out


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
    print(f"{'':34}{'wall ns/call':>14}{'CPU ns/call':>14}")
    rows = [
        ("plain function (no tracing)", "plain"),
        ("hand-written span, idiomatic", "baseline"),
        ("hand-written span, tuned", "tuned"),
        ("@nexagauge.trace", "traced"),
        ("@nexagauge.trace, scrub=False", "traced_noscrub"),
    ]
    for label, key in rows:
        print(f"{label:34}{res[key]['wall']:14.0f}{res[key]['cpu']:14.0f}")
    for sdk, sdk_label in (("traced", "trace"), ("traced_noscrub", "trace, scrub=False")):
        for base, label in (("baseline", "idiomatic"), ("tuned", "tuned")):
            r = res[f"ratio_{sdk}_{base}"]
            print(
                f"ratio {sdk_label:18} / {label:9}: CPU {r['cpu']:.3f} "
                f"(per-round IQR {r['cpu_p25']:.3f}-{r['cpu_p75']:.3f}), wall {r['wall']:.3f} "
                f"(IQR {r['wall_p25']:.3f}-{r['wall_p75']:.3f})"
            )
    print("target: @nexagauge.trace <= 1.2 x the hand-written span")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
