"""Retrieved documents: any common shape -> ``{"id", "score", "content", "metadata"}``, and the
``gen_ai.retrieval.documents`` attribute of a call (cut, scrubbed in one pass, JSON).

Every string of a document is recorded text: the content, the id and each metadata key and value.
They are gated for secrets together with the call's input and output (one pass over all of them,
:meth:`nexagauge.sdk.scrubbing.Scrubber.gate`); only when that pass finds a candidate is each
string scrubbed on its own.

Example::

    >>> normalize_documents([{"id": 1, "text": "Paris", "score": 0.9}, "Lyon"])
    [{'id': '1', 'score': 0.9, 'content': 'Paris'}, {'content': 'Lyon'}]
"""

from __future__ import annotations

import types
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping
from json.encoder import encode_basestring as _enc  # C-accelerated, keeps non-ASCII
from typing import Any

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import SCRUB_MARGIN, Call
from nexagauge.sdk.scrub_gates import CleanMemo, plain_json_body
from nexagauge.sdk.serialize import dumps, safe_repr, to_jsonable, to_text

_DOC_CONTENT_KEYS = ("content", "text", "page_content", "document", "chunk", "body")
_DOC_ID_KEYS = ("id", "doc_id", "document_id", "node_id", "id_", "_id")
_DOC_SCORE_KEYS = ("score", "relevance_score", "similarity", "distance")
_EMPTY: frozenset[str] = frozenset()
_NO_BODIES: dict[str, str | None] = {}
_CONTENTS_HEAD = '[{"' + C.DOC_CONTENT + '":'
_CONTENTS_SEP = '},{"' + C.DOC_CONTENT + '":'
_CONTENTS_TAIL = "}]"
_PLAIN_SEP = '"' + _CONTENTS_SEP + '"'


