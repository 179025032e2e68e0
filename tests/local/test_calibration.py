"""The labelled sets and the calibration report (real model on every pair, offline).

Asserts what ``bench/local_judge/RECORD.md`` claims: the sets are large enough and split by item, the
shipped decision models are what fitting on the *calibration halves* gives, and on the
*held-out halves* the local judge keeps its measured accuracy.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.scripts import bench_module, load_script

from nexagauge.judge.local.judge import CALIBRATED, LinearModel, LocalJudge

ROOT = Path(__file__).resolve().parents[2]
#: the experiment record: its tables are checked against the committed runs
RECORD = ROOT / "bench" / "local_judge" / "RECORD.md"
#: measured held-out accuracy of the shipped models on the v2 and v3 sets, rounded down (no
#: regression; bench/local_judge/RECORD.md has the figures)
FLOOR = {
    ("v2", "relevance"): 0.90,
    ("v2", "grounding"): 0.72,
    ("v3", "relevance"): 0.91,
    ("v3", "grounding"): 0.74,
}


bench = bench_module("local_judge.accuracy")
builder = load_script(
    "build_local_judge_sets", ROOT / "tests" / "data" / "build_local_judge_sets.py"
)


def test_labelled_sets_are_big_balanced_and_split_by_item() -> None:
    rel, grd = bench.load_pairs("relevance"), bench.load_pairs("grounding")
    assert len(rel) >= 300 and len(grd) >= 300
    for rows, labels in ((rel, {"on_topic", "off_topic"}), (grd, {"supported", "unsupported"})):
        assert {r["label"] for r in rows} == labels
        assert {r["split"] for r in rows} == {"calibration", "heldout"}
        cal = {r["item"] for r in rows if r["split"] == "calibration"}
        held = {r["item"] for r in rows if r["split"] == "heldout"}
        assert cal and held and not cal & held  # no item (question/context) in both halves
        assert len({r["domain"] for r in rows}) >= 15
    kinds = {r["kind"] for r in grd}
    assert {"number", "entity", "negation"} <= kinds  # hard negatives are present


def test_committed_pair_files_match_the_builder() -> None:
    rel, grd = builder.build(builder.load_items())
    assert rel == bench.load_pairs("relevance")
    assert grd == bench.load_pairs("grounding")


#: whichever test runs first pays for :func:`prepared` (about 225 s on one thread of the 2-core
#: development machine): more than the suite's default per-test timeout leaves to spare
PREPARE_TIMEOUT = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def prepared(judge_embedder: Any) -> object:
    """Features of every row of both sets, computed once with the real judge (own event loop)."""
    return asyncio.run(bench.prepare(LocalJudge(embedder=judge_embedder)))


def _close(a: LinearModel, b: LinearModel) -> bool:
    """Same model up to float noise in the last rounded digit (1% of each weight, or 0.01)."""
    pairs = [
        (a.bias, b.bias),
        *((x, y) for (_, x), (_, y) in zip(a.weights, b.weights, strict=True)),
    ]
    names_equal = [n for n, _ in a.weights] == [n for n, _ in b.weights]
    return names_equal and all(abs(x - y) <= max(0.01, 0.01 * abs(y)) for x, y in pairs)


@pytest.mark.slow
@pytest.mark.integration
@PREPARE_TIMEOUT
def test_calibration_reproduces_the_models_and_meets_the_floors(prepared: object) -> None:
    fitted = bench.calibrate_on(prepared, "calibration")
    assert _close(fitted.relevance, CALIBRATED.relevance), fitted.relevance
    assert _close(fitted.grounding, CALIBRATED.grounding), fitted.grounding
    rows = bench.evaluate(prepared, CALIBRATED, "heldout")
    stats = {(r.set, r.task, r.subset): r.stats for r in rows}
    print("\n" + bench.table(rows))
    for task in ("relevance", "grounding"):
        # the older, one-style set: clear pairs keep their 0.85 bar
        v1 = stats[("v1", task, "clear")]
        assert v1.n >= 100 and v1.accuracy >= bench.TARGET_V1_CLEAR, (task, v1)
        # the varied sets: the measured held-out accuracy may not regress (the 0.88
        # target is not reached on v4 or for grounding: bench/local_judge/RECORD.md has the figures)
        for dataset in ("v2", "v3"):
            s = stats[(dataset, task, "all")]
            assert s.n >= 250 and s.accuracy >= FLOOR[(dataset, task)], (dataset, task, s)


agreement = bench_module("local_judge.agreement")


def test_second_labels_cover_exactly_the_heldout_halves() -> None:
    for dataset in agreement.SETS:
        agreement.check_coverage(dataset)  # raises naming the missing / extra ids


def test_second_labels_reject_a_malformed_or_repeated_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "second_labels.tsv"
    monkeypatch.setattr(agreement, "second_path", lambda dataset: bad)
    bad.write_text("rel3-a-0\t+\tok\nrel3-a-1\tyes\tnot a label\n", "utf-8")
    with pytest.raises(ValueError, match=r"second_labels.tsv:2: expected"):
        agreement.load_second("v3")
    bad.write_text("rel3-a-0\t+\nrel3-a-0\t-\n", "utf-8")
    with pytest.raises(ValueError, match=r":2: rel3-a-0 labelled twice"):
        agreement.load_second("v3")
    bad.write_text("rel3-a-0\t+\n", "utf-8")
    with pytest.raises(ValueError, match="missing"):
        agreement.check_coverage("v3")


def test_agreement_counts_the_labellers_and_the_judge_against_each() -> None:
    rows = [
        {"id": "a", "label": "supported"},
        {"id": "b", "label": "supported"},
        {"id": "c", "label": "unsupported"},
        {"id": "d", "label": "unsupported"},
    ]
    second = {"a": True, "b": False, "c": False, "d": False}  # the labellers differ on b
    judge = [True, True, True, False]
    agree, kappa, first, sec, agreed = agreement.compare(rows, judge, second, "grounding")
    assert (agree.k, agree.n) == (3, 4)
    assert kappa == pytest.approx(0.5)
    assert (first.k, sec.k) == (3, 2)  # wrong on c for both, on b only for the second labels
    assert (agreed.k, agreed.n) == (2, 3)  # a, c, d: right on a and d
    with pytest.raises(KeyError, match="no second label for d"):
        agreement.compare(rows, judge, {"a": True, "b": True, "c": False}, "grounding")


@pytest.mark.slow
@pytest.mark.integration
@PREPARE_TIMEOUT
def test_docs_show_the_agreement_table_the_bench_computes(prepared: object) -> None:
    docs = RECORD.read_text("utf-8")
    table = agreement.agreement(prepared)
    assert [(a.set, a.task) for a in table] == [
        (s, t) for s in ("v2", "v3") for t in ("relevance", "grounding")
    ]
    assert agreement.HEADER in docs
    for row in table:
        assert row.markdown() in docs, row.markdown()


probe = bench_module("local_judge.probe")


@pytest.mark.slow
@pytest.mark.integration
@PREPARE_TIMEOUT
def test_grouped_cv_and_refit_reproduce_the_docs_figures(prepared: object) -> None:
    """The cross-validation figures the docs quote (and every measured candidate is compared
    against) come from bench/local_judge/probe.py; its held-out refit is the shipped model's."""
    cv = probe.grouped_cv(prepared)
    docs = " ".join(RECORD.read_text("utf-8").split())
    quoted = f"relevance {cv['relevance']['all']:.3f} and grounding {cv['grounding']['all']:.3f}"
    assert f"the same features give {quoted}" in docs, quoted
    held = probe.heldout(prepared)
    rows = bench.evaluate(prepared, CALIBRATED, "heldout")
    for r in rows:
        if r.subset == "all":
            assert held[r.task][r.set] == pytest.approx(r.stats.accuracy), (r.set, r.task)


