"""Why something was not evaluated: the one bounded set of skip reason codes.

Every skip has a **code** from :class:`SkipReason` (low cardinality: a Prometheus ``reason`` label,
an attribute value on the evaluation span) and keeps its **human text** (the executor's reason,
e.g. ``"not eligible: no context"``) for people reading a trace. Two families share the set:

* a **metric** a case did not get (decided by the executor, :class:`NodeOutcome.skip`):
  ``not_eligible``, ``disabled``, ``no_judge``, ``judge_unsupported``, ``nothing_to_judge``,
  ``not_needed``, ``prerequisite_failed``;
* a whole **evaluation** the online service did not run: ``rate_limit``, ``budget_hour``,
  ``budget_day``, ``no_case``, ``content_missing``, ``invalid_case``, ``untrusted_rubric``, ``invalid_span``,
  ``invalid_ids``,
  ``extract_error``, and conversation turns not judged: ``duplicate_turn``, ``late_turn``,
  ``invalid_turn``.

``other`` is the code of a reason nobody classified (a test walks every node's skip texts, so it
does not appear in practice). :func:`skip_code` maps a reason (a code or a human text) to its
code; a metric skipped because a prerequisite was skipped gets the prerequisite's code (the root
cause: grounding skipped because claims had no judge is ``no_judge``).

Example:
    >>> skip_code("rate_limit"), skip_code("not eligible: no context")
    (<SkipReason.RATE_LIMIT: 'rate_limit'>, <SkipReason.NOT_ELIGIBLE: 'not_eligible'>)
    >>> skip_code("claims skipped: no judge configured").value
    'no_judge'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from nexagauge.graph.runtime import NO_JUDGE
from nexagauge.judge.base import NEEDS_LLM


class SkipReason(StrEnum):
    """The bounded skip reason codes (see module docstring)."""

    # -- a metric of an evaluated case --------------------------------------------------------
    NOT_ELIGIBLE = "not_eligible"
    DISABLED = "disabled"
    NO_JUDGE = "no_judge"
    JUDGE_UNSUPPORTED = "judge_unsupported"
    NOTHING_TO_JUDGE = "nothing_to_judge"
    NOT_NEEDED = "not_needed"
    PREREQUISITE_FAILED = "prerequisite_failed"
    TOOL_RESULTS_MISSING = "tool_results_missing"
    # -- a whole evaluation (online) -------------------------------------------------------
    RATE_LIMIT = "rate_limit"
    BUDGET_HOUR = "budget_hour"
    BUDGET_DAY = "budget_day"
    NO_CASE = "no_case"
    CONTENT_MISSING = "content_missing"
    INVALID_CASE = "invalid_case"
    UNTRUSTED_RUBRIC = "untrusted_rubric"
    INVALID_SPAN = "invalid_span"
    INVALID_IDS = "invalid_ids"
    EXTRACT_ERROR = "extract_error"
    DUPLICATE_TURN = "duplicate_turn"
    LATE_TURN = "late_turn"
    INVALID_TURN = "invalid_turn"
    # -- unclassified --------------------------------------------------------------------------
    OTHER = "other"


#: What each code means (docs/emit.md lists the same table).
DESCRIPTIONS: Final[dict[SkipReason, str]] = {
    SkipReason.NOT_ELIGIBLE: "the record lacks a field the metric needs (no context, no reference...)",
    SkipReason.DISABLED: "the metric is switched off in the record or the configuration",
    SkipReason.NO_JUDGE: "the metric needs a judge and none is configured",
    SkipReason.JUDGE_UNSUPPORTED: "the metric needs an LLM judge; the local judge cannot run it",
    SkipReason.NOTHING_TO_JUDGE: "nothing to judge (no claims in the output, no rubrics)",
    SkipReason.NOT_NEEDED: "no planned metric reads this node's output for this case",
    SkipReason.PREREQUISITE_FAILED: "a node the metric needs failed (its error is reported)",
    SkipReason.TOOL_RESULTS_MISSING: "the answer came after tool calls whose results were not "
    "captured (opt-in in the GenAI conventions): grounding would judge it against nothing",
    SkipReason.RATE_LIMIT: "the evaluations-per-second limit refused the evaluation",
    SkipReason.BUDGET_HOUR: "the hourly USD judge budget is spent",
    SkipReason.BUDGET_DAY: "the daily USD judge budget is spent",
    SkipReason.NO_CASE: "the trace holds no span that can be evaluated",
    SkipReason.CONTENT_MISSING: "the trace's LLM spans carry no content and the log records "
    "that bring it did not come within online.log_content_wait_s",
    SkipReason.INVALID_CASE: "an answer span could not be turned into a case",
    SkipReason.UNTRUSTED_RUBRIC: "a span wrote judge instructions (rubric text); only configured "
    "rubrics, selected by name, are used",
    SkipReason.INVALID_SPAN: "a span could not be read (bad bytes, nested too deeply); only it",
    SkipReason.INVALID_IDS: "a span without a valid trace/span id was dropped; only it",
    SkipReason.EXTRACT_ERROR: "reading a span failed (a bug; logged); only that span",
    SkipReason.DUPLICATE_TURN: "a conversation turn already judged",
    SkipReason.LATE_TURN: "a conversation turn too old for the conversation window",
    SkipReason.INVALID_TURN: "a conversation turn record that cannot be read",
    SkipReason.OTHER: "an unclassified reason",
}

#: Codes of metrics a case did not get (the executor's); the rest are whole-evaluation codes.
METRIC_SKIPS: Final = (
    SkipReason.NOT_ELIGIBLE,
    SkipReason.DISABLED,
    SkipReason.NO_JUDGE,
    SkipReason.JUDGE_UNSUPPORTED,
    SkipReason.NOTHING_TO_JUDGE,
    SkipReason.NOT_NEEDED,
    SkipReason.PREREQUISITE_FAILED,
    SkipReason.TOOL_RESULTS_MISSING,
)
EVALUATION_SKIPS: Final = tuple(
    r for r in SkipReason if r not in METRIC_SKIPS and r is not SkipReason.OTHER
)

_VALUES: Final = {r.value: r for r in SkipReason}
_PREREQUISITE = re.compile(r"^[a-z_]+ (skipped|failed): (.*)$", re.S)
#: "no <what>" texts of nodes that found nothing to judge (the rest of "no ..." is a missing field)
_NOTHING = ("no claims", "no redteam rubrics", "no verdicts")
#: how the grounding node's skip text for uncaptured tool results begins
TOOL_RESULTS_NOT_CAPTURED = "tool results not captured"


def skip_code(reason: str | None) -> SkipReason:
    """The code of a skip reason: a code itself, or the executor's / a node's human text.

    Example:
        >>> skip_code("redteam disabled").value, skip_code("no claims in the output").value
        ('disabled', 'nothing_to_judge')
    """
    if reason is None:
        return SkipReason.OTHER
    if isinstance(reason, SkipReason):
        return reason
    text = reason.strip()
    hit = _VALUES.get(text)
    if hit is not None:
        return hit
    m = _PREREQUISITE.match(text)
    if m is not None:
        return SkipReason.PREREQUISITE_FAILED if m.group(1) == "failed" else skip_code(m.group(2))
    if text == NO_JUDGE:
        return SkipReason.NO_JUDGE
    if text == NEEDS_LLM:
        return SkipReason.JUDGE_UNSUPPORTED
    if text.startswith(TOOL_RESULTS_NOT_CAPTURED):
        return SkipReason.TOOL_RESULTS_MISSING
    if text.startswith("not eligible"):
        return SkipReason.NOT_ELIGIBLE
    if text.startswith("not needed") or text.startswith("method "):
        return SkipReason.NOT_NEEDED
    if "disabled" in text:
        return SkipReason.DISABLED
    if text.startswith(_NOTHING):
        return SkipReason.NOTHING_TO_JUDGE
    if text.startswith("no "):
        return SkipReason.NOT_ELIGIBLE
    return SkipReason.OTHER


@dataclass
class SkipTally:
    """Evaluations or turns not run, counted by reason (the stages' plain counters: tests and
    benchmarks read them; Prometheus gets the same by code through the metrics).

    Example:
        >>> t = SkipTally()
        >>> t.skip("rate_limit"); t.skip("rate_limit", 2)
        >>> t.skipped
        {'rate_limit': 3}
    """

    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n
