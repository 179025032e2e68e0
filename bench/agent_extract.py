"""Cost of reading an agent trace (issue 30): extraction of an agent run per trace, against a
RAG trace of the same size, measured in the same run.

An **agent trace** as the GenAI conventions write it: an ``invoke_agent`` root with its tool
definitions, ``ROUNDS`` chat calls whose output asks for tool calls (one with preamble text),
``execute_tool`` spans whose results are order JSON, the results sent back as
``tool_call_response`` parts in each next chat input, and the final chat call; extraction finds
the one answer, reads every tool call (span + message parts), renders the results as evidence
with source labels and builds the agent run (``nexagauge.online.ingest.extract``). The **RAG
trace** has the same number of spans and about the same bytes: a workflow root, retrieval spans
with documents of the same size as the tool results, chat calls with the same history, and one
answer. Both are decoded once (as the evaluator does before extraction) and extracted ``REPEAT``
times; the table gives microseconds per trace, spans and bytes per trace, and the ratio.

    python bench/agent_extract.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import machine, machine_line
from _tables import table
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from nexagauge.online.ingest.assembly import Trace
from nexagauge.online.ingest.decode import decode_traces
from nexagauge.online.ingest.extract import extract_cases
from nexagauge.sdk import conventions as C

ROUNDS = 3
ORDER = {
    "order_id": "A-1042",
    "status": "shipped",
    "carrier": "PostNord",
    "eta": "2026-12-03",
    "items": [{"sku": f"SKU-{i}", "qty": 1, "name": f"Oak shelf {i}"} for i in range(6)],
}
QUESTION = "Where is my order A-1042 and when does it arrive?"
ANSWER = "Order A-1042 has shipped with PostNord and should arrive on 2026-12-03."
SYSTEM = "You are the support agent of Fjordhem Home. Use the tools; answer from their results."


def _av(v: Any) -> AnyValue:
    return AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=str(v))


def _text(role: str, t: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": t}]}


class Builder:
    """One ``ExportTraceServiceRequest`` of many traces, span by span."""

    def __init__(self) -> None:
        self.req = ExportTraceServiceRequest()
        rs = self.req.resource_spans.add()
        rs.resource.attributes.append(KeyValue(key="service.name", value=_av("bench")))
        self.spans = rs.scope_spans.add().spans
        self.n = 0

    def span(self, trace: int, parent: int, name: str, attrs: dict[str, Any], t: int) -> int:
        self.n += 1
        s = self.spans.add()
        s.trace_id = trace.to_bytes(16, "big")
        s.span_id = self.n.to_bytes(8, "big")
        if parent:
            s.parent_span_id = parent.to_bytes(8, "big")
        s.name = name
        s.start_time_unix_nano, s.end_time_unix_nano = t * 10, t * 10 + 5
        s.attributes.extend(KeyValue(key=k, value=_av(v)) for k, v in attrs.items())
        return self.n


def agent_trace(b: Builder, trace: int) -> None:
    defs = json.dumps([{"type": "function", "name": n} for n in ("lookup_order", "lookup_policy")])
    root = b.span(
        trace,
        0,
        "invoke_agent support",
        {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_AGENT,
            C.GEN_AI_AGENT_NAME: "support",
            C.GEN_AI_TOOL_DEFINITIONS: defs,
            C.GEN_AI_INPUT_MESSAGES: json.dumps([_text("user", QUESTION)]),
            C.GEN_AI_OUTPUT_MESSAGES: json.dumps([_text("assistant", ANSWER)]),
        },
        1000,
    )
    history: list[dict[str, Any]] = [_text("system", SYSTEM), _text("user", QUESTION)]
    for r in range(ROUNDS):
        cid = f"call_{trace}_{r}"
        call = {
            "type": "tool_call",
            "id": cid,
            "name": "lookup_order",
            "arguments": {"order_id": "A-1042"},
        }
        out = {
            "role": "assistant",
            "parts": ([{"type": "text", "content": "Let me look."}] if r == 0 else []) + [call],
        }
        b.span(
            trace,
            root,
            "chat",
            {
                C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
                C.GEN_AI_TOOL_DEFINITIONS: defs,
                C.GEN_AI_INPUT_MESSAGES: json.dumps(history),
                C.GEN_AI_OUTPUT_MESSAGES: json.dumps([out]),
            },
            10 * r + 1,
        )
        result = json.dumps({**ORDER, "round": r})
        b.span(
            trace,
            root,
            "execute_tool lookup_order",
            {
                C.GEN_AI_OPERATION_NAME: C.OPERATION_EXECUTE_TOOL,
                C.GEN_AI_TOOL_NAME: "lookup_order",
                C.GEN_AI_TOOL_CALL_ID: cid,
                C.GEN_AI_TOOL_CALL_ARGUMENTS: '{"order_id": "A-1042"}',
                C.GEN_AI_TOOL_CALL_RESULT: result,
            },
            10 * r + 2,
        )
        history += [
            out,
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": cid, "response": result}],
            },
        ]
    b.span(
        trace,
        root,
        "chat",
        {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
            C.GEN_AI_TOOL_DEFINITIONS: defs,
            C.GEN_AI_INPUT_MESSAGES: json.dumps(history),
            C.GEN_AI_OUTPUT_MESSAGES: json.dumps([_text("assistant", ANSWER)]),
        },
        900,
    )


def rag_trace(b: Builder, trace: int) -> None:
    """Same span count and about the same bytes: retrievals in place of tools."""
    root = b.span(
        trace,
        0,
        "invoke_workflow rag",
        {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_INVOKE_WORKFLOW,
            C.GEN_AI_INPUT_MESSAGES: json.dumps([_text("user", QUESTION)]),
            C.GEN_AI_OUTPUT_MESSAGES: json.dumps([_text("assistant", ANSWER)]),
        },
        1000,
    )
    history: list[dict[str, Any]] = [_text("system", SYSTEM), _text("user", QUESTION)]
    for r in range(ROUNDS):
        doc = json.dumps({**ORDER, "round": r})
        rewrite = f"Rewritten query {r}: {QUESTION}"
        b.span(
            trace,
            root,
            "embeddings",
            {
                C.GEN_AI_OPERATION_NAME: C.OPERATION_EMBEDDINGS,
                C.GEN_AI_INPUT_MESSAGES: json.dumps(history),
                C.GEN_AI_OUTPUT_MESSAGES: json.dumps([_text("assistant", rewrite)]),
            },
            10 * r + 1,
        )
        b.span(
            trace,
            root,
            "retrieval kb",
            {
                C.GEN_AI_OPERATION_NAME: C.OPERATION_RETRIEVAL,
                C.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps([{"id": f"kb-{r}", "content": doc}]),
            },
            10 * r + 2,
        )
        history += [_text("assistant", rewrite), _text("user", doc)]
    b.span(
        trace,
        root,
        "chat",
        {
            C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
            C.GEN_AI_INPUT_MESSAGES: json.dumps(history),
            C.GEN_AI_OUTPUT_MESSAGES: json.dumps([_text("assistant", ANSWER)]),
        },
        900,
    )


def traces(kind: str, n: int) -> tuple[list[Trace], int, int]:
    """``n`` decoded traces of ``kind``; (traces, spans per trace, request bytes per trace)."""
    b = Builder()
    for i in range(1, n + 1):
        (agent_trace if kind == "agent" else rag_trace)(b, i)
    data = b.req.SerializeToString()
    out: dict[bytes, Trace] = {}
    for rec in decode_traces(data, max_bytes=len(data) + 1).spans:
        out.setdefault(rec.trace_id, Trace(rec.trace_id, 0.0, 0.0)).spans[rec.span_id] = rec
    return list(out.values()), b.n // n, len(data) // n


def measure(kind: str, n: int, repeat: int) -> dict[str, Any]:
    ts, spans, size = traces(kind, n)
    cases = [extract_cases(t) for t in ts]  # warm-up, and the check that each yields one case
    assert all(len(c) == 1 for c in cases), kind
    if kind == "agent":
        run = cases[0][0].case.agent
        assert run is not None and len(run.tool_calls) == ROUNDS, run
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for t in ts:
            extract_cases(t)
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return {
        "kind": kind,
        "traces": n,
        "spans_per_trace": spans,
        "bytes_per_trace": size,
        "us_per_trace_best": min(runs),
        "us_per_trace_median": statistics.median(runs),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny inputs (a smoke run)")
    ap.add_argument("--json", type=Path, help="write the raw figures here")
    a = ap.parse_args()
    n, repeat = (20, 2) if a.quick else (400, 7)
    rag = measure("rag", n, repeat)
    agent = measure("agent", n, repeat)
    ratio = agent["us_per_trace_best"] / rag["us_per_trace_best"]
    print(machine_line())
    print(
        table(
            ["trace", "spans", "bytes", "µs/trace (best)", "µs/trace (median)"],
            [
                [
                    r["kind"],
                    r["spans_per_trace"],
                    r["bytes_per_trace"],
                    round(r["us_per_trace_best"]),
                    round(r["us_per_trace_median"]),
                ]
                for r in (rag, agent)
            ],
        )
    )
    print(f"agent / RAG extraction cost per trace: {ratio:.2f}x")
    if a.json:
        a.json.write_text(
            json.dumps({"machine": machine(), "rag": rag, "agent": agent, "ratio": ratio}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
