"""Which assembled traces still wait for content that comes in log records.

``opentelemetry-instrumentation-openai-v2`` in its default and "events" content modes writes a
chat call's prompt and reply as GenAI log records (``gen_ai.user.message`` ...
``gen_ai.choice``, or one ``gen_ai.client.inference.operation.details`` record) and none on the
span. Collectors export logs and spans in separate batches, pipelines and topics, so the records
may reach the evaluator after the trace's root span has ended plus ``online.trace_grace_s``. A
trace handed on then has an LLM span without an output: no case, and its records arrive for a
trace already done.

:func:`awaits_log_content` says when a trace is in that state: one of its LLM spans (GenAI
``gen_ai.operation.name`` = chat, text_completion, generate_content; not the nexa-gauge SDK's own
spans, which carry their content) has ended, has no output of any vocabulary on the span (checked
on the span's serialized bytes, without decoding it) and no output record joined yet
(``gen_ai.choice`` or operation details). The assembly buffer then holds the trace up to
``online.log_content_wait_s`` longer (:class:`~nexagauge.online.ingest.assembly.TraceBuffer`).

Example:
    >>> from nexagauge.online.ingest.assembly import Trace
    >>> from nexagauge.online.ingest.decode import LogRef, SpanRecord
    >>> chat = SpanRecord(b"\\x01" * 16, b"\\x02" * 8, b"", "chat", 1, 2, False, "svc",
    ...                   {"gen_ai.operation.name": "chat"}, b"")
    >>> t = Trace(b"\\x01" * 16, 0.0, 0.0, spans={chat.span_id: chat})
    >>> awaits_log_content(t)
    True
    >>> t.logs.append(LogRef(chat.trace_id, chat.span_id, "gen_ai.choice", 2))
    >>> awaits_log_content(t)
    False
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexagauge.online.ingest.roles import GENAI_LLM
from nexagauge.sdk import conventions as C

if TYPE_CHECKING:
    from nexagauge.online.ingest.assembly import Trace

#: eagerly decoded attributes the check reads (the decoder's ``wanted`` keys)
LOG_CONTENT_MARK_KEYS = frozenset({C.GEN_AI_OPERATION_NAME, C.NG_SDK_VERSION})
#: log records that carry a call's output (a reply, or the whole exchange)
OUTPUT_EVENTS = frozenset(
    {C.EVENT_GEN_AI_CHOICE, C.EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS}
)
#: attribute keys (or key prefixes) under which a span carries its output itself: GenAI (also
#: inside an operation-details span event), legacy GenAI / OpenLLMetry, OpenInference, Traceloop
_OUTPUT_ON_SPAN = tuple(
    k.encode()
    for k in (
        C.GEN_AI_OUTPUT_MESSAGES,
        C.LEGACY_GEN_AI_COMPLETION_PREFIX,
        C.OI_LLM_OUTPUT_MESSAGES_PREFIX,
        C.OI_OUTPUT_VALUE,
        C.TRACELOOP_ENTITY_OUTPUT,
    )
)


def awaits_log_content(trace: Trace) -> bool:
    """Whether an ended LLM span of ``trace`` has no output, neither on the span nor in a joined
    log record (see module docstring). Linear in the trace's spans and records; decodes nothing.
    """
    waiting: set[bytes] | None = None
    for s in trace.spans.values():
        m = s.marks
        if not s.end_ns or m.get(C.GEN_AI_OPERATION_NAME) not in GENAI_LLM:
            continue
        if C.NG_SDK_VERSION in m:
            continue
        raw = s.raw
        if raw is not None and any(k in raw for k in _OUTPUT_ON_SPAN):
            continue
        if waiting is None:
            waiting = set()
        waiting.add(s.span_id)
    if not waiting:
        return False
    for log in trace.logs:
        if log.event_name in OUTPUT_EVENTS:
            waiting.discard(log.span_id)
    return bool(waiting)
