"""What the emitter reads from a :class:`~nexagauge.graph.executor.CaseResult`: one flat view.

Both outputs (Prometheus and evaluation spans) need the same facts per evaluated span: each
metric's score or error, its pass threshold, its claim verdict counts and explanation, which metric
nodes were skipped and why, and what each node cost. :func:`evaluation_view` extracts them once.

Sources, in order of preference:

* the ``eval`` node's :class:`~nexagauge.nodes.eval.EvalSummary` when it ran (it already holds each
  metric's threshold and pass/fail, and turns a failed metric node into a failed metric);
* otherwise each metric node's own ``*Metrics`` output (thresholds from ``RunSettings``, the case's
  GEval / conversation blocks), with a failed node reported as one failed metric named after it.

Verdict entries in a metric's ``result`` list may be :class:`~nexagauge.schema.results.ClaimVerdict`
models or plain dicts with a ``"verdict"`` key; a trailing ``{"reasoning": "..."}`` entry is the
metric's explanation.

Example:
    >>> from nexagauge.graph.executor import CaseResult
    >>> v = evaluation_view(CaseResult(index=0, case_id="c", error="record 0: output: missing"))
    >>> v.status, v.error_type
    ('failed', 'RecordError')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from nexagauge.graph.executor import CaseResult
from nexagauge.graph.skips import DESCRIPTIONS, SkipReason, skip_code
from nexagauge.schema.results import CostEstimate, NodeMetrics

#: ``error.type`` when the error message does not start with an exception class name
#: (the OpenTelemetry convention's fallback value).
OTHER_ERROR: Literal["_OTHER"] = "_OTHER"
_ERROR_CLASS = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?::|$)")


@dataclass(frozen=True)
class MetricView:
    """One metric of one evaluated span."""

    name: str  # unique within the evaluation (``node.metric`` on a clash, as in the report)
    node: str
    score: float | None
    error: str | None = None
    threshold: float | None = None
    passed: bool | None = None
    accepted: int = 0
    rejected: int = 0
    explanation: str | None = None
    #: context sources (``tool:lookup_order#call_1``, ``doc:kb-7``) that supported / contradicted
    #: a claim of a grounding metric, de-duplicated, in claim order
    supported_by: tuple[str, ...] = ()
    contradicted_by: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.score is None

    @property
    def error_type(self) -> str | None:
        """Low-cardinality error class (``TimeoutError``, ``_OTHER``), ``None`` when scored."""
        return error_type(self.error) if self.failed else None

    @property
    def label(self) -> str | None:
        """``pass``/``fail`` against the threshold, else the ACCEPTED ratio, else ``None``."""
        if self.score is None:
            return None
        if self.passed is not None:
            return "pass" if self.passed else "fail"
        if self.accepted + self.rejected:
            return f"{self.accepted}/{self.accepted + self.rejected} ACCEPTED"
        return None


@dataclass(frozen=True)
class SkippedMetric:
    """A metric node the case did not get: the bounded code and the human text."""

    code: SkipReason
    text: str


@dataclass
class EvaluationView:
    """Everything emitted for one evaluated span."""

    metrics: list[MetricView] = field(default_factory=list)
    #: planned metric node -> why it did not run (not eligible, no judge, disabled ...)
    skipped: dict[str, SkippedMetric] = field(default_factory=dict)
    #: node -> its own judge spend now (zero for cache hits; aggregates ``eval``/``report`` only
    #: restate the others' cost and are never listed)
    node_costs: dict[str, CostEstimate] = field(default_factory=dict)
    #: nodes served from the node cache that had cost judge calls when first computed
    cached_judge_nodes: list[str] = field(default_factory=list)
    #: the record error that prevented evaluation (no metrics then)
    case_error: str | None = None
    #: ``llm``/``local``/``None`` as reported by the eval summary
    judge: str | None = None
    #: the judge variant as reported by the eval summary (the local judge: embedder, lexicon,
    #: calibration)
    judge_model: str | None = None
    #: total judge spend now
    cost: CostEstimate = field(default_factory=CostEstimate)
    #: longest node run time (a lower bound of the evaluation's duration)
    elapsed_s: float = 0.0

    @property
    def status(self) -> Literal["ok", "failed"]:
        """``failed`` when the case could not be built or any metric has no score."""
        if self.case_error is not None or any(m.failed for m in self.metrics):
            return "failed"
        return "ok"

    @property
    def error_type(self) -> str | None:
        if self.case_error is not None:
            return "RecordError"
        failed = [m for m in self.metrics if m.failed]
        return failed[0].error_type if failed else None


def error_type(message: str | None) -> str:
    """The exception class at the start of an error message, else ``_OTHER``.

    Example:
        >>> error_type("TimeoutError: judge took 60s"), error_type("no verdicts")
        ('TimeoutError', '_OTHER')
    """
    if not message:
        return OTHER_ERROR
    m = _ERROR_CLASS.match(message.strip())
    if m is None:
        return OTHER_ERROR
    name = m.group(1)
    # a lone lower-case word ("timeout", "no") is prose, not a class name
    return name if name[:1].isupper() or "." in name else OTHER_ERROR


def verdict_counts(result: list[Any]) -> tuple[int, int]:
    """(ACCEPTED, REJECTED) counts of a metric's ``result`` list (models or dicts)."""
    acc = rej = 0
    for item in result:
        v = item.get("verdict") if isinstance(item, Mapping) else getattr(item, "verdict", None)
        if v == "ACCEPTED":
            acc += 1
        elif v == "REJECTED":
            rej += 1
    return acc, rej


