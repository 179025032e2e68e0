"""What the app calls: ``@nexagauge.trace`` and friends, and the helpers used inside traced calls.

The implementation is split by job: :mod:`~nexagauge.sdk.decorator` (the decorator and its
wrappers), :mod:`~nexagauge.sdk.spans` (span start and end), :mod:`~nexagauge.sdk.capture`
(inputs, outputs, messages), :mod:`~nexagauge.sdk.documents`, :mod:`~nexagauge.sdk.streams`,
:mod:`~nexagauge.sdk.retrieval`, :mod:`~nexagauge.sdk.session`, :mod:`~nexagauge.sdk.knobs`.
This module holds the helpers called inside traced calls: ``add_context``, ``set_eval_knobs`` and
``mark_turn_end`` (:mod:`nexagauge.sdk` gathers the public names from their homes).

Each traced call becomes one span carrying what the online evaluator needs to build an evaluation
case: the input (``gen_ai.input.messages``), the output (``gen_ai.output.messages``), the retrieved
context (``gen_ai.retrieval.documents``), the conversation (``gen_ai.conversation.id``) and the
per-call evaluation knobs (``nexagauge.eval.*``). Names come from :mod:`nexagauge.sdk.conventions`.

Never break the app:

* the user's exception is recorded (scrubbed) and re-raised unchanged (same object, same traceback);
* any failure inside the SDK goes to :func:`nexagauge.sdk._errors.internal_error` (logged once,
  swallowed; re-raised under ``NEXAGAUGE_SDK_STRICT=1``) and the call runs as if untraced;
* serialization never raises (:mod:`nexagauge.sdk.serialize`); secrets are scrubbed from every
  recorded text, cut to the size limit first, before the span is handed to the exporter
  (:mod:`nexagauge.sdk.scrubbing`); export runs on the batch processor's thread.

Example::

    import nexagauge

    @nexagauge.trace(relevance={"scoring_mode": "scale_1_5", "include_reasoning": True})
    def answer(question: str) -> str:
        docs = search(question)
        nexagauge.add_context(docs)
        return llm(question, docs)

    with nexagauge.session(session_id="conv-42", user_id="u-7"):
        answer("What is the capital of France?")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context

from nexagauge.sdk._call import CALL_KEY, Call
from nexagauge.sdk._errors import internal_error, warn_once
from nexagauge.sdk.documents import normalize_documents
from nexagauge.sdk.knobs import knob_blocks
from nexagauge.sdk.serialize import dumps

__all__ = ["add_context", "mark_turn_end", "set_eval_knobs"]


def _current_call(site: str) -> Call | None:
    call = otel_context.get_value(CALL_KEY)
    if call is None:
        warn_once(site, f"nexagauge.{site}() called outside a @nexagauge.trace call; ignored")
    return call  # type: ignore[return-value]


def add_context(docs: Any) -> None:
    """Attach retrieved documents (text, id, score) to the current traced call.

    Accepts what :func:`normalize_documents` accepts. The documents are recorded (scrubbed,
    truncated) in ``gen_ai.retrieval.documents`` when the call ends; several calls accumulate.
    Outside a traced call it logs a warning once and does nothing.

    Example::

        @nexagauge.trace
        def answer(question: str) -> str:
            hits = store.similarity_search_with_score(question)
            nexagauge.add_context(hits)
            ...
    """
    try:
        call = _current_call("add_context")
        if call is None or not call.recording or not call.state.capture_content:
            return
        call.add_docs(normalize_documents(docs))
    except Exception as exc:
        internal_error("add_context", exc)


def set_eval_knobs(
    *,
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> None:
    """Set evaluation knobs for the current traced call only (overrides the decorator's blocks).

    A malformed block is a programming error: it is logged (raised under strict mode) and ignored,
    the call itself continues.

    Example::

        nexagauge.set_eval_knobs(grounding={"scoring_mode": "scale_1_5", "include_reasoning": True})
    """
    try:
        call = _current_call("set_eval_knobs")
        if call is None:
            return
        knobs: dict[str, str] = {}
        for attribute, data in knob_blocks(relevance, grounding, geval, redteam).items():
            scrubbed, marks = call.state.scrubber.scrub_data(attribute, data)
            call.mark(marks)
            knobs[attribute] = dumps(scrubbed)
        call.knobs = {**(call.knobs or {}), **knobs}
    except Exception as exc:
        internal_error("set_eval_knobs", exc)


def mark_turn_end() -> None:
    """Mark the current traced call as the end of a conversation turn (``nexagauge.turn.end``).

    The evaluator then scores the turn as soon as this span ends instead of waiting out the
    trace grace period. Outside a traced call it does nothing.

    Example::

        @nexagauge.trace
        def handle(message: str) -> str:
            reply = agent.run(message)   # inner traced calls: retrieval, LLM, tools
            nexagauge.mark_turn_end()    # this span closes the user's turn
            return reply
    """
    try:
        call = _current_call("mark_turn_end")
        if call is not None:
            call.turn_end = True
    except Exception as exc:
        internal_error("mark_turn_end", exc)
