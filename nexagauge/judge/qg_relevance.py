"""Answer relevancy by question generation (the Ragas method, spec 001).

Selected per record with ``"relevance": {"method": "question_generation", "strictness": N}``.

1. ONE judge call (:meth:`Judge.structured`, prompt ``question_generation``) asks for ``N``
   (``strictness``, default 3) different questions that the *answer alone* responds to - the
   user's input is not shown - each with a ``noncommittal`` flag (evasive / vague / "I don't
   know" answers).
2. The input and every question are embedded with the process-wide embedding service (the
   packaged local model or an OpenAI-compatible endpoint, ``embeddings`` settings).
3. ``score = clip(mean_i cos(E_input, E_question_i), 0, 1)``; when **every** question is flagged
   noncommittal the score is ``0`` (Ragas' rule). The clip is applied to the mean: cosine
   similarity lies in [-1, 1], and a negative mean (an answer about something else entirely) is
   reported as 0, the bottom of the metric's documented [0, 1] range.

Result: metric ``answer_relevancy`` (category ``answer``) whose ``result`` lists
``{"question", "noncommittal", "similarity"}`` per question (plus ``{"reasoning": ...}`` when
``include_reasoning``), ``meta`` = judge provenance + ``method``, ``strictness`` and the
embedding model. It needs an LLM judge: with the local judge (``supports_llm_tasks = False``) the
metric is ``score=None`` with the :data:`~nexagauge.judge.base.NEEDS_LLM` error (the relevance
node should skip first, see :func:`skip_reason`). A judge reply with another number of questions
than ``N`` (after the client's corrective re-ask) or an embedding failure is an error, never a
padded or truncated score.

Entry points used by the ``relevance`` node (``relevance.method == "question_generation"``):

- ``await question_generation_relevance(ctx, node="relevance") -> RelevanceMetrics``
- ``skip_reason(ctx) -> str | None``, ``estimate(ctx, node=...) -> list[CallEstimate]`` and
  ``cache_key_parts(ctx) -> dict`` (prompt id, embedding model, knobs)

and the building block without a graph context::

    metric, cost = await question_generation_relevancy(
        input="When was the first Super Bowl?", output="It was held on Jan 15, 1967.",
        judge=judge, embedder=embedder, knobs=RelevanceConfig(method="question_generation"),
        node="relevance")

Example:
    >>> qg_score([0.9, 0.7, 0.8], [False, False, False])
    0.8
    >>> qg_score([0.9, 0.7, 0.8], [True, True, True])
    0.0
    >>> qg_score([-0.2, -0.1], [False, False])
    0.0
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from nexagauge.judge.base import NEEDS_LLM
from nexagauge.schema.case import RelevanceConfig
from nexagauge.schema.results import CostEstimate, MetricResult, RelevanceMetrics

if TYPE_CHECKING:
    from nexagauge.graph.node import CallEstimate, NodeContext

PROMPT = "question_generation"
METRIC = "answer_relevancy"
CATEGORY = "answer"
METHOD = "question_generation"
#: expected answer tokens per generated question (estimates only)
TOKENS_PER_QUESTION = 24


class GeneratedQuestion(BaseModel):
    """One question reverse-engineered from the answer."""

    model_config = ConfigDict(extra="forbid")
    question: str
    noncommittal: bool


class GeneratedQuestions(BaseModel):
    """The judge's answer: ``strictness`` questions."""

    model_config = ConfigDict(extra="forbid")
    questions: list[GeneratedQuestion]


class GeneratedQuestionsWithReasoning(GeneratedQuestions):
    reasoning: str


def qg_score(similarities: Sequence[float], noncommittal: Sequence[bool]) -> float:
    """Ragas answer relevancy from per-question cosines and noncommittal flags (see module doc)."""
    if not similarities:
        raise ValueError("no questions to score")
    if all(noncommittal):
        return 0.0
    mean = float(np.mean(np.asarray(similarities, dtype=np.float64)))
    return round(min(1.0, max(0.0, mean)), 6)


def _prompt_variables(output: str, knobs: RelevanceConfig) -> dict[str, Any]:
    from nexagauge.judge.promptlib import load_prompt

    p = load_prompt(PROMPT)
    return {
        "output": output,
        "n": knobs.strictness,
        "reasoning_key": p.part("reasoning") if knobs.include_reasoning else "",
    }


def _count_check(n: int) -> Any:
    def check(parsed: Any) -> str | None:
        qs = parsed.get("questions") if isinstance(parsed, Mapping) else None
        if not isinstance(qs, list) or len(qs) != n:
            got = len(qs) if isinstance(qs, list) else 0
            return f"expected exactly {n} questions, got {got}"
        if any(not str((q or {}).get("question", "")).strip() for q in qs):
            return "every question must be a non-empty string"
        return None

    return check


