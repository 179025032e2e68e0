"""The scripted support agent (:mod:`tests.agents.script`) instrumented with a real library.

    python -m tests.agents.agent_app KIND ENDPOINT LLM_BASE_URL OUT_JSON

KIND: ``openai-v2`` (``opentelemetry-instrumentation-openai-v2``, latest experimental mode with
content on the span, plus the app's own ``invoke_agent`` / ``execute_tool`` / ``retrieval`` spans
per the GenAI conventions), ``openinference`` (``openinference-instrumentation-openai`` plus
AGENT / TOOL / RETRIEVER spans from OpenInference's own tracer) or ``traceloop``
(``traceloop-sdk`` with ``@agent`` / ``@tool`` / ``@task``). ENDPOINT: an OTLP gRPC endpoint, or
``memory:`` to write the finished spans as ``OUT_JSON.spans.pb`` (an ExportTraceServiceRequest)
instead. OUT_JSON receives one object per run: key, trace id, conversation id, question, answer.
Runs in its own process because instrumentors patch the ``openai`` module globally.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from nexagauge.sdk import conventions as C
from tests.agents import script as S

KINDS = ("openai-v2", "openinference", "traceloop")
_V2_ENV = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}

MODEL = S.MODEL
ToolRunner = Callable[[str, str, dict[str, Any]], str]  # (name, call id, args) -> result text


def agent_loop(
    client: Any, run: S.Run, call_tool: ToolRunner, retrieve: Callable[[], str] | None
) -> str:
    """The agent: the model is asked with the tools until it answers without tool calls."""
    user = run.question
    if retrieve is not None:
        user = f"Knowledge base: {retrieve()}\n\n{run.question}"
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": S.SYSTEM},
        {"role": "user", "content": user},
    ]
    while True:
        r = client.chat.completions.create(model=MODEL, messages=msgs, tools=S.TOOL_DEFS)
        m = r.choices[0].message
        if not m.tool_calls:
            return str(m.content or "")
        msgs.append(
            {
                "role": "assistant",
                "content": m.content,
                "tool_calls": [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                    }
                    for tc in m.tool_calls
                ],
            }
        )
        for tc in m.tool_calls:
            args = json.loads(tc.function.arguments)
            try:
                out = call_tool(tc.function.name, tc.id, args)
            except S.ToolFailed as e:
                out = f"error: {e}"
            msgs.append({"role": "tool", "tool_call_id": tc.id, "content": out})


def main() -> int:
    kind, endpoint, llm_url, out = sys.argv[1:5]
    if kind not in KINDS:
        raise SystemExit(f"unknown kind {kind!r}; choose one of {KINDS}")
    global MODEL
    MODEL = f"agent-{kind}"  # the loopback model tags its call ids with it
    if kind == "openai-v2":
        os.environ.update(_V2_ENV)
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    import openai
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    conv = f"agent-{kind}"
    service = f"agent-{kind}"
    resource = Resource.create({"service.name": service})
    memory = InMemorySpanExporter() if endpoint == "memory:" else None
    if memory is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter: Any = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    else:
        exporter = memory
    client = openai.OpenAI(base_url=llm_url, api_key="sk-app-loopback-0000")
    results: list[dict[str, Any]] = []

    def record(run: S.Run, answer: str) -> None:
        ctx = trace.get_current_span().get_span_context()
        results.append(
            {
                "key": run.key,
                "kind": kind,
                "trace_id": f"{ctx.trace_id:032x}",
                "conversation_id": conv,
                "question": run.question,
                "answer": answer,
            }
        )

    if kind == "traceloop":
        from traceloop.sdk import Traceloop
        from traceloop.sdk.decorators import agent, task, tool
        from traceloop.sdk.instruments import Instruments

        Traceloop.init(
            app_name=service,
            exporter=exporter,
            telemetry_enabled=False,
            resource_attributes={"service.name": service},
            instruments={Instruments.OPENAI},
            disable_batch=memory is not None,
        )
        tools = {
            name: tool(name=name)(lambda _n=name, **kw: S.run_tool(_n, kw))
            for name in (*S.DECLARED, "escalate_ticket")
        }

        @task(name="retrieve")
        def retrieve(question: str) -> list[dict[str, str]]:
            return [{"id": S.PASSAGE_ID, "content": S.PASSAGE}]

        @agent(name=S.AGENT)
        def support(question: str) -> str:
            run = S.BY_QUESTION[question]
            answer = agent_loop(
                client,
                run,
                lambda n, cid, args: tools[n](**args),
                (lambda: retrieve(run.question)[0]["content"]) if run.retrieval else None,
            )
            record(run, answer)
            return answer

        Traceloop.set_association_properties({"session_id": conv})
        for run in S.RUNS:
            support(run.question)
        provider: Any = trace.get_tracer_provider()
    else:
        if kind == "openinference":
            from openinference.instrumentation import TracerProvider as OITracerProvider

            provider = OITracerProvider(resource=resource)
        else:
            provider = TracerProvider(resource=resource)
        if memory is None:
            provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
        else:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        if kind == "openai-v2":
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(tracer_provider=provider)
            _semconv_runs(
                provider.get_tracer("support-app"), client, conv, record, Status, StatusCode
            )
        else:
            from openinference.instrumentation.openai import OpenAIInstrumentor as OI

            OI().instrument(tracer_provider=provider)
            _openinference_runs(provider.get_tracer("support-app"), client, conv, record)
    provider.force_flush()
    if memory is not None:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        with open(out + ".spans.pb", "wb") as fh:
            fh.write(encode_spans(memory.get_finished_spans()).SerializeToString())
    provider.shutdown()
    with open(out, "w") as fh:
        json.dump(results, fh)
    return 0


def _semconv_runs(
    tracer: Any, client: Any, conv: str, record: Any, Status: Any, StatusCode: Any
) -> None:
    """The app's own GenAI-convention spans around the instrumented LLM calls."""
    for run in S.RUNS:
        attrs = {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_AGENT,
            C.GEN_AI_AGENT_NAME: S.AGENT,
            C.GEN_AI_CONVERSATION_ID: conv,
            C.GEN_AI_TOOL_DEFINITIONS: json.dumps(S.TOOL_DEFS),
            C.GEN_AI_INPUT_MESSAGES: json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": run.question}]}]
            ),
        }
        with tracer.start_as_current_span(f"invoke_agent {S.AGENT}", attributes=attrs) as span:

            def call_tool(name: str, call_id: str, args: dict[str, Any]) -> str:
                with tracer.start_as_current_span(
                    f"execute_tool {name}",
                    record_exception=False,
                    set_status_on_exception=False,
                    attributes={
                        C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
                        C.GEN_AI_TOOL_NAME: name,
                        C.GEN_AI_TOOL_CALL_ID: call_id,
                        C.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(args),
                    },
                ) as ts:
                    try:
                        result = S.run_tool(name, args)
                    except S.ToolFailed as e:
                        ts.set_attribute(C.ERROR_TYPE, type(e).__name__)
                        ts.set_status(Status(StatusCode.ERROR, str(e)))
                        ts.record_exception(e)
                        raise
                    ts.set_attribute(C.GEN_AI_TOOL_CALL_RESULT, result)
                    return result

            def retrieve(run: S.Run = run) -> str:
                with tracer.start_as_current_span(
                    "retrieval kb",
                    attributes={
                        C.GEN_AI_OPERATION_NAME: C.OPERATION_RETRIEVAL,
                        C.GEN_AI_RETRIEVAL_QUERY_TEXT: run.question,
                        C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(
                            [{"id": S.PASSAGE_ID, "content": S.PASSAGE}]
                        ),
                    },
                ):
                    return S.PASSAGE

            answer = agent_loop(client, run, call_tool, retrieve if run.retrieval else None)
            span.set_attribute(
                C.GEN_AI_OUTPUT_MESSAGES,
                json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": answer}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            )
            record(run, answer)


def _openinference_runs(tracer: Any, client: Any, conv: str, record: Any) -> None:
    """AGENT / TOOL / RETRIEVER spans from OpenInference's tracer around the LLM calls."""
    from openinference.instrumentation import Document, get_retriever_attributes, using_session

    for run in S.RUNS:
        with (
            using_session(conv),
            tracer.start_as_current_span(S.AGENT, openinference_span_kind="agent") as span,
        ):
            span.set_input(run.question)

            def call_tool(name: str, call_id: str, args: dict[str, Any]) -> str:
                with tracer.start_as_current_span(name, openinference_span_kind="tool") as ts:
                    ts.set_tool(name=name, description=name, parameters=json.dumps(args))
                    ts.set_input(json.dumps(args), mime_type="application/json")
                    result = S.run_tool(name, args)  # a failure: the tracer records it
                    ts.set_output(result)
                    return result

            def retrieve(run: S.Run = run) -> str:
                with tracer.start_as_current_span("kb", openinference_span_kind="retriever") as rs:
                    rs.set_input(run.question)
                    rs.set_attributes(
                        get_retriever_attributes(
                            documents=[Document(content=S.PASSAGE, id=S.PASSAGE_ID)]
                        )
                    )
                    return S.PASSAGE

            answer = agent_loop(client, run, call_tool, retrieve if run.retrieval else None)
            span.set_output(answer)
            record(run, answer)


if __name__ == "__main__":
    sys.exit(main())
