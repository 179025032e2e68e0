"""What a traced call records: its input, its output (text, chat messages, LLM responses).

Inputs are picked from the arguments (:func:`pick_input`); a ``str`` input is kept as is and
recorded when the call ends (:func:`record_texts`), where input, output and documents are gated for
secrets in one pass -- the common case (nothing secret) then costs one scan of the texts, and the
same scan tells whether their JSON strings need escaping beyond newlines and quotes (most prose
does not). Anything else is serialized (:mod:`nexagauge.sdk.serialize`,
never raises), cut to the size limit, then scrubbed (:meth:`nexagauge.sdk._call.Call.text`).
"""

from __future__ import annotations

from json.encoder import encode_basestring as _enc  # C-accelerated, keeps non-ASCII
from typing import Any

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import MISSING, Call, Meta
from nexagauge.sdk.documents import (
    contents_json,
    document_texts,
    documents_attribute,
    get_field,
)
from nexagauge.sdk.scrub_gates import plain_json_body
from nexagauge.sdk.scrubbing import CLEAN, PLAIN
from nexagauge.sdk.serialize import dumps, to_text

_IN_HEAD = '[{"role":"user","parts":[{"type":"text","content":'
_IN_TAIL = "}]}]"
_OUT_HEAD = '[{"role":"assistant","parts":[{"type":"text","content":'
_OUT_TAIL = '}],"finish_reason":'
_OUT_TAILS = {
    reason: f'}}],"finish_reason":{_enc(reason)}}}]'
    for reason in (C.FINISH_REASON_STOP, C.FINISH_REASON_ERROR, C.FINISH_REASON_ABANDONED)
}
_OUT_STOP = _OUT_TAILS[C.FINISH_REASON_STOP]


def pick(
    args: tuple[Any, ...], kwargs: dict[str, Any], name: str, pos: int | None, default: Any
) -> Any:
    """The argument ``name`` (by keyword, else at position ``pos``), else ``default``."""
    if kwargs:
        value = kwargs.get(name, MISSING)
        if value is not MISSING:
            return value
    if pos is not None and pos < len(args):
        return args[pos]
    return default


def _first_str(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The first ``str`` argument (positional, then keyword), else a chat message list, else none."""
    for a in args:
        if isinstance(a, str):
            return a
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, str):
                return v
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, list) and a and get_field(a[0], "role") is not None:
            return a
    return MISSING


def pick_input(meta: Meta, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The input argument of a call as the decorator was told (or guessed) to find it."""
    if meta.input_auto:
        return args[0] if args and type(args[0]) is str else _first_str(args, kwargs)
    if meta.input_name is not None:
        return pick(args, kwargs, meta.input_name, meta.input_pos, meta.input_default)
    return MISSING


def _messages_from_list(call: Call, value: list[Any] | tuple[Any, ...]) -> str | None:
    """Chat-style ``[{"role":..., "content":...}]`` -> parts-layout JSON, or None if not chat."""
    out: list[dict[str, Any]] = []
    for m in value:
        role = get_field(m, "role")
        if not isinstance(role, str):
            return None
        content = get_field(m, "content")
        parts: list[dict[str, Any]] = []
        if isinstance(content, str):
            parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: content})
        elif isinstance(content, (list, tuple)):
            for p in content:
                if isinstance(p, str):
                    parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: p})
                    continue
                ptype = get_field(p, "type")
                text = get_field(p, "text")
                if text is None:
                    text = get_field(p, "content")
                if isinstance(text, str):
                    parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: text})
                else:
                    parts.append({C.PART_TYPE: str(ptype) if ptype is not None else "unknown"})
        elif content is not None:
            parts.append({C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: to_text(content)})
        out.append({C.MSG_ROLE: call.text(C.GEN_AI_INPUT_MESSAGES, role), C.MSG_PARTS: parts})
    if not out:
        return None
    for msg in out:
        for part in msg[C.MSG_PARTS]:
            if C.PART_CONTENT in part:
                part[C.PART_CONTENT] = call.text(C.GEN_AI_INPUT_MESSAGES, part[C.PART_CONTENT])
    return dumps(out)


