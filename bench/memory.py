"""Memory of the evaluator with 10,000 traces buffered (roots not ended yet).

The evaluator runs in its own child process (the real ``OnlineService``, ``rekey = false``,
default buffer limits: 10,000 traces / 200,000 spans, ``judge.mode = none``, sample rate 100%:
the worst case, every trace is a candidate and is buffered; at lower rates the decode-time discard
drops traces that can never be sampled before they reach the buffer),
consuming a Tansu topic on loopback. Steps, all in one run:

1. start the service and let its consumer join; then a warm-up of complete traces (roots ended)
   flows through the whole pipeline and leaves the buffer (code paths, protobuf classes, fetch
   buffers and the evaluation path are all warm): RSS = **baseline**;
2. produce ``--traces`` traces (default 10,000) whose root span has not ended: only the 4 child
   spans of each (embedding, retrieval, re-rank, the LLM call; ~10.6 KB of OTLP per trace, 2
   traces per message, written by the real SDK), with ``trace_inactivity_s`` far away, so every
   one stays in the assembly buffer;
3. when the buffer holds all of them: RSS (after ``gc.collect()``) and peak RSS (``VmHWM``).

Reported: baseline, buffered and peak RSS, and RSS per buffered trace =
(buffered - baseline) / traces, next to the OTLP bytes per trace.

    python bench/memory.py [--quick] [--traces N] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Broker,
    BuiltTrace,
    exit_on_sigterm,
    load_line,
    machine,
    peak_rss_kib,
    rss_kib,
    sdk_trace_requests,
    table,
    unique_messages,
)

PARTITIONS = 4
WARMUP_TRACES = 400


def without_root(t: BuiltTrace) -> BuiltTrace:
    """The same trace minus its root span (the turn is still running)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest.FromString(t.request)
    n = 0
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            keep = [s for s in ss.spans if s.parent_span_id]
            del ss.spans[:]
            ss.spans.extend(keep)
            n += len(keep)
    return BuiltTrace(req.SerializeToString(), t.trace_id, n, t.answer_span_id, t.case_id)


# --------------------------------------------------------------------------------------------
# child: the evaluator process
# --------------------------------------------------------------------------------------------
async def child(a: argparse.Namespace) -> None:
    from nexagauge.online.service import OnlineService
    from nexagauge.settings import Settings

    s = Settings(
        kafka={
            "bootstrap_servers": a.bootstrap,
            "traces_topic": a.topic,
            "dlq_topic": f"{a.topic}-dlq",
            "group_id": f"mem-{uuid.uuid4().hex[:8]}",
            "topic_partitions": PARTITIONS,
        },
        online={
            "rekey": False,
            "consume_logs": False,
            "nodes": ["relevance", "grounding"],
            "trace_inactivity_s": 3600.0,
        },
        # every trace may be evaluated, so every one is buffered (at 1% with the decode-time
        # discard, 99% of traces would be dropped before the buffer and never use memory)
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
        emit={"span_exporter": "none", "metrics_port": 0, "dedupe_journal": False},
    )
    started = rss_kib()
    svc = OnlineService(s, serve_http=False)
    await svc.start()
    stage = svc.stage
    assert stage is not None

    def say(*parts: Any) -> None:
        print(*parts, flush=True)

    say("READY", started)
    line = await asyncio.to_thread(sys.stdin.readline)  # "WARM <n_traces>"
    warm = int(line.split()[1])
    t0 = time.monotonic()
    while stage.stats.traces_done < warm or len(stage.buffer) or stage.in_flight:
        if time.monotonic() - t0 > 120:
            raise SystemExit(f"warm-up stuck: {stage.stats} buffer={len(stage.buffer)}")
        await asyncio.sleep(0.05)
    gc.collect()
    await asyncio.sleep(0.5)
    baseline = rss_kib()
    spans_before = stage.stats.spans  # nothing else is produced before BASELINE is read
    say("BASELINE", baseline, peak_rss_kib())
    line = await asyncio.to_thread(sys.stdin.readline)  # "PENDING <n_traces> <n_spans>"
    n_spans = line.split()[2]
    target_spans = spans_before + int(n_spans)
    t0 = last = time.monotonic()
    while stage.stats.spans < target_spans and time.monotonic() - t0 < 600:
        await asyncio.sleep(0.05)
        if time.monotonic() - last > 5:
            last = time.monotonic()
            print(
                f"waiting: {stage.stats} buffer={len(stage.buffer)}/{stage.buffer.n_spans} "
                f"target spans {target_spans}",
                file=sys.stderr,
                flush=True,
            )
    await asyncio.sleep(0.5)
    gc.collect()
    say(
        "BUFFERED",
        rss_kib(),
        peak_rss_kib(),
        len(stage.buffer),
        stage.buffer.n_spans,
        sum(stage.buffer.evicted.values()),
    )
    await svc.stop()