def test_probe_folds_keep_every_case_whole_and_leave_the_heldout_half_out() -> None:
    """The folds behind grouped CV and the out-of-fold cross-encoder scores: every calibration
    sentence in exactly one fold, every case (set + item) in one fold only, held-out rows in
    none, folds of similar size."""
    rows = [
        {"set": s, "item": f"i{n}", "split": split}
        for s in ("v1", "v2")
        for n in range(12)
        for split in ("calibration", "calibration", "heldout")
    ]
    fold = probe.case_folds(rows, 5)
    assert sorted(fold) == [i for i, r in enumerate(rows) if r["split"] == "calibration"]
    by_case: dict[str, set[int]] = {}
    for i, f in fold.items():
        by_case.setdefault(rows[i]["set"] + rows[i]["item"], set()).add(f)
    assert all(len(fs) == 1 for fs in by_case.values())
    sizes = [list(fold.values()).count(k) for k in range(5)]
    assert max(sizes) - min(sizes) <= 2, sizes
    assert probe.case_folds(rows, 5) == fold


def test_probe_names_the_writer_of_every_row() -> None:
    """Leaving one writer out needs to know who wrote each row: v3's four writers prefix
    their items; v1 and v2 each had one writer."""
    assert probe.writer({"set": "v3", "item": "ana-card-lost"}) == "v3:ana"
    assert probe.writer({"set": "v3", "item": "dev-k8s-probes"}) == "v3:dev"
    assert probe.writer({"set": "v2", "item": "ana-card-lost"}) == "v2"
    assert probe.writer({"set": "v1", "item": "tea"}) == "v1"
    v3 = [json.loads(line) for line in (ROOT / "tests/data/local_judge_v3/relevance.jsonl")
          .read_text("utf-8").splitlines()]  # fmt: skip
    assert {probe.writer({**r, "set": "v3"}) for r in v3} == {
        "v3:ana", "v3:ben", "v3:cleo", "v3:dev"
    }  # fmt: skip


def calib_cross_tables(res: dict) -> list[str]:
    """The docs' rows for the ``calib-cross`` probe's relevance result (``--by-writer``)."""
    base, now = res["baseline"], res
    rows = [
        f"| {name} | {r['cv']['relevance']['all']:.3f} | "
        + " | ".join(f"{r['heldout']['relevance'][s]:.3f}" for s in ("v1", "v2", "v3"))
        + " |"
        for name, r in (("features without it", base), ("+ cross-encoder", now))
    ]
    bw = res["by_writer"]
    for w, r in sorted(bw.items()):
        rows.append(f"| {w.split(':')[1]} | {r['n']} | {r['features']:.3f} | "
                    f"{r['features+ce']:.3f} |")  # fmt: skip
    n = sum(r["n"] for r in bw.values())
    pooled = [sum(r[k] * r["n"] for r in bw.values()) / n for k in ("features", "features+ce")]
    rows.append(f"| all four | {n} | {pooled[0]:.3f} | {pooled[1]:.3f} |")
    rows.append(f"ROC AUC {res['auc']['relevance:ce']:.3f} out of fold")
    return rows


def test_docs_show_the_cross_encoder_figures_the_probe_measured() -> None:
    """The cross-encoder figures in the docs are those of the committed probe run."""
    res = json.loads((ROOT / "bench/local_judge/results/probe_calib_cross_relevance.json")
                     .read_text("utf-8"))  # fmt: skip
    assert res["probe"] == "calib-cross"
    docs = " ".join(RECORD.read_text("utf-8").split())
    for row in calib_cross_tables(res):
        assert row in docs, row
