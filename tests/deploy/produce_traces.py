"""Real traces of the demo RAG app, produced to Kafka the way the collector's exporter writes them.

The demo app (``examples/demo_app``) runs with the real nexa-gauge SDK and OpenTelemetry SDK; its
finished spans are encoded as OTLP ``ExportTraceServiceRequest`` protobuf messages, one per trace,
keyed by trace id (what ``encoding: otlp_proto`` + ``partition_traces_by_id: true`` produce), and
sent to ``--topic`` with aiokafka. ``--garbage N`` adds N undecodable messages (dead-letter path);
``--agents N`` adds N runs of the demo's support agent (``@nexagauge.tool`` tools, failures, loops
and undeclared tools now and then; :mod:`nexagauge.demo.agent`).

Run as a separate process (the SDK's tracer provider is process-global)::

    python tests/deploy/produce_traces.py --bootstrap 127.0.0.1:9092 --topic otlp_spans --n 80
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

import nexagauge
from examples.demo_app.app import DemoApp
from nexagauge.demo.agent import DemoAgent


async def produce(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 * 1024 * 1024)
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="otlp_spans")
    ap.add_argument("--n", type=int, default=60, help="questions to ask")
    ap.add_argument("--drift-share", type=float, default=0.5)
    ap.add_argument("--garbage", type=int, default=1)
    ap.add_argument("--plain", type=int, default=0, help="non-LLM traces (HTTP handler spans)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--agents", type=int, default=0, help="runs of the demo's support agent")
    args = ap.parse_args(argv)

    exporter = InMemorySpanExporter()
    provider = nexagauge.configure(service_name="demo-rag", exporter=exporter, batch=False)
    app = DemoApp(drift_after_s=0.0, drift_share=args.drift_share, seed=args.seed)
    while sum(app.counts.values()) < args.n:
        app.conversation(1)
    agent = DemoAgent(random.Random(args.seed), provider=provider)
    for i in range(args.agents):  # every fault at least once, then the demo's mix
        agent.ask(fault=("tool_failure", "loop", "undeclared")[i] if i < 3 else agent.fault())
    tracer = trace.get_tracer("demo-http")
    for i in range(args.plain):  # traffic that is not an LLM call: nothing to evaluate
        with tracer.start_as_current_span("GET /healthz") as span:
            span.set_attribute("http.request.method", "GET")
            span.set_attribute("http.response.status_code", 200 + i % 2)
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for finished in exporter.get_finished_spans():
        assert finished.context is not None
        by_trace[finished.context.trace_id].append(finished)
    messages = [
        (f"{tid:032x}".encode(), encode_spans(spans).SerializeToString())
        for tid, spans in by_trace.items()
    ]
    messages += [(b"garbage-%d" % i, b"\x00\xffnot an OTLP request") for i in range(args.garbage)]
    asyncio.run(produce(args.bootstrap, args.topic, messages))
    print(
        json.dumps(
            {
                "traces": len(by_trace),
                "counts": app.counts,
                "agents": args.agents,
                "messages": len(messages),
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
