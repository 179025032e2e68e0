"""refmatch: each lexical metric against hand-computed values, METEOR with and without WordNet.

Hand computations use the libraries' documented definitions:
- ROUGE-N F1 = 2PR/(P+R) over (Porter-stemmed, lower-cased) n-gram multisets; ROUGE-L uses the
  longest common subsequence (P = LCS/|output|, R = LCS/|reference|).
- BLEU (sacrebleu, 13a, exp smoothing, effective order) = BP * exp(mean(log p_n)) over the orders
  with at least one hypothesis n-gram; a zero match count at the k-th such order is smoothed to
  1 / (2^k * total_n); BP = exp(1 - r/c) when c < r, else 1.
- METEOR (NLTK; alpha=0.9, beta=3, gamma=0.5) = Fmean * (1 - 0.5 * (chunks/matches)^3),
  Fmean = P*R / (0.9*P + 0.1*R).
"""

from __future__ import annotations

import gzip
import math
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.nodes.refmatch import (
    CATEGORY,
    METRICS,
    RefmatchNode,
    bleu,
    compute_refmatch,
    meteor,
    rouge,
)
from nexagauge.schema.results import RefmatchMetrics
from nexagauge.text import wordnet
from nexagauge.text.wordnet import NO_SYNONYMS, WordNetInfo

from .conftest import ctx

NO_WN = (NO_SYNONYMS, WordNetInfo("exact+stem"))


def _by_name(metrics):
    return {m.name: m for m in metrics}


# ------------------------------------------------------------------------------------------
# ROUGE
# ------------------------------------------------------------------------------------------
def test_rouge_one_substitution() -> None:
    # out: the cat is  on the mat     ref: the cat sat on the mat
    # unigrams in common (multiset): the x2, cat, on, mat = 5 of 6 / 6 -> P = R = F = 5/6
    # bigrams out: the-cat cat-is is-on on-the the-mat; ref: the-cat cat-sat sat-on on-the the-mat
    #   common: the-cat, on-the, the-mat = 3 of 5 / 5 -> F = 3/5
    # LCS = the cat on the mat = 5 -> F = 5/6
    r = _by_name(rouge("the cat is on the mat", "the cat sat on the mat"))
    assert r["rouge1"].score == pytest.approx(5 / 6)
    assert r["rouge2"].score == pytest.approx(3 / 5)
    assert r["rougeL"].score == pytest.approx(5 / 6)
    assert r["rouge1"].result == [
        {"precision": pytest.approx(5 / 6), "recall": pytest.approx(5 / 6),
         "fmeasure": pytest.approx(5 / 6)}
    ]  # fmt: skip
    assert all(m.category == CATEGORY == "reference" for m in r.values())


def test_rouge_short_output_precision_recall() -> None:
    # out: the cat (2 tokens) vs ref of 6 tokens
    # ROUGE-1: 2 common -> P = 1, R = 2/6 -> F = 2 * 1 * (1/3) / (4/3) = 1/2
    # ROUGE-2: out bigram the-cat is in ref: P = 1/1, R = 1/5 -> F = 2 * 0.2 / 1.2 = 1/3
    # ROUGE-L: LCS 2 -> same as ROUGE-1 = 1/2
    r = _by_name(rouge("The cat.", "the cat sat on the mat"))
    assert r["rouge1"].score == pytest.approx(0.5)
    assert r["rouge2"].score == pytest.approx(1 / 3)
    assert r["rougeL"].score == pytest.approx(0.5)


def test_rouge_uses_stemmer() -> None:
    # Porter stems (rouge-score stems tokens longer than 3 chars): dogs->dog, barked/barks->bark,
    # loudly->loudli on both sides: every unigram and bigram matches -> 1.0
    r = _by_name(rouge("the dogs barked loudly", "the dog barks loudly"))
    assert [r[n].score for n in ("rouge1", "rouge2", "rougeL")] == [1.0, 1.0, 1.0]


