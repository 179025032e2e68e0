"""Features and decisions of the local judge (pure functions; also used by calibration).

Each claim is described by a few named features and decided by a small linear model whose
weights were fitted on the *calibration* split of the labelled sets
(:func:`nexagauge.judge.local.calibrate.fit_linear`) - accepted when the weighted sum is >= 0.

- **relevance** (:class:`RelevanceFeatures`): query->passage similarity of the claim to the
  question (and of the claim read with the sentence before it, when it leans on that sentence:
  "It works best with food"), its gap to the answer's best sentence, whether it gives the kind
  of information the question asks for (a duration, a number, a reason, an instruction, a
  verdict - :mod:`~nexagauge.judge.local.cues`), and cues for same-subject trivia and filler;
- **grounding** (:class:`GroundingFeatures`): similarity of the claim to its best context
  sentences, content-word coverage (light stemming), and the checks that similarity cannot make:
  numbers (unit-aware: "25 mm" = "2.5 cm"), mid-sentence names, negation polarity, opposites
  ("slower" for "faster") and over-generalisation ("every" where the context says "above 500
  euros"). A rejected claim failing a check is ``contradicted``, else ``not_supported``.

Example:
    >>> f = grounding_features("The tower is in Lyon.", ["The tower is in Paris."], [0.93])
    >>> (f.missing_entities, decide_grounding(f, CALIBRATED)[1])
    (['Lyon'], 'contradicted')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from nexagauge.judge.base import LABEL_CONTRADICTED, LABEL_NOT_SUPPORTED, LABEL_SUPPORTED
from nexagauge.judge.local.contra import antonym_conflicts, overgeneralises
from nexagauge.judge.local.cues import (
    SATISFIES,
    _words,
    answer_types,
    goal_shift,
    is_continuation,
    is_filler,
    is_short,
    is_trivia,
    question_type,
)
from nexagauge.judge.local.lexical import (
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
    quantity_supported,
)

RELEVANCE_FEATURES = (
    "sim", "ctx_gain", "sim_gap", "sim_vs_mean", "cohesion", "type_match", "type_missing",
    "trivia", "filler", "continuation", "overlap", "goal_shift", "short", "length", "ce",
)  # fmt: skip
GROUNDING_FEATURES = (
    "sim", "rsim", "ctx_gain", "coverage", "coverage_all", "missing_words", "missing_numbers",
    "missing_entities", "negation_mismatch", "negated_copy", "antonyms", "overgeneral",
    "fully_covered",
)  # fmt: skip


@dataclass(frozen=True)
class LinearModel:
    """``accept = bias + sum(weights[name] * feature[name]) >= 0``."""

    bias: float
    weights: tuple[tuple[str, float], ...]

    def score(self, features: Mapping[str, float]) -> float:
        return self.bias + sum(w * float(features[n]) for n, w in self.weights)


@dataclass(frozen=True)
class LocalThresholds:
    """The calibrated decision models of the local judge (named for history: once thresholds)."""

    relevance: LinearModel
    grounding: LinearModel
    evidence_sentences: int = 2
    #: the word lists the models were calibrated with (:data:`~.local_lexical.LEXICON`)
    lexicon: str = LEXICON


#: the embedding backend the models below were calibrated with
CALIBRATED_FOR = "local:multilingual-e5-small-q4"

#: Fitted by :func:`nexagauge.judge.local.calibrate.fit_linear` on the calibration splits of
#: ``tests/data/*_pairs.jsonl`` and ``tests/data/local_judge_v2/`` with the packaged e5 model
#: (``bench/local_judge/accuracy.py --calibrate`` recomputes them; ``tests/local/
#: test_calibration.py`` fails if they drift).
CALIBRATED = LocalThresholds(
    relevance=LinearModel(
        bias=-12.826,
        weights=(
            ("sim", 15.467),
            ("ctx_gain", 21.717),
            ("sim_gap", -2.389),
            ("sim_vs_mean", 2.483),
            ("cohesion", 45.792),
            ("type_match", 0.275),
            ("type_missing", -0.423),
            ("trivia", -0.379),
            ("filler", -4.5),
            ("continuation", -0.762),
            ("overlap", -0.532),
            ("goal_shift", -2.596),
            ("short", 2.197),
            ("length", 0.418),
            ("ce", 0.497),
        ),
    ),
    grounding=LinearModel(
        bias=-26.858,
        weights=(
            ("sim", 7.33),
            ("rsim", 26.947),
            ("ctx_gain", 11.288),
            ("coverage", -1.133),
            ("coverage_all", -2.165),
            ("missing_words", -0.302),
            ("missing_numbers", -2.084),
            ("missing_entities", -1.633),
            ("negation_mismatch", -0.264),
            ("negated_copy", -1.947),
            ("antonyms", -1.296),
            ("overgeneral", -0.825),
            ("fully_covered", 0.633),
        ),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class RelevanceFeatures:
    """Why a claim is (not) on-topic."""

    sim: float
    ctx_gain: float = 0.0
    sim_gap: float = 0.0
    #: similarity minus the answer's mean similarity to the question
    sim_vs_mean: float = 0.0
    #: similarity to the rest of the answer minus the answer's mean (off-topic sentences stand
    #: apart; 0 for a one-sentence answer)
    cohesion: float = 0.0
    type_match: float = 0.0
    type_missing: float = 0.0
    trivia: float = 0.0
    filler: float = 0.0
    continuation: float = 0.0
    overlap: float = 0.0
    #: opens with a goal the question does not name ("To change only the message, ...")
    goal_shift: float = 0.0
    #: a fragment of at most four words ("15 minutes."): little text to compare
    short: float = 0.0
    #: words in the claim / 30, at most 1: how much similarity to expect depends on length
    #: (grouped CV on the calibration halves 0.831 -> 0.844)
    length: float = 0.0
    #: the relevance cross-encoder's log-odds that the claim is on topic, question and claim
    #: read together (:mod:`~nexagauge.judge.local.ce`)
    ce: float = 0.0

    def vector(self) -> dict[str, float]:
        return {n: float(getattr(self, n)) for n in RELEVANCE_FEATURES}


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
    #: the claim restates its best evidence sentence almost word for word but with the opposite
    #: polarity ("The tower was not completed in 1889."): a contradiction, unlike the many
    #: negated paraphrases ("You don't need a meal" for "with or without food")
    negated_copy: bool = False
    antonyms: list[str] = field(default_factory=list)
    overgeneral: bool = False
    #: coverage of the claim's content words by the whole context
    coverage_all: float = 1.0
    #: the evidence read as a question the claim answers: query->passage similarity of the best
    #: evidence sentences (as queries) to the claim (as a passage), their maximum (asymmetric
    #: retrieval models; ``None``: use ``similarity``)
    rsim: float | None = None
    #: similarity gained by reading the claim after the sentence before it
    ctx_gain: float = 0.0

    @property
    def conflict(self) -> bool:
        """A check that similarity cannot make failed (number, name, negation, opposite)."""
        return bool(
            self.missing_numbers or self.missing_entities or self.negation_mismatch
            or self.antonyms
        )  # fmt: skip

    @property
    def fails_hard_check(self) -> bool:
        """A number or a name the context does not contain: never supported, whatever the
        linear model says (embeddings rate "Paris" and "Lyon", or 1889 and 1899, as
        near-synonyms)."""
        return bool(self.missing_numbers or self.missing_entities)

    def vector(self) -> dict[str, float]:
        return {
            "sim": self.similarity,
            "rsim": self.similarity if self.rsim is None else self.rsim,
            "ctx_gain": self.ctx_gain,
            "coverage": self.coverage,
            "coverage_all": self.coverage_all,
            "missing_words": float(min(4, len(self.missing_words))),
            "missing_numbers": float(min(2, len(self.missing_numbers))),
            "missing_entities": float(min(2, len(self.missing_entities))),
            "negation_mismatch": float(self.negation_mismatch),
            "negated_copy": float(self.negated_copy),
            "antonyms": float(min(2, len(self.antonyms))),
            "overgeneral": float(self.overgeneral),
            # every content word and number of the claim is in the context, no check failed
            # (short answers such as "About six minutes." have little similarity to go on)
            "fully_covered": float(
                self.coverage_all == 1.0 and not self.conflict and not self.overgeneral
            ),
        }

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("similarity", "coverage", "coverage_all", "rsim", "ctx_gain"):
            if d[k] is not None:
                d[k] = round(d[k], 4)
        return d


#: question types whose answers must carry a recognisable kind of information
_SPECIFIC = frozenset({"duration", "frequency", "quantity", "time", "place", "person"})


def relevance_features(
    question: str,
    claims: Sequence[str],
    similarities: Sequence[float] | np.ndarray,
    context_similarities: Sequence[float | None] | None = None,
    cohesion: Sequence[float] | None = None,
    cross: Sequence[float] | None = None,
) -> list[RelevanceFeatures]:
    """Features of each claim of one answer (in answer order) against the question.

    ``similarities[i]``: query->passage similarity of the question and claim ``i``;
    ``context_similarities[i]``: the same for claim ``i`` read after claim ``i - 1`` (``None``
    where the claim does not lean on the one before it); ``cohesion[i]``: similarity of claim
    ``i`` to the mean of the other claims, relative to the answer's mean; ``cross[i]``: the
    relevance cross-encoder's log-odds for the question and claim ``i``.

    Example:
        >>> fs = relevance_features("How often should I feed it?", ["Feed it twice a day."], [0.8])
        >>> (fs[0].type_match, fs[0].type_missing)
        (1.0, 0.0)
    """
    sims = [float(x) for x in similarities]
    ctx = list(context_similarities) if context_similarities is not None else [None] * len(sims)
    qtype = question_type(question)
    wanted = SATISFIES.get(qtype, frozenset())
    qwords = {_stem(w) for w in content_words(question)}
    top = max(sims) if sims else 0.0
    mean = sum(sims) / len(sims) if sims else 0.0
    coh = list(cohesion) if cohesion is not None else [0.0] * len(sims)
    ce = list(cross) if cross is not None else [0.0] * len(sims)
    out = []
    for i, (text, sim) in enumerate(zip(claims, sims, strict=True)):
        cont = i > 0 and is_continuation(text)
        c = ctx[i]
        gain = max(0.0, float(c) - sim) if cont and c is not None else 0.0
        types = answer_types(text)
        words = content_words(text)
        overlap = (
            sum(1 for w in words if _stem(w) in qwords) / len(qwords) if qwords and words else 0.0
        )
        out.append(
            RelevanceFeatures(
                sim=sim,
                ctx_gain=gain,
                sim_gap=top - max(sim, sim + gain),
                sim_vs_mean=sim - mean,
                cohesion=float(coh[i]),
                type_match=float(bool(wanted & types)),
                type_missing=float(qtype in _SPECIFIC and not wanted & types),
                trivia=float(is_trivia(text, question)),
                filler=float(is_filler(text)),
                continuation=float(cont),
                overlap=min(1.0, overlap),
                goal_shift=float(goal_shift(text, question)),
                short=float(is_short(text)),
                length=min(30, len(_words(text))) / 30,
                ce=float(ce[i]),
            )
        )
    return out


def _near_copy(claim_words: list[str], evidence: str) -> bool:
    """At least 90% of the claim's content words are in ``evidence`` and at least half of the
    evidence's are in the claim (measured on the labelled sets: with opposite polarity, 27 of 29
    such claims were contradictions)."""
    ev_words = content_words(evidence)
    if not claim_words or not ev_words:
        return False
    ev_stems = {_stem(t) for t in _tokens(evidence)}
    claim_stems = {_stem(w) for w in claim_words}
    there = sum(1 for w in claim_words if _word_in(w, ev_stems)) / len(claim_words)
    back = sum(1 for w in ev_words if _word_in(w, claim_stems)) / len(ev_words)
    return there >= 0.9 and back >= 0.5


def _coverage(words: list[str], stems: set[str]) -> tuple[float, list[str]]:
    missing = [w for w in words if not _word_in(w, stems)]
    return (max(0.0, 1.0 - len(missing) / len(words)) if words else 1.0), missing


def evidence_order(
    similarities: Sequence[float] | np.ndarray, evidence_sentences: int = 2
) -> list[int]:
    """Indices of the ``evidence_sentences`` context sentences most similar to a claim, best
    first (ties: the earlier sentence).

    Example:
        >>> evidence_order([0.2, 0.9, 0.5], 2)
        [1, 2]
    """
    sims = np.asarray(similarities, dtype=np.float32)
    return [int(i) for i in np.argsort(-sims, kind="stable")[: max(1, evidence_sentences)]]


def grounding_features(
    claim: str,
    context_sentences: Sequence[str],
    similarities: Sequence[float] | np.ndarray,
    evidence_sentences: int = 2,
    rsim: float | None = None,
    ctx_gain: float = 0.0,
) -> GroundingFeatures:
    """Lexical checks of ``claim`` against its most similar context sentences.

    ``similarities[i]`` is ``cos(claim, context_sentences[i])`` (the evidence: the
    ``evidence_sentences`` most similar, :func:`evidence_order`); ``rsim`` the query->passage
    similarity of the evidence (as queries) to the claim (asymmetric models: measured on the
    labelled sets, the evidence "retrieving" the claim separates supported from unsupported
    sentences better than the claim retrieving the evidence); ``ctx_gain`` what reading the claim
    after the sentence before it adds.
    """
    sims = np.asarray(similarities, dtype=np.float32)
    if len(context_sentences) == 0 or sims.size == 0:
        return GroundingFeatures(similarity=-1.0, evidence=[], coverage=0.0, coverage_all=0.0)
    order = evidence_order(sims, evidence_sentences)
    best = order[0]
    ev_text = _spelled_out(" ".join(context_sentences[i] for i in order))
    all_text = _spelled_out(" ".join(context_sentences))
    ev_tokens = _tokens(ev_text)
    ev_stems = {_stem(t) for t in ev_tokens}
    all_stems = {_stem(t) for t in _tokens(all_text)}
    ev_lower = {t.lower() for t in ev_tokens}

    hedged = any(t.lower() in _HEDGES for t in _tokens(claim))
    ev_numbers = numbers(all_text)
    missing_numbers = sorted(
        n for n in numbers(claim)
        if not _number_supported(n, ev_numbers, hedged)
        and not quantity_supported(_raw_of(n), claim, all_text, hedged)
        and not (n == "1" and not _DIGIT_ONE.search(claim))  # "one of the symptoms"
    )  # fmt: skip
    missing_entities = [
        e for e in dict.fromkeys(entities(claim))
        if e.lower() not in ev_lower and not _word_in(e, all_stems)
    ]  # fmt: skip
    words = content_words(claim)
    coverage, missing_words = _coverage(words, ev_stems)
    coverage_all, _ = _coverage(words, all_stems)
    # polarity must agree with the best evidence sentence ("not X" vs "X")
    claim_neg = negation_count(claim) > 0
    neg_mismatch = (negation_count(context_sentences[best]) > 0) != claim_neg
    negated_copy = neg_mismatch and _near_copy(words, context_sentences[best])
    return GroundingFeatures(
        similarity=float(sims[best]),
        evidence=order,
        missing_numbers=missing_numbers,
        missing_entities=missing_entities,
        coverage=coverage,
        missing_words=missing_words,
        negation_mismatch=neg_mismatch,
        negated_copy=negated_copy,
        antonyms=antonym_conflicts(claim, ev_text),
        overgeneral=overgeneralises(claim, ev_text),
        coverage_all=coverage_all,
        rsim=rsim,
        ctx_gain=ctx_gain,
    )


_SYMBOLS = (("°C", " degrees Celsius "), ("°F", " degrees Fahrenheit "), ("%", " percent "),
            ("£", " pounds "), ("$", " dollars "), ("€", " euros "))  # fmt: skip


def _spelled_out(text: str) -> str:
    """Unit symbols also as words, so "100 degrees Celsius" is found in "100 °C"."""
    for sym, words in _SYMBOLS:
        if sym in text:
            text = text + " " + text.replace(sym, words)
    return text


_DIGIT_ONE = re.compile(r"(?<![\d.,])1(?![\d,]*\d)")


def _raw_of(canon: str) -> str:
    return canon.lstrip("#")


def decide_grounding(f: GroundingFeatures, thr: LocalThresholds) -> tuple[bool, str]:
    """``(supported, label)`` with label ``supported`` / ``contradicted`` / ``not_supported``.

    A number or a name that the context does not contain is never supported, however similar
    the sentence (embeddings rate "Paris" and "Lyon", or 1889 and 1899, as near-synonyms); the
    linear model decides the rest.
    """
    if not f.fails_hard_check and thr.grounding.score(f.vector()) >= 0:
        return True, LABEL_SUPPORTED
    return False, LABEL_CONTRADICTED if f.conflict else LABEL_NOT_SUPPORTED


def decide_relevance(f: RelevanceFeatures, thr: LocalThresholds) -> bool:
    """Whether the claim described by ``f`` is on-topic."""
    return thr.relevance.score(f.vector()) >= 0


def band(score: float, accepted: bool) -> int:
    """A 1-5 raw score consistent with the binary decision (>= 4 accepted, <= 2 rejected), by
    the model's margin (``score`` is the linear model's log-odds)."""
    if accepted:
        return 5 if score >= 2.0 else 4
    return 2 if score >= -2.0 else 1
