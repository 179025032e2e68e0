"""Scale-out of ``nexagauge serve``: two members of one consumer group against one, same backlog.

Everything real, on loopback, as in ``bench/online_latency.py`` (Tansu broker, the RAG app's
5-span traces produced without a key to a rotating partition of a 4-partition topic, the
``bench/llm_server.py`` judge answering after 300 ms, relevance + grounding on every trace).
Each run gets its own topics and consumer group; the backlog (``--traces`` traces, built before
anything is timed) is produced at once after every member is ready and the group has settled,
so both runs see the same work.

Measured per run over a fixed window (``--window`` s, starting ``--warm`` s after the first
evaluation): the evaluations whose evaluation span ended inside it, counted exactly by
(trace id, evaluated span id) from the OTLP sink; duplicates (an evaluation emitted twice) are
counted too and must be 0. After the window the members are stopped (SIGTERM, graceful drain)
and each member's ``nexagauge_evaluations_total`` from ``/metrics`` is read just before: their sum
must equal the distinct evaluations the sink received by then.

Members are sized so that each is bound by its evaluation slots, not by this machine's CPU
(``--max-in-flight``, fixed: ``online.adaptive_concurrency = false``): the benchmark measures how
the work spreads over the group's partitions, which is what separate machines scale; on one shared
2-core machine two CPU-bound members would only measure the machine.

    python bench/online_scaleout.py [--quick] [--traces 1500] [--window 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Broker,
    LlmServer,
    OtlpHttpSink,
    RagApp,
    exit_on_sigterm,
    load_line,
    machine,
    table,
)
from online_latency import PARTITIONS, Serve, prom_value, toml

from nexagauge.sdk import conventions as C


def member_config(
    tmp: Path, b: Broker, tag: str, judge: LlmServer, sink: OtlpHttpSink, port: int, a: Any
) -> Path:
    """One member's configuration: the run's topics and group, its own metrics port."""
    cfg = tmp / f"member-{port}.toml"
    cfg.write_text(
        toml(
            {
                "kafka": {
                    "bootstrap_servers": b.bootstrap,
                    "traces_topic": f"spans-{tag}",
                    "logs_topic": f"logs-{tag}",
                    "rekeyed_topic": f"bytrace-{tag}",
                    "dlq_topic": f"dlq-{tag}",
                    "group_id": f"evaluator-{tag}",
                    "topic_partitions": PARTITIONS,
                },
                "online": {
                    "nodes": ["relevance", "grounding"],
                    "max_in_flight": a.max_in_flight,
                    "adaptive_concurrency": False,
                },
                "sampling": {"default_rate": 1.0},
                "judge": {
                    "base_url": judge.url + "/v1",
                    "api_key": "sk-bench-not-a-real-key",
                    "mode": "llm",
                },
                "cache": {"dir": str(tmp / f"cache-{port}")},
                "emit": {
                    "otlp_endpoint": sink.endpoint,
                    "otlp_protocol": "http/protobuf",
                    "metrics_port": port,
                },
            }
        )
        + "\n"
    )
    return cfg


def evaluations(sink: OtlpHttpSink, tid_set: set[bytes]) -> tuple[list[int], int]:
    """(end ns of each distinct evaluation of this run's traces, duplicates)."""
    seen: dict[tuple[bytes, bytes], int] = {}
    dup = 0
    for s in sink.snapshot():
        if s.name == C.NG_EVALUATION_SPAN_NAME and s.trace_id in tid_set:
            k = (s.trace_id, s.parent_span_id)
            if k in seen:
                dup += 1
            else:
                seen[k] = s.end_ns
    return sorted(seen.values()), dup


async def one_run(
    b: Broker, judge: LlmServer, sink: OtlpHttpSink, members: int, a: Any, tmp: Path
) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    from nexagauge.demo.stack import free_port

    tag = uuid.uuid4().hex[:6]
    await b.create_topics({f"spans-{tag}": PARTITIONS})
    app = RagApp()
    built = [app.trace(i, unique=f"{tag}-{i}") for i in range(a.traces)]  # not timed
    tids = {t.trace_id for t in built}
    serves = []
    for _ in range(members):
        port = free_port()
        serves.append(
            Serve(member_config(tmp, b, tag, judge, sink, port, a), tmp / f"{port}.log", port)
        )
    out: dict[str, Any] = {"members": members}
    try:
        for s in serves:
            await asyncio.to_thread(s.wait_ready)
        await asyncio.sleep(a.settle)  # the group's rebalance after the last member joined
        producer = AIOKafkaProducer(
            bootstrap_servers=b.bootstrap, max_request_size=8 << 20, linger_ms=5, acks=1
        )
        await producer.start()
        try:
            for i, t in enumerate(built):
                await producer.send(f"spans-{tag}", t.request, partition=i % PARTITIONS)
            await producer.flush()
        finally:
            await producer.stop()
        produced_at = time.time_ns()
        deadline = time.monotonic() + 120
        first: int | None = None
        while time.monotonic() < deadline:
            ends, _ = evaluations(sink, tids)
            if ends:
                first = ends[0]
                break
            await asyncio.sleep(0.1)
        if first is None:
            raise RuntimeError("no evaluation within 120 s: " + serves[0].tail())
        lo = first + int(a.warm * 1e9)
        hi = lo + int(a.window * 1e9)
        # the window's end + 2 s (the export linger, the sink's clock)
        await asyncio.sleep(max(0.0, (hi + 2e9 - time.time_ns()) / 1e9))
        ends, dup = evaluations(sink, tids)
        in_window = sum(1 for e in ends if lo <= e < hi)
        per_member = [prom_value(s.metrics(), "nexagauge_evaluations_total") for s in serves]
        ends_at_read, dup = evaluations(sink, tids)
        out.update(
            {
                "traces": a.traces,
                "in_window": in_window,
                "per_s": in_window / a.window,
                "first_eval_after_s": (first - produced_at) / 1e9,
                "evaluated_so_far": len(ends_at_read),
                "duplicates": dup,
                "members_evaluations_total": per_member,
                "backlog_left_at_window_end": a.traces - sum(1 for e in ends if e < hi),
            }
        )
    finally:
        out["exit"] = [s.stop() for s in serves]
    return out


async def amain(a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"machine_before": machine(), "args": vars(a)}
    tmp = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    judge = LlmServer(a.judge_ms)
    sink = OtlpHttpSink()
    try:
        with Broker() as b:
            out["one"] = await one_run(b, judge, sink, 1, a, tmp)
            out["two"] = await one_run(b, judge, sink, 2, a, tmp)
    finally:
        sink.close()
        judge.close()
    shutil.rmtree(tmp, ignore_errors=True)  # kept when the run failed: the members' logs are in it
    for k in ("one", "two"):
        r = out[k]
        # /metrics was read before the sink snapshot: every counted evaluation is in the sink;
        # evaluations emitted between the two reads make the sink's count larger, never smaller
        r["per_member_reconciles"] = sum(r["members_evaluations_total"]) <= r["evaluated_so_far"]
    out["ratio"] = out["two"]["in_window"] / max(1, out["one"]["in_window"])
    out["machine_after"] = machine()
    return out


def report(r: dict[str, Any]) -> str:
    rows = []
    for k in ("one", "two"):
        x = r[k]
        rows.append(
            [
                x["members"],
                x["traces"],
                x["in_window"],
                x["per_s"],
                x["duplicates"],
                " + ".join(f"{v:.0f}" for v in x["members_evaluations_total"]),
                x["backlog_left_at_window_end"],
            ]
        )
    a = r["args"]
    return "\n".join(
        [
            f"Scale-out (nexagauge serve members of one consumer group, {PARTITIONS} partitions, "
            f"relevance + grounding, judge {a['judge_ms']:.0f} ms/call, max_in_flight "
            f"{a['max_in_flight']} per member, window {a['window']:g} s after {a['warm']:g} s)",
            table(
                [
                    "members",
                    "backlog",
                    "evaluated in window",
                    "evals/s",
                    "duplicates",
                    "/metrics per member",
                    "backlog left",
                ],
                rows,
            ),
            f"RESULT scale-out {r['ratio']:.2f}x with 2 members vs 1 (evaluations in the same "
            f"window, exact counts; duplicates {r['one']['duplicates']}+{r['two']['duplicates']}; "
            f"per-member /metrics reconcile: "
            f"{r['one']['per_member_reconciles'] and r['two']['per_member_reconciles']})",
            load_line(r["machine_before"], r["machine_after"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small backlog, short window (smoke)")
    ap.add_argument("--traces", type=int, help="backlog size (default 1500)")
    ap.add_argument("--window", type=float, help="counting window, s (default 15)")
    ap.add_argument("--warm", type=float, default=3.0, help="s after the first evaluation")
    ap.add_argument("--settle", type=float, default=3.0, help="s for the group to settle")
    ap.add_argument("--max-in-flight", type=int, default=16, help="per member (fixed)")
    ap.add_argument("--judge-ms", type=float, default=300.0)
    ap.add_argument("--json", help="write raw figures here")
    a = ap.parse_args(argv)
    exit_on_sigterm()
    a.traces = a.traces or (120 if a.quick else 1500)
    a.window = a.window or (3.0 if a.quick else 15.0)
    r = asyncio.run(amain(a))
    print(report(r))
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