def test_rouge_undefined_cases_are_errors_not_zero() -> None:
    # rouge-score keeps only [a-z0-9]: a Japanese text has no ROUGE tokens at all
    r = _by_name(rouge("東京は日本の首都です", "東京は日本の首都です"))
    assert all(m.score is None and "no ROUGE tokens" in (m.error or "") for m in r.values())
    # one word: ROUGE-1/L defined, ROUGE-2 has no bigram on the output side
    r = _by_name(rouge("Paris", "Paris is the capital"))
    assert r["rouge1"].score == pytest.approx(2 * 1 * 0.25 / 1.25)  # P = 1, R = 1/4 -> 0.4
    assert r["rouge2"].score is None and "fewer than 2" in (r["rouge2"].error or "")


# ------------------------------------------------------------------------------------------
# BLEU
# ------------------------------------------------------------------------------------------
def test_bleu_one_substitution() -> None:
    # p1 = 5/6, p2 = 3/5, p3 = 1/4 (only on-the-mat), p4 = 0/3 -> smoothed 1/(2 * 3) = 1/6
    # c = r = 6 -> BP = 1;  BLEU = (5/6 * 3/5 * 1/4 * 1/6) ** (1/4) = (1/48) ** 0.25 = 0.37992
    m = bleu("the cat is on the mat", "the cat sat on the mat")
    assert m.score == pytest.approx(48**-0.25, abs=1e-9)
    payload = m.result[0]
    assert payload["counts"] == [5, 3, 1, 0] and payload["totals"] == [6, 5, 4, 3]
    assert payload["precisions"] == pytest.approx([5 / 6, 3 / 5, 1 / 4, 1 / 6])
    assert payload["brevity_penalty"] == 1.0
    assert "eff:yes" in payload["signature"] and "tok:13a" in payload["signature"]


def test_bleu_no_stemming_and_repeated_smoothing() -> None:
    # tokens: the dogs barked loudly / the dog barks loudly: p1 = 2/4 (the, loudly);
    # p2, p3, p4 have no match -> 1/(2*3), 1/(4*2), 1/(8*1): BLEU = (1/2*1/6*1/8*1/8) ** 0.25
    m = bleu("the dogs barked loudly", "the dog barks loudly")
    assert m.score == pytest.approx(768**-0.25, abs=1e-9)  # 0.18996


def test_bleu_brevity_penalty_and_effective_order() -> None:
    # "the cat" vs 6-token reference: p1 = 2/2, p2 = 1/1; no 3-/4-grams in the hypothesis, so
    # the effective order is 2: BLEU = BP * 1 = exp(1 - 6/2) = exp(-2) = 0.135335
    m = bleu("the cat", "the cat sat on the mat")
    assert m.score == pytest.approx(math.exp(-2), abs=1e-9)
    # a one-word exact answer is a perfect match with effective order 1 (not smoothed to ~0)
    assert bleu("Paris", "Paris").score == pytest.approx(1.0)


def test_bleu_identical_is_one_and_scaled() -> None:
    m = bleu("The Eiffel Tower is in Paris.", "The Eiffel Tower is in Paris.")
    assert m.score == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------
# METEOR
# ------------------------------------------------------------------------------------------
def test_meteor_exact_and_stem_without_wordnet() -> None:
    # words: the cat is on the mat / the cat sat on the mat; exact matches 5 (is/sat unmatched)
    # P = R = 5/6 -> Fmean = 5/6; alignment (0,0)(1,1) | (3,3)(4,4)(5,5) -> 2 chunks
    # penalty = 0.5 * (2/5)^3 = 0.032 -> 5/6 * 0.968 = 0.806667
    m = meteor("the cat is on the mat", "the cat sat on the mat", *NO_WN)
    assert m.score == pytest.approx(5 / 6 * (1 - 0.5 * 0.4**3))
    assert m.meta == {"variant": "exact+stem"}
    p = m.result[0]
    assert (p["variant"], p["matches"], p["chunks"]) == ("exact+stem", 5, 2)


