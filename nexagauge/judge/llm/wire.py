"""The chat-completions body the judge sends, and what it reads back from the raw answer.

The client posts a plain JSON body and reads the raw response bytes (no openai response models:
see :mod:`nexagauge.judge.llm.client`), so building the body for each structured-output mode and
picking the answer, refusal and token log-probs out of the returned JSON happen here, once.

- ``json_schema`` mode: ``response_format`` carries the strict schema (:func:`request_body`).
- ``json_object`` mode (endpoints that reject schemas): the schema goes into the system message
  through the ``json_object`` prompt and the answer is validated afterwards.

Example:
    >>> completion(b'{"choices": [{"message": {"content": "{}"}}]}')["choices"][0]["message"]
    {'content': '{}'}
    >>> completion(b"<html>") is None
    True
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from nexagauge.judge.promptlib import load_prompt
from nexagauge.settings import JudgeSettings

log = logging.getLogger(__name__)


def request_body(
    s: JudgeSettings,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    name: str,
    mode: str,
    max_tokens: int | None,
) -> dict[str, Any]:
    """The ``/chat/completions`` body for one attempt in ``mode`` (``json_schema`` or
    ``json_object``) with the node's model, temperature and seed.

    Example:
        >>> from nexagauge.settings import JudgeSettings
        >>> b = request_body(JudgeSettings(), [{"role": "user", "content": "q"}], {}, "A",
        ...                  "json_schema", None)
        >>> b["response_format"]["json_schema"]["name"], b["messages"][0]["content"]
        ('A', 'q')
    """
    kw = _fixed_part(s, schema, name, mode, max_tokens)
    kw["messages"] = messages if mode == "json_schema" else _with_hint(messages, schema)
    return kw


def _fixed_part(
    s: JudgeSettings, schema: dict[str, Any], name: str, mode: str, max_tokens: int | None
) -> dict[str, Any]:
    kw: dict[str, Any] = {"model": s.model, "temperature": s.temperature}
    if s.seed is not None:
        kw["seed"] = s.seed
    if max_tokens is not None:
        kw["max_tokens"] = max_tokens
    if mode == "json_schema":
        kw["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name(name), "schema": schema, "strict": True},
        }
    else:
        kw["response_format"] = {"type": "json_object"}
    return kw


def _json_object_hint(schema: dict[str, Any]) -> str:
    return load_prompt("json_object").render({"schema": json.dumps(schema, separators=(",", ":"))})[
        0
    ]["content"]


def _with_hint(
    messages: list[dict[str, str]], schema: dict[str, Any], hint: str | None = None
) -> list[dict[str, str]]:
    """``messages`` with the JSON-mode schema hint in the system message (copies, never edits)."""
    hint = hint if hint is not None else _json_object_hint(schema)
    msgs = [dict(m) for m in messages]
    if msgs and msgs[0]["role"] == "system":
        msgs[0]["content"] = msgs[0]["content"] + "\n" + hint
    else:
        msgs.insert(0, {"role": "system", "content": hint})
    return msgs


@dataclass(frozen=True)
class EncodedBody:
    """One request, encoded: ``content`` is the JSON body posted as bytes; ``messages`` the
    messages it carries (token counting and usage read them) and ``model`` its model."""

    content: bytes
    messages: list[dict[str, str]]
    model: str


class RequestBodies:
    """Request bodies encoded once per prompt version: everything but the messages (model,
    temperature, seed, token limit, the strict schema in ``response_format``, the JSON-mode hint)
    is serialized the first time a (settings, schema, mode) combination is asked and reused as
    bytes; each call only encodes its messages. The judge posts the bytes through openai
    (``content=``), so neither openai nor we walk or validate the body again.

    Schemas are keyed by identity: :func:`~nexagauge.judge.jsonschema.strict_schema` memoizes
    one dict per response model (the entry keeps it alive, so an id is never reused while cached).

    Example:
        >>> from nexagauge.settings import JudgeSettings
        >>> b = RequestBodies().encode(JudgeSettings(), [{"role": "user", "content": "q"}], {},
        ...                            "A", "json_schema", None)
        >>> json.loads(b.content) == request_body(JudgeSettings(), b.messages, {}, "A",
        ...                                       "json_schema", None)
        True
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max(1, max_entries)
        self._fixed: OrderedDict[tuple[Any, ...], tuple[dict[str, Any], bytes, str | None]] = (
            OrderedDict()
        )

    def encode(
        self,
        s: JudgeSettings,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        name: str,
        mode: str,
        max_tokens: int | None,
        extra: dict[str, Any] | None = None,
    ) -> EncodedBody:
        """The body of one attempt (see :func:`request_body`); ``extra`` keys (logprobs) are
        added to the fixed part."""
        extra_key = tuple(sorted(extra.items())) if extra else ()
        key = (s.model, s.temperature, s.seed, max_tokens, mode, name, id(schema), extra_key)
        hit = self._fixed.get(key)
        if hit is None:
            fixed = _fixed_part(s, schema, name, mode, max_tokens)
            fixed.update(extra or {})
            # '{"model": ...,' : the messages follow, then the closing brace
            prefix = json.dumps(fixed, ensure_ascii=False, separators=(",", ":"))[:-1]
            hint = None if mode == "json_schema" else _json_object_hint(schema)
            hit = (schema, (prefix + ',"messages":').encode(), hint)
            self._fixed[key] = hit
            if len(self._fixed) > self.max_entries:
                self._fixed.popitem(last=False)
        else:
            self._fixed.move_to_end(key)
        _, prefix_bytes, hint = hit
        msgs = messages if hint is None else _with_hint(messages, schema, hint)
        body = json.dumps(msgs, ensure_ascii=False, separators=(",", ":")).encode()
        return EncodedBody(prefix_bytes + body + b"}", msgs, s.model)


def schema_name(name: str) -> str:
    """A ``json_schema.name`` the API accepts (``[A-Za-z0-9_-]``, at most 64 characters)."""
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64] or "answer"


def completion(raw: bytes) -> dict[str, Any] | None:
    """The chat completion object of a 2xx body, or ``None`` when it is not a JSON object."""
    try:
        data = json.loads(raw)
    except (ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def answer_content(resp: dict[str, Any]) -> str | None:
    """The first choice's text; ``None`` when there is none (a refusal is logged)."""
    content: str | None = None
    msg = first_message(resp)
    if msg is not None:
        text = msg.get("content")
        content = text if isinstance(text, str) else None
        refusal = msg.get("refusal")
        if content is None and refusal:
            log.warning("judge refused to answer: %s", " ".join(str(refusal).split())[:200])
    return content


def first_message(resp: dict[str, Any]) -> dict[str, Any] | None:
    """The first choice's ``message`` object, if the completion has one."""
    choices = resp.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        return msg if isinstance(msg, dict) else None
    return None


def short_bytes(raw: bytes) -> str:
    """A response body on one line, at most 200 characters (for error messages)."""
    return " ".join(raw.decode("utf-8", "replace").split())[:200] or "empty body"


def answer_logprobs(resp: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Content token log-probs as plain dicts (``None`` when the endpoint sent none)."""
    try:
        content = resp["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, list) or not content:
        return None
    out: list[dict[str, Any]] = []
    for t in content:
        if not isinstance(t, dict):
            return None
        tops = t.get("top_logprobs") or []
        out.append(
            {
                "token": t.get("token"),
                "logprob": t.get("logprob"),
                "top_logprobs": [
                    {"token": x.get("token"), "logprob": x.get("logprob")}
                    for x in tops
                    if isinstance(x, dict)
                ],
            }
        )
    return out
