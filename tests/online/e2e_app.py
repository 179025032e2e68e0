"""The application of the end-to-end test: a tiny RAG bot traced with ``@nexagauge.trace``.

    python -m tests.online.e2e_app OTLP_GRPC_ENDPOINT N OUT_JSON

Answers N questions (each a trace: the turn span + a retrieval span), exports over OTLP gRPC to
the collector, flushes, and writes the (trace id, span id) of every answer span to OUT_JSON.
"""

from __future__ import annotations

import json
import sys

from opentelemetry import trace as otel_trace

import nexagauge

DOCS = {
    "paris": "The Eiffel Tower is in Paris. Paris is the capital of France.",
    "everest": "Mount Everest is the highest mountain on Earth, at 8,849 metres.",
    "python": "Python is a programming language created by Guido van Rossum.",
}


@nexagauge.retriever
def search(query: str) -> list[str]:
    return [d for k, d in DOCS.items() if k in query.lower()] or list(DOCS.values())[:1]


ANSWERS: list[tuple[str, str]] = []


@nexagauge.trace(name="answer", turn_end=True)
def answer(question: str) -> str:
    docs = search(question)
    ctx = otel_trace.get_current_span().get_span_context()
    ANSWERS.append((format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")))
    return docs[0].split(". ")[0] + "."


def main() -> int:
    endpoint, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    nexagauge.configure(service_name="shop-bot", endpoint=endpoint, protocol="grpc")
    questions = ["Where is the Eiffel tower? paris", "How high is everest?", "Who made python?"]
    for i in range(n):
        with nexagauge.session(session_id=f"conv-{i % 3}"):
            answer(questions[i % len(questions)])
    nexagauge.shutdown()
    with open(out, "w") as fh:
        json.dump(ANSWERS, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