def test_meteor_stem_stage() -> None:
    # exact: the, loudly; stem: dogs~dog, barked~barks -> 4 matches, one chunk
    # P = R = 1 -> Fmean = 1; penalty = 0.5 * (1/4)^3 -> 1 - 1/128 = 0.9921875
    m = meteor("The dogs barked loudly!", "the dog barks loudly", *NO_WN)
    assert m.score == pytest.approx(1 - 0.5 * (1 / 4) ** 3)


def test_meteor_nltk_alignment_takes_the_last_equal_word() -> None:
    # hyp: the cat; ref: the cat sat on the mat. NLTK matches each hypothesis word (right to
    # left) to the LAST unused equal reference word: cat->1, the->4. Alignment (0,4),(1,1): 2
    # chunks for 2 matches. P = 1, R = 2/6; Fmean = (1/3) / (0.9 + 0.1/3) = 0.357143;
    # penalty = 0.5 * (2/2)^3 = 0.5 -> 0.178571
    m = meteor("the cat", "the cat sat on the mat", *NO_WN)
    assert m.score == pytest.approx(0.5 * (1 / 3) / (0.9 + 0.1 / 3))


def test_meteor_synonym_needs_wordnet(system_wordnet) -> None:
    # without WordNet: quick/fast unmatched: 3 matches of 4, one chunk
    #   Fmean = 3/4, penalty = 0.5 * (1/3)^3 -> 0.75 * (1 - 1/54) = 0.736111
    without = meteor("the cat is quick", "the cat is fast", *NO_WN)
    assert without.score == pytest.approx(0.75 * (1 - 0.5 / 27))
    # with WordNet: fast is a lemma of a synset of quick -> 4 matches, one chunk
    #   Fmean = 1, penalty = 0.5 * (1/4)^3 -> 0.9921875
    src, info = system_wordnet
    with_wn = meteor("the cat is quick", "the cat is fast", src, info)
    assert with_wn.score == pytest.approx(1 - 0.5 / 64)
    assert with_wn.meta is not None and with_wn.meta["variant"] == "wordnet"
    assert with_wn.meta["wordnet_version"] == "3.0"
    assert with_wn.result[0]["variant"] == "wordnet"


def test_meteor_no_words_is_an_error() -> None:
    m = meteor("!!! ...", "the cat", *NO_WN)
    assert m.score is None and m.error == "the output has no words"


# ------------------------------------------------------------------------------------------
# WordNet loading
# ------------------------------------------------------------------------------------------
def test_lexnames_match_the_wordnet_manual() -> None:
    man = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not man.exists():
        pytest.skip("lexnames(5WN) manual not installed")
    with gzip.open(man, "rt") as fh:
        rows = re.findall(r"^(\d\d)\t(\S+)\s*\t", fh.read(), re.M)
    assert [name for _, name in rows] == list(wordnet.LEXNAMES_30)
    assert [int(n) for n, _ in rows] == list(range(45))
    assert wordnet.lexnames_text().splitlines()[3] == "03\tnoun.Tops\t1"


def test_wordnet_synonyms_and_thread_safety(system_wordnet) -> None:
    src, _ = system_wordnet
    assert isinstance(src, wordnet.LockedWordNet)
    assert {"fast", "speedy", "agile"} <= src.synonyms("quick")
    assert src.synonyms("xyzzyq") == set()
    words = ["car", "quick", "happy", "run", "house", "big", "small", "walk", "eat", "dog"] * 4
    expected = {w: src.synonyms(w) for w in set(words)}
    results: dict[int, set[str]] = {}

    def look(i: int, w: str) -> None:
        results[i] = src.synonyms(w)

    threads = [threading.Thread(target=look, args=(i, w)) for i, w in enumerate(words)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i] == expected[w] for i, w in enumerate(words))


