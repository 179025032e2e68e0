"""A support bot whose users paste secrets and personal data, under a real third-party library.

    python -m tests.online.sensitive_apps KIND COLLECTOR_GRPC_ENDPOINT LLM_BASE_URL OUT_JSON

KIND is one of :data:`KINDS`. Per kind of value in ``tests/support/sensitive.py`` (an OpenAI key,
an AWS key id and secret, a GitHub token, a JWT, a ``DB_PASSWORD=`` line, a card, an IBAN, an
email, a phone number, a national id) one turn: the question carries the value, the retrieved
passage carries it, and the answer (the loopback LLM's, which repeats it) carries it -- all
recorded verbatim by the library, as in production. The SDK's scrubber never sees this text.

- ``openai-v2``: ``opentelemetry-instrumentation-openai-v2`` in its default content mode
  (messages in log records); the passage travels in the system prompt.
- ``openinference``: a CHAIN root and a RETRIEVER span in OpenInference conventions around
  ``openinference-instrumentation-openai``; it also asks :data:`FILTERED` (the judge refuses
  that case with a content filter: a dead letter).
- ``traceloop``: ``traceloop-sdk`` with an ``@workflow`` per turn and an ``@task`` retriever.

OUT_JSON receives one object per turn (kind, value kind, trace id). Runs in its own process:
instrumentors patch ``openai`` globally.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ -> `support`

from support.sensitive import PERSONAL, SENTENCES

KINDS = ("openai-v2", "openinference", "traceloop")
#: a case the judge refuses (the loopback judge answers 400 content_filter to its marker)
FILTER_MARKER = "blocked-by-content-filter"
FILTERED = (
    f"Refund to IBAN {PERSONAL['iban']} for {PERSONAL['email']}, {FILTER_MARKER}?",
    f"Refund desk: IBAN {PERSONAL['iban']} of {PERSONAL['email']} queued.",
    f"The refund to IBAN {PERSONAL['iban']} for {PERSONAL['email']} is queued, {FILTER_MARKER}.",
)
SYSTEM = "You are the support assistant of a payments company."


def turns_of(kind: str) -> list[tuple[str, tuple[str, str, str]]]:
    """(value kind, (question, passage, answer)) per turn of an app."""
    out = list(SENTENCES.items())
    if kind == "openinference":
        out.append(("filtered", FILTERED))
    return out


def answer_for(prompt: str) -> str:
    """The loopback LLM: the answer of the turn whose question ``prompt`` ends with."""
    for _, (q, _, a) in [*SENTENCES.items(), ("filtered", FILTERED)]:
        if q in prompt:
            return a
    return "I do not know."


def main() -> int:
    kind, endpoint, llm_url, out = sys.argv[1:5]
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    import openai
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    conv = f"support-{kind}"
    resource = Resource.create({"service.name": f"support-{kind}"})
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True)))  # fmt: skip
    client = openai.OpenAI(base_url=llm_url, api_key="sk-app-loopback-0000")
    done: list[dict[str, Any]] = []

    def chat(question: str, passage: str, in_system: bool) -> str:
        system = SYSTEM + (f"\nFacts:\n{passage}" if in_system else "")
        user = question if in_system else f"Facts:\n{passage}\n\n{question}"
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        r = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)  # type: ignore[arg-type]
        return r.choices[0].message.content or ""

    def record(value_kind: str) -> None:
        ctx = trace.get_current_span().get_span_context()
        done.append({"kind": kind, "value": value_kind, "trace_id": f"{ctx.trace_id:032x}"})

    if kind == "traceloop":
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import task, workflow
        from traceloop.sdk.instruments import Instruments

        Traceloop.init(
            app_name=f"support-{kind}",
            exporter=exporter,
            telemetry_enabled=False,
            resource_attributes={"service.name": f"support-{kind}"},
            instruments={Instruments.OPENAI},
        )

        @task(name="retrieve")
        def retrieve(question: str, passage: str) -> list[dict[str, Any]]:
            return [{"id": "kb-1", "content": passage}]

        @workflow(name="support_turn")
        def support_turn(question: str, passage: str, value_kind: str) -> str:
            docs = [d["content"] for d in retrieve(question, passage)]
            answer = chat(question, docs[0], in_system=False)
            record(value_kind)
            return answer

        Traceloop.set_association_properties({"session_id": conv})
        for value_kind, (q, passage, _) in turns_of(kind):
            support_turn(q, passage, value_kind)
        provider: Any = trace.get_tracer_provider()
    else:
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
        tracer = provider.get_tracer("support-bot")
        if kind == "openai-v2":
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=lp)
            for value_kind, (q, passage, _) in turns_of(kind):
                attrs = {"gen_ai.conversation.id": conv}
                with tracer.start_as_current_span("handle_request", attributes=attrs):
                    chat(q, passage, in_system=True)
                    record(value_kind)
        else:
            from openinference.instrumentation.openai import OpenAIInstrumentor as OI

            OI().instrument(tracer_provider=provider)
            for value_kind, (q, passage, _) in turns_of(kind):
                root_attrs = {"openinference.span.kind": "CHAIN", "session.id": conv, "input.value": q}  # fmt: skip
                with tracer.start_as_current_span("support", attributes=root_attrs) as root:
                    retriever = {
                        "openinference.span.kind": "RETRIEVER",
                        "input.value": q,
                        "retrieval.documents.0.document.content": passage,
                        "retrieval.documents.0.document.id": "kb-1",
                    }
                    with tracer.start_as_current_span("retrieve", attributes=retriever):
                        pass
                    root.set_attribute("output.value", chat(q, passage, in_system=False))
                    record(value_kind)
    provider.force_flush()
    lp.force_flush()
    provider.shutdown()
    lp.shutdown()
    Path(out).write_text(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
