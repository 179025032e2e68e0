"""Produces real third-party instrumentation output for the extraction tests.

    python -m tests.online.instrumented_app {openai-v2|openinference|openinference-rag} BASE_URL OUT

Instruments the real ``openai`` client with ``opentelemetry-instrumentation-openai-v2`` or
``openinference-instrumentation-openai``, makes a multi-turn chat call to the loopback
OpenAI-compatible server at BASE_URL inside a parent span, and writes what an OTLP exporter would
send: ``OUT_PREFIX.spans.pb`` (ExportTraceServiceRequest) and ``OUT_PREFIX.logs.pb``
(ExportLogsServiceRequest, the official instrumentation's content events). Runs in its own process
because instrumentors patch the ``openai`` module globally.
"""

from __future__ import annotations

import sys
from typing import Any

import openai
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

MESSAGES = [
    {"role": "system", "content": "Answer from the shop facts: the shop opens at 9 am."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "When does the shop open?"},
]


#: what the retriever of the ``openinference-rag`` app finds
DOCUMENTS = ["The shop opens at 9 am on weekdays.", "On Sundays the shop is closed."]


def rag(tp: TracerProvider, client: openai.OpenAI) -> None:
    """A RAG turn written with OpenInference's own tracer (``openinference-instrumentation``):
    a CHAIN around an embedding step, a RETRIEVER with documents, a TOOL call and the
    instrumented LLM call; the chain's output is the LLM's reply."""
    from openinference.instrumentation import Document, get_retriever_attributes

    oi: Any = tp.get_tracer("rag-app")  # an OITracer: tp is OpenInference's TracerProvider
    question = MESSAGES[-1]["content"]
    with oi.start_as_current_span("rag", openinference_span_kind="chain") as chain:
        chain.set_input(question)
        with oi.start_as_current_span("embed", openinference_span_kind="embedding") as emb:
            emb.set_input(question)
            emb.set_output("[0.1, 0.2, 0.3]")
        with oi.start_as_current_span("search", openinference_span_kind="retriever") as ret:
            ret.set_input(question)
            ret.set_attributes(
                get_retriever_attributes(
                    documents=[Document(content=d, id=str(i)) for i, d in enumerate(DOCUMENTS)]
                )
            )
        with oi.start_as_current_span("opening_hours", openinference_span_kind="tool") as tool:
            tool.set_input(question)
            tool.set_output("9 am")
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)  # type: ignore[arg-type]
        chain.set_output(reply.choices[0].message.content or "")


def main() -> int:
    kind, base_url, out = sys.argv[1:4]
    resource = Resource.create({"service.name": f"bot-{kind}"})
    spans = InMemorySpanExporter()
    if kind == "openinference-rag":
        from openinference.instrumentation import TracerProvider as OITracerProvider

        tp = OITracerProvider(resource=resource)
    else:
        tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    logs = InMemoryLogExporter()
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    if kind == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=tp)
    client = openai.OpenAI(base_url=base_url, api_key="sk-loopback")
    if kind == "openinference-rag":
        rag(tp, client)
    else:
        with tp.get_tracer("app").start_as_current_span("handle_request"):
            client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)  # type: ignore[arg-type]
    tp.force_flush()
    lp.force_flush()
    with open(out + ".spans.pb", "wb") as fh:
        fh.write(encode_spans(spans.get_finished_spans()).SerializeToString())
    with open(out + ".logs.pb", "wb") as fh:
        fh.write(encode_logs(logs.get_finished_logs()).SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