def test_missing_or_broken_wordnet_falls_back(tmp_path) -> None:
    src, info = wordnet.load_synonyms(str(tmp_path / "absent"))
    assert src is NO_SYNONYMS and info.variant == "exact+stem" and "no WordNet" in info.error
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in wordnet.REQUIRED_FILES:
        (broken / f).write_text("garbage here\n")
    src, info = wordnet.load_synonyms(str(broken))
    assert src is NO_SYNONYMS and info.variant == "exact+stem" and info.error


def test_locate_honours_wnsearchdir(monkeypatch, tmp_path) -> None:
    db = tmp_path / "dict"
    db.mkdir()
    for f in wordnet.REQUIRED_FILES:
        (db / f).write_text("")
    monkeypatch.setenv("WNSEARCHDIR", str(db))
    assert wordnet.candidate_dirs()[0] == db
    assert wordnet.locate() == str(db)


# ------------------------------------------------------------------------------------------
# The node
# ------------------------------------------------------------------------------------------
async def test_node_all_metrics_hand_computed(case, make_runtime) -> None:
    rt = make_runtime()
    c = case("the cat is on the mat", reference="the cat sat on the mat")
    out = await RefmatchNode(synonyms=NO_WN).run(ctx(c, rt))
    assert isinstance(out, RefmatchMetrics)
    assert [m.name for m in out.metrics] == list(METRICS)
    scores = {m.name: m.score for m in out.metrics}
    assert scores == pytest.approx(
        {"rouge1": 5 / 6, "rouge2": 3 / 5, "rougeL": 5 / 6, "bleu": 48**-0.25,
         "meteor": 5 / 6 * (1 - 0.5 * 0.4**3)}
    )  # fmt: skip
    assert out.cost.cost == 0 and out.cost.input_tokens == 0
    assert rt.offloaded == 1  # the CPU work ran in the runtime's thread pool
    dumped = out.model_dump(mode="json")
    assert dumped["metrics"][4]["meta"] == {"variant": "exact+stem"}
    assert "meta" not in dumped["metrics"][0]  # empty meta is omitted from JSON


async def test_node_default_uses_installed_wordnet(case, make_runtime, monkeypatch,
                                                   system_wordnet) -> None:  # fmt: skip
    monkeypatch.setattr(wordnet, "_default", system_wordnet)  # reuse the session's load
    rt = make_runtime()
    c = case("the cat is quick", reference="the cat is fast")
    node = RefmatchNode()
    assert node.cache_key_parts(ctx(c, rt))["meteor"] == "wordnet"
    out = await node.run(ctx(c, rt))
    m = _by_name(out.metrics)["meteor"]
    assert m.score == pytest.approx(1 - 0.5 / 64)
    assert m.meta is not None and m.meta["variant"] == "wordnet"


async def test_node_cache_key_distinguishes_variants(case, make_runtime) -> None:
    rt = make_runtime()
    c = case("a", reference="b")
    k_no = RefmatchNode(synonyms=NO_WN).cache_key_parts(ctx(c, rt))
    k_wn = RefmatchNode(
        synonyms=(NO_SYNONYMS, WordNetInfo("wordnet", "/usr/share/wordnet", "3.0"))
    ).cache_key_parts(ctx(c, rt))
    assert k_no["meteor"] == "exact+stem" and k_wn["meteor"] == "wordnet" and k_no != k_wn
    assert {"rouge_score", "sacrebleu", "nltk"} <= set(k_no)


async def test_node_defensive_without_reference(case, make_runtime) -> None:
    rt = make_runtime()
    for ref in (None, "   "):
        c = case("some output", reference=ref) if ref is not None else case("some output")
        out = await RefmatchNode(synonyms=NO_WN).run(ctx(c, rt))
        assert [m.name for m in out.metrics] == list(METRICS)
        assert all(
            m.score is None and m.error == "no reference to compare with" for m in out.metrics
        )


