"""The local judge: claims, relevance and grounding with embeddings and lexical checks, no API key.

It is the default judge when no LLM endpoint is configured (``judge.mode = "auto"``) and runs
fully offline on its packaged multilingual-e5-small model (:mod:`nexagauge.judge.local.e5`).
It implements the task-level judge protocol of :mod:`nexagauge.judge.base`; the job is split in
modules:

- :mod:`~nexagauge.judge.local.lexical`: numbers, names, negation, content words (built-in word
  lists: verdicts never depend on what the host has installed);
- :mod:`~nexagauge.judge.local.cues`: what a question asks for and a sentence gives,
  continuation, trivia, filler, opposites, over-generalisation;
- :mod:`~nexagauge.judge.local.decide`: features and the calibrated linear decision models;
- :mod:`~nexagauge.judge.local.calibrate`: model fitting, accuracy, kappa, Wilson intervals;
- :mod:`~nexagauge.judge.local.e5`: the judge's own embedder;
- this module: claim extraction and the :class:`LocalJudge` itself.

The judge gets what it needs - an embedder (or a factory for one, so the model loads on first
use) and a function that runs CPU work off the event loop - not the whole runtime.

Every verdict is provenance-marked: ``judge.kind == "local"``, ``model == "local:<embedding
model>"`` and :meth:`LocalJudge.result_meta` (judge, model, embedder, lexicon, calibration), so a
local verdict is never mistaken for an LLM's. Free-form LLM tasks (redteam, GEval, question
generation) are not supported: ``supports_llm_tasks = False`` and :meth:`LocalJudge.structured`
answers with the :data:`~nexagauge.judge.base.NEEDS_LLM` error.

Example:
    >>> judge = LocalJudge(embedder=my_embedder)                 # doctest: +SKIP
    >>> judge.result_meta()["judge"]                             # doctest: +SKIP
    'local'
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nexagauge.judge.base import (
    LABEL_CONTRADICTED,
    LABEL_NO,
    LABEL_SUPPORTED,
    LABEL_YES,
    NEEDS_LLM,
    CallInfo,
    ClaimExtraction,
    ClaimJudgement,
    ClaimTask,
    ExtractedClaim,
    JudgeReply,
    RawVerdict,
    T,
)
from nexagauge.judge.local.calibrate import BinaryStats, binary_stats, fit_linear, wilson
from nexagauge.judge.local.ce import NAME as CROSS_ENCODER_NAME
from nexagauge.judge.local.ce import RelevanceCrossEncoder
from nexagauge.judge.local.cues import is_continuation
from nexagauge.judge.local.decide import (
    CALIBRATED,
    CALIBRATED_FOR,
    GroundingFeatures,
    LinearModel,
    LocalThresholds,
    RelevanceFeatures,
    band,
    decide_grounding,
    decide_relevance,
    evidence_order,
    grounding_features,
    relevance_features,
)
from nexagauge.judge.local.e5 import E5_NAME
from nexagauge.judge.local.lexical import (
    LEXICON,
    content_words,
    entities,
    negation_count,
    numbers,
)
from nexagauge.schema.case import GroundingConfig, RelevanceConfig, ScoringMode
from nexagauge.schema.results import Chunk, Claim, CostEstimate
from nexagauge.text.sentences import sentences

if TYPE_CHECKING:
    from nexagauge.judge.embeddings import Embedder
    from nexagauge.settings import Settings

__all__ = [
    "CALIBRATED",
    "CALIBRATED_FOR",
    "CALIBRATION_VERSION",
    "LEXICON",
    "LOCAL_JUDGE_VERSION",
    "BinaryStats",
    "GroundingFeatures",
    "LinearModel",
    "LocalJudge",
    "LocalThresholds",
    "RelevanceFeatures",
    "binary_stats",
    "content_words",
    "decide_grounding",
    "decide_relevance",
    "entities",
    "fit_linear",
    "grounding_features",
    "negation_count",
    "numbers",
    "relevance_features",
    "wilson",
]

#: version of the local judge's method; goes into cache keys via ``CallInfo.prompt``
LOCAL_JUDGE_VERSION = "local.v2"
#: version of the calibration data and procedure behind :data:`CALIBRATED`
CALIBRATION_VERSION = "cal.2026-11-g"

#: runs ``fn(*args)`` off the event loop (``Runtime.to_thread``; default ``asyncio.to_thread``)
Offload = Callable[..., Awaitable[Any]]

_FILLERS = frozenset(
    [
        *["hi", "hello", "hey", "sure", "thanks", "okay", "ok", "certainly", "absolutely"],
        *("of course", "thank you", "happy to help", "glad to help", "great question"),
        *("good question", "you're welcome", "no problem"),
    ]
)


def _is_claim_unit(text: str) -> bool:
    """Sentences that state something: not list headers, questions, or greetings/filler."""
    t = text.strip()
    if not t or t.endswith((":", "?")):
        return False
    bare = re.sub(r"[^\w\s']", "", t.lower().replace("\u2019", "'")).strip()
    if bare in _FILLERS:
        return False
    # short exclamations ("Hi there!", "Great news!") carry no checkable content
    return not (t.endswith("!") and len(bare.split()) <= 3)


def _uses_packaged_model(settings: Settings | None) -> bool:
    """Whether the settings leave the embeddings at the packaged default (the judge then uses
    its own calibrated model rather than the general embedding service)."""
    if settings is None:
        return True
    e = settings.embeddings
    return e.provider == "local" and not e.model_path


class LocalJudge:
    """Embeddings + lexical checks behind the judge protocol (see module docstring).

    By default it embeds with its packaged, calibrated model (:mod:`~.local_e5`, loaded on first
    use). Give it an ``embedder`` (tests), or an ``embedder_factory`` called on first use for
    configured non-default embeddings (the runtime passes its process-wide service this way).
    ``offload`` runs CPU work off the event loop (default: :func:`asyncio.to_thread`).
    """

    kind = "local"
    supports_llm_tasks = False

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        embedder_factory: Callable[[], Embedder] | None = None,
        offload: Offload | None = None,
        thresholds: LocalThresholds | None = None,
        cross_encoder: RelevanceCrossEncoder | None = None,
    ) -> None:
        self.settings = settings
        self._embedder = embedder
        self._cross = cross_encoder
        self._embedder_factory = embedder_factory
        self._offload_fn = offload
        self.thresholds = thresholds or CALIBRATED
        if embedder is None and _uses_packaged_model(settings):
            self.model = E5_NAME
        else:
            model = settings.embeddings.model if settings is not None else "custom"
            self.model = getattr(embedder, "name", None) or f"local:{model}"

    @property
    def embedder(self) -> Embedder:
        """The embedding service (built on first use): the judge's packaged e5 model unless
        the settings name other embeddings (``embeddings.provider = "openai"`` or a
        ``model_path``), which are then used as configured and marked uncalibrated."""
        if self._embedder is None:
            es = self.settings.embeddings if self.settings is not None else None
            if _uses_packaged_model(self.settings):
                from nexagauge.judge.local.e5 import create_e5_embedder

                self._embedder = create_e5_embedder(es)
            elif self._embedder_factory is not None:
                self._embedder = self._embedder_factory()
            else:
                from nexagauge.judge.embeddings import create_embedder

                self._embedder = create_embedder(es)
        return self._embedder

    @property
    def cross_encoder(self) -> RelevanceCrossEncoder:
        """The relevance cross-encoder (:mod:`~.local_ce`; its model is loaded on first use)."""
        if self._cross is None:
            self._cross = RelevanceCrossEncoder()
        return self._cross

    def method(self) -> str:
        """Version, calibration and a digest of the decision models and the cross-encoder's
        adapter (cache keys never mix calibrations)."""
        models = f"{self.thresholds!r}:{self.cross_encoder.digest}"
        digest = hashlib.sha256(models.encode()).hexdigest()[:12]
        return f"{LOCAL_JUDGE_VERSION}:{CALIBRATION_VERSION}:{self.thresholds.lexicon}:{digest}"

    def describe(self) -> str:
        """One line naming the variant: embedder, cross-encoder, lexicon and calibration.

        Example:
            >>> LocalJudge(embedder=my_embedder).describe()          # doctest: +SKIP
            'local:multilingual-e5-small-q4 cross_encoder=local:all-minilm-l6-v2-ce:3f2a...
             lexicon=builtin.v2 calibration=cal.2026-11-g'
        """
        m = self.result_meta()
        return (
            f"{m['embedder']} cross_encoder={m['cross_encoder']} lexicon={m['lexicon']} "
            f"calibration={m['calibration']}"
        )

    def result_meta(self) -> dict[str, Any]:
        """Provenance to put in ``MetricResult.meta`` of every result this judge produced.

        ``judge`` (``local``), ``model``, ``embedder`` (the vectors actually used), ``lexicon``
        (the built-in word lists' version), ``calibration`` and ``method`` (version and
        thresholds); ``uncalibrated: true`` flags an embedding backend other than the one the
        thresholds were calibrated for (e.g. ``embeddings.provider = "openai"``).
        """
        try:
            name = getattr(self.embedder, "name", None)
        except Exception:  # the embedder cannot be built; the verdict call will report it
            name = None
        meta: dict[str, Any] = {
            "judge": "local",
            "model": self.model,
            "embedder": name or self.model,
            "lexicon": self.thresholds.lexicon,
            "cross_encoder": f"{CROSS_ENCODER_NAME}:{self.cross_encoder.digest}",
            "calibration": CALIBRATION_VERSION,
            "method": self.method(),
        }
        if name is not None and name != CALIBRATED_FOR:
            meta["uncalibrated"] = True
            meta["embeddings"] = name
        return meta

    def _info(self) -> CallInfo:
        return CallInfo(calls=0, cached=False, model=self.model, prompt=LOCAL_JUDGE_VERSION)

    async def _offload(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._offload_fn is not None:
            return await self._offload_fn(fn, *args)
        return await asyncio.to_thread(fn, *args)

    # -- claims ----------------------------------------------------------------------------
    async def extract_claims(
        self, chunks: Sequence[Chunk], *, node: str = "claims"
    ) -> ClaimExtraction:
        """Claims = the sentences of each chunk (list headers and questions dropped).

        Example:
            >>> # one chunk "Paris is in France. Want more?" -> ["Paris is in France."]
        """
        out: list[ExtractedClaim] = []
        for ch in chunks:
            units = sentences(ch.item.text)
            kept = [u for u in units if _is_claim_unit(u)]  # a lone question is no claim
            out.extend(
                ExtractedClaim(text=u, source_chunk_index=ch.index, confidence=1.0) for u in kept
            )
        return ClaimExtraction(claims=out, cost=CostEstimate(), info=self._info())

    # -- relevance / grounding ---------------------------------------------------------------
    async def judge_claims(
        self,
        task: ClaimTask,
        claims: Sequence[Claim],
        target: str,
        knobs: RelevanceConfig | GroundingConfig,
        *,
        node: str,
    ) -> ClaimJudgement:
        """One verdict per claim against ``target`` (the input, or the context).

        ``raw`` follows the protocol: 1/0 in ``binary_yes_no``; 1-5 in ``scale_1_5`` (4-5 when
        accepted, 1-2 when rejected, by distance to the threshold). Per-claim reasons (when
        ``include_reasoning``) give the similarity and the failed checks.
        """
        texts = [c.item.text for c in claims]
        if not texts:
            return ClaimJudgement(verdicts=[], info=self._info())
        if not target or not target.strip():
            return ClaimJudgement(error=f"{task}: empty target text", info=self._info())
        try:
            if task == "relevance":
                verdicts = await self._relevance(texts, target, knobs)
            elif task == "grounding":
                verdicts = await self._grounding(texts, target, knobs)
            else:
                return ClaimJudgement(
                    error=f"local judge: unknown task {task!r}", info=self._info()
                )
        except Exception as e:  # the protocol never raises for judge-side failures
            return ClaimJudgement(
                error=f"local judge failed: {type(e).__name__}: {e}", info=self._info()
            )
        reasoning = None
        if knobs.include_reasoning:
            ok = sum(1 for v in verdicts if v.label in (LABEL_YES, LABEL_SUPPORTED))
            what = "on-topic" if task == "relevance" else "supported"
            reasoning = (
                f"local judge (embeddings + lexical checks, not an LLM): {ok} of {len(verdicts)} "
                f"claims {what}."
            )
        return ClaimJudgement(verdicts=verdicts, reasoning=reasoning, info=self._info())

    async def _queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors (asymmetric models embed questions differently), else plain ones."""
        emb = self.embedder
        fn = getattr(emb, "embed_queries", None)
        return await (fn(texts) if callable(fn) else emb.embed(texts))

    async def _with_previous(self, texts: list[str]) -> dict[int, str]:
        """Claim ``i`` read after claim ``i - 1``, for claims that lean on the one before."""
        return {
            i: f"{texts[i - 1]} {t}" for i, t in enumerate(texts) if i > 0 and is_continuation(t)
        }

    async def relevance_features(self, texts: list[str], question: str) -> list[RelevanceFeatures]:
        """The features the relevance decision uses, claims in answer order (also for
        calibration: the same code path as :meth:`judge_claims`)."""
        q = (await self._queries([question]))[0]
        joined = await self._with_previous(texts)
        vecs = await self.embedder.embed([*texts, *joined.values()])
        sims = (vecs[: len(texts)] @ q).astype(float)
        ctx_vals = (vecs[len(texts) :] @ q).astype(float) if joined else np.zeros(0)
        ctx: list[float | None] = [None] * len(texts)
        for k, i in enumerate(joined):
            ctx[i] = float(ctx_vals[k])
        own = vecs[: len(texts)]
        cohesion = [0.0] * len(texts)
        if len(texts) > 1:
            total = own.sum(axis=0)
            for i in range(len(texts)):
                rest = total - own[i]
                norm = float(np.linalg.norm(rest))
                cohesion[i] = float(own[i] @ rest) / norm if norm else 0.0
            mean_c = sum(cohesion) / len(cohesion)
            cohesion = [c - mean_c for c in cohesion]  # relative: 0 for a one-sentence answer
        pairs = [(question, t) for t in texts]
        cross = await self._offload(self.cross_encoder.score, pairs)
        return relevance_features(question, texts, sims, ctx, cohesion, [float(x) for x in cross])

    async def grounding_features(self, texts: list[str], context: str) -> list[GroundingFeatures]:
        """The features the grounding decision uses, claims in answer order (also for
        calibration)."""
        ctx = sentences(context)
        if not ctx:
            raise ValueError("context has no sentences")
        joined = await self._with_previous(texts)
        passages = await self.embedder.embed([*ctx, *texts, *joined.values()])
        cv = passages[: len(ctx)]
        sim = passages[len(ctx) : len(ctx) + len(texts)] @ cv.T
        jsim = passages[len(ctx) + len(texts) :] @ cv.T
        gains = [0.0] * len(texts)
        for k, i in enumerate(joined):
            gains[i] = max(0.0, float(jsim[k].max()) - float(sim[i].max()))
        n_ev = self.thresholds.evidence_sentences
        # the evidence sentences as queries, each once (shared by the claims it is evidence for)
        orders = [evidence_order(sim[i], n_ev) for i in range(len(texts))]
        need = sorted({j for o in orders for j in o})
        qv = await self._queries([ctx[j] for j in need])
        row = {j: k for k, j in enumerate(need)}
        claims_p = passages[len(ctx) : len(ctx) + len(texts)]
        rsims = [max(float(qv[row[j]] @ claims_p[i]) for j in o) for i, o in enumerate(orders)]
        feats: list[GroundingFeatures] = await self._offload(
            lambda: [
                grounding_features(t, ctx, sim[i], n_ev, rsims[i], gains[i])
                for i, t in enumerate(texts)
            ]
        )
        return feats

    async def _relevance(
        self, texts: list[str], target: str, knobs: RelevanceConfig | GroundingConfig
    ) -> list[RawVerdict]:
        out = []
        for f in await self.relevance_features(texts, target):
            score = self.thresholds.relevance.score(f.vector())
            ok = score >= 0
            raw = band(score, ok) if knobs.scoring_mode == ScoringMode.SCALE else int(ok)
            reason = _relevance_reason(f, score) if knobs.include_reasoning else None
            out.append(RawVerdict(raw=raw, label=LABEL_YES if ok else LABEL_NO, reason=reason))
        return out

    async def _grounding(
        self, texts: list[str], target: str, knobs: RelevanceConfig | GroundingConfig
    ) -> list[RawVerdict]:
        thr = self.thresholds
        ctx = sentences(target)
        out = []
        for f in await self.grounding_features(texts, target):
            ok, label = decide_grounding(f, thr)
            score = thr.grounding.score(f.vector())
            if knobs.scoring_mode == ScoringMode.SCALE:
                raw = 1 if label == LABEL_CONTRADICTED else band(score, ok)
            else:
                raw = int(ok)
            reason = _grounding_reason(f, ok, score, ctx) if knobs.include_reasoning else None
            out.append(RawVerdict(raw=raw, label=label, reason=reason))
        return out

    # -- free-form LLM tasks -----------------------------------------------------------------
    async def structured(
        self,
        prompt: str,
        variables: Mapping[str, Any],
        response_model: type[T],
        *,
        node: str,
        untrusted: Sequence[str] = (),
        max_tokens: int | None = None,
    ) -> JudgeReply[T]:
        """Not available locally: always an error reply (nodes should check
        ``supports_llm_tasks`` first and skip with :data:`NEEDS_LLM`)."""
        return JudgeReply(value=None, error=NEEDS_LLM, info=self._info())

    async def aclose(self) -> None:
        return None


