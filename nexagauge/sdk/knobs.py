"""Evaluation knobs: per-function (decorator) or per-call (``set_eval_knobs``) metric settings.

Each block of the data schema (relevance, grounding, geval, redteam) is validated when it is given
-- a malformed block is a programming error named by block and field -- and recorded as
``nexagauge.eval.<block>`` JSON, its strings scrubbed like any recorded text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexagauge.sdk import conventions as C
from nexagauge.sdk.serialize import dumps, to_jsonable

KNOB_BLOCKS = {
    "relevance": C.NG_EVAL_RELEVANCE,
    "grounding": C.NG_EVAL_GROUNDING,
    "geval": C.NG_EVAL_GEVAL,
    "redteam": C.NG_EVAL_REDTEAM,
}
SCORING_MODES = ("binary_yes_no", "scale_1_5")


def _validate_knobs(block: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{block}: evaluation knobs must be a mapping, got {type(value).__name__}")
    mode = value.get("scoring_mode")
    if mode is not None and mode not in SCORING_MODES:
        raise ValueError(f"{block}.scoring_mode must be one of {SCORING_MODES}, got {mode!r}")
    reasoning = value.get("include_reasoning")
    if reasoning is not None and not isinstance(reasoning, bool):
        raise ValueError(f"{block}.include_reasoning must be a bool, got {reasoning!r}")
    metrics = value.get("metrics")
    if metrics is not None:
        if block not in ("geval", "redteam"):
            raise ValueError(f"{block} takes no metrics (only geval and redteam do)")
        if not isinstance(metrics, (list, tuple)):
            raise ValueError(f"{block}.metrics must be a list, got {type(metrics).__name__}")
        for i, m in enumerate(metrics):
            if not isinstance(m, Mapping) or not isinstance(m.get("name"), str) or not m["name"]:
                raise ValueError(f"{block}.metrics[{i}] must be a mapping with a non-empty name")
    data = to_jsonable(value)
    assert isinstance(data, dict)
    return data


def knob_attributes(
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Validate knob blocks and return their span attributes (``nexagauge.eval.<block>`` -> JSON).

    Raises ``TypeError``/``ValueError`` naming the block and field for a malformed block.

    Example::

        >>> knob_attributes(relevance={"scoring_mode": "scale_1_5"})
        {'nexagauge.eval.relevance': '{"scoring_mode":"scale_1_5"}'}
    """
    blocks = knob_blocks(relevance, grounding, geval, redteam)
    return {attribute: dumps(data) for attribute, data in blocks.items()}


def knob_blocks(
    relevance: Mapping[str, Any] | None = None,
    grounding: Mapping[str, Any] | None = None,
    geval: Mapping[str, Any] | None = None,
    redteam: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Validated knob blocks as data (``nexagauge.eval.<block>`` -> block), not yet JSON.

    Kept as data so their strings can be scrubbed before they are encoded.

    Example::

        >>> knob_blocks(grounding={"include_reasoning": True})
        {'nexagauge.eval.grounding': {'include_reasoning': True}}
    """
    out: dict[str, dict[str, Any]] = {}
    for block, value in (
        ("relevance", relevance),
        ("grounding", grounding),
        ("geval", geval),
        ("redteam", redteam),
    ):
        if value is not None:
            out[KNOB_BLOCKS[block]] = _validate_knobs(block, value)
    return out
