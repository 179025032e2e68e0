"""On-demand fuzz campaign of the online decoders and extraction (issue 15), longer than the suite.

Two parts, both checking the rule "one bad span costs only itself":

1. the property tests of ``tests/online/test_properties.py`` with many examples
   (``NEXAGAUGE_FUZZ_EXAMPLES``, default here 2,000 per property instead of the suite's 60);
2. a time-bounded mutation campaign: seed messages of every supported vocabulary (our SDK, OTel
   GenAI with log records, OpenInference with a retriever, Traceloop with a retriever task) are
   mutated at the byte level (bit flips, cuts, inserts, splices between seeds) and at the value
   level (attribute values replaced by deep JSON, lone-surrogate escapes, arrays, huge numbers),
   then decoded, assembled and extracted. Invariants: decoding raises only ``PoisonMessage``;
   extraction never raises and never reports ``extract_error`` (an extractor bug); every case
   fingerprints and serializes. A failing input is written to ``--out`` as ``fail-<n>.bin``.

    python scripts/fuzz_online.py [--seconds 300] [--examples 2000] [--seed 1] [--out fuzz-out]
    python scripts/fuzz_online.py --skip-properties --seconds 3600     # mutation only, an hour

Exit status 1 when any invariant failed.
"""

from __future__ import annotations

import json
import random
import sys

from _fuzz import ROOT, arguments, campaign, finish

sys.path.insert(0, str(ROOT))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from nexagauge.online.ingest.assembly import TraceBuffer
from nexagauge.online.ingest.decode import PoisonMessage, decode_logs, decode_traces
from nexagauge.online.ingest.extract import extract_cases_with_errors
from nexagauge.sdk import conventions as C
from tests.online.otlp import (
    chat_messages,
    logs_request,
    sdk_turn,
    sid,
    span,
    tid,
    traces_request,
)

POISON = {"undecodable", "too_large", "invalid_ids", "not_otlp"}


