"""refalign: matchings known by construction, knob validation, the node with real embeddings."""

from __future__ import annotations

from collections.abc import Callable
from itertools import permutations

import numpy as np
import pytest
from support.openai_server import OpenAIServer

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.nodes.refalign import align, hungarian, match_units
from nexagauge.schema.case import RecordError, parse_record
from nexagauge.schema.results import RefalignMetrics


# ------------------------------------------------------------------ matching (pure)
def _brute_force(sim: np.ndarray, thr: float) -> tuple[int, float]:
    """(max matches, max total similarity among max-cardinality matchings) by enumeration."""
    n, m = sim.shape
    best = (0, 0.0)
    if n <= m:
        for cols in permutations(range(m), n):
            pairs = [(i, j) for i, j in enumerate(cols) if sim[i, j] >= thr]
            cand = (len(pairs), sum(sim[i, j] for i, j in pairs))
            best = max(best, cand)
    else:
        return _brute_force(sim.T, thr)
    return best


def test_optimal_not_greedy() -> None:
    # greedy would take (0,0)=0.95 and leave row 1 unmatched; the optimum matches both rows
    sim = np.array([[0.95, 0.90], [0.85, 0.10]])
    assert match_units(sim, 0.7) == [(0, 1, 0.90), (1, 0, 0.85)]
    assert match_units(sim, 0.7, use_scipy=False) == [(0, 1, 0.90), (1, 0, 0.85)]


def test_threshold_and_one_to_one() -> None:
    # two output units want the same reference unit: only one gets it
    sim = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.75]])
    assert match_units(sim, 0.7) == [(0, 0, 0.9), (2, 1, 0.75)]
    assert match_units(sim, 0.95) == []
    assert match_units(np.zeros((0, 3)), 0.5) == []


def test_refine_top_k_restricts_candidates() -> None:
    # row 0's best is column 0 (0.9); with top_k=1 it may not take column 1 even when that
    # would let row 1 match too, so only one pair survives
    sim = np.array([[0.9, 0.8], [0.85, 0.1]])
    assert len(match_units(sim, 0.7)) == 2
    assert match_units(sim, 0.7, top_k=1) == [(0, 0, 0.9)]
    assert match_units(sim, 0.7, top_k=5) == match_units(sim, 0.7)


def test_matching_equals_brute_force_and_builtin_hungarian_equals_scipy() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, m = (int(x) for x in rng.integers(1, 6, size=2))
        sim = rng.random((n, m))
        expected = _brute_force(sim, 0.6)
        for use_scipy in (True, False):
            pairs = match_units(sim, 0.6, use_scipy=use_scipy)
            assert len({i for i, _, _ in pairs}) == len(pairs) == len({j for _, j, _ in pairs})
            assert (len(pairs), pytest.approx(sum(s for *_, s in pairs))) == (
                expected[0],
                pytest.approx(expected[1]),
            )
    from scipy.optimize import linear_sum_assignment

    for _ in range(100):
        cost = rng.random((int(rng.integers(1, 8)), int(rng.integers(1, 8))))
        r, c = linear_sum_assignment(cost)
        assert sum(cost[i, j] for i, j in hungarian(cost)) == pytest.approx(cost[r, c].sum())


def test_align_scores_from_known_vectors() -> None:
    e = np.eye(4, dtype=np.float32)
    # output units: ref0, ref1 (exact), and an unrelated unit; reference has a unit never said
    out = np.stack([e[0], e[1], e[3]])
    ref = np.stack([e[1], e[0], e[2]])
    a = align(["a", "b", "x"], ["B", "A", "C"], out, ref, 0.7, None)
    assert a.pairs == [(0, 1, 1.0), (1, 0, 1.0)]
    assert (a.precision, a.recall) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert a.f1 == pytest.approx(2 / 3)
    # mean-pooled global cosine: (e0+e1+e3)/3 . (e1+e0+e2)/3 normalized = 2/3
    assert a.global_cosine == pytest.approx(2 / 3)


