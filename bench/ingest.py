"""Ingest throughput: the evaluator's pipeline against the raw ceiling of an aiokafka consumer.

One Tansu broker on loopback, one pre-produced topic (4 partitions) of realistic messages: traces
of a RAG chat bot written by the real ``@nexagauge.trace`` SDK (5 spans: turn, query embedding,
retrieval of 22 passages, re-ranking, the chat LLM call with 8 earlier turns), encoded as a
collector's Kafka exporter writes them (``otlp_proto``), 2 traces = 10 spans (~27 KB) per message,
every trace with its own random trace id. Every variant reads the *whole same topic* from the
beginning in its own consumer group, in the same process and run; rounds alternate the variants
(order rotated) and the median is reported.

Variants (all with the same consumer settings as ``nexagauge.online.delivery.consumer.ConsumerLoop``):

- ``fetch``: aiokafka ``getmany`` only (bytes are counted, nothing is decoded);
- ``decode``: + ``ExportTraceServiceRequest`` parse and each span's ids, name and times;
- ``decode+attrs`` (THE ceiling of issue 9): + every attribute of every span converted to Python;
- ``pipeline``: the real ``OnlineService`` with ``rekey = false`` (evaluator reads the topic
  directly, as behind a collector that keys by trace id): ``ConsumerLoop`` -> ``EvaluatorStage``
  (lazy decode, ``TraceBuffer`` assembly, offset tracking and commits, ``Sampler`` at
  ``default_rate = 0.01``, with the decode-time discard of traces that can never be sampled
  (``online.early_discard``, on by default) when the pipeline has it; the ~1% sampled traces are extracted, run through the node graph
  with ``judge.mode = none`` (relevance/grounding skip as "no judge": the judge is not what is
  measured) and emitted by the real ``Emitter`` (Prometheus metrics; evaluation-span exporter
  off)). Default grace and buffer settings (2 s, 10,000 traces).
- ``pipeline+rekey`` (``--rekey``, one round): the same with ``nexagauge serve``'s default
  ``rekey = true``: the re-key stage (split by trace id, produce to the by-trace topic) and the
  evaluator in one process.

Reported: spans/s of wall time from the first fetched batch to the last span handed to the
stage (assembly), spans per CPU-second of the process, and pipeline / ceiling ratios.
Target (issue 9): pipeline >= 70% of ``decode+attrs`` on one process.

    python bench/ingest.py [--quick] [--messages N] [--rounds R] [--rekey] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Broker,
    exit_on_sigterm,
    load_line,
    machine,
    sdk_trace_requests,
    table,
    unique_messages,
)

TRACES_PER_MESSAGE = 2
PARTITIONS = 4
SAMPLE_RATE = 0.01


def consumer_kwargs() -> dict[str, Any]:
    """The fetch settings ``ConsumerLoop`` uses with default ``KafkaSettings``."""
    from nexagauge.settings import KafkaSettings

    k = KafkaSettings()
    return {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": k.fetch_max_wait_ms,
        "max_partition_fetch_bytes": max(k.max_message_bytes, 1024 * 1024),
        "fetch_max_bytes": max(k.max_message_bytes * 2, 52428800),
    }


async def run_raw(bootstrap: str, topic: str, n_msgs: int, level: str) -> dict[str, float]:
    """A plain aiokafka consumer: ``fetch``, ``decode`` or ``decode+attrs``."""
    from aiokafka import AIOKafkaConsumer
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from nexagauge.online.ingest.decode import any_value

    parse = ExportTraceServiceRequest.FromString
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"raw-{uuid.uuid4().hex[:8]}",
        **consumer_kwargs(),
    )
    await c.start()
    msgs = spans = nbytes = attrs = 0
    t0 = cpu0 = 0.0
    sink: list[Any] = []
    try:
        while msgs < n_msgs:
            batches = await c.getmany(timeout_ms=100, max_records=500)
            if batches and not t0:
                t0, cpu0 = time.perf_counter(), time.process_time()
            for records in batches.values():
                for rec in records:
                    msgs += 1
                    v = rec.value
                    nbytes += len(v)
                    if level == "fetch":
                        continue
                    req = parse(v)
                    for rs in req.resource_spans:
                        for ss in rs.scope_spans:
                            for s in ss.spans:
                                spans += 1
                                row: tuple[Any, ...] = (
                                    s.trace_id,
                                    s.span_id,
                                    s.parent_span_id,
                                    s.name,
                                    s.start_time_unix_nano,
                                    s.end_time_unix_nano,
                                )
                                if level == "decode+attrs":
                                    a = {kv.key: any_value(kv.value) for kv in s.attributes}
                                    attrs += len(a)
                                    row = (row, a)
                                sink.append(row)
                    sink.clear()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        await c.stop()
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "messages": msgs,
        "spans": spans,
        "bytes": nbytes,
        "attrs": attrs,
    }


def pipeline_settings(bootstrap: str, topic: str, *, rekey: bool, tag: str) -> Any:
    from nexagauge.settings import Settings

    return Settings(
        kafka={
            "bootstrap_servers": bootstrap,
            "traces_topic": topic,
            "logs_topic": f"{topic}-logs",
            "rekeyed_topic": f"{topic}-bytrace-{tag}",
            "dlq_topic": f"{topic}-dlq",
            "group_id": f"pipeline-{tag}",
            "topic_partitions": PARTITIONS,
        },
        online={"rekey": rekey, "consume_logs": False, "nodes": ["relevance", "grounding"]},
        sampling={"default_rate": SAMPLE_RATE},
        judge={"mode": "none"},
        cache={"enabled": False},
        emit={"span_exporter": "none", "metrics_port": 0, "dedupe_journal": False},
    )


async def run_pipeline(
    bootstrap: str, topic: str, n_spans: int, n_traces: int, *, rekey: bool = False
) -> dict[str, Any]:
    """The real OnlineService; timed from the first batch the evaluator stage gets to the last span."""
    from nexagauge.online.service import OnlineService

    tag = uuid.uuid4().hex[:8]
    svc = OnlineService(pipeline_settings(bootstrap, topic, rekey=rekey, tag=tag), serve_http=False)
    await svc.start()
    stage = svc.stage
    assert stage is not None
    marks: dict[str, float] = {}
    done = asyncio.Event()
    inner = stage.handle

    async def timed(tp: Any, records: Any) -> None:
        if "t0" not in marks:
            marks["t0"], marks["cpu0"] = time.perf_counter(), time.process_time()
        await inner(tp, records)
        if stage.stats.spans >= n_spans and "t1" not in marks:
            marks["t1"], marks["cpu1"] = time.perf_counter(), time.process_time()
            done.set()

    stage.handle = timed  # type: ignore[method-assign]  # the bench times the stage's own handler
    if rekey and svc.rekey_stage is not None:
        r_inner = svc.rekey_stage.handle

        async def r_timed(tp: Any, records: Any) -> None:
            if "t0" not in marks:
                marks["t0"], marks["cpu0"] = time.perf_counter(), time.process_time()
            await r_inner(tp, records)

        svc.rekey_stage.handle = r_timed
    try:
        await asyncio.wait_for(done.wait(), timeout=600)
        # every trace through sampling (root end + 2 s grace), sampled ones evaluated
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = stage.stats
            gone = st.traces_done + getattr(st, "discarded_traces", 0)
            if gone >= n_traces and stage.in_flight == 0:
                break
            await asyncio.sleep(0.1)
        st = stage.stats
        buf = stage.buffer
        out = {
            "wall_s": marks["t1"] - marks["t0"],
            "cpu_s": marks["cpu1"] - marks["cpu0"],
            "messages": st.messages,
            "spans": st.spans,
            "traces_done": st.traces_done,
            "discarded": getattr(st, "discarded_traces", 0),
            "sampled": st.sampled,
            "evaluated": st.evaluated,
            "failed": st.failed,
            "not_sampled": st.not_sampled,
            "evicted": sum(buf.evicted.values()),
            "late": buf.late,
            "assembled": dict(buf.assembled),
        }
    finally:
        await svc.stop()
    return out


async def amain(a: argparse.Namespace) -> dict[str, Any]:
    templates = sdk_trace_requests(52)
    msgs, n_spans, n_traces = unique_messages(templates, a.messages, TRACES_PER_MESSAGE)
    avg = statistics.mean(len(m) for m in msgs)
    info: dict[str, Any] = {
        "messages": len(msgs),
        "spans": n_spans,
        "traces": n_traces,
        "avg_message_bytes": avg,
        "spans_per_message": n_spans / len(msgs),
        "machine_before": machine(),
    }
    with Broker() as b:
        topic = f"ingest-{uuid.uuid4().hex[:6]}"
        await b.create_topics({topic: PARTITIONS})
        info["produce_s"] = await b.produce(topic, msgs, PARTITIONS)
        del msgs
        variants = ["fetch", "decode", "decode+attrs", "pipeline"]
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for r in range(a.rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for v in order:
                bcpu = b.cpu_s()
                if v == "pipeline":
                    res = await run_pipeline(b.bootstrap, topic, n_spans, n_traces)
                else:
                    res = await run_raw(b.bootstrap, topic, info["messages"], v)
                res["broker_cpu_s"] = b.cpu_s() - bcpu
                runs[v].append(res)
                print(
                    f"  round {r + 1} {v:13} {res['messages'] * 10 / res['wall_s']:>9,.0f} spans/s"
                    f" (cpu {res['cpu_s']:.2f}s)",
                    file=sys.stderr,
                    flush=True,
                )
        if a.rekey:
            res = await run_pipeline(b.bootstrap, topic, n_spans, n_traces, rekey=True)
            runs["pipeline+rekey"] = [res]
    info["machine_after"] = machine()
    return {"info": info, "runs": runs}


def summarize(rep: dict[str, Any]) -> dict[str, dict[str, float]]:
    info = rep["info"]
    spm = info["spans_per_message"]
    out: dict[str, dict[str, float]] = {}
    for v, rs in rep["runs"].items():
        rate = [r["messages"] * spm / r["wall_s"] for r in rs]
        cpu = [r["messages"] * spm / r["cpu_s"] for r in rs if r["cpu_s"] > 0]
        mb = [r["messages"] * info["avg_message_bytes"] / r["wall_s"] / 1e6 for r in rs]
        out[v] = {
            "spans_s": statistics.median(rate),
            "spans_cpu_s": statistics.median(cpu) if cpu else float("nan"),
            "mb_s": statistics.median(mb),
            "min": min(rate),
            "max": max(rate),
        }
        last = rs[-1]
        for k in ("sampled", "evaluated", "failed", "evicted", "late", "traces_done", "discarded"):
            if k in last:
                out[v][k] = last[k]
    return out


def report(rep: dict[str, Any]) -> str:
    s = summarize(rep)
    info = rep["info"]
    ceil = s["decode+attrs"]["spans_s"]
    ceil_cpu = s["decode+attrs"]["spans_cpu_s"]
    rows = []
    for v, r in s.items():
        rows.append(
            [
                v,
                r["spans_s"],
                f"{r['min']:,.0f}-{r['max']:,.0f}",
                r["mb_s"],
                r["spans_cpu_s"],
                f"{r['spans_s'] / ceil:.0%}",
                f"{r['spans_cpu_s'] / ceil_cpu:.0%}",
            ]
        )
    lines = [
        f"Ingest ({info['messages']:,} messages x {info['spans_per_message']:.0f} spans, "
        f"{info['avg_message_bytes'] / 1000:.1f} KB each, {info['traces']:,} traces, "
        f"{PARTITIONS} partitions, Tansu on loopback, sample rate {SAMPLE_RATE:.0%}; "
        f"median of {len(rep['runs']['fetch'])} rounds)",
        table(
            ["variant", "spans/s", "range", "MB/s", "spans/CPU-s", "vs ceiling", "CPU vs ceiling"],
            rows,
        ),
    ]
    p = s["pipeline"]
    lines.append(
        f"pipeline: {p.get('discarded', 0):,.0f} traces dropped at decode time (cannot be sampled), "
        f"{p.get('traces_done', 0):,.0f} assembled, {p.get('sampled', 0):,.0f} sampled "
        f"and evaluated ({p.get('evaluated', 0):,.0f} ok, {p.get('failed', 0):,.0f} failed), "
        f"{p.get('evicted', 0):,.0f} evicted early, {p.get('late', 0):,.0f} late spans"
    )
    ratio = p["spans_s"] / ceil
    lines.append(
        f"RESULT ingest pipeline {p['spans_s']:,.0f} spans/s = {ratio:.0%} of the decode+attrs "
        f"ceiling {ceil:,.0f} spans/s (target >= 70%: {'met' if ratio >= 0.7 else 'NOT met'})"
    )
    mb, ma = info["machine_before"], info["machine_after"]
    lines.append(load_line(mb, ma))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small topic, one round (smoke)")
    ap.add_argument("--messages", type=int, help="messages in the topic (default 10,000)")
    ap.add_argument("--rounds", type=int, help="rounds per variant (default 3)")
    ap.add_argument("--rekey", action="store_true", help="also one round with rekey = true")
    ap.add_argument("--json", help="write raw figures here")
    a = ap.parse_args(argv)
    exit_on_sigterm()
    a.messages = a.messages or (300 if a.quick else 10_000)
    a.rounds = a.rounds or (1 if a.quick else 3)
    rep = asyncio.run(amain(a))
    rep["summary"] = summarize(rep)
    print(report(rep))
    if a.json:
        Path(a.json).write_text(json.dumps(rep, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
