"""The relevance cross-encoder (nexagauge/judge/local/ce.py) and its calibration data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.scripts import bench_module

from nexagauge.judge.local.ce import ADAPTER, LINEARS, CrossEncoderError, RelevanceCrossEncoder

ROOT = Path(__file__).resolve().parents[2]
#: the experiment record: its tables are checked against the committed runs
RECORD = ROOT / "bench" / "local_judge" / "RECORD.md"


bench = bench_module("local_judge.accuracy")

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")


@pytest.fixture(scope="module")
def ce() -> RelevanceCrossEncoder:
    return RelevanceCrossEncoder()


def test_the_adapter_is_small_complete_and_names_its_base_model() -> None:
    data = np.load(ADAPTER)
    assert ADAPTER.stat().st_size < 2_000_000
    assert len(str(data["base_sha256"])) == 64
    for k in range(6):
        for name in LINEARS:
            a, b = data[f"l{k}.{name}.A"], data[f"l{k}.{name}.B"]
            assert a.shape[0] == b.shape[1] == 8, name
    assert data["classifier.weight"].shape == (2, 384)


@pytest.mark.slow
def test_answers_score_above_asides_and_scores_repeat(ce: RelevanceCrossEncoder) -> None:
    """Real pairs, written for this test (not in any labelled set): a direct answer, an answer
    sharing no word with the question, and two asides on the same subject."""
    q = "How long should I boil an egg for a soft yolk?"
    pairs = [
        (q, "Boil it for about six minutes, then cool it in cold water."),
        (q, "Six minutes gives a runny centre."),
        (q, "Eggs have been eaten by people for thousands of years."),
        (q, "Chickens lay around 300 eggs a year."),
    ]
    s = ce.score(pairs)
    assert min(s[:2]) > max(s[2:]), s
    assert np.array_equal(s, ce.score(pairs))
    # batched or one at a time: the same scores (padding does not change a pair's score)
    uncached = RelevanceCrossEncoder(cache_size=0)
    one = np.concatenate([uncached.score([p]) for p in pairs])
    assert np.allclose(s, one, atol=1e-4), (s, one)
    assert not uncached._cache


def test_a_pair_is_scored_once_while_it_is_in_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    ce = RelevanceCrossEncoder(cache_size=3)
    rows: list[int] = []
    forward = ce._forward

    def counting(ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        rows.append(len(ids))
        return forward(ids, types, mask)

    monkeypatch.setattr(ce, "_forward", counting)
    q = "Where do I renew a passport?"
    a, b, c, d = ((q, f"Sentence number {n} about passports.") for n in range(4))
    first = ce.score([a, b, a])  # a repeated within one call: one row
    assert rows == [2] and first[0] == first[2]
    again = ce.score([b, a, c])  # a and b cached: only c is run
    assert rows == [2, 1] and again[0] == first[1] and again[1] == first[0]
    ce.score([d])  # the cache holds three pairs: the least recently used (b) goes
    assert list(ce._cache) == [a, c, d]
    ce.score([b])
    assert rows == [2, 1, 1, 1]


def test_no_pairs_loads_nothing() -> None:
    fresh = RelevanceCrossEncoder()
    assert fresh.score([]).shape == (0,)
    assert fresh._w is None


def test_an_adapter_for_another_base_model_is_refused(tmp_path: Path) -> None:
    data = dict(np.load(ADAPTER))
    data["base_sha256"] = np.array("0" * 64)
    other = tmp_path / "other.npz"
    with other.open("wb") as f:
        np.savez(f, **data)
    with pytest.raises(CrossEncoderError, match="000000000000"):
        RelevanceCrossEncoder(other).score([("q", "s")])


def test_a_missing_adapter_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "none.npz"
    ce = RelevanceCrossEncoder(missing)
    assert ce.digest == "missing"
    with pytest.raises(CrossEncoderError, match=r"none\.npz"):
        ce.score([("q", "s")])


def test_out_of_fold_scores_cover_exactly_the_calibration_rows() -> None:
    oof = bench.read_oof()
    rows = [r for s in bench.SETS for r in bench.load_rows(s, "relevance")]
    assert set(oof) == {r["id"] for r in rows if r["split"] == "calibration"}


def test_out_of_fold_file_rejects_a_malformed_or_repeated_line(tmp_path: Path) -> None:
    bad = tmp_path / "oof.tsv"
    bad.write_text("a\t1.0\nb 2.0\n", "utf-8")
    with pytest.raises(ValueError, match=r"oof.tsv:2"):
        bench.read_oof(bad)
    bad.write_text("a\t1.0\na\t2.0\n", "utf-8")
    with pytest.raises(ValueError, match=r"oof.tsv:2"):
        bench.read_oof(bad)


def test_calibration_pairs_take_their_out_of_fold_score_and_held_out_pairs_the_model_s() -> None:
    q = "How long should I boil an egg for a soft yolk?"
    rows = [
        {"id": "a", "split": "calibration", "question": q, "claim": "About six minutes."},
        {"id": "b", "split": "heldout", "question": q, "claim": "Six minutes, then cold water."},
    ]
    ce = bench.OutOfFold(rows, {"a": -1.0})
    pairs = [(q, "About six minutes."), (q, "Six minutes, then cold water.")]
    live = RelevanceCrossEncoder().score(pairs[1:])
    assert list(ce.score(pairs)) == [-1.0, live[0]]
    assert list(ce._cache) == [pairs[1]]  # the calibration pair never ran
    assert ce.digest.endswith("+oof")
    with pytest.raises(KeyError, match="a: no out-of-fold score"):
        bench.OutOfFold(rows, {})
    clash = [rows[0], {**rows[0], "id": "c", "split": "heldout"}]
    with pytest.raises(ValueError, match="c: a held-out pair repeats a calibration pair"):
        bench.OutOfFold(clash, {"a": 0.0})


@pytest.mark.slow
def test_the_numpy_forward_pass_is_the_torch_model_s(tmp_path: Path) -> None:
    """The judge runs the cross-encoder in plain numpy; training (bench/local_judge/train_ce.py)
    runs it in torch. With a random adapter merged the same way, both give the same scores,
    padding and truncation included."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from nexagauge.judge.embeddings import packaged_model_dir
    from nexagauge.judge.local.ce import MAX_LENGTH, file_sha256

    base = packaged_model_dir()
    rng = np.random.default_rng(1)
    arr: dict[str, np.ndarray] = {"base_sha256": np.array(file_sha256(base / "model.safetensors"))}
    for k in range(6):
        for name in LINEARS:
            out_dim = 1536 if name == "intermediate.dense" else 384
            in_dim = 1536 if name == "output.dense" else 384
            arr[f"l{k}.{name}.A"] = (rng.standard_normal((8, in_dim)) * 0.05).astype(np.float16)
            arr[f"l{k}.{name}.B"] = (rng.standard_normal((out_dim, 8)) * 0.05).astype(np.float16)
    arr["pooler.weight"] = (rng.standard_normal((384, 384)) * 0.05).astype(np.float16)
    arr["pooler.bias"] = (rng.standard_normal(384) * 0.05).astype(np.float16)
    arr["classifier.weight"] = (rng.standard_normal((2, 384)) * 0.5).astype(np.float16)
    arr["classifier.bias"] = np.array([0.1, -0.1], np.float16)
    path = tmp_path / "random.npz"
    with path.open("wb") as f:
        np.savez(f, **arr)
    pairs = [
        ("How long do I boil an egg?", "About nine minutes."),
        ("Where is the Eiffel Tower?", "On the Champ de Mars in Paris, finished in 1889."),
        ("q", "s"),
        ("What?", "word " * 400),  # truncated to MAX_LENGTH word pieces
    ]
    ours = RelevanceCrossEncoder(path).score(pairs)

    model = transformers.BertModel.from_pretrained(str(base)).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(base))
    f32 = {k: torch.from_numpy(v.astype(np.float32)) for k, v in arr.items() if k != "base_sha256"}
    with torch.no_grad():
        for k, layer in enumerate(model.encoder.layer):
            for name in LINEARS:
                lin = layer
                for part in name.split("."):
                    lin = getattr(lin, part)
                lin.weight += f32[f"l{k}.{name}.B"] @ f32[f"l{k}.{name}.A"]
        model.pooler.dense.weight.copy_(f32["pooler.weight"])
        model.pooler.dense.bias.copy_(f32["pooler.bias"])
        enc = tok([q for q, _ in pairs], [s for _, s in pairs], padding=True, truncation=True,
                  max_length=MAX_LENGTH, return_tensors="pt")  # fmt: skip
        logits = model(**enc).pooler_output @ f32["classifier.weight"].T + f32["classifier.bias"]
    theirs = (logits[:, 1] - logits[:, 0]).numpy()
    assert np.allclose(ours, theirs, atol=1e-4), (ours, theirs)


