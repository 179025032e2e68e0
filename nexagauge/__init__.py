"""nexa-gauge: evaluate LLM apps in production from their OpenTelemetry traces.

The SDK (what an app imports) is light: ``import nexagauge`` loads only the standard library and
OpenTelemetry. Evaluator symbols (``EvalCase``, ``Settings``...) are loaded lazily on first access
through the module ``__getattr__`` below, so apps never pay for pydantic, aiokafka or openai.

Example::

    import nexagauge

    nexagauge.configure(service_name="chat-api")

    @nexagauge.trace
    def answer(question: str) -> str: ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nexagauge.sdk import (
    SDK_VERSION,
    ScrubRule,
    add_context,
    configure,
    current_session,
    force_flush,
    mark_turn_end,
    normalize_documents,
    retrieval,
    retriever,
    session,
    set_eval_knobs,
    shutdown,
    tool,
    trace,
)

__version__ = SDK_VERSION

# ------------------------------------------------------------------------------------------------
# LAZY EVALUATOR EXPORTS (hook for the evaluator side; add entries here, never eager imports).
# name -> "module:attribute"; resolved on first attribute access and cached in the module globals.
_LAZY: dict[str, str] = {
    # cases and results
    "EvalCase": "nexagauge.schema.case:EvalCase",
    "parse_record": "nexagauge.schema.case:parse_record",
    "RecordError": "nexagauge.schema.case:RecordError",
    "MetricResult": "nexagauge.schema.results:MetricResult",
    "CostEstimate": "nexagauge.schema.results:CostEstimate",
    # configuration
    "Settings": "nexagauge.settings:Settings",
    "load_settings": "nexagauge.settings:load_settings",
    # the metric graph (offline and online share it)
    "evaluate": "nexagauge.graph.executor:evaluate",
    "Executor": "nexagauge.graph.executor:Executor",
    "plan": "nexagauge.graph.planner:plan",
    "Runtime": "nexagauge.graph.runtime:Runtime",
    # the online evaluator (`nexagauge serve`)
    "serve": "nexagauge.cli.serve:serve",
    "OnlineService": "nexagauge.online.service:OnlineService",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'nexagauge' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # static type checkers see the lazy names
    from nexagauge.cli.serve import serve
    from nexagauge.graph.executor import Executor, evaluate
    from nexagauge.graph.planner import plan
    from nexagauge.graph.runtime import Runtime
    from nexagauge.online.service import OnlineService
    from nexagauge.schema.case import EvalCase, RecordError, parse_record
    from nexagauge.schema.results import CostEstimate, MetricResult
    from nexagauge.settings import Settings, load_settings
# ------------------------------------------------------------------------------------------------

__all__ = [
    "CostEstimate",
    "EvalCase",
    "Executor",
    "MetricResult",
    "OnlineService",
    "RecordError",
    "Runtime",
    "ScrubRule",
    "Settings",
    "__version__",
    "add_context",
    "configure",
    "current_session",
    "evaluate",
    "force_flush",
    "load_settings",
    "mark_turn_end",
    "normalize_documents",
    "parse_record",
    "plan",
    "retrieval",
    "retriever",
    "serve",
    "session",
    "set_eval_knobs",
    "shutdown",
    "tool",
    "trace",
]