def test_one_failing_library_does_not_hide_the_others(monkeypatch) -> None:
    import nexagauge.nodes.refmatch as rm

    def boom(*a, **k):
        raise RuntimeError("sacrebleu exploded")

    monkeypatch.setattr(rm, "bleu", boom)
    ms = _by_name(compute_refmatch("the cat", "the cat sat", *NO_WN))
    assert ms["bleu"].score is None and ms["bleu"].error == "RuntimeError: sacrebleu exploded"
    assert ms["rouge1"].score is not None and ms["meteor"].score is not None


# ------------------------------------------------------------------------------------------
# ROUGE-L's bit-parallel LCS equals rouge-score's own table
# ------------------------------------------------------------------------------------------
def test_lcs_hand_computed() -> None:
    from nexagauge.text.lcs import lcs_length

    assert lcs_length("ABCBDAB", "BDCABA") == 4  # classic CLRS example: BCBA
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a"] * 70, ["a"] * 65) == 65  # crosses a 64-bit word boundary


@settings(max_examples=150, deadline=None)
@given(
    a=st.lists(st.sampled_from("abcde"), max_size=90),
    b=st.lists(st.sampled_from("abcdef"), max_size=90),
)
def test_lcs_equals_rouge_score_table(a: list[str], b: list[str]) -> None:
    from rouge_score.rouge_scorer import _lcs_table

    from nexagauge.text.lcs import lcs_length

    expected = _lcs_table(a, b)[-1][-1] if a and b else 0
    assert lcs_length(a, b) == expected == lcs_length(b, a)


@settings(max_examples=40, deadline=None)
@given(
    out=st.lists(st.sampled_from(["the", "cats", "cat", "sat", "on", "mat", "running", "ran"]),
                 min_size=1, max_size=40),
    ref=st.lists(st.sampled_from(["the", "cat", "sits", "on", "a", "mat", "runs", "ran"]),
                 min_size=1, max_size=40),
)  # fmt: skip
def test_rouge_matches_rouge_score_exactly(out: list[str], ref: list[str]) -> None:
    from rouge_score import rouge_scorer

    o, r = " ".join(out), " ".join(ref)
    expected = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(
        r, o
    )
    got = _by_name(rouge(o, r))
    for name in ("rouge1", "rougeL") + (("rouge2",) if min(len(out), len(ref)) >= 2 else ()):
        assert got[name].score == pytest.approx(expected[name].fmeasure, abs=1e-12), name


async def test_node_default_without_any_wordnet(case, make_runtime, monkeypatch, tmp_path) -> None:
    """A machine without WordNet: the default node runs METEOR exact+stem and says so."""
    monkeypatch.setattr(wordnet, "candidate_dirs", lambda: [tmp_path / "none"])
    monkeypatch.setattr(wordnet, "locate", lambda: None)  # also hides NLTK's own corpus
    monkeypatch.setattr(wordnet, "_default", None)
    rt = make_runtime()
    c = case("the cat is quick", reference="the cat is fast")
    node = RefmatchNode()
    assert node.cache_key_parts(ctx(c, rt))["meteor"] == "exact+stem"
    out = await node.run(ctx(c, rt))
    m = _by_name(out.metrics)["meteor"]
    assert m.score == pytest.approx(0.75 * (1 - 0.5 / 27))  # no synonym stage: 3 of 4 words
    assert m.meta == {"variant": "exact+stem"}
    assert wordnet.default_synonyms()[0] is NO_SYNONYMS


async def test_node_cache_key_is_stable_across_the_lazy_wordnet_load(
    case, make_runtime, monkeypatch, system_wordnet
) -> None:
    """Cases planned before WordNet finished loading must get the same key as later ones."""
    rt = make_runtime()
    c = case("the cat is quick", reference="the cat is fast")
    node = RefmatchNode()
    monkeypatch.setattr(wordnet, "_default", None)  # not loaded yet: located only
    before = node.cache_key_parts(ctx(c, rt))
    monkeypatch.setattr(wordnet, "_default", system_wordnet)  # loaded (version now known)
    after = node.cache_key_parts(ctx(c, rt))
    assert before == after and before["meteor"] == "wordnet"
