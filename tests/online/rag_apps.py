"""A small RAG chat app instrumented with a real third-party library, for the end-to-end test.

    python -m tests.online.rag_apps KIND COLLECTOR_GRPC_ENDPOINT LLM_BASE_URL OUT_JSON

KIND is one of :data:`KINDS`. Each run holds one 3-turn conversation: per turn the app retrieves
documents, then calls the real ``openai`` client (the loopback OpenAI-compatible server at
LLM_BASE_URL) with the conversation so far, under a root span per turn; spans (and content log
records where the library writes them) go over OTLP gRPC to the collector. OUT_JSON receives one
object per turn: trace id, conversation id, question, documents and answer — what the test
expects the evaluator to have seen.

- ``openai-v2-default`` / ``openai-v2-span`` / ``openai-v2-events``: the official
  ``opentelemetry-instrumentation-openai-v2`` in its default content mode (content in log
  records), the latest experimental mode with content on the span, and the latest experimental
  mode with content in a log event. It has no retrieval spans: the documents travel in the system
  prompt (the evaluator's system-prompt fallback).
- ``openinference``: ``openinference-instrumentation-openai`` for the LLM span, under a CHAIN
  root with a RETRIEVER span written in OpenInference conventions.
- ``traceloop``: ``traceloop-sdk`` with an ``@workflow`` per turn, an ``@task`` retriever whose
  output is the documents, its own openai instrumentation and the session id as association
  property.

Runs in its own process because instrumentors patch the ``openai`` module globally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

KINDS = ("openai-v2-default", "openai-v2-span", "openai-v2-events", "openinference", "traceloop")
TURNS = 3
QUESTIONS = [
    "When does the Lyon shop open on Sundays?",
    "Can I bring my dog inside?",
    "Is there parking nearby?",
]
SYSTEM = "You are the assistant of a bakery chain. Be brief."
#: the env of each content mode of openai-v2
MODES = {
    "openai-v2-default": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "openai-v2-span": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
    "openai-v2-events": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
    },
}


def documents(kind: str, turn: int) -> list[str]:
    """Documents unique to (kind, turn), so the test can tell whose context a judge call used."""
    tag = f"{kind}-{turn}"
    return [
        f"Shop fact {tag}-a: the Lyon shop opens at 8 am on Sundays and closes at 1 pm.",
        f"Shop fact {tag}-b: dogs on a leash are welcome; free parking is behind the shop.",
    ]


def main() -> int:
    kind, endpoint, llm_url, out = sys.argv[1:5]
    if kind not in KINDS:
        raise SystemExit(f"unknown kind {kind!r}; choose one of {KINDS}")
    os.environ.update(MODES.get(kind, {}))
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    conv = f"conv-{kind}"
    resource = Resource.create({"service.name": f"rag-{kind}"})
    span_exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True))
    )
    turns: list[dict[str, Any]] = []
    history: list[dict[str, str]] = []

    import openai

    client = openai.OpenAI(base_url=llm_url, api_key="sk-app-loopback-0000")

    def chat(question: str, docs: list[str], docs_in_system: bool) -> str:
        system = SYSTEM + ("\nFacts:\n" + "\n".join(docs) if docs_in_system else "")
        user = question if docs_in_system else "Facts:\n" + "\n".join(docs) + "\n\n" + question
        msgs = [{"role": "system", "content": system}, *history, {"role": "user", "content": user}]
        r = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)  # type: ignore[arg-type]
        answer = r.choices[0].message.content or ""
        history.extend(
            [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        )
        return answer

    def record(i: int, docs: list[str], answer: str) -> None:
        ctx = trace.get_current_span().get_span_context()
        turns.append(
            {
                "kind": kind,
                "turn": i,
                "trace_id": f"{ctx.trace_id:032x}",
                "conversation_id": conv,
                "question": QUESTIONS[i],
                "documents": docs,
                "answer": answer,
            }
        )

    if kind == "traceloop":
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import task, workflow
        from traceloop.sdk.instruments import Instruments

        Traceloop.init(
            app_name=f"rag-{kind}",
            exporter=span_exporter,
            telemetry_enabled=False,
            resource_attributes={"service.name": f"rag-{kind}"},
            instruments={Instruments.OPENAI},
        )

        @task(name="retrieve")
        def retrieve(question: str, i: int) -> list[dict[str, Any]]:
            return [{"id": f"d{k}", "content": d} for k, d in enumerate(documents(kind, i))]

        @workflow(name="answer_question")
        def answer_question(question: str, i: int) -> str:
            docs = [d["content"] for d in retrieve(question, i)]
            answer = chat(question, docs, docs_in_system=False)
            record(i, docs, answer)
            return answer

        Traceloop.set_association_properties({"session_id": conv})
        for i, q in enumerate(QUESTIONS[:TURNS]):
            answer_question(q, i)
        provider = trace.get_tracer_provider()
    else:
        tp = TracerProvider(resource=resource)
        tp.add_span_processor(BatchSpanProcessor(span_exporter, schedule_delay_millis=100))
        provider = tp
        tracer = tp.get_tracer("rag-app")
        if kind.startswith("openai-v2"):
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)
            for i, q in enumerate(QUESTIONS[:TURNS]):
                with tracer.start_as_current_span(
                    "handle_request", attributes={"gen_ai.conversation.id": conv}
                ):
                    docs = documents(kind, i)
                    record(i, docs, chat(q, docs, docs_in_system=True))
        else:
            from openinference.instrumentation.openai import OpenAIInstrumentor as OI

            OI().instrument(tracer_provider=tp)
            for i, q in enumerate(QUESTIONS[:TURNS]):
                with tracer.start_as_current_span(
                    "rag",
                    attributes={
                        "openinference.span.kind": "CHAIN",
                        "session.id": conv,
                        "input.value": q,
                    },
                ) as root:
                    docs = documents(kind, i)
                    attrs: dict[str, Any] = {
                        "openinference.span.kind": "RETRIEVER",
                        "input.value": q,
                    }
                    for k, d in enumerate(docs):
                        attrs[f"retrieval.documents.{k}.document.content"] = d
                        attrs[f"retrieval.documents.{k}.document.id"] = f"d{k}"
                    with tracer.start_as_current_span("retrieve", attributes=attrs):
                        pass
                    answer = chat(q, docs, docs_in_system=False)
                    root.set_attribute("output.value", answer)
                    record(i, docs, answer)
    provider.force_flush()  # type: ignore[attr-defined]
    lp.force_flush()
    provider.shutdown()  # type: ignore[attr-defined]
    lp.shutdown()
    with open(out, "w") as fh:
        json.dump(turns, fh)
    return 0


def run_apps(
    kinds: tuple[str, ...] | list[str],
    collector: str,
    llm_url: str,
    out_dir: Path,
    env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Run one app process per kind, all at once; their turns in ``kinds`` order (each app's
    exit code checked, each wrote :data:`TURNS` turns)."""
    repo = Path(__file__).resolve().parents[2]

    def one(kind: str) -> list[dict[str, Any]]:
        out = out_dir / f"{kind}.json"
        argv = [sys.executable, "-m", "tests.online.rag_apps", kind, collector, llm_url, str(out)]
        run = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 0, f"{kind}: {run.stderr[-3000:]}"
        got: list[dict[str, Any]] = json.loads(out.read_text())
        assert len(got) == TURNS, (kind, got)
        return got

    with ThreadPoolExecutor(len(kinds)) as pool:
        return [t for got in pool.map(one, kinds) for t in got]


if __name__ == "__main__":
    sys.exit(main())