def seeds() -> list[tuple[bytes, bytes]]:
    """(traces request, logs request) of one trace per vocabulary."""
    out = [(traces_request(sdk_turn(tid(1), "Where?", "Paris.", docs=["It is in Paris."])), b"")]
    chat = span(tid(2), sid(1), "chat", {C.GEN_AI_OPERATION_NAME: "chat"})
    logs = logs_request(
        [
            {
                "trace_id": tid(2),
                "span_id": sid(1),
                "event": C.EVENT_GEN_AI_USER_MESSAGE,
                "body": {"content": "When?"},
            },
            {
                "trace_id": tid(2),
                "span_id": sid(1),
                "event": C.EVENT_GEN_AI_CHOICE,
                "body": {"index": 0, "message": {"role": "assistant", "content": "At 9."}},
            },
        ]
    )
    out.append((traces_request([chat]), logs))
    oi = [
        span(
            tid(3),
            sid(1),
            "rag",
            {C.OI_SPAN_KIND: "CHAIN", C.OI_INPUT_VALUE: "Who?", C.OI_OUTPUT_VALUE: "Shakespeare."},
            end=9000,
        ),
        span(
            tid(3),
            sid(2),
            "retrieve",
            {C.OI_SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.content": "Hamlet."},
            parent=sid(1),
            end=3000,
        ),
        span(
            tid(3),
            sid(3),
            "llm",
            {
                C.OI_SPAN_KIND: "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "Who?",
                "llm.output_messages.0.message.content": "Shakespeare.",
            },
            parent=sid(1),
            end=8000,
        ),
    ]
    out.append((traces_request(oi), b""))
    tl = [
        span(
            tid(4),
            sid(1),
            "wf",
            {
                C.TRACELOOP_SPAN_KIND: "workflow",
                C.TRACELOOP_ENTITY_INPUT: json.dumps({"args": ["Q?"], "kwargs": {}}),
                C.TRACELOOP_ENTITY_OUTPUT: json.dumps("A."),
            },
            end=9000,
        ),
        span(
            tid(4),
            sid(2),
            "retrieve",
            {
                C.TRACELOOP_SPAN_KIND: "task",
                C.TRACELOOP_ENTITY_OUTPUT: json.dumps(["doc 1", "doc 2"]),
            },
            parent=sid(1),
            end=2000,
        ),
        span(
            tid(4),
            sid(3),
            "chat",
            {
                C.GEN_AI_OPERATION_NAME: "chat",
                C.GEN_AI_INPUT_MESSAGES: chat_messages(("user", "Q?")),
                C.GEN_AI_OUTPUT_MESSAGES: chat_messages(("assistant", "A.")),
            },
            parent=sid(1),
        ),
    ]
    out.append((traces_request(tl), b""))
    return out


_HOSTILE_VALUES = [
    "[" * 3000 + "]" * 3000,
    json.dumps([{"role": "user", "parts": json.loads("[" * 500 + "]" * 500)}]),
    '[{"role": "user", "content": "x\\ud800\\udfff\\ud800"}]',
    '["\\ud800"]',
    "9" * 5000,
    '{"args": [' + '{"a": ' * 400 + "1" + "}" * 400 + "]}",
]


def mutate_values(raw: bytes, rnd: random.Random) -> bytes:
    """Replace random string attribute values by hostile ones (still valid protobuf)."""
    req = ExportTraceServiceRequest.FromString(raw)
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                for kv in s.attributes:
                    if rnd.random() < 0.3:
                        kind = rnd.randrange(3)
                        if kind == 0:
                            kv.value.string_value = rnd.choice(_HOSTILE_VALUES)
                        elif kind == 1:
                            kv.value.array_value.values.add().string_value = "LLM"
                        else:
                            kv.value.int_value = rnd.randrange(-(2**63), 2**63)
    return req.SerializeToString()


def mutate_bytes(raw: bytes, other: bytes, rnd: random.Random) -> bytes:
    b = bytearray(raw)
    for _ in range(rnd.randint(1, 6)):
        op = rnd.randrange(4)
        i = rnd.randrange(max(1, len(b)))
        if op == 0 and b:
            b[i] ^= rnd.randint(1, 255)
        elif op == 1:
            del b[i : i + rnd.randint(1, 32)]
        elif op == 2:
            b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))
        else:
            j = rnd.randrange(max(1, len(other)))
            b[i:i] = other[j : j + rnd.randint(1, 64)]
    return bytes(b)


def check(traces: bytes, logs: bytes) -> None:
    """The invariants of one input (raises AssertionError or the unexpected exception)."""
    buf = TraceBuffer(grace_s=0.0)
    for data, fn in ((traces, decode_traces), (logs, decode_logs)):
        if not data:
            continue
        try:
            batch = fn(data)
        except PoisonMessage as p:
            assert p.reason in POISON, p.reason
            continue
        for s in batch.spans:
            buf.add_span(s, None, now=0.0)
        for lg in batch.logs:
            buf.add_log(lg, None, now=0.0)
    for trace, _ in buf.flush():
        for mode in ("auto", "all"):
            cases, errors = extract_cases_with_errors(trace, mode)  # type: ignore[arg-type]
            assert not [e for e in errors if e.reason == "extract_error"], errors
            for c in cases:
                c.case.fingerprint()
                json.dumps(c.case.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")


def generate(rnd: random.Random, pool: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """One input: a seed, its values and/or bytes mutated (the logs request's bytes at times)."""
    traces, logs = rnd.choice(pool)
    if rnd.random() < 0.5:
        traces = mutate_values(traces, rnd)
    if rnd.random() < 0.6:
        traces = mutate_bytes(traces, rnd.choice(pool)[0], rnd)
    if logs and rnd.random() < 0.3:
        logs = mutate_bytes(logs, traces, rnd)
    return traces, logs


def main() -> int:
    a = arguments(__doc__, examples=2000).parse_args()
    pool = seeds()
    return finish(
        a,
        "tests/online/test_properties.py",
        lambda: campaign(
            a.seconds,
            a.seed,
            a.out,
            lambda rnd: generate(rnd, pool),
            lambda item, _n: check(*item),
            lambda item: {"bin": item[0], "logs.bin": item[1]},
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
