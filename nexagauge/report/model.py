"""The report's data: one run (summary, cases, problems) as plain dataclasses.

Built by :mod:`nexagauge.report.load` from a results directory; read by the comparison, the
charts and the template. Every string here was scrubbed when it was loaded.

Example:
    >>> s = ScoreView(name="grounding", score=0.25, passed=False, error=None)
    >>> CaseView(key="c1#0", case_id="c1", index=0, line=1, scores=(s,)).failing
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nexagauge.report.agent import AgentTotals, AgentView
from nexagauge.report.record import RecordText


@dataclass(frozen=True)
class ScoreView:
    """One metric of one case: its score (None: not computed, see ``error``) and pass/fail."""

    name: str
    score: float | None
    passed: bool | None
    error: str | None


@dataclass(frozen=True)
class ClaimView:
    """One claim as a judge saw it: verdict (ACCEPTED/REJECTED), label, reason, and for
    grounding the source that supports or contradicts it (its label, ``doc:kb-7`` /
    ``tool:lookup#c1``) and that source's passage: the labelled context document (cut), or the
    context sentence the local judge's reason quotes when the context has no labels."""

    text: str
    verdict: str
    label: str | None = None
    raw_score: float | None = None
    reason: str | None = None
    passage: str | None = None
    source: str | None = None
    #: the position of the source among the case's context documents (for a link to it)
    source_index: int | None = None


@dataclass(frozen=True)
class DetailView:
    """The per-item detail of one metric of a case: its claims (relevance, grounding, ...),
    other verdict lines (a redteam rubric's verdict and evidence) and the judge's reasoning."""

    metric: str
    node: str
    score: float | None
    claims: tuple[ClaimView, ...] = ()
    lines: tuple[str, ...] = ()
    reasoning: str | None = None


@dataclass(frozen=True)
class NodeNote:
    """A node of a case that did not produce a result: skipped or errored, and why."""

    node: str
    status: str
    reason: str


@dataclass(frozen=True)
class CaseView:
    """One evaluated case. ``key`` is unique in a run (the case id and its occurrence number), and
    matches the same case of another run for the comparison."""

    key: str
    case_id: str
    index: int | None
    line: int | None
    record: RecordText = field(default_factory=RecordText)
    scores: tuple[ScoreView, ...] = ()
    details: tuple[DetailView, ...] = ()
    notes: tuple[NodeNote, ...] = ()
    warnings: tuple[str, ...] = ()
    judge_model: str | None = None
    cost: float = 0.0
    #: the agent run (tool calls, signals, task completion); ``None`` for a case without one
    agent: AgentView | None = None

    @property
    def agent_faults(self) -> bool:
        """The agent run has a failed tool call, a loop or a call to an undeclared tool."""
        return self.agent is not None and self.agent.faulty

    @property
    def failing(self) -> bool:
        """At least one metric failed its threshold."""
        return any(s.passed is False for s in self.scores)

    def score_of(self, name: str) -> float | None:
        return next((s.score for s in self.scores if s.name == name), None)


@dataclass(frozen=True)
class MetricRow:
    """A metric of ``summary.json``: count of scores, mean, pass rate, errors, skipped."""

    metric: str
    node: str
    count: int
    mean: float | None
    median: float | None
    pass_rate: float | None
    errors: int
    skipped: int


@dataclass(frozen=True)
class Problem:
    """A line of errors.jsonl (bad record, warning, node error, input error) or a case file the
    report could not read."""

    kind: str
    reason: str
    line: int | None = None
    index: int | None = None
    case_id: str | None = None
    field: str | None = None
    node: str | None = None


@dataclass(frozen=True)
class Reason:
    """A skip or error reason of a node with the number of cases it applied to."""

    node: str
    reason: str
    count: int


@dataclass(frozen=True)
class RunView:
    """A whole run as the report shows it (``summary`` fields are an allow-list of
    ``summary.json``: no path, cache location or configuration value is carried)."""

    name: str
    target: str
    input_name: str
    started_at: str | None
    duration_s: float | None
    judge: str | None
    judge_models: tuple[str, ...]
    records: int
    cases_count: int
    failed_records: int
    warnings: int
    node_errors: int
    metric_errors: int
    input_error: str | None
    interrupted: bool
    cost: float
    input_tokens: float
    output_tokens: float
    metrics: tuple[MetricRow, ...]
    reasons: tuple[Reason, ...]
    cases: tuple[CaseView, ...]
    problems: tuple[Problem, ...]
    #: the agent totals; ``None`` when no case had an agent run
    agents: AgentTotals | None = None

    @property
    def failing_cases(self) -> int:
        return sum(c.failing for c in self.cases)
