"""Extraction from spans written by the real third-party instrumentations.

``opentelemetry-instrumentation-openai-v2`` (official; message content either in log records
joined by span id, or as ``gen_ai.*.messages`` span attributes) and
``openinference-instrumentation-openai`` instrument the real ``openai`` client calling a loopback
OpenAI-compatible server; their OTLP output goes through the evaluator's decoder, assembly and
extraction. The reply of the server is the case output, never the history assistant message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexagauge.online.ingest.assembly import TraceBuffer
from nexagauge.online.ingest.decode import decode_logs, decode_traces
from nexagauge.online.ingest.extract import extract_cases

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
REPLY = "The shop opens at 9 am every day."


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from support.openai_server import OpenAIServer, Reply

    with OpenAIServer() as srv:
        srv.handler = lambda req: Reply(content=REPLY)
        yield srv


def run_app(kind: str, base_url: str, tmp: Path, **env: str) -> tuple[bytes, bytes]:
    out = tmp / kind
    r = subprocess.run(
        [sys.executable, "-m", "tests.online.instrumented_app", kind, base_url, str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return Path(str(out) + ".spans.pb").read_bytes(), Path(str(out) + ".logs.pb").read_bytes()


def cases_from(spans_pb: bytes, logs_pb: bytes, mode: str = "auto") -> list[Any]:
    buf = TraceBuffer(grace_s=0.0)
    for s in decode_traces(spans_pb).spans:
        buf.add_span(s, None, now=0.0)
    for lg in decode_logs(logs_pb).logs:
        buf.add_log(lg, None, now=0.0)
    out = []
    for trace, _ in buf.flush():
        out += extract_cases(trace, mode)  # type: ignore[arg-type]
    return out


def check_case(c: Any, service: str) -> None:
    assert c.case.output == REPLY
    assert c.case.input == "When does the shop open?"
    assert c.case.context == "Answer from the shop facts: the shop opens at 9 am."
    assert [(t.input, t.output) for t in c.case.conversation] == [
        ("Hello", "Hi! How can I help?"),
        ("When does the shop open?", REPLY),
    ]
    assert c.span.service == service and c.model and "gpt-4o-mini" in c.model


def test_official_openai_v2_content_in_log_records(server: Any, tmp_path: Path) -> None:
    """Latest experimental mode, EVENT_ONLY: the content travels only in a
    ``gen_ai.client.inference.operation.details`` log record carrying the span's ids; the
    evaluator joins it to the span."""
    spans, logs = run_app(
        "openai-v2",
        server.base_url,
        tmp_path,
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="EVENT_ONLY",
    )
    assert decode_logs(logs).logs, "the instrumentation emitted no content events"
    [c] = cases_from(spans, logs)
    check_case(c, "bot-openai-v2")
    assert c.span.name.startswith("chat")
    # without the log records there is no content on the span: no case, not a wrong case
    assert cases_from(spans, b"") == []


def test_official_openai_v2_default_mode_one_log_record_per_message(
    server: Any, tmp_path: Path
) -> None:
    """The default (stable) mode with content capture on: one log record per message
    (``gen_ai.system.message``, ``gen_ai.user.message``, ..., ``gen_ai.choice``) with the span's
    ids and nothing on the span; the evaluator rebuilds the case from them."""
    spans, logs = run_app(
        "openai-v2",
        server.base_url,
        tmp_path,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
    )
    assert len(decode_logs(logs).logs) >= 4, "expected one content event per message"
    [c] = cases_from(spans, logs)
    check_case(c, "bot-openai-v2")
    assert cases_from(spans, b"") == []


def test_official_openai_v2_content_on_span_attributes(server: Any, tmp_path: Path) -> None:
    spans, logs = run_app(
        "openai-v2",
        server.base_url,
        tmp_path,
        OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
    )
    assert not decode_logs(logs).logs  # SPAN_ONLY: the content is on the span itself
    cs = cases_from(spans, logs)
    assert len(cs) == 1
    check_case(cs[0], "bot-openai-v2")


def test_openinference_openai(server: Any, tmp_path: Path) -> None:
    spans, logs = run_app("openinference", server.base_url, tmp_path)
    [c] = cases_from(spans, logs)
    check_case(c, "bot-openinference")


def test_openinference_rag_roles_from_the_real_tracer(server: Any, tmp_path: Path) -> None:
    """Span roles on OpenInference's own tracer (issue 13): the CHAIN is the one answer (the LLM
    call inside it has the same reply and is merged into it), the RETRIEVER's documents are its
    context (not the system message), the TOOL and EMBEDDING spans are no cases."""
    from tests.online.instrumented_app import DOCUMENTS

    spans, logs = run_app("openinference-rag", server.base_url, tmp_path)
    names = {s.name for s in decode_traces(spans).spans}
    assert {"rag", "embed", "search", "opening_hours"} <= names
    [c] = cases_from(spans, logs)
    assert c.span.name == "rag" and c.case.output == REPLY
    assert c.case.input == "When does the shop open?"
    # the documents, then the TOOL span's result (issue 30: tool results are evidence too)
    assert c.case.context_documents[:2] == tuple(DOCUMENTS)
    [tool_doc] = c.case.context_documents[2:]
    assert tool_doc.startswith("Result of tool opening_hours") and tool_doc.endswith("9 am")
    assert c.case.context_sources[:2] == ("doc:0", "doc:1")
    assert c.case.context_sources[2].startswith("tool:opening_hours#")
    assert c.model and "gpt-4o-mini" in c.model  # from the merged LLM span
    [llm] = cases_from(spans, logs, "llm")
    assert llm.span.name != "rag" and llm.case.context_documents == c.case.context_documents
