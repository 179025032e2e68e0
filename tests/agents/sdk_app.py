"""The scripted support agent on the ``openai-agents`` SDK, instrumented with OpenInference.

    .venv-agents/bin/python -m tests.agents.sdk_app ENDPOINT LLM_BASE_URL OUT_JSON

Runs in its own virtual environment (``.venv-agents``, built by ``scripts/test.sh``): the
``openai-agents`` instrumentors and ``traceloop-sdk`` install the same Python module, so they
cannot share the main one. Imports nothing of nexa-gauge (only :mod:`tests.agents.script`,
stdlib). The agent (``Agent`` + ``function_tool`` tools, chat-completions model against the
loopback server) runs the scripted runs the SDK can run: an undeclared tool fails the SDK's run
itself and it has no retriever, so those two runs are left out. Spans go over OTLP gRPC to
ENDPOINT (``memory:``: to ``OUT_JSON.spans.pb`` instead); OUT_JSON receives one object per run (key, trace id, question, answer).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tests.agents import script as S

KIND = "openai-agents"
#: the runs the SDK can run (see module docstring)
RUNS = tuple(r for r in S.RUNS if not r.undeclared and not r.retrieval)


async def run_all(endpoint: str, llm_url: str) -> tuple[list[dict[str, Any]], bytes | None]:
    """Run the agent; (one object per run, the encoded spans when ``endpoint`` is ``memory:``)."""
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from agents.tracing import set_trace_processors

    set_trace_processors([])  # no export to the OpenAI platform (no network here)
    tp = TracerProvider(resource=Resource.create({"service.name": f"agent-{KIND}"}))
    if endpoint != "memory:":
        tp.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=endpoint, insecure=True), schedule_delay_millis=100
            )
        )
    seen = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(seen))
    OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Look up an order by its id."""
        return S.run_tool("lookup_order", {"order_id": order_id})

    @function_tool
    def lookup_policy(topic: str) -> str:
        """Look up a store policy by topic."""
        return S.run_tool("lookup_policy", {"topic": topic})

    client = AsyncOpenAI(base_url=llm_url, api_key="sk-app-loopback-0000")
    model = OpenAIChatCompletionsModel(model=f"agent-{KIND}", openai_client=client)
    agent = Agent(
        name=S.AGENT, instructions=S.SYSTEM, tools=[lookup_order, lookup_policy], model=model
    )
    results: list[dict[str, Any]] = []
    everything: list[Any] = []
    for run in RUNS:
        seen.clear()
        res = await Runner.run(agent, run.question)
        everything += seen.get_finished_spans()
        traces = {f"{s.context.trace_id:032x}" for s in seen.get_finished_spans()}
        if len(traces) != 1:
            raise SystemExit(f"{run.key}: expected one trace, got {len(traces)}")
        results.append(
            {
                "key": run.key,
                "kind": KIND,
                "trace_id": traces.pop(),
                "conversation_id": None,
                "question": run.question,
                "answer": str(res.final_output),
            }
        )
    tp.force_flush()
    encoded = None
    if endpoint == "memory:":
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        encoded = encode_spans(everything).SerializeToString()
    tp.shutdown()
    return results, encoded


def main() -> int:
    endpoint, llm_url, out = sys.argv[1:4]
    results, encoded = asyncio.run(run_all(endpoint, llm_url))
    if encoded is not None:
        with open(out + ".spans.pb", "wb") as fh:
            fh.write(encoded)
    with open(out, "w") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
