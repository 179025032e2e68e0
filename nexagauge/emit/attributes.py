"""The ``gen_ai.evaluation.result`` attributes of one metric: one builder for both ways a result
goes out (a log-based event, :mod:`.events`, or a span event of the evaluation span, :mod:`.spans`),
and the bound every text attribute of the evaluation gets.

Example:
    >>> from nexagauge.emit.view import MetricView
    >>> result_attributes(MetricView("answer_relevancy", "relevance", 0.8, passed=True))["gen_ai.evaluation.score.label"]
    'pass'
"""

from __future__ import annotations

from typing import Any

from nexagauge.emit.view import MetricView
from nexagauge.sdk import conventions as C

_ELLIPSIS = "…"
#: most source labels one result record lists per kind (supported / contradicted)
MAX_SOURCES = 32


def bounded(text: str | None, limit: int) -> str | None:
    """``text`` cut to at most ``limit`` characters (an ellipsis marks the cut).

    Example:
        >>> bounded("abcdef", 4), bounded("abc", 4), bounded("abc", 0)
        ('abc…', 'abc', None)
    """
    if text is None or limit <= 0:
        return None
    return text if len(text) <= limit else text[: max(0, limit - 1)] + _ELLIPSIS


def result_attributes(
    m: MetricView, *, include_explanation: bool = True, max_chars: int = 1000
) -> dict[str, Any]:
    """The ``gen_ai.evaluation.result`` attributes of one metric (one definition for the log
    event and the span event).

    Example:
        >>> result_attributes(MetricView("grounding", "grounding", None, error="TimeoutError: x"))
        {'gen_ai.evaluation.name': 'grounding', 'gen_ai.evaluation.explanation': 'TimeoutError: x', 'error.type': 'TimeoutError'}
    """
    attrs: dict[str, Any] = {C.GEN_AI_EVALUATION_NAME: m.name}
    if m.score is not None:
        attrs[C.GEN_AI_EVALUATION_SCORE_VALUE] = float(m.score)
    if m.label is not None:
        attrs[C.GEN_AI_EVALUATION_SCORE_LABEL] = m.label
    why = m.explanation if m.score is not None else (m.explanation or m.error)
    if include_explanation or m.score is None:
        text = bounded(why, max_chars)
        if text:
            attrs[C.GEN_AI_EVALUATION_EXPLANATION] = text
    if m.failed:
        attrs[C.ERROR_TYPE] = m.error_type or "_OTHER"
    if m.supported_by:
        attrs[C.NG_EVALUATION_SUPPORTED_BY] = list(m.supported_by[:MAX_SOURCES])
    if m.contradicted_by:
        attrs[C.NG_EVALUATION_CONTRADICTED_BY] = list(m.contradicted_by[:MAX_SOURCES])
    return attrs
