"""Judging one conversation turn and building what the emitter receives.

The conversation stage (:mod:`nexagauge.online.conversations.stage`) decides *when* a turn is judged;
this module decides *what* a judged turn is: the windows it adds judged in one call
(:func:`~nexagauge.nodes.conversation_relevance.judge_windows`), the running score updated in the
conversation's state, a ``conversation_relevance`` :class:`~nexagauge.schema.results.MetricResult`
whose explanation names each window and its verdict, and the evaluation target/result pair the
emitter writes under the turn's span (:func:`turn_result`).
"""

from __future__ import annotations

from typing import Any

from nexagauge.emit.target import EvaluationTarget
from nexagauge.nodes.conversation_relevance import (
    CATEGORY,
    METRIC,
    judge_windows,
    score_windows,
    window_score,
)
from nexagauge.online.conversations.state import Added, ConversationState
from nexagauge.online.conversations.turns import TurnRecord
from nexagauge.schema.case import ConversationRelevanceConfig, EvalCase, ScoringMode
from nexagauge.schema.results import CostEstimate, MetricResult


async def judge_turn(
    judge: Any, cfg: ConversationRelevanceConfig, state: ConversationState, added: Added
) -> tuple[MetricResult, CostEstimate, bool]:
    """Judge the windows ``added`` brings; (metric result, judge cost, judged ok).

    A judge failure gives a failed metric (no score) and leaves the running score unchanged.
    """
    scale = cfg.scoring_mode is ScoringMode.SCALE
    verdicts, cost, error = await judge_windows(
        judge,
        added.tail,
        added.windows,
        scale=scale,
        reasoning=cfg.include_reasoning,
        rubric=cfg.rubric_prompt,
    )
    meta: dict[str, Any] = {
        "judge": judge.kind,
        "model": judge.model,
        "window_size": cfg.window_size,
        "turn_index": added.index,
        "online": "incremental",
    }
    if verdicts is None:
        failed = MetricResult.failed(
            METRIC, CATEGORY, error or "no verdicts", windows=state.windows, **meta
        )
        return failed, cost, False
    return scored(state, added, verdicts, scale, meta), cost, True


def scored(
    state: ConversationState,
    added: Added,
    verdicts: list[dict[str, Any]],
    scale: bool,
    meta: dict[str, Any],
) -> MetricResult:
    """Record the window verdicts in ``state``; the metric carries the running score."""
    _, rows = score_windows(added.tail, added.windows, verdicts, scale)
    running = state.record([window_score(v, scale)[0] for v in verdicts])
    assert running is not None
    words = []
    for r in rows:
        s, e = r["window"]
        text = f"turn {e + 1} (window turns {s + 1}-{e + 1}): {r['verdict']}"
        if r.get("reason"):
            text += f" - {r['reason']}"
        words.append(text)
    words.append(
        f"running score {running:.3f} over {state.windows} windows"
        + (" (late turn: later windows were not re-judged)" if added.late else "")
    )
    rows.append({"reasoning": "; ".join(words)})
    return MetricResult(
        name=METRIC,
        category=CATEGORY,
        score=running,
        result=rows,
        meta={**meta, "windows": state.windows, "relevant": state.total, "late": added.late},
    )


def turn_result(
    turn: TurnRecord,
    cfg: ConversationRelevanceConfig,
    metric: MetricResult,
    cost: CostEstimate,
    elapsed_s: float,
) -> tuple[EvaluationTarget, Any]:
    """The (target, case result) the emitter writes for a judged turn (under the turn's span,
    with the conversation config's fingerprint)."""
    from nexagauge.graph.executor import CaseResult, NodeOutcome
    from nexagauge.schema.results import ConversationMetrics

    target = EvaluationTarget(
        trace_id=turn.trace_id,
        span_id=turn.span_id,
        service=turn.service,
        span_name=turn.span_name,
        end_time_unix_nano=turn.time_ns,
        model=turn.model,
        conversation_id=turn.conversation_id,
        sampling_rule="conversation",
        config_fingerprint=turn.fingerprint,
    )
    case = EvalCase(
        case_id=target.case_id, input=turn.input, output=turn.output, conversation_relevance=cfg
    )
    out = ConversationMetrics(metrics=[metric], cost=cost)
    result = CaseResult(
        index=0,
        case_id=target.case_id,
        case=case,
        outcomes={METRIC: NodeOutcome(METRIC, "ok", output=out, elapsed_s=elapsed_s)},
    )
    return target, result
