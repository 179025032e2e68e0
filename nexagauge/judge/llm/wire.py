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
    ``json_object``) with the node's model, temperature and seed."""
    kw: dict[str, Any] = {"model": s.model, "temperature": s.temperature}
    if s.seed is not None:
        kw["seed"] = s.seed
    if max_tokens is not None:
        kw["max_tokens"] = max_tokens
    if mode == "json_schema":
        kw["messages"] = messages
        kw["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name(name), "schema": schema, "strict": True},
        }
    else:
        hint = load_prompt("json_object").render(
            {"schema": json.dumps(schema, separators=(",", ":"))}
        )[0]["content"]
        msgs = [dict(m) for m in messages]
        if msgs and msgs[0]["role"] == "system":
            msgs[0]["content"] = msgs[0]["content"] + "\n" + hint
        else:
            msgs.insert(0, {"role": "system", "content": hint})
        kw["messages"] = msgs
        kw["response_format"] = {"type": "json_object"}
    return kw


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
