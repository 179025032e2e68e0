"""``conversation_relevance``: are assistant replies relevant throughout a conversation?

Windows (promptfoo / DeepEval semantics). ``per_turn`` (default): one window per turn ``i``,
``turns[max(0, i - W + 1) : i + 1]``, judging reply ``i`` with up to ``W - 1`` earlier turns as
context, so every reply is judged. ``sliding`` (promptfoo's legacy behaviour): full windows of
``W`` turns, and a conversation shorter than ``W`` is one window. Score = relevant windows /
windows; ``threshold`` gives pass/fail (in ``eval``). ``scale_1_5`` windows count as relevant at a
normalized score >= 0.6 and the score is the mean normalized score.

Cost. All windows of a conversation are judged in ONE call, and the conversation is sent once:
windows reference numbered turns instead of repeating them (DeepEval and promptfoo send one call
per window, each repeating up to W turns). Very long conversations are split into batches of
``WINDOWS_PER_CALL`` windows, each sending only the turns its windows need.

Online, :func:`new_windows` gives the windows a newly arrived turn adds, so scores update
incrementally as turns arrive instead of when the session closes.

Example:
    >>> [(w.start, w.end) for w in build_windows(4, 2)]
    [(0, 0), (0, 1), (1, 2), (2, 3)]
    >>> [(w.start, w.end) for w in build_windows(3, 5, mode="sliding")]
    [(0, 2)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, create_model

from nexagauge.graph.node import CallEstimate, Node, NodeContext
from nexagauge.nodes._kinds import StrictAnswer, judge_prompt_key, numbered_answer
from nexagauge.schema.case import ScoringMode, Turn
from nexagauge.schema.results import (
    ACCEPT_THRESHOLD,
    ConversationMetrics,
    CostEstimate,
    MetricResult,
)

METRIC = "conversation_relevance"
CATEGORY = "conversation"
PROMPT = "conversation_relevance"
WINDOWS_PER_CALL = 25


@dataclass(frozen=True)
class Window:
    """Turns ``start..end`` inclusive; the reply judged is turn ``end``'s output."""

    start: int
    end: int


def build_windows(n_turns: int, size: int, mode: str = "per_turn") -> list[Window]:
    """The windows of a conversation of ``n_turns`` turns (see module docstring)."""
    if n_turns <= 0:
        return []
    if size < 1:
        raise ValueError("window size must be >= 1")
    if mode == "sliding":
        if n_turns <= size:
            return [Window(0, n_turns - 1)]
        return [Window(i, i + size - 1) for i in range(n_turns - size + 1)]
    if mode != "per_turn":
        raise ValueError(f"unknown window mode {mode!r}")
    return [Window(max(0, i - size + 1), i) for i in range(n_turns)]


def new_windows(n_before: int, n_after: int, size: int) -> list[Window]:
    """Per-turn windows added when a conversation grows from ``n_before`` to ``n_after`` turns."""
    return [w for w in build_windows(n_after, size) if w.end >= n_before]


@cache
def window_model(scale: bool, reasoning: bool) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    if scale:
        fields["score"] = (Literal[1, 2, 3, 4, 5], ...)
    else:
        fields["verdict"] = (Literal["yes", "no"], ...)
    if reasoning:
        fields["reason"] = (str, ...)
    return create_model(
        f"WindowVerdict{int(scale)}{int(reasoning)}", __base__=StrictAnswer, **fields
    )


@cache
def answer_model(n: int, scale: bool, reasoning: bool) -> type[BaseModel]:
    name = f"ConversationAnswer{n}{int(scale)}{int(reasoning)}"
    return numbered_answer(name, "w", window_model(scale, reasoning), n)


def _turn_blocks(turns: Sequence[Turn], needed: Sequence[int]) -> list[str]:
    return [f"turn {i + 1}\nuser: {turns[i].input}\nassistant: {turns[i].output}" for i in needed]