def claim_sources(result: list[Any], label: str) -> tuple[str, ...]:
    """The ``source`` of every claim verdict with ``label`` (``supported``, ``contradicted``),
    de-duplicated in claim order."""
    out = [
        x["source"]
        for x in result
        if isinstance(x, Mapping) and x.get("label") == label and isinstance(x.get("source"), str)
    ]
    return tuple(dict.fromkeys(out))


def explanation_of(result: list[Any]) -> str | None:
    """The reasoning of a metric (its trailing ``{"reasoning": ...}`` entry), if any."""
    for item in reversed(result):
        if isinstance(item, Mapping) and isinstance(item.get("reasoning"), str):
            text: str = item["reasoning"].strip()
            return text or None
    return None


@cache
def _metric_nodes() -> frozenset[str]:
    from nexagauge.graph.topology import load_topology

    return frozenset(load_topology().metric_nodes)


def _threshold(result: CaseResult, node: str, metric: str, run: Any) -> float | None:
    case = result.case
    if case is not None and node == "geval" and case.geval is not None:
        for d in case.geval.metrics:
            if d.name == metric:
                return float(d.threshold)
    if case is not None and node == "conversation_relevance":
        return float(case.conversation_relevance.threshold)
    if run is None:
        return None
    return float(run.thresholds.get(metric, run.default_threshold))


def evaluation_view(result: CaseResult, run: Any = None) -> EvaluationView:
    """Flatten a case result for emission (see module docstring).

    ``run`` is the ``RunSettings`` used for thresholds when the ``eval`` node did not run.
    """
    view = EvaluationView()
    if result.error is not None:
        view.case_error = result.error
        return view
    metric_nodes = _metric_nodes()
    outputs: dict[str, NodeMetrics] = {}
    for name, o in result.outcomes.items():
        view.elapsed_s = max(view.elapsed_s, o.elapsed_s)
        c = o.spend  # aggregates (eval, report) restate the others' cost: never counted
        if c.cost or c.input_tokens or c.output_tokens:
            view.node_costs[name] = c
        if (
            o.cached
            and o.original_cost is not None
            and (
                o.original_cost.cost
                or o.original_cost.input_tokens
                or o.original_cost.output_tokens
            )
        ):
            view.cached_judge_nodes.append(name)
        if name in metric_nodes and o.status == "skipped":
            code = o.skip or skip_code(o.reason)
            view.skipped[name] = SkippedMetric(code, o.reason or DESCRIPTIONS[code])
        if isinstance(o.output, NodeMetrics) and o.status == "ok":
            outputs[name] = o.output
    view.cost = CostEstimate.total(list(view.node_costs.values()))

    def details(node: str, metric: str) -> list[Any]:
        out = outputs.get(node)
        for m in out.metrics if out is not None else ():
            if m.name == metric:
                return m.result
        return []

    seen: set[str] = set()

    def unique(node: str, metric: str) -> str:
        key = metric if metric not in seen else f"{node}.{metric}"
        seen.add(key)
        return key

    summary = _summary(result)
    if summary is not None:
        view.judge = summary.judge
        view.judge_model = summary.judge_model
        for em in summary.metrics:
            res = details(em.node, em.name)
            acc, rej = verdict_counts(res)
            view.metrics.append(
                MetricView(
                    name=unique(em.node, em.name),
                    node=em.node,
                    score=em.score,
                    error=em.error if em.score is None else None,
                    threshold=em.threshold,
                    passed=em.passed,
                    accepted=acc,
                    rejected=rej,
                    explanation=explanation_of(res),
                    supported_by=claim_sources(res, "supported"),
                    contradicted_by=claim_sources(res, "contradicted"),
                )
            )
        return view

    for name, o in result.outcomes.items():
        if name not in metric_nodes:
            continue
        if o.status == "error":
            view.metrics.append(
                MetricView(
                    name=unique(name, name), node=name, score=None, error=o.reason or "error"
                )
            )
            continue
        out = outputs.get(name)
        if out is None:
            continue
        for m in out.metrics:
            th = _threshold(result, name, m.name, run)
            acc, rej = verdict_counts(m.result)
            view.metrics.append(
                MetricView(
                    name=unique(name, m.name),
                    node=name,
                    score=m.score,
                    error=m.error if m.score is None else None,
                    threshold=th,
                    passed=None if m.score is None or th is None else m.score >= th,
                    accepted=acc,
                    rejected=rej,
                    explanation=explanation_of(m.result),
                    supported_by=claim_sources(m.result, "supported"),
                    contradicted_by=claim_sources(m.result, "contradicted"),
                )
            )
    return view


def _summary(result: CaseResult) -> Any:
    from nexagauge.nodes.eval import EvalSummary

    o = result.outcomes.get("eval")
    if o is not None and o.status == "ok" and isinstance(o.output, EvalSummary):
        return o.output
    return None