async def question_generation_relevancy(
    *,
    input: str,
    output: str,
    judge: Any,
    embedder: Any,
    knobs: RelevanceConfig,
    node: str = "relevance",
    meta: Mapping[str, Any] | None = None,
) -> tuple[MetricResult, CostEstimate]:
    """Score ``output`` against ``input`` by question generation; never raises for judge or
    embedding failures (they become ``score=None`` + ``error``).

    Returns ``(metric, cost)``; ``cost`` is the judge spend (also when the metric failed).
    """
    info: dict[str, Any] = dict(meta or {})
    info.update({"method": METHOD, "strictness": knobs.strictness})
    n = knobs.strictness
    if not input.strip():
        return MetricResult.failed(METRIC, CATEGORY, "no input", **info), CostEstimate()
    if judge is None or not getattr(judge, "supports_llm_tasks", False):
        return MetricResult.failed(METRIC, CATEGORY, NEEDS_LLM, **info), CostEstimate()
    model = GeneratedQuestionsWithReasoning if knobs.include_reasoning else GeneratedQuestions
    kwargs: dict[str, Any] = {"node": node, "untrusted": ("output",)}
    if "check" in inspect.signature(judge.structured).parameters:
        kwargs["check"] = _count_check(n)
    reply = await judge.structured(PROMPT, _prompt_variables(output, knobs), model, **kwargs)
    cost = reply.cost
    if reply.error is not None or reply.value is None:
        err = reply.error or "judge returned no value"
        return MetricResult.failed(
            METRIC, CATEGORY, f"question generation failed: {err}", **info
        ), cost
    questions = list(reply.value.questions)
    if len(questions) != n:
        return (
            MetricResult.failed(
                METRIC, CATEGORY, f"judge returned {len(questions)} questions, expected {n}", **info
            ),
            cost,
        )
    if any(not q.question.strip() for q in questions):
        return MetricResult.failed(
            METRIC, CATEGORY, "judge returned an empty question", **info
        ), cost
    name = getattr(embedder, "name", type(embedder).__name__)
    info["embeddings"] = name
    try:
        vecs = await embedder.embed([input, *(q.question for q in questions)])
    except Exception as e:  # embeddings are a service: report, do not crash the case
        msg = f"embeddings failed: {type(e).__name__}: {e}"
        return MetricResult.failed(METRIC, CATEGORY, msg, **info), cost
    sims = [float(x) for x in (vecs[1:] @ vecs[0])]
    flags = [q.noncommittal for q in questions]
    score = qg_score(sims, flags)
    result: list[Any] = [
        {"question": q.question, "noncommittal": q.noncommittal, "similarity": round(s, 6)}
        for q, s in zip(questions, sims, strict=True)
    ]
    if knobs.include_reasoning:
        result.append({"reasoning": getattr(reply.value, "reasoning", "")})
    if all(flags):
        info["all_noncommittal"] = True
    return MetricResult(name=METRIC, category=CATEGORY, score=score, result=result, meta=info), cost


# --------------------------------------------------------------------------------------------
# Graph entry points (called by nexagauge.nodes.relevance)
# --------------------------------------------------------------------------------------------
def skip_reason(ctx: NodeContext) -> str | None:
    """Why the question-generation method cannot run for this case (``None``: it can)."""
    from nexagauge.graph.runtime import NO_JUDGE

    if not ctx.case.relevance.enabled:
        return "relevance disabled in the record"
    if not (ctx.case.input or "").strip():
        return "no input"
    judge = ctx.runtime.judge
    if judge is None:
        return NO_JUDGE
    if not getattr(judge, "supports_llm_tasks", False):
        return NEEDS_LLM
    return None


def cache_key_parts(ctx: NodeContext) -> dict[str, Any]:
    """What besides the case changes the result: judge, prompt version, embeddings, knobs."""
    from nexagauge.judge.promptlib import load_prompt
    from nexagauge.nodes.claims import judge_meta

    s = ctx.runtime.settings.embeddings
    return {
        **judge_meta(ctx, "relevance"),
        "prompt": load_prompt(PROMPT).id,
        "embeddings": [s.provider, s.model, str(s.model_path), s.base_url],
        "knobs": ctx.case.relevance.model_dump(mode="json"),
    }


async def question_generation_relevance(
    ctx: NodeContext, *, node: str = "relevance"
) -> RelevanceMetrics:
    """The relevance node's output for ``method: question_generation``.

    Example:
        >>> # metrics = await question_generation_relevance(ctx, node="relevance")
        >>> # metrics.metrics[0].name == "answer_relevancy"
    """
    from nexagauge.nodes.claims import judge_meta

    judge = ctx.runtime.judge
    meta = judge_meta(ctx, node) if judge is not None else {}
    embedder = ctx.runtime.embedder if judge is not None and judge.supports_llm_tasks else None
    metric, cost = await question_generation_relevancy(
        input=ctx.case.input or "",
        output=ctx.case.output,
        judge=judge,
        embedder=embedder,
        knobs=ctx.case.relevance,
        node=node,
        meta=meta,
    )
    return RelevanceMetrics(metrics=[metric], cost=cost)


def estimate(ctx: NodeContext, *, node: str = "relevance") -> list[CallEstimate]:
    """One judge call: the rendered prompt's tokens in, ``strictness`` short questions out."""
    from nexagauge.graph.node import CallEstimate
    from nexagauge.judge.promptlib import load_prompt
    from nexagauge.judge.tokens import count_tokens

    if skip_reason(ctx) is not None:
        return []
    knobs = ctx.case.relevance
    msgs = load_prompt(PROMPT).render(
        _prompt_variables(ctx.case.output, knobs), untrusted=("output",)
    )
    prompt_tokens = sum(count_tokens(m["content"]) + 4 for m in msgs) + 3
    out = TOKENS_PER_QUESTION * knobs.strictness + (30 if knobs.include_reasoning else 8)
    return [CallEstimate(node, 1, prompt_tokens, out)]
