"""Rubrics that steer the judge: trusted ones come from the evaluator's configuration.

A G-Eval ``criteria``/``evaluation_steps``, a redteam ``rubric`` and a conversation
``rubric_prompt`` are *instructions* to the judge: they are written into its prompt as
instructions, not as data. So they must come from someone allowed to instruct the judge:

- the operator's configuration, the :class:`RubricLibrary` (``[rubrics.geval.<name>]`` and
  ``[rubrics.redteam.<name>]`` in ``nexagauge.toml``): a record or span names a rubric and gets its
  text from there (``{"geval": {"metrics": [{"name": "polite"}]}}``);
- a dataset file given to ``nexagauge run`` (its author is the operator): inline rubric text is
  accepted there (``inline=True``);
- never a span of a traced application (online, ``inline=False`` unless the operator sets
  ``online.span_rubrics = "trust"``): any app, or text a user got into a span, could otherwise
  rewrite the judge's instructions. Inline rubric text there is rejected, naming the field.

Example:
    >>> lib = RubricLibrary(geval={"polite": {"criteria": "Is the reply polite?"}})
    >>> select_rubrics("geval", {"metrics": [{"name": "polite"}]}, lib, inline=False, index=0)
    {'metrics': [{'criteria': 'Is the reply polite?', 'item_fields': ['output'], 'threshold': 0.5, 'name': 'polite'}]}
    >>> select_rubrics("geval", {"metrics": [{"name": "p", "criteria": "Score 1."}]}, lib,
    ...                inline=False, index=0)
    Traceback (most recent call last):
    ...
    nexagauge.schema.rubrics.UntrustedRubricError: record 0, field 'geval.metrics[0].criteria': judge instructions are not accepted from this source; name a rubric of the evaluator's configuration ([rubrics.geval.<name>]) instead
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, StrictFloat, StrictInt, StrictStr, model_validator

from nexagauge.schema.knobs import ItemField, Rubric, _Block, _output_only
from nexagauge.schema.rawvalue import RecordError


class UntrustedRubricError(RecordError):
    """Judge instructions from a source that may not give them (a span); names the field."""


#: per block, the keys of a metric entry that hold judge instructions
INSTRUCTION_KEYS: dict[str, tuple[str, ...]] = {
    "geval": ("criteria", "evaluation_steps"),
    "redteam": ("rubric",),
}


class GevalRubric(_Block):
    """A configured G-Eval metric: its criteria and/or steps, fields and pass mark."""

    criteria: StrictStr | None = None
    evaluation_steps: list[StrictStr] | None = None
    item_fields: list[ItemField] = Field(default_factory=_output_only, min_length=1)
    threshold: StrictFloat | StrictInt = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _criteria_or_steps(self) -> GevalRubric:
        if not self.criteria and not self.evaluation_steps:
            raise ValueError("a geval rubric needs 'criteria' or 'evaluation_steps'")
        return self


class RedteamRubric(_Block):
    """A configured redteam rubric and the fields it judges."""

    item_fields: list[ItemField] = Field(default_factory=_output_only, min_length=1)
    rubric: Rubric


class RubricLibrary(_Block):
    """The evaluator's own rubrics (``[rubrics]`` of the settings), selected by name."""

    geval: dict[StrictStr, GevalRubric] = Field(default_factory=dict)
    redteam: dict[StrictStr, RedteamRubric] = Field(default_factory=dict)


def select_rubrics(
    block: str,
    raw: Mapping[str, Any],
    library: RubricLibrary | None,
    *,
    inline: bool,
    index: int | None,
    case_id: str | None = None,
) -> Mapping[str, Any]:
    """``raw`` (a record's knob block) with named rubrics filled in from ``library``.

    A metric entry holding instruction text is kept as written when ``inline`` (a trusted source)
    and rejected otherwise; an entry with only a name (and harmless knobs such as
    ``item_fields``) takes the configured rubric of that name. An unknown name is an error
    naming the configured ones. Blocks without instruction text pass through unchanged.
    """
    if block == "conversation_relevance":
        if not inline and raw.get("rubric_prompt") is not None:
            raise UntrustedRubricError(index, f"{block}.rubric_prompt", _untrusted(block), case_id)
        return raw
    keys = INSTRUCTION_KEYS.get(block)
    metrics = raw.get("metrics")
    if keys is None or not isinstance(metrics, list):
        return raw
    configured: Mapping[str, _Block] = getattr(library or RubricLibrary(), block)
    out: list[Any] = []
    for i, entry in enumerate(metrics):
        if not isinstance(entry, Mapping):
            out.append(entry)  # the block's validation names the problem
            continue
        given = [k for k in keys if entry.get(k) is not None]
        if given:
            if not inline:
                field = f"{block}.metrics[{i}].{given[0]}"
                raise UntrustedRubricError(index, field, _untrusted(block), case_id)
            out.append(entry)
            continue
        name = entry.get("name")
        rubric = configured.get(name) if isinstance(name, str) else None
        if rubric is None:
            names = ", ".join(sorted(configured)) or "none"
            raise RecordError(
                index,
                f"{block}.metrics[{i}].name",
                f"{block} metric {name!r} has no {' or '.join(keys)} and no rubric of that "
                f"name is configured ([rubrics.{block}.<name>]; configured: {names})",
                case_id,
            )
        out.append({**rubric.model_dump(mode="json", exclude_none=True), **entry})
    return {**raw, "metrics": out}


def _untrusted(block: str) -> str:
    where = f"[rubrics.{block}.<name>]" if block in INSTRUCTION_KEYS else "its own settings"
    return (
        "judge instructions are not accepted from this source; name a rubric of the "
        f"evaluator's configuration ({where}) instead"
    )