def _relevance_reason(f: RelevanceFeatures, score: float) -> str:
    cues = [n for n in ("type_match", "type_missing", "trivia", "filler", "continuation")
            if getattr(f, n)]  # fmt: skip
    verdict = "on-topic" if score >= 0 else "off-topic"
    return (
        f"{verdict} (score {score:+.2f}): similarity to input {f.sim:.3f}"
        + (f", with the previous sentence +{f.ctx_gain:.3f}" if f.ctx_gain else "")
        + (f"; cues: {', '.join(cues)}" if cues else "")
    )


def _grounding_reason(f: GroundingFeatures, ok: bool, score: float, ctx: Sequence[str]) -> str:
    best = ctx[f.evidence[0]] if f.evidence else ""
    parts = [f"best context sentence (similarity {f.similarity:.3f}): {best!r}"]
    if ok:
        return f"supported (score {score:+.2f}); " + parts[0]
    parts.insert(0, f"score {score:+.2f}")
    if f.missing_numbers:
        parts.append(f"numbers not in the context: {', '.join(f.missing_numbers)}")
    if f.missing_entities:
        parts.append(f"names not in the context: {', '.join(f.missing_entities)}")
    if f.negation_mismatch:
        parts.append("negation differs from the evidence")
    if f.antonyms:
        parts.append(f"the evidence says the opposite of: {', '.join(f.antonyms)}")
    if f.overgeneral:
        parts.append("generalises what the evidence qualifies")
    if f.coverage < 1.0:
        parts.append(f"{f.coverage:.0%} of content words in the evidence")
    return "; ".join(parts)
