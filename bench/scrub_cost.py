"""What scrubbing a case costs against what serving that case costs (issue 31), in the same run.

``nexagauge serve`` scrubs every case it extracts (``online.scrub``, ``online.scrub_pii``;
``nexagauge/schema/scrub.py``). The target: scrubbing a case costs at most 10 % of that case's
serve CPU. Both are measured here, in one process, on the same cases:

- **serve CPU per case**: the real ``EvaluatorStage`` (decode, assembly, sampling at 100 %,
  extraction + scrubbing with PII on, the relevance + grounding graph with the real ``openai``
  client against ``bench/llm_server.py`` at 0 ms latency in a child process; evaluation spans
  dropped, so the serve figure is a floor and the ratio an upper bound) -> process CPU time of
  the whole run / cases;
- **worst-case texts**: one text of each shape that makes the patterns work hardest, at two
  sizes ten times apart: the cost of a value is linear in its length (ratio ~10);
- **scrub CPU per case**: the same extracted cases scrubbed again by a fresh
  :class:`~nexagauge.schema.scrub.CaseScrubber` per round (no memo of passages seen before),
  median of rounds; split into the cases carrying secrets or personal data (scrubbed) and the
  clean ones (the gate only).

Cases: the 52 RAG cases of ``bench/data/rag_cases.jsonl`` as OpenInference traces (a CHAIN root
with the question and answer, a RETRIEVER span with the passages), every run unique; one in three
gets an OpenAI key in the question, an email and an IBAN in a passage and the key and email
repeated in the answer.

    python bench/scrub_cost.py [--quick] [--json FILE]
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import LlmServer, load_cases, machine, machine_line, table
from aiokafka.structs import ConsumerRecord, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from nexagauge.graph.runtime import Runtime
from nexagauge.online.ingest.extract import extract_cases_with_errors
from nexagauge.online.stage import EvaluatorStage
from nexagauge.schema.scrub import CaseScrubber
from nexagauge.sdk import conventions as C
from nexagauge.settings import Settings

TP = TopicPartition("spans", 0)
TARGET = 0.10
KEY = "sk-proj-Q8vX2mN4pL7rT1wZ9yK3bH6dF0sA5eJc"
EMAIL = "maria.garcia@example.com"
IBAN = "DE89 3704 0044 0532 0130 00"


def _kv(k: str, v: str) -> KeyValue:
    return KeyValue(key=k, value=AnyValue(string_value=v))


def traces(n: int, run: str) -> tuple[bytes, int]:
    """One OTLP request of ``n`` OpenInference RAG traces (see module docstring)."""
    cases = load_cases()
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(_kv("service.name", "support-bench"))
    spans = rs.scope_spans.add().spans
    sensitive = 0
    for i in range(n):
        c = cases[i % len(cases)]
        q, docs, a = f"{c['input']} (ref {run}-{i})", list(c["context"]), c["output"]
        if i % 3 == 0:
            sensitive += 1
            q = f"My key {KEY} and email {EMAIL}: {q}"
            docs[0] = f"Account {EMAIL}, refunds to IBAN {IBAN}. {docs[0]}"
            a = f"{a} (account {EMAIL}; rotate {KEY})"
        tid = (i + 1).to_bytes(16, "big")
        for sid, parent, name, end, attrs in (
            (1, 0, "support", 100, {C.OI_SPAN_KIND: "CHAIN", C.OI_INPUT_VALUE: q,
                                    C.OI_OUTPUT_VALUE: a}),
            (2, 1, "retrieve", 50, {C.OI_SPAN_KIND: "RETRIEVER", **{
                f"{C.OI_RETRIEVAL_DOCUMENTS_PREFIX}{k}.document.content": d
                for k, d in enumerate(docs)}}),
        ):  # fmt: skip
            s = spans.add()
            s.trace_id, s.span_id = tid, sid.to_bytes(8, "big")
            if parent:
                s.parent_span_id = parent.to_bytes(8, "big")
            s.name, s.start_time_unix_nano, s.end_time_unix_nano = name, 1, end
            s.attributes.extend(_kv(k, v) for k, v in attrs.items())
    return req.SerializeToString(), sensitive


class _Drop:
    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        return None


async def serve_cpu(settings: Settings, message: bytes, n: int) -> tuple[float, EvaluatorStage]:
    """Process CPU seconds of the evaluator stage serving ``n`` cases from ``message``."""
    now = [1000.0]
    stage = EvaluatorStage(
        settings, Runtime.create(settings, use_cache=False), _Drop(), clock=lambda: now[0]
    )
    rec = ConsumerRecord(TP.topic, 0, 0, 0, 0, None, message, None, 0, len(message), [])
    c0 = time.process_time()
    await stage.handle(TP, [rec])
    now[0] += 10.0
    await stage.tick()
    while stage.stats.evaluated + stage.stats.failed < n:  # noqa: ASYNC110 (no event to wait on)
        await asyncio.sleep(0.005)
    cpu = time.process_time() - c0
    await stage.runtime.aclose()
    return cpu, stage


def scrub_cpu(cases: list[Any], rounds: int) -> tuple[float, float]:
    """Median CPU seconds per round of scrubbing the sensitive and the clean cases."""
    dirty = [c for c in cases if KEY in (c.input or "")]
    clean = [c for c in cases if KEY not in (c.input or "")]
    out = []
    for group in (dirty, clean):
        times = []
        for _ in range(rounds):
            scrubber = CaseScrubber(secrets=True, pii=True)  # fresh: no passage memo
            c0 = time.process_time()
            for case in group:
                scrubber.scrub(case)
            times.append(time.process_time() - c0)
        out.append(statistics.median(times))
    return out[0], out[1]


#: texts built to make patterns work hardest (runs of what each rule starts or continues on)
HOSTILE = {
    "grouped digits": "0123 4567 ",
    "dots and digits": "1.2.3.4.",
    "colons and hex": "fe80::",
    "key=value": "password=x ",
    "local parts and @": "a.b.c.d@",
    "prose with a phone": "The shop opens at 9 am; call 020 7946 0958. ",
}


def hostile_rows(sizes: tuple[int, int]) -> list[list[str]]:
    """CPU of scrubbing one text of each hostile kind at two sizes: linear means the larger costs
    ``sizes[1] / sizes[0]`` times the smaller (each value's cost is bounded by its length)."""
    scrubber = CaseScrubber(secrets=True, pii=True)
    rows = []
    for name, unit in HOSTILE.items():
        cpu = []
        for n in sizes:
            text = (unit * (n // len(unit) + 1))[:n]
            c0 = time.process_time()
            scrubber.scrub_text(text)
            cpu.append(time.process_time() - c0)
        rows.append([name, f"{cpu[0] * 1e3:.1f} ms", f"{cpu[1] * 1e3:.1f} ms",
                     f"{cpu[1] / max(cpu[0], 1e-9):.1f}"])  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny inputs (a smoke run)")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    n, rounds = (12, 3) if args.quick else (156, 21)
    judge = LlmServer(latency_ms=0)
    try:
        settings = Settings(
            judge={"base_url": judge.url + "/v1", "api_key": "bench", "mode": "llm"},
            online={"nodes": ["relevance", "grounding"], "scrub": True, "scrub_pii": True,
                    "max_in_flight": 16, "trace_grace_s": 0.0},
            sampling={"default_rate": 1.0},
            cache={"enabled": False},
        )  # fmt: skip
        # a warm-up run (imports, connection pool), then the measured one
        warm, _ = traces(4, uuid.uuid4().hex[:8])
        asyncio.run(serve_cpu(settings, warm, 4))
        message, sensitive = traces(n, uuid.uuid4().hex[:8])
        cpu, stage = asyncio.run(serve_cpu(settings, message, n))
        # (two bench cases quote a support phone number: scrubbed too)
        assert stage.scrubber.scrubbed >= sensitive, (stage.scrubber.scrubbed, sensitive)
    finally:
        judge.close()
    # the same cases, extracted unscrubbed, scrubbed again
    from nexagauge.online.ingest.assembly import TraceBuffer
    from nexagauge.online.ingest.decode import decode_traces

    buf = TraceBuffer(grace_s=0, inactivity_s=1, max_traces=n + 1, max_spans=10 * n)
    for sp in decode_traces(message, "otlp_proto").spans:
        buf.add_span(sp, ("t", 0, 0), 0.0, 0.0)
    cases = [ec.case for t, _ in buf.poll(100.0, 100.0) for ec in extract_cases_with_errors(t)[0]]
    assert len(cases) == n
    dirty_s, clean_s = scrub_cpu(cases, rounds)
    per_case = cpu / n
    dirty, clean = dirty_s / sensitive, clean_s / (n - sensitive)
    rows = [
        ["serve CPU per case (PII on)", f"{per_case * 1e3:.2f} ms", "1.00"],
        ["scrub a case with values", f"{dirty * 1e6:.0f} us", f"{dirty / per_case:.3f}"],
        ["scrub a clean case (gate)", f"{clean * 1e6:.0f} us", f"{clean / per_case:.3f}"],
    ]
    worst = dirty / per_case
    print(machine_line())
    print(f"{n} cases ({sensitive} with a key, an email and an IBAN), scrub rounds: {rounds}")
    print(table(["", "CPU", "of serve CPU"], rows))
    sizes = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    print(f"worst-case texts (one text, {sizes[0]:,} and {sizes[1]:,} characters):")
    heads = ["text", f"{sizes[0]:,} chars", f"{sizes[1]:,} chars", "ratio"]
    print(table(heads, hostile_rows(sizes)))
    verdict = "meets" if worst <= TARGET else "MISSES"
    print(f"scrubbing a case costs {worst:.1%} of its serve CPU: {verdict} the {TARGET:.0%} target")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": machine(),
                    "cases": n,
                    "sensitive": sensitive,
                    "serve_cpu_per_case_s": per_case,
                    "scrub_cpu_per_sensitive_case_s": dirty,
                    "scrub_cpu_per_clean_case_s": clean,
                    "ratio": worst,
                    "target": TARGET,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