def get_field(obj: Any, name: str) -> Any:
    """``obj[name]`` for a mapping, else ``obj.name``; None when absent or when reading raises."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _doc(item: Any) -> dict[str, Any]:
    """One retrieved document in any common shape -> ``{"id", "score", "content", "metadata"}``."""
    if isinstance(item, str):
        return {C.DOC_CONTENT: item}
    if isinstance(item, (bytes, bytearray)):
        return {C.DOC_CONTENT: to_text(item)}
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], (int, float)):
        scored = _doc(item[0])  # (Document, score) as returned by similarity_search_with_score
        scored.setdefault(C.DOC_SCORE, float(item[1]))
        return scored
    node = get_field(item, "node")  # LlamaIndex NodeWithScore
    if node is not None and not isinstance(item, Mapping):
        wrapped = _doc(node)
        score = get_field(item, "score")
        if isinstance(score, (int, float)):
            wrapped[C.DOC_SCORE] = float(score)
        return wrapped
    doc: dict[str, Any] = {}
    content: Any = None
    for key in _DOC_CONTENT_KEYS:
        content = get_field(item, key)
        if content is not None:
            break
    if content is None and not isinstance(item, Mapping):
        get_content = getattr(item, "get_content", None)
        if callable(get_content):
            content = get_content()
    for key in _DOC_ID_KEYS:
        ident = get_field(item, key)
        if isinstance(ident, (str, int)) and not isinstance(ident, bool):
            doc[C.DOC_ID] = str(ident)
            break
    for key in _DOC_SCORE_KEYS:
        score = get_field(item, key)
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            doc[C.DOC_SCORE] = float(score)
            break
    metadata = get_field(item, "metadata")
    if isinstance(metadata, Mapping) and metadata:
        doc[C.DOC_METADATA] = to_jsonable(metadata, scrub_keys=True)
    if content is None:
        content = item  # an unknown object: its serialized form is the content
    doc[C.DOC_CONTENT] = content if isinstance(content, str) else to_text(content, scrub_keys=True)
    return doc


def normalize_documents(docs: Any) -> list[dict[str, Any]]:
    """Documents in the shapes apps use -> list of ``{"id", "score", "content", "metadata"}``.

    Accepts a string, a mapping, an object (LangChain ``Document``, LlamaIndex node /
    ``NodeWithScore``, anything with ``text``/``content``/``page_content``), ``(doc, score)`` tuples,
    or a list of any of these. Never raises: an unreadable item becomes its safe repr.

    Example::

        >>> normalize_documents("Paris is the capital of France.")
        [{'content': 'Paris is the capital of France.'}]
    """
    if docs is None:
        return []
    if type(docs) is list:  # a list of strings: the common case, fast (one pass)
        plain = [{C.DOC_CONTENT: d} for d in docs if type(d) is str]
        if len(plain) == len(docs):
            return plain
    if isinstance(docs, (str, bytes, bytearray, Mapping)) or (
        isinstance(docs, tuple) and len(docs) == 2 and isinstance(docs[1], (int, float))
    ):
        items: Iterable[Any] = [docs]
    elif isinstance(docs, (list, tuple, set, frozenset)):
        items = docs
    elif isinstance(docs, (Generator, AsyncGenerator, types.GeneratorType)):
        return [{C.DOC_CONTENT: safe_repr(docs)}]  # never consume a user's iterator
    else:
        items = [docs]
    out = []
    for item in items:
        try:
            out.append(_doc(item))
        except Exception:
            out.append({C.DOC_CONTENT: safe_repr(item)})
    return out


def _strings(value: Any, out: list[str], limit: int) -> bool:
    """Append every string of JSON-compatible ``value`` (keys too); False if one exceeds ``limit``."""
    if isinstance(value, str):
        out.append(value)
        return len(value) <= limit
    ok = True
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(k)
            ok = _strings(v, out, limit) and len(k) <= limit and ok
    elif isinstance(value, list):
        for v in value:
            ok = _strings(v, out, limit) and ok
    return ok


def document_texts(
    docs: list[dict[str, Any]], out: list[str], limit: int, known: CleanMemo | None = None
) -> bool:
    """Append the recorded strings of ``docs`` to ``out`` (the contents in ``known`` -- already
    found clean -- left out); False when one exceeds ``limit``."""
    young, old = (known.young, known.old) if known is not None else (_EMPTY, _EMPTY)
    ok = True
    for doc in docs:
        if len(doc) == 1:  # content only (from a plain string)
            content = doc.get(C.DOC_CONTENT)
            if type(content) is str:
                if content not in young and content not in old:
                    out.append(content)
                    ok = ok and len(content) <= limit
                continue
        content = doc.get(C.DOC_CONTENT)
        if isinstance(content, str) and content not in young and content not in old:
            out.append(content)
            ok = ok and len(content) <= limit
        ident = doc.get(C.DOC_ID)
        if isinstance(ident, str):
            out.append(ident)
            ok = ok and len(ident) <= limit
        metadata = doc.get(C.DOC_METADATA)
        if metadata is not None:
            ok = _strings(metadata, out, limit) and ok
    return ok


def _cut(call: Call, value: Any) -> Any:
    """Metadata with every string longer than the limit cut (marked) before it is scrubbed."""
    limit = call.state.max_value_length
    if isinstance(value, str):
        if len(value) > limit:
            return call.truncate(
                C.GEN_AI_RETRIEVAL_DOCUMENTS, value[: limit + SCRUB_MARGIN], len(value), limit
            )
        return value
    if isinstance(value, dict):
        return {_cut(call, k): _cut(call, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(call, v) for v in value]
    return value


def all_str(items: list[Any] | tuple[Any, ...]) -> bool:
    """True when every item is a ``str`` (documents passed as plain strings)."""
    for item in items:  # noqa: SIM110 - a loop, not all(<generator>): no frame per call
        if type(item) is not str:
            return False
    return True


def _contents(docs: list[dict[str, Any]]) -> list[str] | None:
    """The contents of documents that are each only ``{"content": str}``, else None."""
    contents: list[str] = []
    for doc in docs:
        content = doc.get(C.DOC_CONTENT)
        if len(doc) != 1 or type(content) is not str:
            return None
        contents.append(content)
    return contents


def contents_json(
    contents: list[str] | tuple[str, ...],
    plain: bool = False,
    memo: CleanMemo | None = None,
    gated: list[str] | None = None,
    bodies: list[str | None] | None = None,
) -> str:
    """The JSON of documents that are only contents (documents passed as plain strings),
    ``[{"content": ...}, ...]``, written directly: what :func:`dumps` returns, without building an
    encoder per call.

    ``memo``: the scrubber's memo of clean texts; a content it knows is written with the JSON body
    kept there (a passage retrieved again is not escaped again), and the body of each content in
    ``gated`` (gated clean in this call) is kept there. ``bodies``: the caller already looked
    each content up in the memo (its body, or None: then it was gated clean in this call).
    ``plain``: no content gated now needs JSON escaping but for newlines and quotes (the secret
    gate said so)."""
    if bodies is None:
        young, old = (memo.young, memo.old) if memo is not None else (_NO_BODIES, _NO_BODIES)
        bodies = [young.get(c) or old.get(c) for c in contents]
        if gated is None:
            gated = []
    out: list[str] = []
    kept: list[str] = []  # gated now: remembered with their bodies, in one add
    kept_bodies: list[str | None] = []
    for content, body in zip(contents, bodies, strict=True):
        if body is None:
            fresh = gated is None or content in gated
            body = plain_json_body(content) if plain and fresh else _enc(content)[1:-1]
            if fresh:
                kept.append(content)
                kept_bodies.append(body)
        out.append(body)
    if kept and memo is not None:
        memo.add(kept, kept_bodies, all_new=len(kept) == len(out))
    return f'{_CONTENTS_HEAD}"{_PLAIN_SEP.join(out)}"{_CONTENTS_TAIL}'


def documents_attribute(
    call: Call,
    docs: list[dict[str, Any]],
    clean: bool,
    plain: bool = False,
    gated: list[str] | None = None,
) -> str:
    """``gen_ai.retrieval.documents`` JSON of the documents of ``call``.

    ``clean``: the caller gated every string of the documents (``document_texts``; ``gated``:
    those it gated now, the others were known clean) and found nothing to scrub, and none is
    longer than the limit; otherwise each string is cut and scrubbed. ``plain``: the gate also
    found nothing JSON must escape in ``gated`` but newlines and quotes.
    """
    if clean:  # every string was encoded to UTF-8 by the gate: no lone surrogate left
        scrubber = call.state.scrubber
        memo = scrubber.known_clean if scrubber.active else None  # nothing scanned: no memo
        contents = _contents(docs)
        if contents:
            return contents_json(contents, plain, memo, gated)
        if memo is not None and gated:  # found clean: a content retrieved again is not scanned
            memo.add(gated)
        return dumps(docs, utf8_checked=True)
    attr = C.GEN_AI_RETRIEVAL_DOCUMENTS
    scrubber = call.state.scrubber
    out: list[dict[str, Any]] = []
    for doc in docs:
        new = dict(doc)
        content = doc.get(C.DOC_CONTENT)
        if isinstance(content, str):
            new[C.DOC_CONTENT] = call.text(attr, content)
        ident = doc.get(C.DOC_ID)
        if isinstance(ident, str):
            new[C.DOC_ID] = call.text(attr, ident)
        metadata = doc.get(C.DOC_METADATA)
        if metadata is not None:
            new[C.DOC_METADATA], marks = scrubber.scrub_data(attr, _cut(call, metadata))
            call.mark(marks)
        out.append(new)
    return dumps(out)