def test_a_soup_adapter_is_the_mean_of_its_models(tmp_path: Path) -> None:
    """``local_judge.train_ce.py --soup``: one adapter whose merged update is the mean of the
    fold models' (factors side by side, B scaled by 1/K), pooler and head averaged; the judge
    loads it like any adapter."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from nexagauge.judge.embeddings import packaged_model_dir

    train = bench_module("local_judge.train_ce")
    base = packaged_model_dir()
    models = [train._model(base), train._model(base)]
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in models:
            for p in m.parameters():
                if p.requires_grad:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    path = tmp_path / "soup.npz"
    train.soup(models, base, path)
    data = np.load(path)

    def lora(m, k: int, name: str):  # type: ignore[no-untyped-def]
        mod = m.bert.encoder.layer[k]
        for part in name.split("."):
            mod = getattr(mod, part)
        return (mod.B @ mod.A).detach().numpy()

    for k in (0, 5):
        for name in LINEARS:
            a, b = (
                data[f"l{k}.{name}.A"].astype(np.float32),
                data[f"l{k}.{name}.B"].astype(np.float32),
            )
            assert a.shape[0] == b.shape[1] == 2 * train.RANK
            want = (lora(models[0], k, name) + lora(models[1], k, name)) / 2
            assert np.allclose(b @ a, want, atol=2e-3), (k, name)
    head = (models[0].classifier.weight + models[1].classifier.weight).detach().numpy() / 2
    assert np.allclose(data["classifier.weight"].astype(np.float32), head, atol=1e-3)
    pooler = (models[0].bert.pooler.dense.bias + models[1].bert.pooler.dense.bias) / 2
    assert np.allclose(data["pooler.bias"].astype(np.float32), pooler.detach().numpy(), atol=1e-3)
    scores = RelevanceCrossEncoder(path).score([("How long do I boil an egg?", "Nine minutes.")])
    assert scores.shape == (1,) and np.isfinite(scores).all()


def test_the_score_offset_is_subtracted_from_every_score_and_renames_the_adapter(
    tmp_path: Path,
) -> None:
    """``score_offset`` (``local_judge.train_ce.write_offset``) moves every score by exactly
    that much, cached or not, keeps every other array, and changes the adapter's digest, so
    verdicts made before and after never share a cache key."""
    train = bench_module("local_judge.train_ce")
    path = tmp_path / "shifted.npz"
    path.write_bytes(ADAPTER.read_bytes())
    train.write_offset(path, 0.0)
    zero = RelevanceCrossEncoder(path)
    pairs = [("How long do I boil an egg?", "About nine minutes."), ("q?", "Unrelated.")]
    before = zero.score(pairs)
    train.write_offset(path, 1.25)
    shifted = RelevanceCrossEncoder(path)
    assert shifted.digest != zero.digest
    after = shifted.score(pairs)
    assert shifted.offset == 1.25
    assert np.allclose(after, before - 1.25, atol=1e-5), (before, after)
    assert np.array_equal(shifted.score(pairs), after)  # from the cache: the same, shifted
    with np.load(path) as a, np.load(ADAPTER) as b:
        assert set(a.files) == set(b.files) | {"score_offset"}
        assert all(np.array_equal(a[k], b[k]) for k in b.files if k != "score_offset")


def test_the_shipped_adapter_carries_its_measured_offset() -> None:
    """The shipped adapter's offset is the one ``local_judge.train_ce.py`` measured (a real,
    positive shift: the model trained on every calibration row scores higher than the fold
    models; bench/local_judge/RECORD.md, "A known bias")."""
    with np.load(ADAPTER) as data:
        offset = float(data["score_offset"])
    assert 0.1 < offset < 3.0
    docs = RECORD.read_text("utf-8")
    assert f"`score_offset` {offset:.4f}" in docs


def test_reference_pairs_are_unlabelled_rag_text_on_both_sides_of_the_scale() -> None:
    """The offset is measured on pairs no model trains on (bench/data/rag_cases.jsonl): each
    question with its own answer's sentences and with the next case's."""
    train = bench_module("local_judge.train_ce")
    pairs = train.reference_pairs()
    assert pairs == train.reference_pairs() and len(pairs) > 150
    questions = {q for q, _ in pairs}
    lines = train.RAG_CASES.read_text("utf-8").splitlines()
    cases = {c["input"]: c["output"] for c in map(json.loads, lines)}
    trained = [bench.question_stems(r["question"]) for r in train.relevance_rows()
               if r["split"] == "calibration"]  # fmt: skip
    for q in cases:  # a RAG case is used exactly when no training row asks its question
        near = any(bench.same_question(bench.question_stems(q), t) for t in trained)
        assert (q in questions) != near, q
    assert 40 <= len(questions) < len(cases)  # "What is the half-life of carbon-14?" is in v1
    half = len(pairs) // 2  # as many sentences on each side: every answer is used twice
    assert len(pairs) == 2 * half
    assert all(s in cases[q] for q, s in pairs[:half])  # its own answer
    assert not any(s in cases[q] for q, s in pairs[half:])  # the next case's answer
    assert train.score_offset([2.0, 0.0], [[1.0, -1.0], [0.5, -0.5]]) == 1.0


@pytest.mark.slow
def test_training_end_to_end_writes_oof_scores_and_an_adapter_with_its_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``local_judge.train_ce.py`` on a few real cases (one epoch, with one swapped answer per
    case as an extra negative, ``--swaps 1``): out-of-fold scores for exactly the calibration
    rows (none for the swaps), and an adapter the judge loads, carrying a score offset that
    the judge subtracts (its scores are the trained model's less the offset, up to float16)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    train = bench_module("local_judge.train_ce")
    rows = bench.load_rows("v2", "relevance")
    cal = sorted({r["item"] for r in rows if r["split"] == "calibration"})[:10]
    held = sorted({r["item"] for r in rows if r["split"] == "heldout"})[:2]
    few = [r for r in rows if r["item"] in {*cal, *held}]
    ref = train.reference_pairs()[::25]
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(train, "relevance_rows", lambda sets: asked.append(tuple(sets)) or few)
    monkeypatch.setattr(train, "reference_pairs", lambda: ref)
    monkeypatch.setattr(train, "EPOCHS", 1)
    swaps: list = []
    real_swapped = train.swapped
    monkeypatch.setattr(train, "swapped", lambda *a: swaps.extend(real_swapped(*a)) or swaps)
    adapter, oof = tmp_path / "a.npz", tmp_path / "oof.tsv"
    assert train.main(["--adapter", str(adapter), "--oof", str(oof), "--swaps", "1"]) == 0
    assert len(swaps) == len(cal)  # one per calibration case, trained on
    assert asked == [tuple(train.lja.SETS)]  # no candidate set (v8) unless --with-set names it
    out = capsys.readouterr().out
    assert [line.split("\t")[0] for line in oof.read_text("utf-8").splitlines()] == [
        r["id"] for r in few if r["split"] == "calibration"
    ]
    with np.load(adapter) as data:
        offset = float(data["score_offset"])
    assert np.isfinite(offset) and f"score_offset {round(offset, 4)}" in out
    gap = float(out.rsplit("largest score change from float16: ", 1)[1].split()[0])
    assert gap < 0.01, out  # the shipped scores are the trained model's, less the offset
    ce = RelevanceCrossEncoder(adapter)
    ce.score(ref[:1])
    assert ce.offset == pytest.approx(offset)
    # --offset-only retrains the fold models (seeded: the same ones) and measures it again
    swaps.clear()
    assert (
        train.main(["--adapter", str(adapter), "--oof", str(oof), "--offset-only", "--swaps", "1"])
        == 0
    )
    with np.load(adapter) as data:
        assert float(data["score_offset"]) == pytest.approx(offset, abs=2e-4)
    # ... and refuses when the fold models are not the ones behind the out-of-fold scores
    shifted = [f"{i}\t{float(v) + 1:.4f}" for i, v in
               (line.split("\t") for line in oof.read_text("utf-8").splitlines())]  # fmt: skip
    oof.write_text("\n".join(shifted) + "\n", "utf-8")
    with pytest.raises(SystemExit, match="retrained fold models differ"):
        train.main(["--adapter", str(adapter), "--oof", str(oof), "--offset-only", "--swaps", "1"])
