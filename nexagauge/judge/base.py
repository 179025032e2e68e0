"""The judge protocol: what the claim nodes (and other judge nodes) ask of a judge backend.

Two backends implement it: the LLM judge (:mod:`nexagauge.judge.llm.client`, any OpenAI-compatible
endpoint) and the local judge (:mod:`nexagauge.judge.local.judge`, embeddings, no API key). The protocol
is *task-level* for the claim pipeline so both can implement the same tasks:

- :meth:`Judge.extract_claims` - atomic claims from every chunk of an output, in one call per case;
- :meth:`Judge.judge_claims` - every claim against one target (the input for ``relevance``, the
  context for ``grounding``) in one call, returning one :class:`RawVerdict` per claim;
- :meth:`Judge.structured` - a generic "prompt file + variables -> pydantic model" call for the
  other LLM nodes (redteam, geval, conversation relevance, question generation). Backends that
  cannot run free-form LLM prompts set ``supports_llm_tasks = False``; nodes that need it skip
  with :data:`NEEDS_LLM`.

Judges never raise for judge-side failures (bad JSON, wrong verdict count, HTTP errors after
retries): they return a result whose ``error`` is set, so the node can emit ``score=None`` with
that error. Scoring (raw verdict -> normalized score -> ACCEPTED/REJECTED) is done by the node
(:mod:`nexagauge.judge.scoring`), so every backend is scored identically.

Raw verdict conventions (``RawVerdict.raw``), per ``knobs.scoring_mode``:

- ``binary_yes_no``: ``1`` (yes / supported) or ``0`` (no / not supported);
- ``scale_1_5``: an integer ``1``..``5`` (5 = fully relevant / fully supported);
- relevance may answer "unsure": ``raw=None, label="idk"`` (the node counts it as relevant unless
  ``penalize_ambiguity``);
- grounding distinguishes ``label="contradicted"`` (raw ``0`` / ``1``) from ``"not_supported"``.

Example:
    >>> ex = ClaimExtraction(claims=[ExtractedClaim("Paris is in France.", 0, 0.9)])
    >>> (ex.ok, ex.claims[0].source_chunk_index)
    (True, 0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from nexagauge.schema.case import GroundingConfig, RelevanceConfig
from nexagauge.schema.results import Chunk, Claim, CostEstimate

T = TypeVar("T", bound=BaseModel)

JudgeKind = Literal["llm", "local"]
ClaimTask = Literal["relevance", "grounding"]

#: skip reason of nodes that need a real LLM when the configured judge is the local one
NEEDS_LLM = "needs an LLM judge (the local judge cannot run this metric)"

#: labels a RawVerdict may carry
LABEL_YES = "yes"
LABEL_NO = "no"
LABEL_IDK = "idk"
LABEL_SUPPORTED = "supported"
LABEL_NOT_SUPPORTED = "not_supported"
LABEL_CONTRADICTED = "contradicted"


@dataclass(frozen=True)
class CallInfo:
    """Accounting of the judge calls behind one result (for cost reports and benchmarks).

    ``calls`` counts HTTP requests actually sent (re-asks and retries included; 0 when cached).
    """

    calls: int = 0
    cached: bool = False
    model: str = ""
    prompt: str = ""  # prompt file name + version, e.g. "claims.v1"


@dataclass(frozen=True)
class ExtractedClaim:
    """One claim as a judge extracted it (the claims node adds ids, tokens, and merges)."""

    text: str
    source_chunk_index: int
    confidence: float = 1.0


@dataclass(frozen=True, kw_only=True)
class JudgeOutcome:
    """What every judge call returns besides its answer: what it cost, the error that stopped it
    (``None``: it succeeded) and which model answered how (keyword-only fields)."""

    cost: CostEstimate = field(default_factory=CostEstimate)
    error: str | None = None
    info: CallInfo = field(default_factory=CallInfo)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ClaimExtraction(JudgeOutcome):
    """Result of :meth:`Judge.extract_claims`: claims of every chunk, or an ``error``."""

    claims: list[ExtractedClaim] = field(default_factory=list)


@dataclass(frozen=True)
class RawVerdict:
    """The judge's verdict on one claim (see module docstring for the ``raw`` conventions)."""

    raw: int | float | None
    label: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ClaimJudgement(JudgeOutcome):
    """Result of :meth:`Judge.judge_claims`.

    On success ``len(verdicts) == len(claims)`` (a judge answer with another count is an
    ``error``, never truncated or padded). ``reasoning`` is the batch-level explanation when
    ``knobs.include_reasoning`` was set.
    """

    verdicts: list[RawVerdict] = field(default_factory=list)
    reasoning: str | None = None


@dataclass(frozen=True)
class JudgeReply(JudgeOutcome, Generic[T]):
    """Result of :meth:`Judge.structured`: the validated model instance, or an ``error``."""

    value: T | None
    #: content token log-probs when ``top_logprobs`` was requested and the endpoint returned them:
    #: ``[{"token": str, "logprob": float, "top_logprobs": [{"token", "logprob"}, ...]}, ...]``
    logprobs: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.value is not None


@runtime_checkable
class Judge(Protocol):
    """What every judge backend provides. ``node`` selects per-node settings and labels logs."""

    kind: JudgeKind
    model: str
    #: False for backends that cannot run arbitrary LLM prompts (:meth:`structured`)
    supports_llm_tasks: bool

    async def extract_claims(
        self, chunks: Sequence[Chunk], *, node: str = "claims"
    ) -> ClaimExtraction:
        """Atomic, self-contained claims of every chunk, in one call per case."""
        ...

    async def judge_claims(
        self,
        task: ClaimTask,
        claims: Sequence[Claim],
        target: str,
        knobs: RelevanceConfig | GroundingConfig,
        *,
        node: str,
    ) -> ClaimJudgement:
        """One verdict per claim against ``target`` (input or context), all in one call."""
        ...

    async def structured(
        self,
        prompt: str,
        variables: Mapping[str, Any],
        response_model: type[T],
        *,
        node: str,
        untrusted: Sequence[str] = (),
        max_tokens: int | None = None,
        top_logprobs: int | None = None,
    ) -> JudgeReply[T]:
        """Render prompt file ``prompt`` (e.g. ``"geval"``, latest version) with ``variables`` and
        return an instance of ``response_model``. Variables named in ``untrusted`` (evaluated
        text: outputs, inputs, contexts) are wrapped in nonce-tagged blocks so that text cannot
        change the instructions or the response schema. ``top_logprobs`` asks for token
        log-probabilities (GEval's probability-weighted score); backends without them return
        ``logprobs=None``."""
        ...

    async def aclose(self) -> None:
        """Release connections (idempotent)."""
        ...
