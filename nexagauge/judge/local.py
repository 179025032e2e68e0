"""The local judge: claims, relevance and grounding with embeddings and lexical checks, no API key.

It is the default judge when no LLM endpoint is configured (``judge.mode = "auto"``) and runs
fully offline on the packaged ``all-MiniLM-L6-v2`` model (:mod:`nexagauge.judge.embeddings`).
It implements the task-level judge protocol of :mod:`nexagauge.judge.base`:

- **claims** (:meth:`LocalJudge.extract_claims`): the sentences of every refined chunk
  (:mod:`nexagauge.judge.segment`), minus list headers ending in ``:`` and questions.
- **relevance**: a claim is on-topic when ``cos(claim, input) >= relevance_similarity``.
- **grounding**: the claim's evidence is the ``evidence_sentences`` context sentences most
  similar to it. It is *supported* only when all of these hold:

  1. best similarity ``>= grounding_similarity``;
  2. every number of the claim occurs in the evidence (``1,332`` = ``1332``, ``six`` = ``6``,
     ``one and a half`` = ``1.5``, ordinals ``third`` = ``3rd``; a hedged claim such as
     "about 40" may round ``39``);
  3. every mid-sentence capitalised name of the claim (``Lyon``, ``Boots``, ``Columbia``) occurs
     in the evidence - embeddings rate "Paris" and "Lyon" as near-synonyms, this does not;
  4. the claim has the negation polarity (``not``/``never``/``no``/``n't``...) of at least one
     of its evidence sentences;
  5. at least ``grounding_coverage`` of the claim's content words occur in the evidence
     (light stemming: ``rebasing`` = ``rebase``). With an installed WordNet (the *lexicon*,
     never downloaded) a WordNet synonym in the evidence counts as present and a missing
     noun-only word ("vinegar" swapped in for "water") counts double.

  A claim that is similar enough but fails 2-4 is labelled ``contradicted``, otherwise
  ``not_supported``.

The thresholds (:data:`CALIBRATED_WORDNET` when WordNet is installed, else
:data:`CALIBRATED_PLAIN`) were picked by :func:`calibrate` on the *calibration half* of
the labelled sets in ``tests/data/`` (512 claim/question and 448 claim/context pairs); accuracy
and Cohen's kappa on the held-out half are in ``docs/local-judge.md`` and recomputed by
``bench/local_judge_accuracy.py``. Every verdict is provenance-marked: ``judge.kind == "local"``,
``model == "local:<embedding model>"`` and ``result_meta() == {"judge": "local", ...}``, so a
local verdict is never mistaken for an LLM's. Free-form LLM tasks (redteam, GEval, question
generation) are not supported: ``supports_llm_tasks = False`` and :meth:`structured` answers
with the :data:`~nexagauge.judge.base.NEEDS_LLM` error.

Example:
    >>> f = grounding_features("The tower is in Lyon.", ["The tower is in Paris."], [0.93])
    >>> (f.missing_entities, decide_grounding(f, CALIBRATED)[1])
    (['Lyon'], 'contradicted')
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nexagauge.judge.base import (
    LABEL_CONTRADICTED,
    LABEL_NO,
    LABEL_NOT_SUPPORTED,
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
from nexagauge.judge.segment import sentences
from nexagauge.schema.case import GroundingConfig, RelevanceConfig, ScoringMode
from nexagauge.schema.results import Chunk, Claim, CostEstimate

if TYPE_CHECKING:
    from nexagauge.graph.runtime import Runtime
    from nexagauge.settings import Settings

#: version of the local judge's method; goes into cache keys via ``CallInfo.prompt``
LOCAL_JUDGE_VERSION = "local.v1"


# --------------------------------------------------------------------------------------------
# Thresholds
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LocalThresholds:
    """Decision thresholds of the local judge (cosine similarities in [-1, 1], coverage in [0, 1])."""

    relevance_similarity: float
    grounding_similarity: float
    grounding_coverage: float
    evidence_sentences: int = 2
    #: the lexical features the thresholds were calibrated with: ``"wordnet"`` (synonyms and
    #: noun weighting from an installed WordNet) or ``"none"``
    lexicon: str = "none"


#: the embedding backend the thresholds below were calibrated with
CALIBRATED_FOR = "local:all-MiniLM-L6-v2"

#: Picked by :func:`calibrate` on the calibration half of ``tests/data/*_pairs.jsonl`` with the
#: packaged all-MiniLM-L6-v2 (``bench/local_judge_accuracy.py --calibrate`` recomputes them;
#: ``tests/local/test_calibration.py`` fails if they drift). One set per lexicon: WordNet (when a
#: WordNet 3.0 database is installed, e.g. Debian ``wordnet-base``) and plain.
CALIBRATED_WORDNET = LocalThresholds(
    relevance_similarity=0.39,
    grounding_similarity=0.41,
    grounding_coverage=0.65,
    evidence_sentences=2,
    lexicon="wordnet",
)
CALIBRATED_PLAIN = LocalThresholds(
    relevance_similarity=0.39,
    grounding_similarity=0.41,
    grounding_coverage=0.45,
    evidence_sentences=2,
    lexicon="none",
)
#: the plain set (no external data needed); :func:`default_thresholds` picks per machine
CALIBRATED = CALIBRATED_PLAIN


def default_lexicon() -> Any:
    """The installed WordNet (a synonym source) or ``None`` - loaded once per process."""
    from nexagauge.text.wordnet import default_synonyms

    src, info = default_synonyms()
    return src if info.variant == "wordnet" else None


def default_thresholds(lexicon: Any) -> LocalThresholds:
    """The calibrated thresholds matching the available lexicon."""
    return CALIBRATED_WORDNET if lexicon is not None else CALIBRATED_PLAIN


# --------------------------------------------------------------------------------------------
# Lexical analysis (stdlib only)
# --------------------------------------------------------------------------------------------
_STOP = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "than", "so", "of", "in", "on", "at", "to", "for", "from", "by", "with", "without", "within", "into", "onto", "over", "under", "about", "above", "below", "after", "before", "during", "between", "among", "through", "across", "per", "via", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "done", "have", "has", "had", "having", "can", "could", "may", "might", "must", "shall", "should", "will", "would", "it", "its", "it's", "this", "that", "these", "those", "there", "here", "their", "they", "them", "he", "she", "his", "her", "him", "we", "our", "us", "you", "your", "i", "me", "my", "mine", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "all", "any", "each", "every", "some", "most", "more", "less", "many", "much", "few", "other", "such", "same", "own", "only", "also", "just", "very", "too", "as", "not", "no", "nor", "never", "none", "up", "down", "out", "off", "again", "further", "once", "both", "either", "neither", "one's", "let", "lets", "get", "gets", "got", "make", "makes", "made", "use", "used", "using", "like", "e.g", "i.e", "etc", "vs"]
)
_NEGATIONS = frozenset(
    ["not", "no", "never", "none", "nothing", "nobody", "nowhere", "neither", "nor", "cannot", "n't"]
)
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12,
}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}
_HEDGES = frozenset(
    ["about", "approximately", "approx", "around", "roughly", "nearly", "almost", "some", "circa", "ca", "estimated"]
)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[.,'\u2019][A-Za-z0-9]+)*")
_NUM = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d,]*\d)(?!(?:st|nd|rd|th)\b)")
_AND_A_HALF = re.compile(r"\b(\w+) and a half\b", re.IGNORECASE)


def _canon(x: float) -> str:
    return f"{x:.6g}"


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.replace("\u2019", "'"))


def numbers(text: str) -> set[str]:
    """Canonical numbers mentioned in ``text`` (digits, thousands separators, number words).

    Example:
        >>> sorted(numbers("one and a half cups, 1,332 km, six minutes, 2.50 USD"))
        ['1.5', '1332', '2.5', '6']
    """
    out: set[str] = set()
    consumed: list[tuple[int, int]] = []
    for m in _AND_A_HALF.finditer(text):
        w = m.group(1).lower()
        base = _NUMBER_WORDS.get(w)
        if base is None and w.isdigit():
            base = int(w)
        if base is not None:
            out.add(_canon(base + 0.5))
            consumed.append(m.span())
    for m in _NUM.finditer(text):
        if any(a <= m.start() < b for a, b in consumed):
            continue
        whole = m.group(1).replace(",", "")
        frac = m.group(2) or ""
        out.add(_canon(float(whole + frac)))
    for m in re.finditer(r"[A-Za-z]+", text):
        if any(a <= m.start() < b for a, b in consumed):
            continue
        w = m.group(0).lower()
        if w in _NUMBER_WORDS and w not in {"hundred", "dozen"}:
            # "one" as a pronoun ("the one who") is rare in factual claims; accepted
            out.add(_canon(_NUMBER_WORDS[w]))
        elif w in _ORDINALS:
            out.add(f"#{_ORDINALS[w]}")  # "third-last" vs "second-last"
    for m in re.finditer(r"\b(\d+)(?:st|nd|rd|th)\b", text):
        out.add(f"#{int(m.group(1))}")
    return out


def _number_supported(n: str, evidence: set[str], hedged: bool) -> bool:
    if n in evidence:
        return True
    if not hedged or n.startswith("#"):
        return False
    x = float(n)
    for e in evidence:
        if e.startswith("#"):
            continue
        y = float(e)
        if y == 0 or x == 0:
            continue
        # a hedged claim may round the evidence ("about 40" for 39, "about 9.5" for 9.46)
        for k in range(-3, 7):
            if round(y, -k) == x and abs(x - y) / abs(y) < 0.1:
                return True
    return False


def _stem(w: str) -> str:
    w = w.lower().replace("'", "")
    for suf, rep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: len(w) - len(suf)] + rep
    return w


def _word_in(w: str, stems: set[str]) -> bool:
    s = _stem(w)
    if s in stems:
        return True
    if len(s) >= 5:
        return any(len(t) >= 5 and (t.startswith(s[:5]) and s.startswith(t[:5])) for t in stems)
    return False


def content_words(text: str) -> list[str]:
    """Words that carry content: not stopwords, not pure numbers, at least 2 characters.

    Example:
        >>> content_words("The tower is 330 metres tall.")
        ['tower', 'metres', 'tall']
    """
    out = []
    for t in _tokens(text):
        lw = t.lower()
        if lw in _STOP or lw in _NEGATIONS or len(lw) < 2 or lw.replace(",", "").replace(".", "").isdigit():
            continue
        if lw in _NUMBER_WORDS or lw in _ORDINALS:
            continue
        out.append(lw)
    return out


def entities(text: str) -> list[str]:
    """Capitalised names that are not sentence-initial (``Lyon``, ``Boots``, ``NVMe``).

    Example:
        >>> entities("The tower in Lyon was built by Gustave Eiffel.")
        ['Lyon', 'Gustave', 'Eiffel']
    """
    out: list[str] = []
    toks = list(re.finditer(r"[A-Za-z][A-Za-z0-9'\u2019-]*", text))
    for i, m in enumerate(toks):
        t = m.group(0)
        if i == 0:
            continue
        prev_end = text[toks[i - 1].end() : m.start()]
        if re.search(r"[.!?:]\s*$", prev_end):  # sentence-initial after punctuation
            continue
        if t[0].isupper() or (any(c.isupper() for c in t[1:]) and t.lower() not in _STOP):
            if t.lower() in _STOP:
                continue
            out.append(t.rstrip("'\u2019-"))
    return out


def negation_count(text: str) -> int:
    """Number of negation markers (``not``, ``never``, ``n't`` ...).

    Example:
        >>> negation_count("It is not open and they don't know.")
        2
    """
    t = text.lower().replace("\u2019", "'")
    n = len(re.findall(r"n't\b", t))
    n += sum(1 for w in re.findall(r"[a-z]+", t.replace("n't", " ")) if w in _NEGATIONS)
    return n


# --------------------------------------------------------------------------------------------
# Features and decisions (pure; also used by the calibration benchmark)
# --------------------------------------------------------------------------------------------
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


def _synonym_in(w: str, stems: set[str], lexicon: Any) -> bool:
    try:
        syns = lexicon.synonyms(w)
    except Exception:  # a lexicon lookup failure only loses the synonym credit
        return False
    return any(_stem(s) in stems for s in syns if s.lower() != w)


def _noun_only(w: str, lexicon: Any) -> bool:
    try:
        ss = lexicon.synsets(w)
    except Exception:
        return False
    return bool(ss) and all(x.pos() == "n" for x in ss)


def grounding_features(
    claim: str,
    context_sentences: Sequence[str],
    similarities: Sequence[float] | np.ndarray,
    evidence_sentences: int = 2,
    lexicon: Any = None,
) -> GroundingFeatures:
    """Lexical checks of ``claim`` against its most similar context sentences.

    ``similarities[i]`` is ``cos(claim, context_sentences[i])``. With a ``lexicon`` (WordNet), a
    claim word whose synonym is in the evidence counts as present, and a missing word that is
    only a noun (a thing swapped in: "vinegar" for "water") weighs double in the coverage.
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
    if lexicon is not None:
        missing_words = [w for w in missing_words if not _synonym_in(w, ev_stems, lexicon)]
        penalty = sum(2 if _noun_only(w, lexicon) else 1 for w in missing_words)
    else:
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


# --------------------------------------------------------------------------------------------
# Calibration (threshold search on labelled pairs)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BinaryStats:
    """Accuracy and Cohen's kappa of binary predictions against labels."""

    n: int
    accuracy: float
    kappa: float
    tp: int
    tn: int
    fp: int
    fn: int


def binary_stats(pred: Sequence[bool], gold: Sequence[bool]) -> BinaryStats:
    """Accuracy and Cohen's kappa (chance agreement from both marginals).

    Example:
        >>> s = binary_stats([True, False, True, True], [True, False, False, True])
        >>> (s.accuracy, round(s.kappa, 3))
        (0.75, 0.5)
    """
    if len(pred) != len(gold):
        raise ValueError("pred and gold differ in length")
    n = len(pred)
    if n == 0:
        return BinaryStats(0, math.nan, math.nan, 0, 0, 0, 0)
    tp = sum(1 for p, g in zip(pred, gold, strict=True) if p and g)
    tn = sum(1 for p, g in zip(pred, gold, strict=True) if not p and not g)
    fp = sum(1 for p, g in zip(pred, gold, strict=True) if p and not g)
    fn = n - tp - tn - fp
    po = (tp + tn) / n
    pe = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / (n * n)
    kappa = (po - pe) / (1 - pe) if pe < 1 else (1.0 if po == 1 else 0.0)
    return BinaryStats(n, po, kappa, tp, tn, fp, fn)


def _grid(lo: float, hi: float, step: float) -> list[float]:
    k = round((hi - lo) / step)
    return [round(lo + i * step, 4) for i in range(k + 1)]


def calibrate(
    relevance_sims: Sequence[float],
    relevance_gold: Sequence[bool],
    grounding_inputs: Sequence[tuple[str, Sequence[str], Sequence[float]]],
    grounding_gold: Sequence[bool],
    evidence_sentences: int = 2,
    lexicon: Any = None,
) -> LocalThresholds:
    """Pick thresholds that maximize accuracy on labelled pairs (use the calibration half only).

    Ties are broken towards the middle of the best plateau (robust to small shifts).
    ``grounding_inputs`` are ``(claim, context_sentences, similarities)``.
    """
    grid = _grid(0.10, 0.90, 0.01)
    accs = [
        binary_stats([decide_relevance(s, LocalThresholds(t, 0, 0)) for s in relevance_sims],
                     relevance_gold).accuracy
        for t in grid
    ]
    t_rel = _middle_of_best(grid, accs)

    feats = [
        grounding_features(c, ss, sims, evidence_sentences, lexicon)
        for c, ss, sims in grounding_inputs
    ]
    lex = "wordnet" if lexicon is not None else "none"
    best: tuple[float, float, float] | None = None
    results: dict[tuple[float, float], float] = {}
    cov_grid = _grid(0.30, 1.00, 0.05)
    for ts in _grid(0.30, 0.90, 0.01):
        for tc in cov_grid:
            thr = LocalThresholds(t_rel, ts, tc, evidence_sentences, lex)
            acc = binary_stats([decide_grounding(f, thr)[0] for f in feats], grounding_gold).accuracy
            results[(ts, tc)] = acc
            if best is None or acc > best[0] + 1e-12:
                best = (acc, ts, tc)
    assert best is not None
    top = best[0]
    # choose the coverage with the widest similarity plateau at the top accuracy, then its middle
    best_tc, best_ts, best_width = best[2], best[1], -1
    for tc in cov_grid:
        ts_ok = [ts for (ts, c), a in results.items() if c == tc and abs(a - top) < 1e-12]
        if ts_ok and len(ts_ok) > best_width:
            best_width, best_tc, best_ts = len(ts_ok), tc, ts_ok[len(ts_ok) // 2]
    return LocalThresholds(t_rel, best_ts, best_tc, evidence_sentences, lex)


def _middle_of_best(grid: list[float], accs: list[float]) -> float:
    top = max(accs)
    # longest run of consecutive grid points at the top accuracy, then its middle
    runs: list[list[float]] = []
    cur: list[float] = []
    for t, a in zip(grid, accs, strict=True):
        if abs(a - top) < 1e-12:
            cur.append(t)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    run = max(runs, key=len)
    return run[len(run) // 2]


# --------------------------------------------------------------------------------------------
# The judge
# --------------------------------------------------------------------------------------------
_AUTO: Any = object()  # "use the installed lexicon if any"


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


class LocalJudge:
    """Embeddings + lexical checks behind the judge protocol (see module docstring).

    ``embedder`` defaults to ``runtime.embedder`` (the process-wide service); tests may pass one.
    """

    kind = "local"
    supports_llm_tasks = False

    def __init__(
        self,
        settings: Settings | None = None,
        runtime: Runtime | None = None,
        *,
        embedder: Any = None,
        thresholds: LocalThresholds | None = None,
        lexicon: Any = _AUTO,
    ) -> None:
        self.settings = settings
        self.runtime = runtime
        self._embedder = embedder
        # The lexicon (WordNet) is loaded lazily, off the event loop, on the first grounding
        # call; which one will be used is known now without loading it.
        self._lexicon: Any = lexicon
        if lexicon is _AUTO:
            from nexagauge.text.wordnet import default_info

            kind = "wordnet" if default_info().variant == "wordnet" else "none"
        else:
            kind = "wordnet" if lexicon is not None else "none"
        self._explicit_thresholds = thresholds is not None
        self.thresholds = thresholds or (CALIBRATED_WORDNET if kind == "wordnet" else CALIBRATED_PLAIN)
        model = settings.embeddings.model if settings is not None else "all-MiniLM-L6-v2"
        self.model = f"local:{model}"

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            if self.runtime is not None:
                self._embedder = self.runtime.embedder
            else:
                from nexagauge.judge.embeddings import create_embedder

                self._embedder = create_embedder(
                    self.settings.embeddings if self.settings is not None else None
                )
        return self._embedder

    def result_meta(self) -> dict[str, Any]:
        """Provenance to put in ``MetricResult.meta`` of every result this judge produced.

        ``method`` carries the thresholds (so the node cache never mixes calibrations);
        ``uncalibrated: true`` flags an embedding backend other than the one the thresholds
        were calibrated for (e.g. ``embeddings.provider = "openai"``).
        """
        t = self.thresholds
        meta: dict[str, Any] = {
            "judge": "local",
            "model": self.model,
            "method": f"{LOCAL_JUDGE_VERSION}:{t.relevance_similarity}/"
            f"{t.grounding_similarity}/{t.grounding_coverage}/{t.evidence_sentences}/{t.lexicon}",
        }
        try:
            name = getattr(self.embedder, "name", None)
        except Exception:  # the embedder cannot be built; the verdict call will report it
            name = None
        if name is not None and name != CALIBRATED_FOR:
            meta["uncalibrated"] = True
            meta["embeddings"] = name
        return meta

    def _info(self) -> CallInfo:
        return CallInfo(calls=0, cached=False, model=self.model, prompt=LOCAL_JUDGE_VERSION)

    async def _offload(self, fn: Any, *args: Any) -> Any:
        if self.runtime is not None:
            return await self.runtime.to_thread(fn, *args)
        import asyncio

        return await asyncio.to_thread(fn, *args)

    # -- claims ----------------------------------------------------------------------------
    async def extract_claims(self, chunks: Sequence[Chunk], *, node: str = "claims") -> ClaimExtraction:
        """Claims = the sentences of each chunk (list headers and questions dropped).

        Example:
            >>> # one chunk "Paris is in France. Want more?" -> ["Paris is in France."]
        """
        out: list[ExtractedClaim] = []
        for ch in chunks:
            units = sentences(ch.item.text)
            kept = [u for u in units if _is_claim_unit(u)]  # a lone question is no claim
            out.extend(ExtractedClaim(text=u, source_chunk_index=ch.index, confidence=1.0) for u in kept)
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
                return ClaimJudgement(error=f"local judge: unknown task {task!r}", info=self._info())
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

    async def _relevance(
        self, texts: list[str], target: str, knobs: RelevanceConfig | GroundingConfig
    ) -> list[RawVerdict]:
        vecs = await self.embedder.embed([target, *texts])
        sims = (vecs[1:] @ vecs[0]).astype(float)
        thr = self.thresholds.relevance_similarity
        out = []
        for s in sims:
            ok = decide_relevance(float(s), self.thresholds)
            raw = _band(float(s), thr, ok) if knobs.scoring_mode == ScoringMode.SCALE else int(ok)
            reason = None
            if knobs.include_reasoning:
                reason = f"similarity to input {s:.3f} {'>=' if ok else '<'} threshold {thr:.2f}"
            out.append(RawVerdict(raw=raw, label=LABEL_YES if ok else LABEL_NO, reason=reason))
        return out

    async def _grounding(
        self, texts: list[str], target: str, knobs: RelevanceConfig | GroundingConfig
    ) -> list[RawVerdict]:
        ctx = sentences(target)
        if not ctx:
            raise ValueError("context has no sentences")
        vecs = await self.embedder.embed([*ctx, *texts])
        sim = vecs[len(ctx):] @ vecs[: len(ctx)].T
        if self._lexicon is _AUTO:
            self._lexicon = await self._offload(default_lexicon)
            if not self._explicit_thresholds:
                self.thresholds = default_thresholds(self._lexicon)
        lexicon = self._lexicon if self.thresholds.lexicon == "wordnet" else None
        thr = self.thresholds
        feats: list[GroundingFeatures] = await self._offload(
            lambda: [
                grounding_features(t, ctx, sim[i], thr.evidence_sentences, lexicon)
                for i, t in enumerate(texts)
            ]
        )
        out = []
        for f in feats:
            ok, label = decide_grounding(f, thr)
            if knobs.scoring_mode == ScoringMode.SCALE:
                raw = 1 if label == LABEL_CONTRADICTED else _band(f.similarity, thr.grounding_similarity, ok)
            else:
                raw = int(ok)
            reason = _grounding_reason(f, ok, thr, ctx) if knobs.include_reasoning else None
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


def _grounding_reason(
    f: GroundingFeatures, ok: bool, thr: LocalThresholds, ctx: Sequence[str]
) -> str:
    best = ctx[f.evidence[0]] if f.evidence else ""
    parts = [f"best context sentence (similarity {f.similarity:.3f}): {best!r}"]
    if ok:
        return "supported; " + parts[0]
    if f.similarity < thr.grounding_similarity:
        parts.append(f"similarity below {thr.grounding_similarity:.2f}")
    if f.missing_numbers:
        parts.append(f"numbers not in evidence: {', '.join(f.missing_numbers)}")
    if f.missing_entities:
        parts.append(f"names not in evidence: {', '.join(f.missing_entities)}")
    if f.negation_mismatch:
        parts.append("negation differs from the evidence")
    if f.coverage < thr.grounding_coverage:
        parts.append(f"only {f.coverage:.0%} of content words in evidence")
    return "; ".join(parts)
