"""``refmatch``: lexical overlap of the output with the reference (ROUGE, BLEU, METEOR).

Five metrics, category ``"reference"``, each in [0, 1]:

- ``rouge1``, ``rouge2``, ``rougeL``: F1 (``fmeasure``) from Google's ``rouge-score`` with
  ``use_stemmer=True`` (its tokenizer lower-cases and keeps ASCII letters and digits only, then
  Porter-stems). ROUGE-1/2 are rouge-score's own scores; ROUGE-L applies rouge-score's
  definition (LCS precision/recall, F1) to the same tokens with a bit-parallel LCS
  (:mod:`nexagauge.text.lcs`; identical values, checked against rouge-score in the tests),
  because rouge-score's pure-Python O(n*m) table takes seconds on long answers. Payload:
  precision, recall, fmeasure. ROUGE-2 is undefined (an error, not
  0) when either side has fewer than two tokens; all three are errors when either side has none.
- ``bleu``: sacrebleu sentence BLEU (tokenizer ``13a``, exponential smoothing, effective order,
  so short texts without 4-gram matches are not zero by construction), divided by 100. Payload:
  n-gram precisions, brevity penalty, lengths, signature.
- ``meteor``: NLTK's METEOR (alpha 0.9, beta 3, gamma 0.5) on lower-cased word tokens
  (:func:`nexagauge.text.normalize.words`). Words align by exact form, then Porter stem, then
  WordNet synonyms when a WordNet database is installed (:mod:`nexagauge.text.wordnet`);
  otherwise the synonym stage has no synonyms and METEOR is exact+stem. Which variant ran is in
  ``meta["variant"]`` (``"wordnet"`` or ``"exact+stem"``) and in the payload.

A metric that cannot be computed (no reference, no tokens its tokenizer keeps, a library error) is
``score=None`` with an ``error``; the other metrics are still computed. All CPU work runs through
``runtime.to_thread``. The node is eligible only when the case has a non-empty reference (the
topology); a missing reference reaching ``run`` anyway gives error results, never a score.

Example:
    >>> scores = compute_refmatch("The cat sat on the mat.", "The cat sat on the mat.", NO_SYNONYMS,
    ...                           WordNetInfo("exact+stem"))
    >>> [(m.name, round(m.score, 3)) for m in scores]
    [('rouge1', 1.0), ('rouge2', 1.0), ('rougeL', 1.0), ('bleu', 1.0), ('meteor', 0.998)]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from nexagauge.graph.node import Node, NodeContext
from nexagauge.schema.results import MetricResult, RefmatchMetrics
from nexagauge.text import wordnet
from nexagauge.text.lcs import lcs_length
from nexagauge.text.normalize import words
from nexagauge.text.wordnet import NO_SYNONYMS, SynonymSource, WordNetInfo

CATEGORY = "reference"
METRICS = ("rouge1", "rouge2", "rougeL", "bleu", "meteor")
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
METEOR_PARAMS = {"alpha": 0.9, "beta": 3.0, "gamma": 0.5}


@cache
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    # ROUGE-L is computed with the bit-parallel LCS below (same value, linear-time steps)
    return rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=True)


@cache
def _bleu() -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(effective_order=True, tokenize="13a", smooth_method="exp")


@cache
def _porter() -> Any:
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


def _lib_version(pkg: str) -> str:
    try:
        return version(pkg)
    except PackageNotFoundError:  # pragma: no cover - declared dependencies
        return "unknown"


def rouge(output: str, reference: str) -> list[MetricResult]:
    """ROUGE-1/2/L F1 of ``output`` against ``reference`` (rouge-score, Porter stemmer).

    Example:
        >>> [round(m.score, 4) for m in rouge("the cat is on the mat", "the cat sat on the mat")]
        [0.8333, 0.6, 0.8333]
    """
    from rouge_score.scoring import Score, fmeasure

    scorer = _rouge_scorer()
    tok = scorer._tokenizer  # the tokenizer rouge-score itself applies
    ref_tokens, out_tokens = tok.tokenize(reference), tok.tokenize(output)
    n_ref, n_out = len(ref_tokens), len(out_tokens)
    if n_ref == 0 or n_out == 0:
        side = "reference" if n_ref == 0 else "output"
        err = f"the {side} has no ROUGE tokens (rouge-score keeps only ASCII letters and digits)"
        return [MetricResult.failed(name, CATEGORY, err) for name in ROUGE_TYPES]
    scores = dict(scorer.score(reference, output))  # (target, prediction)
    lcs = lcs_length(ref_tokens, out_tokens)
    p, r = lcs / n_out, lcs / n_ref
    scores["rougeL"] = Score(precision=p, recall=r, fmeasure=fmeasure(p, r))
    out = []
    for name in ROUGE_TYPES:
        if name == "rouge2" and min(n_ref, n_out) < 2:
            # no bigram on one side: ROUGE-2 is undefined, not 0
            side = "reference" if n_ref < 2 else "output"
            err = f"the {side} has fewer than 2 ROUGE tokens, so no bigrams for ROUGE-2"
            out.append(MetricResult.failed(name, CATEGORY, err))
            continue
        s = scores[name]
        out.append(
            MetricResult(
                name=name,
                category=CATEGORY,
                score=float(s.fmeasure),
                result=[
                    {
                        "precision": float(s.precision),
                        "recall": float(s.recall),
                        "fmeasure": float(s.fmeasure),
                    }
                ],
            )
        )
    return out


def bleu(output: str, reference: str) -> MetricResult:
    """Sentence BLEU (sacrebleu, 13a, exp smoothing, effective order) scaled to [0, 1].

    Example:
        >>> round(bleu("the cat is on the mat", "the cat sat on the mat").score, 4)
        0.3799
    """
    metric = _bleu()
    s = metric.sentence_score(output, [reference])
    if s.sys_len == 0 or s.ref_len == 0:
        side = "reference" if s.ref_len == 0 else "output"
        return MetricResult.failed("bleu", CATEGORY, f"the {side} has no BLEU tokens")
    return MetricResult(
        name="bleu",
        category=CATEGORY,
        score=min(1.0, max(0.0, float(s.score) / 100.0)),
        result=[
            {
                "precisions": [float(p) / 100.0 for p in s.precisions],
                "brevity_penalty": float(s.bp),
                "hyp_len": int(s.sys_len),
                "ref_len": int(s.ref_len),
                "counts": [int(c) for c in s.counts],
                "totals": [int(t) for t in s.totals],
                "signature": str(metric.get_signature()),
            }
        ],
    )


def meteor(
    output: str,
    reference: str,
    synonyms: SynonymSource = NO_SYNONYMS,
    info: WordNetInfo | None = None,
) -> MetricResult:
    """METEOR (NLTK) on word tokens; WordNet synonyms when ``synonyms`` provides them.

    ``info`` describes ``synonyms`` and is reported in ``meta`` and the payload.

    Example:
        >>> round(meteor("the cat is on the mat", "the cat sat on the mat").score, 4)
        0.8067
    """
    from nltk.translate.meteor_score import align_words, single_meteor_score

    info = info or (
        WordNetInfo("exact+stem") if synonyms is NO_SYNONYMS else WordNetInfo("wordnet")
    )
    meta: dict[str, Any] = {"variant": info.variant}
    if info.source:
        meta["wordnet"] = info.source
    if info.version:
        meta["wordnet_version"] = info.version
    if info.error:
        meta["wordnet_error"] = info.error
    hyp, ref = words(output), words(reference)
    if not hyp or not ref:
        side = "reference" if not ref else "output"
        return MetricResult.failed("meteor", CATEGORY, f"the {side} has no words", **meta)
    stemmer = _porter()
    score = single_meteor_score(ref, hyp, stemmer=stemmer, wordnet=synonyms, **METEOR_PARAMS)
    matches, _, _ = align_words(hyp, ref, stemmer=stemmer, wordnet=synonyms)
    n = len(matches)
    chunks = 0
    for k, (hi, ri) in enumerate(matches):
        if k == 0 or not (hi == matches[k - 1][0] + 1 and ri == matches[k - 1][1] + 1):
            chunks += 1
    return MetricResult(
        name="meteor",
        category=CATEGORY,
        score=float(score),
        result=[
            {
                "variant": info.variant,
                "matches": n,
                "hypothesis_words": len(hyp),
                "reference_words": len(ref),
                "precision": n / len(hyp),
                "recall": n / len(ref),
                "chunks": chunks,
                **METEOR_PARAMS,
            }
        ],
        meta=meta,
    )


def _guard(name: str, fn: Callable[[], list[MetricResult]]) -> list[MetricResult]:
    """Run one metric family; a library failure becomes an error result for its metrics only."""
    try:
        return fn()
    except Exception as e:
        names = ROUGE_TYPES if name == "rouge" else (name,)
        return [MetricResult.failed(n, CATEGORY, f"{type(e).__name__}: {e}") for n in names]


def compute_refmatch(
    output: str | None,
    reference: str | None,
    synonyms: SynonymSource = NO_SYNONYMS,
    info: WordNetInfo | None = None,
) -> list[MetricResult]:
    """All five refmatch metrics, in :data:`METRICS` order (pure and thread-safe)."""
    if reference is None or not reference.strip():
        return [MetricResult.failed(n, CATEGORY, "no reference to compare with") for n in METRICS]
    if output is None or not output.strip():
        return [MetricResult.failed(n, CATEGORY, "the output is empty") for n in METRICS]
    return [
        *_guard("rouge", lambda: rouge(output, reference)),
        *_guard("bleu", lambda: [bleu(output, reference)]),
        *_guard("meteor", lambda: [meteor(output, reference, synonyms, info)]),
    ]


class RefmatchNode(Node):
    """ROUGE-1/2/L, BLEU and METEOR against the reference (see module docstring).

    ``synonyms``: the METEOR synonym source and its description; default: the process-wide
    WordNet if installed (loaded on first use, off the event loop), else exact+stem.
    """

    name = "refmatch"
    version = "1"
    output_model = RefmatchMetrics

    def __init__(self, synonyms: tuple[SynonymSource, WordNetInfo] | None = None):
        self._synonyms = synonyms

    def _info(self) -> WordNetInfo:
        return self._synonyms[1] if self._synonyms is not None else wordnet.default_info()

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        info = self._info()
        return {
            "meteor": info.variant,
            # stable before and after the lazy WordNet load (the version is only known after)
            "wordnet": info.source if info.variant == "wordnet" else None,
            "rouge_score": _lib_version("rouge-score"),
            "sacrebleu": _lib_version("sacrebleu"),
            "nltk": _lib_version("nltk"),
        }

    async def run(self, ctx: NodeContext) -> RefmatchMetrics:
        case = ctx.case
        if case.reference is None or not case.reference.strip():
            return RefmatchMetrics(metrics=compute_refmatch(case.output, case.reference))
        synonyms = self._synonyms
        if synonyms is None:
            synonyms = await ctx.runtime.to_thread(wordnet.default_synonyms)
        metrics = await ctx.runtime.to_thread(
            compute_refmatch, case.output, case.reference, synonyms[0], synonyms[1]
        )
        return RefmatchMetrics(metrics=metrics)