# --------------------------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------------------------
async def amain(a: argparse.Namespace) -> dict[str, Any]:
    templates = sdk_trace_requests(52)
    pending = [without_root(t) for t in templates]
    warm_msgs, _, warm_traces = unique_messages(templates, WARMUP_TRACES // 2, 2, seed=1)
    msgs, n_spans, n_traces = unique_messages(pending, a.traces // 2, 2, seed=2)
    wire = sum(len(m) for m in msgs)
    out: dict[str, Any] = {
        "machine_before": machine(),
        "traces": n_traces,
        "spans": n_spans,
        "otlp_bytes_per_trace": wire / n_traces,
    }
    with Broker() as b:
        topic = f"mem-{uuid.uuid4().hex[:6]}"
        await b.create_topics({topic: PARTITIONS})
        p = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, pipes read in a thread
            [sys.executable, __file__, "--child", "--bootstrap", b.bootstrap, "--topic", topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert p.stdin is not None and p.stdout is not None

        def expect(word: str) -> list[int]:
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line.startswith(word):
                raise RuntimeError(f"evaluator child said {line!r}, expected {word}")
            return [int(x) for x in line.split()[1:]]

        try:
            out["rss_at_start_kib"] = (await asyncio.to_thread(expect, "READY"))[0]
            await b.produce(topic, warm_msgs, PARTITIONS)
            p.stdin.write(f"WARM {warm_traces}\n")
            p.stdin.flush()
            base, _peak0 = await asyncio.to_thread(expect, "BASELINE")
            await b.produce(topic, msgs, PARTITIONS)
            p.stdin.write(f"PENDING {n_traces} {n_spans}\n")
            p.stdin.flush()
            rss, peak, buffered, bspans, evicted = await asyncio.to_thread(expect, "BUFFERED")
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    out.update(
        baseline_kib=base,
        buffered_kib=rss,
        peak_kib=peak,
        buffered_traces=buffered,
        buffered_spans=bspans,
        evicted=evicted,
        per_trace_kib=(rss - base) / max(1, buffered),
        machine_after=machine(),
    )
    return out


def report(r: dict[str, Any]) -> str:
    mib = 1 / 1024
    rows = [
        ["process after imports, before the service starts", r["rss_at_start_kib"] * mib, ""],
        [
            f"baseline (after {WARMUP_TRACES:,} complete traces went through)",
            r["baseline_kib"] * mib,
            "",
        ],
        [
            f"buffered: {r['buffered_traces']:,} traces ({r['buffered_spans']:,} spans)",
            r["buffered_kib"] * mib,
            f"+{(r['buffered_kib'] - r['baseline_kib']) * mib:.1f}",
        ],
        ["peak (VmHWM)", r["peak_kib"] * mib, f"+{(r['peak_kib'] - r['baseline_kib']) * mib:.1f}"],
    ]
    per = r["per_trace_kib"]
    return "\n".join(
        [
            f"Memory (RSS of the evaluator process; traces of {r['spans'] // max(1, r['traces'])} "
            f"spans, root not ended, {r['otlp_bytes_per_trace'] / 1024:.1f} KiB of OTLP each)",
            table(["state", "RSS MiB", "vs baseline MiB"], rows),
            f"RESULT memory {r['buffered_traces']:,} buffered traces: peak RSS "
            f"{r['peak_kib'] * mib:.0f} MiB, {per:.1f} KiB per buffered trace "
            f"({per * 1024 / r['otlp_bytes_per_trace']:.1f}x its OTLP bytes), "
            f"{r['evicted']} evicted",
            load_line(r["machine_before"], r["machine_after"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 traces (smoke)")
    ap.add_argument("--traces", type=int, help="traces to buffer (default 10,000)")
    ap.add_argument("--json", help="write raw figures here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    exit_on_sigterm()
    if a.child:
        asyncio.run(child(a))
        return 0
    a.traces = a.traces or (1000 if a.quick else 10_000)
    r = asyncio.run(amain(a))
    print(report(r))
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
