"""The local judge: lexical checks, verdicts with real embeddings, and the claim nodes end to end."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.judge.base import NEEDS_LLM, Judge
from nexagauge.judge.embeddings import LocalEmbedder
from nexagauge.judge.local.ce import ADAPTER, RelevanceCrossEncoder
from nexagauge.judge.local.e5 import E5_NAME
from nexagauge.judge.local.judge import (
    CALIBRATED,
    CALIBRATED_FOR,
    CALIBRATION_VERSION,
    LEXICON,
    LocalJudge,
    binary_stats,
    content_words,
    decide_grounding,
    entities,
    grounding_features,
    negation_count,
    numbers,
)
from nexagauge.schema.case import GroundingConfig, RelevanceConfig, parse_record
from nexagauge.schema.results import Chunk, Claim, Item, MetricResult


# ------------------------------------------------------------------ lexical units (pure)
def test_numbers_are_canonical() -> None:
    assert numbers("It is 1,332 km and 1332.0 m") == {"1332"}
    assert numbers("one and a half cups, six minutes") == {"1.5", "6"}
    assert numbers("the 21st century, the third-last defender") == {"#21", "#3"}
    assert numbers("No numbers here, v2 or H2O.") == set()
    assert numbers("in the 1960s, 5km away, $2.75 million") == {"1960", "5", "2.75"}


def test_entities_skip_the_sentence_start() -> None:
    assert entities("Paris is the capital of France.") == ["France"]
    assert entities("The tower was built by Gustave Eiffel in Lyon.") == [
        "Gustave",
        "Eiffel",
        "Lyon",
    ]
    assert entities("It runs on NVMe drives.") == ["NVMe"]
    # a unit symbol after a number is no name the context must contain (it rejected "A fever
    # means a temperature of 38 °C or higher." outright against "38 degrees Celsius")
    assert entities("A fever means 38 °C or higher; the sump takes 4.2 L.") == []
    assert entities("Vitamin C helps.") == ["C"]  # a letter not after a number still counts


def test_negation_and_content_words() -> None:
    assert negation_count("It is not open and they don't know; never.") == 3
    assert negation_count("It is open.") == 0
    assert content_words("The tower is 330 metres tall.") == ["tower", "metres", "tall"]
    # contractions and discourse words carry nothing to check (lexicon v2): "you're" and
    # "won't" once counted as content words the context lacked
    assert content_words("Since you're past it, it won't cost anything; that's why.") == [
        "past",
        "cost",
        "anything",
    ]
    assert content_words("The cat's bowl isn't full.") == ["cat's", "bowl", "full"]


def test_relevance_cues_goal_shift_short_answers_and_questions_back() -> None:
    from nexagauge.judge.local.cues import goal_shift, is_filler, is_short

    q = "How do I undo my last commit but keep the changes?"
    assert goal_shift("To change only the commit message, use git commit --amend.", q)
    assert goal_shift("If you'd like a higher credit limit, ask after six months.", q)
    assert goal_shift("While you're in there, bump shared_buffers too.", q)
    assert not goal_shift("To undo it but keep the changes, run git reset --soft HEAD~1.", q)
    assert not goal_shift("Run git reset --soft HEAD~1 to keep the changes.", q)
    assert is_short("6379.") and is_short("Mostly in the leaves.")
    assert not is_short("Redis listens on port 6379 by default.")
    assert is_filler("Which HTTP library are you using, by the way?")
    assert not is_filler("Back off and retry later.")


def test_grounding_checks_catch_hard_negatives_despite_high_similarity() -> None:
    ctx = ["The tower was completed in 1889 in Paris.", "It is 330 metres tall."]
    ok = grounding_features("The tower was finished in 1889 in Paris.", ctx, [0.95, 0.3])
    assert decide_grounding(ok, CALIBRATED) == (True, "supported")
    year = grounding_features("The tower was completed in 1899 in Paris.", ctx, [0.97, 0.3])
    assert year.missing_numbers == ["1899"]
    assert decide_grounding(year, CALIBRATED) == (False, "contradicted")
    city = grounding_features("The tower was completed in 1889 in Lyon.", ctx, [0.9, 0.3])
    assert city.missing_entities == ["Lyon"]
    assert decide_grounding(city, CALIBRATED)[1] == "contradicted"
    neg = grounding_features("The tower was not completed in 1889.", ctx, [0.9, 0.3])
    assert neg.negation_mismatch and neg.negated_copy  # the evidence, word for word, negated
    assert decide_grounding(neg, CALIBRATED) == (False, "contradicted")
    food = ["The capsules can be taken with or without food."]
    para = grounding_features("You don't need to take them with a meal.", food, [0.9])
    assert para.negation_mismatch and not para.negated_copy  # a negated paraphrase
    hedged = grounding_features("The tower is about 300 metres tall.", ctx, [0.2, 0.9])
    assert hedged.missing_numbers == []  # "about 300" may round 330
    unhedged = grounding_features("The tower is 300 metres tall.", ctx, [0.2, 0.9])
    assert unhedged.missing_numbers == ["300"]


def test_kappa_matches_a_hand_computation() -> None:
    # 10 pairs: tp=4 tn=3 fp=2 fn=1 -> po=.7, pe=(6*5+4*5)/100=.5, kappa=.4
    pred = [True] * 4 + [False] * 3 + [True] * 2 + [False]
    gold = [True] * 4 + [False] * 3 + [False] * 2 + [True]
    s = binary_stats(pred, gold)
    assert (s.tp, s.tn, s.fp, s.fn) == (4, 3, 2, 1)
    assert s.accuracy == pytest.approx(0.7) and s.kappa == pytest.approx(0.4)


# ------------------------------------------------------------------ the judge (real model)
def _claims(*texts: str) -> list[Claim]:
    return [
        Claim(item=Item(id=str(i), text=t, tokens=float(len(t.split()))), source_chunk_index=0)
        for i, t in enumerate(texts)
    ]


@pytest.mark.integration
async def test_local_judge_verdicts(judge_embedder: Any) -> None:
    judge = LocalJudge(embedder=judge_embedder)
    assert isinstance(judge, Judge)
    assert (judge.kind, judge.supports_llm_tasks) == ("local", False)
    assert judge.result_meta()["judge"] == "local"

    claims = _claims(
        "The Eiffel Tower is a wrought-iron tower in Paris.",
        "The Eiffel Tower is a wrought-iron tower in Lyon.",
        "Transformers use self-attention in deep learning.",
    )
    rel = await judge.judge_claims(
        "relevance",
        claims,
        "What is the Eiffel Tower and where is it?",
        RelevanceConfig(),
        node="relevance",
    )
    assert rel.ok and [v.raw for v in rel.verdicts] == [1, 1, 0]
    assert rel.cost.cost == 0 and rel.info.calls == 0

    ctx = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It opened in 1889."
    knobs = GroundingConfig(scoring_mode="scale_1_5", include_reasoning=True)
    grd = await judge.judge_claims("grounding", claims, ctx, knobs, node="grounding")
    assert grd.ok
    raws = [v.raw for v in grd.verdicts]
    labels = [v.label for v in grd.verdicts]
    assert raws[0] >= 4 and raws[1] == 1 and raws[2] <= 2
    assert labels == ["supported", "contradicted", "not_supported"]
    assert "Lyon" in (grd.verdicts[1].reason or "")
    assert grd.reasoning and "not an LLM" in grd.reasoning

    empty = await judge.judge_claims(
        "grounding", claims, "   ", GroundingConfig(), node="grounding"
    )
    assert empty.error is not None
    reply = await judge.structured("geval", {}, MetricResult, node="geval")
    assert reply.error == NEEDS_LLM and reply.value is None


async def test_local_claim_extraction_is_sentences() -> None:
    judge = LocalJudge()
    text = "Paris is in France. It has 2.1 million people.\nWant to know more?"
    chunk = Chunk(
        item=Item(id="c", text=text, tokens=20.0), index=3, char_start=0, char_end=len(text)
    )
    ex = await judge.extract_claims([chunk])
    assert ex.ok
    assert [(c.text, c.source_chunk_index) for c in ex.claims] == [
        ("Paris is in France.", 3),
        ("It has 2.1 million people.", 3),
    ]
    greeting = "Hi! How can I help you today?"
    g = Chunk(item=Item(id="g", text=greeting, tokens=8.0), index=0, char_start=0, char_end=14)
    assert (await judge.extract_claims([g])).claims == []
    only_q = Chunk(
        item=Item(id="q", text="Anything else?", tokens=3.0), index=0, char_start=0, char_end=14
    )
    assert (await judge.extract_claims([only_q])).claims == []


# ------------------------------------------------------------------ through the graph
@pytest.mark.integration
async def test_claims_relevance_grounding_nodes_with_the_local_judge(
    make_runtime: Callable[..., Runtime],
) -> None:
    rt = make_runtime()
    assert rt.judge_kind == "local"
    assert rt.judge.model == E5_NAME  # the judge uses its own packaged model
    case = parse_record(
        {
            "case_id": "eiffel",
            "input": "What is the Eiffel Tower and where is it located?",
            "output": (
                "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. "
                "It was completed in 1899. "
                "Transformers use self-attention in deep learning."
            ),
            "context": (
                "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, "
                "France. It was completed in 1889 for the World's Fair."
            ),
            "geval": {"metrics": [{"name": "clarity", "criteria": "Is the answer clear?"}]},
        }
    )
    res = await Executor(rt, plan("eval")).run_case(case)
    claims = res.outcomes["claims"].output
    assert res.outcomes["claims"].status == "ok"
    assert [c.item.text for c in claims.claims] == [  # type: ignore[union-attr]
        "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
        "It was completed in 1899.",
        "Transformers use self-attention in deep learning.",
    ]
    rel = res.outcomes["relevance"].output.metrics[0]  # type: ignore[union-attr]
    grd = res.outcomes["grounding"].output.metrics[0]  # type: ignore[union-attr]
    for m in (rel, grd):
        assert m.meta and m.meta["judge"] == "local" and m.meta["model"].startswith("local:")
    # the wrong year answers the question (relevant under the labelling rule: correctness is
    # grounding's business, bench/local_judge/RECORD.md; v1 labels the same sentence on_topic) and is
    # contradicted by the context; the aside about transformers is neither
    assert [c["verdict"] for c in rel.result] == ["ACCEPTED", "ACCEPTED", "REJECTED"]
    assert [c["verdict"] for c in grd.result] == ["ACCEPTED", "REJECTED", "REJECTED"]
    assert grd.result[1]["label"] == "contradicted"
    assert rel.score == pytest.approx(2 / 3) and grd.score == pytest.approx(1 / 3)
    # the case summary names the variant that judged
    summary = res.outcomes["eval"].output
    assert summary.judge == "local"  # type: ignore[union-attr]
    assert summary.judge_model == rt.judge.describe()  # type: ignore[union-attr]
    report = res.outcomes["report"].output
    assert report.judge_model == rt.judge.describe()  # type: ignore[union-attr]
    assert rel.meta["calibration"] == CALIBRATION_VERSION and rel.meta["lexicon"] == LEXICON
    # nodes that need a real LLM are skipped, saying why
    for node in ("redteam", "geval_steps"):
        assert res.outcomes[node].status == "skipped"
        assert res.outcomes[node].reason == NEEDS_LLM
    assert res.outcomes["geval"].status == "skipped"


def test_meta_flags_an_uncalibrated_embedding_backend() -> None:
    from nexagauge.judge.embeddings import OpenAIEmbedder
    from nexagauge.settings import EmbeddingSettings

    remote = OpenAIEmbedder(EmbeddingSettings(provider="openai", model="m", base_url="http://x/v1"))
    meta = LocalJudge(embedder=remote).result_meta()
    assert meta["judge"] == "local" and meta["uncalibrated"] is True
    assert meta["embeddings"].startswith("openai:m")


def test_meta_of_the_calibrated_model() -> None:
    judge = LocalJudge()  # its own packaged model (nothing is loaded to describe it)
    meta = judge.result_meta()
    assert "uncalibrated" not in meta and meta["model"] == E5_NAME == CALIBRATED_FOR
    # every result says which variant judged: embedder, cross-encoder (with its adapter's
    # digest), lexicon, calibration version
    assert meta["embedder"] == E5_NAME
    assert meta["lexicon"] == LEXICON and meta["calibration"] == CALIBRATION_VERSION
    adapter = hashlib.sha256(ADAPTER.read_bytes()).hexdigest()[:12]
    assert meta["cross_encoder"] == f"local:all-minilm-l6-v2-ce:{adapter}"
    assert judge.describe() == (
        f"{E5_NAME} cross_encoder=local:all-minilm-l6-v2-ce:{adapter} lexicon={LEXICON} "
        f"calibration={CALIBRATION_VERSION}"
    )
    assert CALIBRATION_VERSION in meta["method"] and LEXICON in meta["method"]
    # another adapter, another method: cached verdicts never mix adapters
    other = LocalJudge(cross_encoder=RelevanceCrossEncoder(Path("/nonexistent.npz")))
    assert other.method() != judge.method()
    # the docs show what a result of this judge carries (not a stale adapter or calibration)
    docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "local-judge.md")
                    .read_text("utf-8").split())  # fmt: skip
    for key in ("embedder", "lexicon", "cross_encoder", "calibration"):
        assert f'"{key}": "{meta[key]}"' in docs, key
    assert f"`{judge.describe()}`" in docs


def test_a_configured_embedding_service_is_used_and_marked_uncalibrated(
    embedder: LocalEmbedder,
) -> None:
    from nexagauge.settings import Settings

    s = Settings(embeddings={"model_path": str(embedder.model_dir)})
    judge = LocalJudge(s, embedder_factory=lambda: embedder)
    meta = judge.result_meta()
    assert judge.embedder is embedder and meta["uncalibrated"] is True


def test_verdicts_do_not_depend_on_an_installed_wordnet(tmp_path: Path) -> None:
    """The judge reads no lexicon from the host: with a WordNet database on the search path
    (``WNSEARCHDIR``, as Debian's ``wordnet-base`` would provide) nothing WordNet-related is
    even imported, and the features of a synonym paraphrase are the same."""
    db = tmp_path / "dict"
    db.mkdir()
    for f in ("index.noun", "index.verb", "index.adj", "index.adv", "data.noun", "data.verb",
              "data.adj", "data.adv"):  # fmt: skip
        (db / f).write_text("")
    code = (
        "import sys, json\n"
        "from nexagauge.judge.local import judge as local\n"
        "from nexagauge.graph.runtime import Runtime\n"
        "f = local.grounding_features('The work finished in 1889.', "
        "['The work was completed in 1889.'], [0.9])\n"
        "print(json.dumps([f.as_dict(), sorted(m for m in sys.modules "
        "if 'wordnet' in m or m.startswith('nltk'))]))\n"
    )
    outs = []
    for env_extra in ({}, {"WNSEARCHDIR": str(db)}):
        env = {**os.environ, **env_extra}
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True)  # fmt: skip
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1]
    assert outs[0][1] == []  # neither nexagauge.text.wordnet nor nltk was loaded


def test_runtime_defaults_to_the_local_judge_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nexagauge.settings import Settings

    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "NEXAGAUGE_JUDGE_BASE_URL",
        "NEXAGAUGE_JUDGE_API_KEY",
        "NEXAGAUGE_JUDGE_MODE",
    ):
        monkeypatch.delenv(var, raising=False)
    rt = Runtime.create(Settings(), use_cache=False)
    assert isinstance(rt.judge, LocalJudge) and rt.judge_kind == "local"
    assert not hasattr(rt.judge, "runtime")  # it holds an embedder factory and offload only


async def test_the_judge_offloads_through_the_function_it_is_given() -> None:
    import numpy as np

    calls: list[str] = []

    async def offload(fn: Callable[..., object], *args: object) -> object:
        calls.append(getattr(fn, "__name__", "fn"))
        return fn(*args)

    class Fixed:
        name = "test:fixed"

        async def embed(self, texts: list[str]) -> np.ndarray:
            v = np.ones((len(texts), 4), dtype=np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

        async def aclose(self) -> None:
            return None

    from nexagauge.settings import Settings

    built: list[Fixed] = []
    # configured (non-default) embeddings: the judge takes them from the factory, on first use
    s = Settings(embeddings={"provider": "openai", "base_url": "http://127.0.0.1:9/v1"})
    judge = LocalJudge(s, embedder_factory=lambda: built.append(Fixed()) or built[-1],
                       offload=offload)  # fmt: skip
    assert built == []  # nothing is built before the first use
    out = await judge.judge_claims("grounding", _claims("Paris is in France."),
                                   "Paris is in France.", GroundingConfig(), node="grounding")  # fmt: skip
    assert out.ok and [v.label for v in out.verdicts] == ["supported"]
    assert len(built) == 1 and calls  # the CPU part went through the given offload


@pytest.mark.integration
async def test_single_correct_answers_are_accepted(judge_embedder: Any) -> None:
    """Issue 17: on real traffic, one-sentence correct answers were scored 0 on relevance and
    grounding. Judged alone (no answer around them), most must now be accepted on both."""
    cases = [
        ("What is the capital of France?", "The capital of France is Paris.",
         "Paris is the capital and most populous city of France."),
        ("How many moons does Mars have?", "Mars has two moons, Phobos and Deimos.",
         "Mars has two small moons, Phobos and Deimos, which were discovered in 1877."),
        ("When did World War II end?", "World War II ended in 1945.",
         "World War II ended in 1945 with the surrender of Germany in May and Japan in September."),
        ("Who wrote Pride and Prejudice?", "Jane Austen wrote it.",
         "Pride and Prejudice is an 1813 novel by Jane Austen."),
        ("What is the boiling point of water at sea level?",
         "Water boils at 100 degrees Celsius at sea level.",
         "At standard atmospheric pressure, pure water boils at 100 °C (212 °F)."),
        ("How long should I boil an egg for a soft yolk?", "About six minutes.",
         "For a soft, runny yolk, boil the egg for six minutes, then cool it in cold water."),
    ]  # fmt: skip
    judge = LocalJudge(embedder=judge_embedder)
    rel_ok = grd_ok = 0
    for question, answer, context in cases:
        rel = await judge.judge_claims("relevance", _claims(answer), question, RelevanceConfig(),
                                       node="relevance")  # fmt: skip
        grd = await judge.judge_claims("grounding", _claims(answer), context, GroundingConfig(),
                                       node="grounding")  # fmt: skip
        rel_ok += rel.verdicts[0].raw
        grd_ok += grd.verdicts[0].raw
    # measured: 5 of 6 on each ("Jane Austen wrote it." is judged off-topic, "About six
    # minutes." unsupported: bench/local_judge/RECORD.md, honest limits)
    assert rel_ok >= 5 and grd_ok >= 5, (rel_ok, grd_ok)


async def test_grounding_reads_the_best_evidence_sentences_as_queries() -> None:
    """Grounding embeds as queries exactly the best evidence sentences of the claims (each once)
    - not the claims, not the whole context - and its ``rsim`` is their query->passage
    similarity to the claim."""
    import numpy as np

    vocab = ["paris", "france", "tower", "rain", "cheese"]

    def vec(text: str, query: bool) -> np.ndarray:
        v = np.array([text.lower().count(w) for w in vocab], dtype=np.float32) + 0.01
        if query:
            v = v[::-1].copy()  # an asymmetric model: queries live elsewhere
        return v / np.linalg.norm(v)

    asked: list[list[str]] = []

    class Asymmetric:
        name = "test:asymmetric"

        async def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([vec(t, False) for t in texts])

        async def embed_queries(self, texts: list[str]) -> np.ndarray:
            asked.append(list(texts))
            return np.array([vec(t, True) for t in texts])

    ctx = "Paris is in France. The tower is in Paris. It rains a lot. Cheese is sold."
    claims = ["France has Paris in it.", "Paris has a tower."]  # not the context's words
    judge = LocalJudge(embedder=Asymmetric())
    feats = await judge.grounding_features(claims, ctx)
    n_ev = judge.thresholds.evidence_sentences
    assert len(asked) == 1
    ctx_sents = [
        "Paris is in France.",
        "The tower is in Paris.",
        "It rains a lot.",
        "Cheese is sold.",
    ]
    want = sorted({i for f in feats for i in f.evidence})
    assert asked[0] == [ctx_sents[i] for i in want] and len(asked[0]) <= n_ev * len(claims)
    for claim, f in zip(claims, feats, strict=True):
        expect = max(float(vec(ctx_sents[i], True) @ vec(claim, False)) for i in f.evidence)
        assert f.rsim == pytest.approx(expect)
