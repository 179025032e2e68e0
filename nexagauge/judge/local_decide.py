"""Features and decisions of the local judge (pure functions; also used by calibration).

- relevance: a claim is on-topic when ``cos(claim, input) >= relevance_similarity``;
- grounding: the claim's evidence is the ``evidence_sentences`` context sentences most similar
  to it; it is *supported* only when the best similarity reaches ``grounding_similarity``, every
  number and mid-sentence name of the claim occurs in the evidence, its negation polarity
  matches an evidence sentence, and at least ``grounding_coverage`` of its content words occur
  in the evidence (light stemming). A similar claim failing the number/name/negation checks is
  ``contradicted``, other failures ``not_supported``.

Example:
    >>> f = grounding_features("The tower is in Lyon.", ["The tower is in Paris."], [0.93])
    >>> (f.missing_entities, decide_grounding(f, CALIBRATED)[1])
    (['Lyon'], 'contradicted')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from nexagauge.judge.base import LABEL_CONTRADICTED, LABEL_NOT_SUPPORTED, LABEL_SUPPORTED
from nexagauge.judge.local_lexical import (
    _HEDGES,
    LEXICON,
    _number_supported,
    _stem,
    _tokens,
    _word_in,
    content_words,
    entities,
    negation_count,
    numbers,
)


@dataclass(frozen=True)
class LocalThresholds:
    """Decision thresholds of the local judge (cosine similarities in [-1, 1], coverage in [0, 1])."""

    relevance_similarity: float
    grounding_similarity: float
    grounding_coverage: float
    evidence_sentences: int = 2
    #: the word lists the thresholds were calibrated with (:data:`~.local_lexical.LEXICON`)
    lexicon: str = LEXICON

#: the embedding backend the thresholds below were calibrated with
CALIBRATED_FOR = "local:all-MiniLM-L6-v2"

#: Picked by :func:`nexagauge.judge.local_calibrate.calibrate` on the calibration split with the
#: packaged all-MiniLM-L6-v2 (``bench/local_judge_accuracy.py --calibrate`` recomputes them;
#: ``tests/local/test_calibration.py`` fails if they drift).
CALIBRATED = LocalThresholds(
    relevance_similarity=0.39,
    grounding_similarity=0.41,
    grounding_coverage=0.45,
    evidence_sentences=2,
    lexicon=LEXICON,
)


@dataclass(frozen=True)
class GroundingFeatures:
    """Why a claim is (not) grounded: similarity, evidence and every lexical check."""

    similarity: float
    evidence: list[int]
    missing_numbers: list[str] = field(default_factory=list)
    missing_entities: list[str] = field(default_factory=list)
    coverage: float = 1.0
    missing_words: list[str] = field(default_factory=list)
    negation_mismatch: bool = False

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["similarity"] = round(self.similarity, 4)
        d["coverage"] = round(self.coverage, 4)
        return d



def grounding_features(
    claim: str,
    context_sentences: Sequence[str],
    similarities: Sequence[float] | np.ndarray,
    evidence_sentences: int = 2,
) -> GroundingFeatures:
    """Lexical checks of ``claim`` against its most similar context sentences.

    ``similarities[i]`` is ``cos(claim, context_sentences[i])``.
    """
    sims = np.asarray(similarities, dtype=np.float32)
    if len(context_sentences) == 0 or sims.size == 0:
        return GroundingFeatures(similarity=-1.0, evidence=[], coverage=0.0)
    order = [int(i) for i in np.argsort(-sims, kind="stable")[: max(1, evidence_sentences)]]
    best = order[0]
    ev_text = " ".join(context_sentences[i] for i in order)
    ev_tokens = _tokens(ev_text)
    ev_stems = {_stem(t) for t in ev_tokens}
    ev_lower = {t.lower() for t in ev_tokens}

    hedged = any(t.lower() in _HEDGES for t in _tokens(claim))
    ev_numbers = numbers(ev_text)
    missing_numbers = sorted(
        n for n in numbers(claim) if not _number_supported(n, ev_numbers, hedged)
    )
    missing_entities = [
        e for e in dict.fromkeys(entities(claim))
        if e.lower() not in ev_lower and not _word_in(e, ev_stems)
    ]
    words = content_words(claim)
    missing_words = [w for w in words if not _word_in(w, ev_stems)]
    penalty = len(missing_words)
    coverage = max(0.0, 1.0 - penalty / len(words)) if words else 1.0
    # polarity must agree with at least one evidence sentence ("not X" vs "X")
    claim_neg = negation_count(claim) > 0
    neg_mismatch = all((negation_count(context_sentences[i]) > 0) != claim_neg for i in order)
    return GroundingFeatures(
        similarity=float(sims[best]),
        evidence=order,
        missing_numbers=missing_numbers,
        missing_entities=missing_entities,
        coverage=coverage,
        missing_words=missing_words,
        negation_mismatch=neg_mismatch,
    )


def decide_grounding(f: GroundingFeatures, thr: LocalThresholds) -> tuple[bool, str]:
    """``(supported, label)`` with label ``supported`` / ``contradicted`` / ``not_supported``."""
    similar = f.similarity >= thr.grounding_similarity
    conflict = bool(f.missing_numbers or f.missing_entities or f.negation_mismatch)
    if similar and not conflict and f.coverage >= thr.grounding_coverage:
        return True, LABEL_SUPPORTED
    if similar and conflict:
        return False, LABEL_CONTRADICTED
    return False, LABEL_NOT_SUPPORTED


def decide_relevance(similarity: float, thr: LocalThresholds) -> bool:
    """Whether a claim with ``cos(claim, input) = similarity`` is on-topic."""
    return similarity >= thr.relevance_similarity


def _band(similarity: float, threshold: float, accepted: bool) -> int:
    """A 1-5 raw score consistent with the binary decision (>= 4 accepted, <= 2 rejected)."""
    if accepted:
        return 5 if similarity >= threshold + 0.15 else 4
    return 2 if similarity >= threshold - 0.1 else 1