async def judge_windows(
    judge: Any,
    turns: Sequence[Turn],
    windows: Sequence[Window],
    *,
    scale: bool,
    reasoning: bool,
    rubric: str | None,
    node: str = METRIC,
) -> tuple[list[dict[str, Any]] | None, CostEstimate, str | None]:
    """Judge windows (one call per ``WINDOWS_PER_CALL``); returns (verdicts, cost, error)."""
    import asyncio

    from nexagauge.judge.promptlib import load_prompt

    prompt = load_prompt(PROMPT)
    batches = [windows[i : i + WINDOWS_PER_CALL] for i in range(0, len(windows), WINDOWS_PER_CALL)]

    async def one(
        batch: Sequence[Window],
    ) -> tuple[list[dict[str, Any]] | None, CostEstimate, str | None]:
        needed = sorted({t for w in batch for t in range(w.start, w.end + 1)})
        variables = {
            "rubric": rubric or prompt.part("rubric"),
            "turns": _turn_blocks(turns, needed),
            "windows": "\n".join(
                f"w{k + 1}: turns {w.start + 1}-{w.end + 1}, judge the reply of turn {w.end + 1}"
                for k, w in enumerate(batch)
            ),
            "format": prompt.part("format_scale_1_5" if scale else "format_binary_yes_no"),
            "reasoning": prompt.part("reasoning") if reasoning else "",
        }
        reply = await judge.structured(
            PROMPT,
            variables,
            answer_model(len(batch), scale, reasoning),
            node=node,
            untrusted=("turns",),
        )
        if not reply.ok:
            return None, reply.cost, reply.error or "judge returned no verdicts"
        data = reply.value.model_dump()
        return [data[f"w{k + 1}"] for k in range(len(batch))], reply.cost, None

    outs = await asyncio.gather(*(one(b) for b in batches))
    cost = CostEstimate.total([c for _, c, _ in outs])
    errors = [e for _, _, e in outs if e]
    if errors:
        return None, cost, errors[0]
    verdicts = [v for vs, _, _ in outs for v in (vs or [])]
    return verdicts, cost, None


def window_score(verdict: Mapping[str, Any], scale: bool) -> tuple[float, int]:
    """(normalized score, raw) of one window verdict."""
    if scale:
        raw = int(verdict["score"])
        return (raw - 1) / 4.0, raw
    raw = 1 if verdict["verdict"] == "yes" else 0
    return float(raw), raw


def score_windows(
    turns: Sequence[Turn],
    windows: Sequence[Window],
    verdicts: Sequence[Mapping[str, Any]],
    scale: bool,
) -> tuple[float, list[dict[str, Any]]]:
    rows = []
    total = 0.0
    for w, v in zip(windows, verdicts, strict=True):
        s, raw = window_score(v, scale)
        total += s
        row: dict[str, Any] = {
            "window": [w.start, w.end],
            "turn": w.end,
            "input": turns[w.end].input,
            "output": turns[w.end].output,
            "verdict": "ACCEPTED" if s >= ACCEPT_THRESHOLD else "REJECTED",
            "raw_score": raw,
        }
        if "reason" in v:
            row["reason"] = v["reason"]
        rows.append(row)
    return total / len(windows), rows


class ConversationRelevanceNode(Node):
    name = "conversation_relevance"
    version = "1"
    output_model = ConversationMetrics

    def skip_reason(self, ctx: NodeContext) -> str | None:
        if not ctx.case.conversation_relevance.enabled:
            return "conversation_relevance disabled"
        return ctx.runtime.llm_unavailable()

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        return judge_prompt_key(ctx, PROMPT)

    async def run(self, ctx: NodeContext) -> ConversationMetrics:
        cfg = ctx.case.conversation_relevance
        turns = ctx.case.conversation
        windows = build_windows(len(turns), cfg.window_size, cfg.window_mode)
        scale = cfg.scoring_mode is ScoringMode.SCALE
        judge = ctx.runtime.judge
        meta = {
            "judge": judge.kind,
            "model": judge.model,
            "windows": len(windows),
            "window_size": cfg.window_size,
        }
        verdicts, cost, error = await judge_windows(
            judge,
            turns,
            windows,
            scale=scale,
            reasoning=cfg.include_reasoning,
            rubric=cfg.rubric_prompt,
        )
        if verdicts is None:
            return ConversationMetrics(
                metrics=[MetricResult.failed(METRIC, CATEGORY, error or "no verdicts", **meta)],
                cost=cost,
            )
        score, rows = score_windows(turns, windows, verdicts, scale)
        return ConversationMetrics(
            metrics=[
                MetricResult(name=METRIC, category=CATEGORY, score=score, result=rows, meta=meta)
            ],
            cost=cost,
        )

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        from nexagauge.judge.promptlib import load_prompt
        from nexagauge.text.tokens import count_tokens

        cfg = ctx.case.conversation_relevance
        turns = ctx.case.conversation
        windows = build_windows(len(turns), cfg.window_size, cfg.window_mode)
        if not windows:
            return []
        p = load_prompt(PROMPT)
        base = count_tokens(p.system + p.user + (cfg.rubric_prompt or p.part("rubric")))
        out = []
        for i in range(0, len(windows), WINDOWS_PER_CALL):
            batch = windows[i : i + WINDOWS_PER_CALL]
            needed = sorted({t for w in batch for t in range(w.start, w.end + 1)})
            tin = (
                base
                + sum(count_tokens(b) + 6 for b in _turn_blocks(turns, needed))
                + 18 * len(batch)
                + 40
            )
            tout = len(batch) * (10 + (20 if cfg.include_reasoning else 0)) + 5
            out.append(CallEstimate(self.name, 1, tin, tout))
        return out
