"""Worst-case event-loop hold per message of the evaluator stage (issue 15 item 4).

A message can cost the consumer its group membership if handling it keeps the event loop busy
longer than the session timeout (heartbeats, fetches and commits all run on that loop). This
benchmark feeds one hostile-but-valid message at a time to the real ``EvaluatorStage`` (decode,
assembly, sampling at 100%, extraction; evaluation replaced by a no-op so only the per-message
work is measured) and records, with a 1 ms ticker task, the **longest gap** the loop could not
run anything (the hold: in CPU time of the loop thread, and in wall time, which on a shared
machine also counts the time other processes had the core), plus the CPU time of the whole message and a baseline measured in the
same run: parsing the same bytes with protobuf and walking every attribute into Python (the
least any consumer of this message must do).

Messages:

- ``chain-3000``: one trace of 3,000 GenAI chat spans in a single parent chain (each an answer),
  ~0.9 MB: quadratic extraction took 16.6 s on it before;
- ``wide-8MB``: ~8 MB of 4-span RAG traces (LLM, retriever, tool, workflow root), the realistic
  large batch of a collector;
- ``one-trace-8MB``: one trace of ~8 MB (thousands of answers and retrievals under one root);
- ``one-span-8MB``: one chat span whose input history is ~8 MB of messages;
- ``salvage-8MB``: ``wide-8MB`` plus one span with invalid UTF-8, so the request is refused whole
  and re-read span by span (``online/ingest/salvage.py``).

Each is run with large traces extracted in a worker thread (the service's behaviour) and, for
comparison in the same run, inline on the loop.

    python bench/hostile.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine, machine_line, table
from aiokafka.structs import ConsumerRecord, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from nexagauge.graph.runtime import Runtime
from nexagauge.online import stage as service_mod
from nexagauge.online.ingest.decode import attributes
from nexagauge.online.stage import EvaluatorStage
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

TP = TopicPartition("spans", 0)
LIMIT = 8 * 1024 * 1024 - 64 * 1024
TEXT = "The shop opens at 9 am on weekdays and at 10 am on Saturdays; closed on Sundays. " * 6


def _kv(k: str, v: str) -> KeyValue:
    return KeyValue(key=k, value=AnyValue(string_value=v))


def _msgs(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in pairs])


class Builder:
    """One ``ExportTraceServiceRequest`` built span by span."""

    def __init__(self) -> None:
        self.req = ExportTraceServiceRequest()
        rs = self.req.resource_spans.add()
        rs.resource.attributes.append(_kv("service.name", "hostile-bench"))
        self.spans = rs.scope_spans.add().spans
        self.n = 0

    def span(self, trace: int, parent: int, name: str, attrs: dict[str, str], end: int) -> int:
        self.n += 1
        s = self.spans.add()
        s.trace_id, s.span_id = trace.to_bytes(16, "big"), self.n.to_bytes(8, "big")
        if parent:
            s.parent_span_id = parent.to_bytes(8, "big")
        s.name, s.start_time_unix_nano, s.end_time_unix_nano = name, 1, end
        s.attributes.extend(_kv(k, v) for k, v in attrs.items())
        return self.n

    def chat(self, trace: int, parent: int, i: int, end: int) -> int:
        return self.span(
            trace,
            parent,
            "chat",
            {
                C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
                C.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
                C.GEN_AI_INPUT_MESSAGES: _msgs(("system", TEXT), ("user", f"Question {i}?")),
                C.GEN_AI_OUTPUT_MESSAGES: _msgs(("assistant", f"Answer {i}: {TEXT[:200]}")),
            },
            end,
        )

    def retrieval(self, trace: int, parent: int, i: int, end: int) -> int:
        docs = [{"id": f"d{i}-{k}", "content": f"{k} {TEXT}"} for k in range(3)]
        return self.span(
            trace,
            parent,
            "search",
            {C.OI_SPAN_KIND: "RETRIEVER", C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(docs)},
            end,
        )

    def rag_trace(self, trace: int, i: int) -> None:
        root = self.span(trace, 0, "workflow", {C.TRACELOOP_SPAN_KIND: "workflow"}, 100)
        self.retrieval(trace, root, i, 10)
        self.span(trace, root, "tool", {C.OI_SPAN_KIND: "TOOL", C.OI_INPUT_VALUE: TEXT}, 20)
        self.chat(trace, root, i, 90)

    def size(self) -> int:
        return self.req.ByteSize()

    def bytes(self) -> bytes:
        return self.req.SerializeToString()


def chain(n: int) -> bytes:
    b = Builder()
    parent = 0
    for i in range(n):
        parent = b.chat(1, parent, i, 10_000_000 - i)
    return b.bytes()


def wide(limit: int) -> bytes:
    b, i = Builder(), 0
    while b.size() < limit:
        i += 1
        b.rag_trace(1000 + i, i)
    return b.bytes()


def one_trace(limit: int) -> bytes:
    b, i = Builder(), 0
    root = b.span(7, 0, "workflow", {C.TRACELOOP_SPAN_KIND: "workflow"}, 10_000_000)
    while b.size() < limit:
        i += 1
        b.retrieval(7, root, i, 2 * i)
        b.chat(7, root, i, 2 * i + 1)
    return b.bytes()


def one_span(limit: int) -> bytes:
    """One chat span whose input history holds ~``limit`` bytes of messages."""
    per = len(_msgs(("user", "turn 00000 " + TEXT[:150])))
    n = max(2, int(limit * 0.95) // per)  # below the message limit with the span around it
    history = [("user" if i % 2 == 0 else "assistant", f"turn {i} " + TEXT[:150]) for i in range(n)]
    b = Builder()
    b.span(
        3,
        0,
        "chat",
        {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
            C.GEN_AI_INPUT_MESSAGES: _msgs(*history),
            C.GEN_AI_OUTPUT_MESSAGES: _msgs(("assistant", "ok")),
        },
        10,
    )
    return b.bytes()


def with_bad_span(limit: int) -> bytes:
    b, i = Builder(), 0
    while b.size() < limit:
        i += 1
        b.rag_trace(5000 + i, i)
    b.span(9, 0, "BADNAME", {}, 5)
    return b.bytes().replace(b"BADNAME", b"bad\xff\xfeXY")


class Stage(EvaluatorStage):
    """The real stage with evaluation replaced by a count (only per-message work is measured)."""

    cases = 0

    async def _evaluate(self, active: Any, ec: Any, d: Any) -> None:
        self.cases += 1
        self._in_flight -= 1
        self._done_case(active)
        self._pump()  # a slot is free: start the next queued case, as the real stage does


def make_stage() -> Stage:
    s = Settings(
        kafka={"traces_topic": "spans", "max_message_bytes": 8 * 1024 * 1024},
        # a fixed limit (no slow start): every case starts at once, only per-message work counts
        online={
            "trace_grace_s": 0.0,
            "max_in_flight": 100_000,
            "adaptive_concurrency": False,
            "early_discard": False,
        },
        sampling={"default_rate": 1.0},
        judge={"mode": "none"},
        cache={"enabled": False},
    )
    return Stage(s, Runtime.create(s, use_cache=False), _NoEmit(), clock=lambda: 1e9)


class _NoEmit:
    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        return None


async def run_message(value: bytes) -> dict[str, float]:
    stage = make_stage()
    rec = ConsumerRecord("spans", 0, 0, 0, 0, None, value, None, 0, len(value), [])
    worst = worst_cpu = 0.0
    running = True

    async def ticker() -> None:
        # wall: the longest the loop could not run this task; CPU: what the loop thread itself
        # spent in that time (the same hold without the time the OS gave other processes)
        nonlocal worst, worst_cpu
        while running:
            t, c = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - t - 0.001)
            worst_cpu = max(worst_cpu, time.thread_time() - c)

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.01)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await stage.handle(TP, [rec])
    await stage.tick()
    while len(stage.buffer) or stage._side or stage._active:
        await asyncio.sleep(0.005)
        await stage.tick()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    running = False
    await tick
    return {
        "hold_ms": worst * 1000,
        "hold_cpu_ms": worst_cpu * 1000,
        "cpu_ms": cpu * 1000,
        "wall_ms": wall * 1000,
        "cases": stage.cases,
        "spans": stage.stats.spans,
    }


def baseline_ms(value: bytes) -> float:
    """Parse the request and walk every attribute of every span into Python (the floor)."""
    t = time.process_time()
    req = ExportTraceServiceRequest.FromString(value)
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                attributes(s.attributes)
    return (time.process_time() - t) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small messages (a smoke run)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    logging.getLogger("nexagauge").setLevel(logging.ERROR)  # the salvage case logs its bad span
    big = 256 * 1024 if a.quick else LIMIT
    cases = {
        "chain-3000": chain(300 if a.quick else 3000),
        "wide-8MB": wide(big),
        "one-trace-8MB": one_trace(big),
        "one-span-8MB": one_span(big),
        "salvage-8MB": with_bad_span(big),
    }
    rows, out = [], {}
    for name, value in cases.items():
        # the refused request cannot be parsed whole: its baseline is the same batch without it
        base = baseline_ms(cases["wide-8MB"] if name.startswith("salvage") else value)
        res = {}
        limits = (service_mod.INLINE_EXTRACT_MAX, service_mod.INLINE_EXTRACT_MAX_BYTES)
        for mode, inline in (("thread", limits), ("inline", (10**9, 10**12))):
            service_mod.INLINE_EXTRACT_MAX, service_mod.INLINE_EXTRACT_MAX_BYTES = inline
            res[mode] = asyncio.run(run_message(value))
        service_mod.INLINE_EXTRACT_MAX, service_mod.INLINE_EXTRACT_MAX_BYTES = limits
        t, i = res["thread"], res["inline"]
        out[name] = {
            "bytes": len(value),
            "baseline_cpu_ms": base,
            **{f"{m}_{k}": v for m, r in res.items() for k, v in r.items()},
        }
        rows.append(
            [
                name,
                f"{len(value) / 1e6:.2f}",
                t["spans"],
                t["cases"],
                round(t["hold_cpu_ms"]),
                round(t["hold_ms"]),
                round(i["hold_cpu_ms"]),
                round(t["cpu_ms"]),
                round(base),
                f"{t['cpu_ms'] / max(base, 1e-9):.1f}x",
            ]
        )
    print(f"Event-loop hold per message ({machine_line()})\n")
    print(
        table(
            [
                "message",
                "MB",
                "spans",
                "cases",
                "hold CPU ms",
                "hold wall ms",
                "hold CPU ms (inline)",
                "CPU ms",
                "baseline CPU ms",
                "CPU / baseline",
            ],
            rows,
        )
    )
    if a.json:
        a.json.write_text(json.dumps({"machine": machine(), "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
