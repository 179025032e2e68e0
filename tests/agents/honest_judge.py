"""A loopback judge that grounds honestly: it checks each claim against the context it is sent.

A claim is supported only if every id and number in it (tokens holding a digit: ``A-1042``,
``2026-12-03``, ``30``) and most (>= 60 %) of its other content words are in the context of that
very request; a claim naming an id the context holds but not supported by it is
``contradicted`` (the context speaks of the same order and says otherwise); anything else is
``no``. Scale mode maps these to 5 / 0 / 1. Other calls (claim extraction, relevance,
conversation relevance, ...) fall through to the server's smart mode. Used as the ``handler``
of :class:`support.openai_server.OpenAIServer`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from support.openai_server import Reply, Request

_TAGGED = re.compile(r"<(x[0-9a-f]{8})(?: i=(\d+))?>\n?(.*?)\n?</\1>", re.S)
_ID = re.compile(r"\w[\w.\-/:]*\w|\w")
_WORD = re.compile(r"[a-z]+")
_STOPWORDS = """a an the and or but of to in on at by for with from is are was were be been has
have had it its this that as if so not no will would can could should may your you we our their
i my me"""
_STOP = frozenset(_STOPWORDS.split())


def _ids(t: str) -> set[str]:
    return {x for x in _ID.findall(t.lower()) if any(c.isdigit() for c in x)}


def _words(t: str) -> set[str]:
    return {w for w in _WORD.findall(t.lower()) if w not in _STOP and len(w) > 1}


def verdict(claim: str, context: str) -> str:
    """``yes`` / ``contradicted`` / ``no`` for one claim against one context."""
    cid, ctx_ids = _ids(claim), _ids(context)
    cw, ctx_w = _words(claim), _words(context)
    words_ok = not cw or len(cw & ctx_w) / len(cw) >= 0.6
    if cid <= ctx_ids and words_ok:
        return "yes"
    return "contradicted" if cid & ctx_ids else "no"


def grounding_reply(req: Request) -> Reply | None:
    """The verdicts of a grounding request (``None`` for any other request)."""
    system = next((str(m.get("content")) for m in req.messages if m.get("role") == "system"), "")
    schema = req.schema or {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    if "verdicts" not in props or "supported by the context" not in system:
        return None
    user = "\n".join(str(m.get("content")) for m in req.messages if m.get("role") == "user")
    blocks = [m.group(3) for m in _TAGGED.finditer(user)]
    context, claims_block = [*blocks, "", ""][:2]
    claims = [re.sub(r"^\d+\.\s*", "", ln) for ln in claims_block.splitlines() if ln.strip()]
    scale = props["verdicts"].get("items", {}).get("type") == "integer"
    out: list[Any] = []
    for c in claims:
        v = verdict(c, context)
        out.append({"yes": 5, "contradicted": 0, "no": 1}[v] if scale else v)
    ans: dict[str, Any] = {"verdicts": out}
    if "reasoning" in props:
        ans["reasoning"] = "Checked ids, numbers and words against the context."
    return Reply(content=json.dumps(ans))
