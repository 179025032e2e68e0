"""The nexa-gauge SDK: instrument an LLM app so the online evaluator can score it from its traces.

Public API (re-exported by ``nexagauge``): :func:`configure`, :func:`trace`, :func:`retriever`,
:func:`tool`, :func:`add_context`, :class:`session`, :func:`set_eval_knobs`, :func:`mark_turn_end`,
:func:`force_flush`, :func:`shutdown`. Attribute names: :mod:`nexagauge.sdk.conventions`.
"""

from __future__ import annotations

from nexagauge.sdk._version import SDK_VERSION
from nexagauge.sdk.config import configure, force_flush, shutdown
from nexagauge.sdk.decorator import retriever, trace
from nexagauge.sdk.documents import normalize_documents
from nexagauge.sdk.retrieval import retrieval
from nexagauge.sdk.scrubbing import ScrubRule
from nexagauge.sdk.session import current_session, session
from nexagauge.sdk.tool import tool
from nexagauge.sdk.tracing import add_context, mark_turn_end, set_eval_knobs

__all__ = [
    "SDK_VERSION",
    "ScrubRule",
    "add_context",
    "configure",
    "current_session",
    "force_flush",
    "mark_turn_end",
    "normalize_documents",
    "retrieval",
    "retriever",
    "session",
    "set_eval_knobs",
    "shutdown",
    "tool",
    "trace",
]
