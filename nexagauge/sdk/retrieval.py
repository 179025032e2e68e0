"""``nexagauge.retrieval``: a retrieval span around inline code (when there is no function to
decorate with ``@nexagauge.retriever``).

Per-name facts are cached in a bounded LRU (:data:`MAX_NAMES` names): an app that builds names
from data (``retrieval(name=f"search-{tenant}")``) cannot grow the process without bound.
"""

from __future__ import annotations

import functools
from typing import Any

from opentelemetry import context as otel_context

from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import Call, Meta
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk.decorator import build_meta
from nexagauge.sdk.documents import normalize_documents
from nexagauge.sdk.spans import end_error, end_ok, start

#: distinct ``name=`` values whose facts are kept (least recently used dropped first)
MAX_NAMES = 256


def _retrieval_signature(query: str | None = None) -> None:
    """Signature template of ``nexagauge.retrieval`` (its input is the query)."""


@functools.lru_cache(maxsize=MAX_NAMES)
def retrieval_meta(name: str) -> Meta:
    """The facts of the retrieval spans named ``name`` (cached, bounded)."""
    return build_meta(
        _retrieval_signature,
        name=name,
        input_arg="query",
        context_arg=False,
        capture_input=True,
        capture_output=False,
        operation=C.OPERATION_RETRIEVAL,
        turn_end=False,
        attributes=None,
        knobs={},
        stream=False,
    )


class retrieval:
    """A retrieval span around inline code (when the retrieval is not a function to decorate).

    Documents passed to :meth:`add` are recorded on the retrieval span and added to the enclosing
    traced call's context, exactly like :func:`nexagauge.retriever`. Works with ``with`` and
    ``async with``; an exception inside the block is recorded on the span and propagates unchanged.

    Example::

        with nexagauge.retrieval(query=question) as r:
            hits = index.search(question, k=4)
            r.add(hits)
    """

    __slots__ = ("_call", "_meta", "_query", "_token")

    def __init__(self, query: str | None = None, *, name: str = "retrieval") -> None:
        self._meta = retrieval_meta(name if isinstance(name, str) else str(name))
        self._query = query
        self._call: Call | None = None
        self._token: Any = None

    def __enter__(self) -> retrieval:
        try:
            self._call = start(self._meta, (self._query,), {})
            if self._call is not None:
                self._token = otel_context.attach(self._call.ctx)
        except Exception as exc:
            internal_error("start retrieval span", exc)
        return self

    def add(self, docs: Any) -> None:
        """Record retrieved documents (any shape :func:`normalize_documents` accepts)."""
        try:
            call = self._call
            if call is None or not call.recording or not call.state.capture_content:
                return
            normalized = normalize_documents(docs)
            call.add_docs(normalized)
            if call.parent is not None:
                call.parent.add_docs(normalized)
        except Exception as exc:
            internal_error("retrieval.add", exc)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        call, self._call = self._call, None
        if call is None:
            return
        if self._token is not None:
            otel_context.detach(self._token)
            self._token = None
        if exc is not None:
            end_error(call, exc)
        else:
            end_ok(call, None, capture=False)

    async def __aenter__(self) -> retrieval:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)