def as_text(call: Call, value: Any) -> str:
    """Any value as text; structured values have secret-looking keys scrubbed."""
    if isinstance(value, str):
        return value
    hits: list[bool] = []
    scrub_keys = call.state.scrubber.scrub_keys
    text = to_text(value, scrub_keys=scrub_keys, on_sensitive_key=lambda: hits.append(True))
    if hits:
        call.mark(["nexagauge.value:sensitive_key"])
    return text


def input_attrs(call: Call, attrs: dict[str, Any], value: Any) -> None:
    """Record a non-deferred input (retrieval query, chat messages, structured value)."""
    if call.meta.is_retrieval:
        attrs[C.GEN_AI_RETRIEVAL_QUERY_TEXT] = call.text(
            C.GEN_AI_RETRIEVAL_QUERY_TEXT, as_text(call, value)
        )
        return
    if type(value) is str:
        call.input_text = value  # immutable: recorded when the call ends (see record_texts)
        return
    if isinstance(value, (list, tuple)) and value:
        messages = _messages_from_list(call, value)
        if messages is not None:
            attrs[C.GEN_AI_INPUT_MESSAGES] = messages
            return
    attrs[C.GEN_AI_INPUT_MESSAGES] = (
        _IN_HEAD + _enc(call.text(C.GEN_AI_INPUT_MESSAGES, as_text(call, value))) + _IN_TAIL
    )


def output_message(call: Call, text: str, finish_reason: str, original: int = -1) -> str:
    """The ``gen_ai.output.messages`` JSON of one assistant text (cut, scrubbed)."""
    tail = _OUT_TAILS.get(finish_reason) or _OUT_TAIL + _enc(finish_reason) + "}]"
    return _OUT_HEAD + _enc(call.text(C.GEN_AI_OUTPUT_MESSAGES, text, original)) + tail


def record_texts(call: Call, attrs: dict[str, Any], output: str | None) -> None:
    """Record the deferred ``str`` input, a ``str`` output and the documents of a call.

    One secret gate over all of them (the common case: nothing to scrub, nothing too long); else
    each is cut and scrubbed on its own.
    """
    text_in = call.input_text
    docs = call.docs
    strs = call.strs
    call.input_text = call.docs = call.strs = None  # recorded once
    limit = call.state.max_value_length
    texts: list[str] = []
    short = True
    if text_in is not None:
        texts.append(text_in)
        short = len(text_in) <= limit
    if output is not None:
        texts.append(output)
        short = short and len(output) <= limit
    scrubber = call.state.scrubber
    first_doc = len(texts)
    known = scrubber.known_clean
    bodies: list[str | None] | None = None
    if strs:  # documents passed as plain strings: those not known clean are gated
        young, old = known.young, known.old
        bodies = []
        for s in strs:
            body = young.get(s)
            if body is None:
                body = old.get(s)
                if body is None:
                    texts.append(s)
                    short = short and len(s) <= limit
            bodies.append(body)
    elif docs:
        short = document_texts(docs, texts, limit, known) and short
    # documents found clean are remembered with their JSON (documents_attribute): a passage
    # retrieved again is neither scanned nor escaped again
    verdict = scrubber.gate(texts) if short else 0
    # plain: no gated text needs JSON escaping but for newlines and quotes (see Scrubber.gate)
    plain = verdict == CLEAN | PLAIN
    if text_in is not None:
        if plain:
            attrs[C.GEN_AI_INPUT_MESSAGES] = f'{_IN_HEAD}"{plain_json_body(text_in)}"{_IN_TAIL}'
        else:
            attrs[C.GEN_AI_INPUT_MESSAGES] = (
                _IN_HEAD
                + _enc(text_in if verdict else call.text(C.GEN_AI_INPUT_MESSAGES, text_in))
                + _IN_TAIL
            )
    if output is not None:
        if plain:
            attrs[C.GEN_AI_OUTPUT_MESSAGES] = f'{_OUT_HEAD}"{plain_json_body(output)}"{_OUT_STOP}'
        elif verdict:
            attrs[C.GEN_AI_OUTPUT_MESSAGES] = _OUT_HEAD + _enc(output) + _OUT_STOP
        else:
            attrs[C.GEN_AI_OUTPUT_MESSAGES] = output_message(call, output, C.FINISH_REASON_STOP)
    if strs:
        if verdict:  # a scrubber without rules or hook scans nothing: nothing to remember
            memo = known if scrubber.active else None
            attrs[C.GEN_AI_RETRIEVAL_DOCUMENTS] = contents_json(strs, plain, memo, None, bodies)
            return
        docs = [{C.DOC_CONTENT: s} for s in strs]  # each cut and scrubbed on its own
    if docs:
        attrs[C.GEN_AI_RETRIEVAL_DOCUMENTS] = documents_attribute(
            call, docs, verdict != 0, plain, texts[first_doc:]
        )


