"""The labelled sets and the calibration report (real model on every pair, offline).

Asserts what ``docs/local-judge.md`` claims: the sets are large enough and split by item, the
shipped thresholds are exactly what calibration on the *calibration half* picks, and on the
*held-out half* the local judge reaches the target accuracy on clear pairs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from nexagauge.judge.embeddings import LocalEmbedder
from nexagauge.judge.local import CALIBRATED

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


bench = _load("local_judge_accuracy_bench", ROOT / "bench" / "local_judge_accuracy.py")
builder = _load("build_local_judge_sets", ROOT / "tests" / "data" / "build_local_judge_sets.py")


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


@pytest.fixture(scope="module")
def prepared(embedder: LocalEmbedder) -> object:
    """Similarities of every pair, computed once with the real model (its own event loop)."""
    return asyncio.run(bench.prepare(embedder))


@pytest.mark.integration
def test_calibration_reproduces_thresholds_and_meets_the_target(prepared: object) -> None:
    assert bench.calibrate_on(prepared, "calibration") == CALIBRATED
    rows = bench.evaluate(prepared, CALIBRATED, "heldout")
    stats = {(r.task, r.subset): r.stats for r in rows}
    for task in ("relevance", "grounding"):
        clear = stats[(task, "clear")]
        assert clear.n >= 100
        assert clear.accuracy >= bench.TARGET_ACCURACY, (task, clear)
        assert clear.kappa >= 0.6, (task, clear)
    print("\n" + bench.table(rows))