# ------------------------------------------------------------------ knob validation
@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"similarity_threshold": 1.5}, "refalign.similarity_threshold"),
        ({"similarity_threshold": "high"}, "refalign.similarity_threshold"),
        ({"refine_top_k": 0}, "refalign.refine_top_k"),
        ({"atomic_chunks": "yes"}, "refalign.atomic_chunks"),
        ({"similarity": 0.5}, "refalign.similarity"),
    ],
)
def test_bad_refalign_block_is_a_record_error(block: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as err:
        parse_record({"output": "a", "reference": "b", "refalign": block}, index=4)
    assert err.value.field == field and "record 4" in str(err.value)


# ------------------------------------------------------------------ the node (real model)
REF = (
    "The Eiffel Tower is located in Paris. It was completed in 1889. The tower is 330 metres tall."
)


async def _refalign(rt: Runtime, output: str, **block: object) -> RefalignMetrics:
    rec: dict[str, object] = {"case_id": "r", "output": output, "reference": REF}
    if block:
        rec["refalign"] = block
    res = await Executor(rt, plan("refalign")).run_case(parse_record(rec))
    out = res.outcomes["refalign"]
    assert out.status == "ok", out.reason
    assert isinstance(out.output, RefalignMetrics)
    return out.output


@pytest.mark.integration
async def test_node_hand_computed_alignment(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime()
    # output: two reference sentences verbatim (reordered) + one unrelated sentence;
    # the "330 metres" reference sentence is missing
    output = (
        "It was completed in 1889. "
        "Bananas are rich in potassium. "
        "The Eiffel Tower is located in Paris."
    )
    m = {x.name: x for x in (await _refalign(rt, output)).metrics}
    assert set(m) == {"refalign_precision", "refalign_recall", "refalign_f1", "refalign_similarity"}
    assert all(x.category == "reference" for x in m.values())
    assert m["refalign_precision"].score == pytest.approx(2 / 3)
    assert m["refalign_recall"].score == pytest.approx(2 / 3)
    assert m["refalign_f1"].score == pytest.approx(2 / 3)
    assert 0.0 < (m["refalign_similarity"].score or 0) < 1.0
    ex = m["refalign_f1"].result[0]
    assert [(p["output_index"], p["reference_index"]) for p in ex["matched_pairs"]] == [
        (0, 1),
        (2, 0),
    ]
    assert all(p["similarity"] == pytest.approx(1.0, abs=1e-4) for p in ex["matched_pairs"])
    assert [u["unit"] for u in ex["missed_reference_units"]] == ["The tower is 330 metres tall."]
    assert [u["unit"] for u in ex["extra_output_units"]] == ["Bananas are rich in potassium."]
    meta = m["refalign_f1"].meta or {}
    assert meta["units"] == "sentences" and meta["matching"].startswith("hungarian")
    assert meta["embeddings"].startswith("local:")


@pytest.mark.integration
async def test_node_paraphrases_match_and_knobs_apply(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime()
    output = "The Eiffel Tower is in Paris. The tower was finished in 1889. It is 330 m tall."
    m = {x.name: x for x in (await _refalign(rt, output, similarity_threshold=0.6)).metrics}
    assert m["refalign_recall"].score == pytest.approx(1.0)
    assert m["refalign_precision"].score == pytest.approx(1.0)
    assert (m["refalign_similarity"].score or 0) > 0.8
    # an impossible threshold matches nothing: scores are 0, not errors
    strict = {x.name: x for x in (await _refalign(rt, output, similarity_threshold=1.0)).metrics}
    assert strict["refalign_f1"].score == 0.0 and strict["refalign_f1"].error is None
    # refine_top_k above the number of reference units is clamped and reported
    k = {x.name: x for x in (await _refalign(rt, output, refine_top_k=10)).metrics}
    assert (k["refalign_f1"].meta or {})["refine_top_k"] == 3
    # atomic_chunks without an LLM judge falls back to sentences and says so
    at = {x.name: x for x in (await _refalign(rt, output, atomic_chunks=True)).metrics}
    assert "needs an LLM judge" in (at["refalign_f1"].meta or {})["units"]


@pytest.mark.integration
async def test_node_atomic_units_from_the_llm_judge(
    make_runtime: Callable[..., Runtime], server: OpenAIServer
) -> None:
    rt = make_runtime(judge={"base_url": server.base_url, "api_key": "k", "max_retries": 0})
    assert rt.judge_kind == "llm"
    output = "The Eiffel Tower is located in Paris. It was completed in 1889."
    res = await _refalign(rt, output, atomic_chunks=True)
    m = {x.name: x for x in res.metrics}
    assert (m["refalign_f1"].meta or {})["units"] == "atomic_claims"
    assert m["refalign_precision"].score == pytest.approx(1.0)
    assert m["refalign_recall"].score == pytest.approx(2 / 3)
    assert res.cost.input_tokens > 0  # two extraction calls were paid for
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 2


@pytest.mark.integration
async def test_node_disabled_and_unusable_inputs(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime()
    case = parse_record({"output": "x", "reference": REF, "refalign": {"enabled": False}})
    res = await Executor(rt, plan("refalign")).run_case(case)
    assert res.outcomes["refalign"].status == "skipped"
    assert "disabled" in (res.outcomes["refalign"].reason or "")
    res = await Executor(rt, plan("refalign")).run_case(
        parse_record({"output": "...", "reference": REF})
    )
    metrics = res.outcomes["refalign"].output.metrics  # type: ignore[union-attr]
    assert len(metrics) == 4
    assert all(x.score is None and "no text units" in (x.error or "") for x in metrics)