def output_attrs(call: Call, attrs: dict[str, Any], result: Any) -> None:
    """Record a return value that is not a ``str`` (``str`` goes through :func:`record_texts`)."""
    if result is None:
        return
    if llm_response_attrs(call, attrs, result):
        return
    attrs[C.GEN_AI_OUTPUT_MESSAGES] = output_message(
        call, as_text(call, result), C.FINISH_REASON_STOP
    )


def _text_part(call: Call, text: str) -> dict[str, Any]:
    return {
        C.PART_TYPE: C.PART_TYPE_TEXT,
        C.PART_CONTENT: call.text(C.GEN_AI_OUTPUT_MESSAGES, text),
    }


def llm_response_attrs(call: Call, attrs: dict[str, Any], result: Any) -> bool:
    """Duck-typed OpenAI ChatCompletion / Anthropic Message: output, model, usage, finish."""
    choices = get_field(result, "choices")
    messages: list[dict[str, Any]] = []
    finish: list[str] = []
    if isinstance(choices, (list, tuple)) and choices:
        for ch in choices:
            msg = get_field(ch, "message")
            content = get_field(msg, "content") if msg is not None else get_field(ch, "text")
            reason = get_field(ch, "finish_reason")
            reason = reason if isinstance(reason, str) else C.FINISH_REASON_STOP
            finish.append(reason)
            parts = [_text_part(call, content)] if isinstance(content, str) else []
            messages.append(
                {C.MSG_ROLE: C.ROLE_ASSISTANT, C.MSG_PARTS: parts, C.MSG_FINISH_REASON: reason}
            )
    elif get_field(result, "role") == C.ROLE_ASSISTANT and isinstance(
        get_field(result, "content"), (list, tuple)
    ):
        parts = []
        for block in get_field(result, "content"):
            text = get_field(block, "text")
            if isinstance(text, str):
                parts.append(_text_part(call, text))
        reason = get_field(result, "stop_reason")
        reason = reason if isinstance(reason, str) else C.FINISH_REASON_STOP
        finish.append(reason)
        messages.append(
            {C.MSG_ROLE: C.ROLE_ASSISTANT, C.MSG_PARTS: parts, C.MSG_FINISH_REASON: reason}
        )
    else:
        return False
    attrs[C.GEN_AI_OUTPUT_MESSAGES] = dumps(messages)
    attrs[C.GEN_AI_RESPONSE_FINISH_REASONS] = finish
    model = get_field(result, "model")
    if isinstance(model, str):
        attrs[C.GEN_AI_RESPONSE_MODEL] = call.text(C.GEN_AI_RESPONSE_MODEL, model)
    rid = get_field(result, "id")
    if isinstance(rid, str):
        attrs[C.GEN_AI_RESPONSE_ID] = call.text(C.GEN_AI_RESPONSE_ID, rid)
    usage = get_field(result, "usage")
    if usage is not None:
        tin = get_field(usage, "prompt_tokens")
        tin = get_field(usage, "input_tokens") if tin is None else tin
        tout = get_field(usage, "completion_tokens")
        tout = get_field(usage, "output_tokens") if tout is None else tout
        if isinstance(tin, int):
            attrs[C.GEN_AI_USAGE_INPUT_TOKENS] = tin
        if isinstance(tout, int):
            attrs[C.GEN_AI_USAGE_OUTPUT_TOKENS] = tout
    return True
