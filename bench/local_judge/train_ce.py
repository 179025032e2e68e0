"""Train the local judge's relevance cross-encoder adapter (issue 17).

The packaged all-MiniLM-L6-v2, read as a cross-encoder over (question, sentence), gets a
low-rank adapter (LoRA, rank 8, on every linear map of its six layers) plus a trained pooler
and two-way head, fitted on the **calibration rows** of the training sets only (v1, v2, v3 and
the training-only v5, less the rows whose question a held-out case asks:
``local_judge.accuracy.load_rows``; the held-out halves and v4 are for reporting). It writes:

- ``nexagauge/data/relevance_ce.npz``: the adapter of a model trained on every calibration row
  (float16 factors, about 1 MB), with the SHA-256 of the base model it belongs to;
- ``tests/data/local_judge_ce_oof.tsv``: for every calibration row, the score of a model that
  did not see its case (5 grouped folds, the folds of ``local_judge.probe.case_folds``). The
  decision model is calibrated on these, so it learns how much to trust scores on unseen text,
  not on text the adapter was trained on.
- the adapter's ``score_offset``: how much higher the final model scores than the fold models,
  on average, on unlabelled pairs none of them trained on (:func:`reference_pairs`: the
  questions of ``bench/data/rag_cases.jsonl`` with their own answers' sentences and the next
  case's). The judge subtracts it, so live scores are on the scale of the out-of-fold scores
  the decision model was fitted on. ``--offset-only`` measures it again for the shipped adapter
  (the fold models are retrained; training is seeded, so they are the same models).

About 15 minutes on two cores (torch, transformers; 1,523 rows)::

    HF_HUB_OFFLINE=1 python bench/local_judge/train_ce.py
    HF_HUB_OFFLINE=1 python bench/local_judge/accuracy.py --calibrate --write

Training is seeded; on another CPU the float arithmetic (and so the last digits) can differ,
which is why the adapter is shipped rather than trained at install time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from local_judge import accuracy as lja  # noqa: E402
from local_judge.probe import case_folds  # noqa: E402
from local_judge.swap import Swap, swapped  # noqa: E402
from nexagauge.judge.local.ce import ADAPTER, LINEARS, MAX_LENGTH, file_sha256  # noqa: E402

OOF = lja.CE_OOF
RANK, LR, EPOCHS, BATCH = 8, 5e-4, 4, 16


RAG_CASES = ROOT / "bench" / "data" / "rag_cases.jsonl"


def reference_pairs(path: Path = RAG_CASES) -> list[tuple[str, str]]:
    """Unlabelled (question, sentence) pairs from text no model trains on: each RAG case's
    question with its own answer's sentences, and with the next case's (off topic, mostly),
    so both sides of the scale are represented. Cases whose question a training row asks too
    (or one alike: ``local_judge.accuracy.same_question``) are left out. Deterministic."""
    from nexagauge.text.sentences import sentences

    trained = {lja.question_stems(r["question"]) for r in relevance_rows()
               if r["split"] == "calibration"}  # fmt: skip
    cases = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    cases = [c for c in cases
             if not any(lja.same_question(lja.question_stems(c["input"]), t) for t in trained)]  # fmt: skip
    out = [(c["input"], s) for c in cases for s in sentences(c["output"])]
    nxt = cases[1:] + cases[:1]
    return out + [(c["input"], s) for c, d in zip(cases, nxt, strict=True)
                  for s in sentences(d["output"])]  # fmt: skip


def score_offset(final: Sequence[float], folds: Sequence[Sequence[float]]) -> float:
    """The final model's mean score on the reference pairs less the fold models' (each fold
    model's mean, averaged), rounded to 4 decimals.

    Example:
        >>> score_offset([2.0, 0.0], [[1.0, -1.0], [0.5, -0.5]])
        1.0
    """
    return round(float(np.mean(final)) - float(np.mean([np.mean(f) for f in folds])), 4)


def write_offset(path: Path, offset: float) -> None:
    """Rewrite an adapter with ``score_offset`` set (everything else as it was)."""
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "score_offset"}
    arrays["score_offset"] = np.array(offset, dtype=np.float32)
    with path.open("wb") as f:
        np.savez_compressed(f, **arrays)


def relevance_rows(sets: Sequence[str] = lja.SETS) -> list[dict[str, Any]]:
    """Every relevance row of the training sets, as the calibration sees them."""
    return [r for s in sets for r in lja.load_rows(s, "relevance")]


def _model(base: Path) -> Any:
    """The base model with LoRA factors on every linear map; only those, the pooler and the
    head train."""
    import torch
    from torch import nn
    from transformers import AutoModelForSequenceClassification

    class LoRA(nn.Module):
        def __init__(self, lin: nn.Linear) -> None:
            super().__init__()
            self.lin = lin
            self.A = nn.Parameter(torch.randn(RANK, lin.in_features) / lin.in_features**0.5)
            self.B = nn.Parameter(torch.zeros(lin.out_features, RANK))

        def forward(self, x: Any) -> Any:
            return self.lin(x) + (x @ self.A.T) @ self.B.T

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=2)
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.bert.encoder.layer:
        for name in LINEARS:
            owner_path, attr = name.rsplit(".", 1)
            owner = layer
            for part in owner_path.split("."):
                owner = getattr(owner, part)
            setattr(owner, attr, LoRA(getattr(owner, attr)))
    for p in [*model.classifier.parameters(), *model.bert.pooler.parameters()]:
        p.requires_grad_(True)
    return model


def training_indices(
    fold: dict[int, int], n: int, swaps: Sequence[Swap], k: int | None
) -> list[int]:
    """Indices a model trains on: every calibration row outside fold ``k`` (all when ``k`` is
    None), and every swap (numbered from ``n``, after the ``n`` labelled rows) neither of whose
    cases is in fold ``k``: a fold model must not have seen the question or the answer of a
    case it scores out of fold.

    Example:
        >>> s = Swap("q", "c", (0, 1))
        >>> training_indices({0: 0, 1: 1, 2: 2}, 3, [s], 2), training_indices({0: 0, 1: 1}, 3, [s], 1)
        ([0, 1, 3], [0])
    """
    own = [i for i, f in fold.items() if f != k]
    return own + [n + j for j, x in enumerate(swaps)
                  if k is None or k not in (fold[x.cases[0]], fold[x.cases[1]])]  # fmt: skip


def training_swaps(rows: Sequence[dict[str, Any]], k: int, shared: int) -> list[Swap]:
    """``k`` nearest swaps per calibration case, then ``shared`` that share a content word with
    their new question, each (question, sentence) pair once."""
    out = swapped(rows, "calibration", k) if k else []
    seen = {(x.question, x.claim) for x in out}
    for x in swapped(rows, "calibration", shared, shared=True) if shared else []:
        if (x.question, x.claim) not in seen:
            seen.add((x.question, x.claim))
            out.append(x)
    return out


class Trainer:
    """The labelled rows (indices ``0 .. len(rows) - 1``) and, after them, optional extra
    negatives (``--swaps K``): the swapped answers of the calibration cases
    (``local_judge.swap.swapped``: a case's answer put to a neighbouring case's question).
    Trained on the labelled rows alone, the cross-encoder learnt what an answer looks like more
    than whether it answers *this* question: it gives a positive score to 88% of the
    calibration swaps ("Can I get a late checkout on Sunday?" / "Yes, most likely: under EU
    Regulation 261/2004 a delay of three hours ... gives you 250 euros."). Trained on them it
    rejects most swaps but loses accuracy on the labelled sets (bench/local_judge/RECORD.md, "Swapped
    answers"), so the shipped adapter is trained without."""

    def __init__(
        self, rows: Sequence[dict[str, Any]], base: Path, extra: Sequence[Swap] = ()
    ) -> None:
        from transformers import AutoTokenizer

        self.rows, self.base, self.extra = rows, base, list(extra)
        self.tok = AutoTokenizer.from_pretrained(str(base))
        self.pairs = [(r["question"], r["claim"]) for r in rows]
        self.pairs += [(x.question, x.claim) for x in self.extra]
        self.gold = [r["label"] == lja.POSITIVE["relevance"] for r in rows]
        self.gold += [False] * len(self.extra)

    def _pairs(self, idx: Sequence[int]) -> list[tuple[str, str]]:
        return [self.pairs[i] for i in idx]

    def _enc(self, pairs: Sequence[tuple[str, str]]) -> Any:
        return self.tok([q for q, _ in pairs], [c for _, c in pairs], padding=True,
                        truncation=True, max_length=MAX_LENGTH, return_tensors="pt")  # fmt: skip

    def train(self, idx: Sequence[int]) -> Any:
        import torch

        model = _model(self.base)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.01)
        model.train()
        rng = np.random.default_rng(0)
        for _ in range(EPOCHS):
            order = [int(i) for i in rng.permutation(list(idx))]
            for a in range(0, len(order), BATCH):
                b = order[a : a + BATCH]
                y = torch.tensor([int(self.gold[i]) for i in b])
                loss = torch.nn.functional.cross_entropy(
                    model(**self._enc(self._pairs(b))).logits, y
                )
                loss.backward()
                opt.step()
                opt.zero_grad()
        return model.eval()

    def score(self, model: Any, idx: Sequence[int]) -> dict[int, float]:
        return dict(zip(idx, self.score_pairs(model, self._pairs(idx)), strict=True))

    def score_pairs(self, model: Any, pairs: Sequence[tuple[str, str]]) -> list[float]:
        import torch

        out: list[float] = []
        with torch.no_grad():
            for a in range(0, len(pairs), 64):
                logits = model(**self._enc(pairs[a : a + 64])).logits
                out += [float(d) for d in (logits[:, 1] - logits[:, 0]).tolist()]
        return out


def export(model: Any, base: Path, path: Path) -> None:
    """The adapter of ``model`` as float16 arrays (the factors, pooler and head)."""
    arrays: dict[str, Any] = {"base_sha256": np.array(file_sha256(base / "model.safetensors"))}
    for k, layer in enumerate(model.bert.encoder.layer):
        for name in LINEARS:
            lora = layer
            for part in name.split("."):
                lora = getattr(lora, part)
            arrays[f"l{k}.{name}.A"] = lora.A.detach().numpy().astype(np.float16)
            arrays[f"l{k}.{name}.B"] = lora.B.detach().numpy().astype(np.float16)
    pooler, head = model.bert.pooler.dense, model.classifier
    arrays["pooler.weight"] = pooler.weight.detach().numpy().astype(np.float16)
    arrays["pooler.bias"] = pooler.bias.detach().numpy().astype(np.float16)
    arrays["classifier.weight"] = head.weight.detach().numpy().astype(np.float16)
    arrays["classifier.bias"] = head.bias.detach().numpy().astype(np.float16)
    with path.open("wb") as f:
        np.savez_compressed(f, **arrays)


def soup(models: Sequence[Any], base: Path, path: Path) -> None:
    """One adapter that is the mean of several (the fold models): the LoRA factors side by side
    (``mean_k B_k A_k = [B_1 .. B_K] / K @ [A_1; ..; A_K]``, rank ``K x RANK``), the pooler and
    head averaged. Its scores are distributed like the fold models' out-of-fold scores, which
    the decision model was fitted on, unlike a model trained on all folds at once."""
    import torch

    k = len(models)
    arrays: dict[str, Any] = {"base_sha256": np.array(file_sha256(base / "model.safetensors"))}
    layers = [m.bert.encoder.layer for m in models]
    for i in range(len(layers[0])):
        for name in LINEARS:
            loras = []
            for ls in layers:
                mod = ls[i]
                for part in name.split("."):
                    mod = getattr(mod, part)
                loras.append(mod)
            a = torch.cat([m.A.detach() for m in loras], 0)
            b = torch.cat([m.B.detach() for m in loras], 1) / k
            arrays[f"l{i}.{name}.A"] = a.numpy().astype(np.float16)
            arrays[f"l{i}.{name}.B"] = b.numpy().astype(np.float16)
    for key, get in (
        ("pooler", lambda m: m.bert.pooler.dense),
        ("classifier", lambda m: m.classifier),
    ):
        for t in ("weight", "bias"):
            mean = sum(getattr(get(m), t).detach() for m in models) / k
            arrays[f"{key}.{t}"] = mean.numpy().astype(np.float16)
    with path.open("wb") as f:
        np.savez_compressed(f, **arrays)


def write_oof(rows: Sequence[dict[str, Any]], scores: dict[int, float], path: Path) -> None:
    """``id TAB score`` per calibration row, in row order (4 decimals)."""
    lines = [f"{rows[i]['id']}\t{scores[i]:.4f}" for i in sorted(scores)]
    path.write_text("\n".join(lines) + "\n", "utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--adapter", type=Path, default=ADAPTER)
    ap.add_argument("--oof", type=Path, default=OOF)
    ap.add_argument("--soup", type=Path,
                    help="instead: write the mean of the fold models' adapters here")  # fmt: skip
    ap.add_argument("--offset-only", action="store_true",
                    help="only measure the adapter's score_offset again (retrains the folds)")  # fmt: skip
    ap.add_argument("--swaps", type=int, default=0, metavar="K",
                    help="also train on K swapped answers per calibration case as negatives "
                         "(local_judge.swap.swapped; measured, not shipped: bench/local_judge/RECORD.md)")  # fmt: skip
    ap.add_argument("--swaps-shared", type=int, default=0, metavar="N",
                    help="also N swapped sentences per case that share a content word with "
                         "their new question (local_judge.swap.swapped(shared=True))")  # fmt: skip
    ap.add_argument("--with-set", action="append", default=[], choices=lja.CANDIDATE_SETS,
                    help="also train on this candidate training set (measured, not shipped: "
                         "bench/local_judge/RECORD.md, \"Training set v8\", \"v9\")")  # fmt: skip
    args = ap.parse_args(argv)

    from nexagauge.judge.embeddings import packaged_model_dir
    from nexagauge.judge.local.ce import RelevanceCrossEncoder

    base = packaged_model_dir()
    rows = relevance_rows((*lja.SETS, *args.with_set))
    fold = case_folds(rows)
    tr = Trainer(rows, base, training_swaps(rows, args.swaps, args.swaps_shared))
    oof: dict[int, float] = {}
    models = []
    ref = reference_pairs()
    ref_folds: list[list[float]] = []
    for k in sorted(set(fold.values())):
        model = tr.train(training_indices(fold, len(rows), tr.extra, k))
        oof.update(tr.score(model, [i for i, f in fold.items() if f == k]))
        ref_folds.append(tr.score_pairs(model, ref))
        models.append(model)
        print(f"fold {k} done", file=sys.stderr, flush=True)
    if args.offset_only:
        committed = lja.read_oof(args.oof)
        gap = max(abs(committed[rows[i]["id"]] - v) for i, v in oof.items())
        if gap > 0.01:  # other fold models than those behind the decision model: refuse
            raise SystemExit(f"the retrained fold models differ from {args.oof} by up to "
                             f"{gap:.4f}; retrain everything instead (without --offset-only)")  # fmt: skip
        raw = RelevanceCrossEncoder(args.adapter)
        final_ref = [float(x) for x in raw.score(ref)]
        offset = score_offset([x + raw.offset for x in final_ref], ref_folds)
        write_offset(args.adapter, offset)
        print(f"score_offset {offset} ({len(ref)} reference pairs) written to {args.adapter}; "
              f"largest difference from the out-of-fold scores in {args.oof.name}: {gap:.4f}")  # fmt: skip
        return 0
    if args.soup:
        soup(models, base, args.soup)
        # the fold models are those behind the committed out-of-fold scores (seeded)
        committed = lja.read_oof(args.oof)
        gap = max(abs(committed[rows[i]["id"]] - v) for i, v in oof.items())
        print(f"wrote {args.soup} ({args.soup.stat().st_size} bytes); largest difference from "
              f"the out-of-fold scores in {args.oof.name}: {gap:.4f}")  # fmt: skip
        return 0
    write_oof(rows, oof, args.oof)
    final = tr.train(training_indices(fold, len(rows), tr.extra, None))
    export(final, base, args.adapter)
    offset = score_offset(tr.score_pairs(final, ref), ref_folds)
    write_offset(args.adapter, offset)
    # the shipped (float16) adapter, loaded the way the judge loads it, against the trained model
    held = [i for i, r in enumerate(rows) if r["split"] == "heldout"]
    trained = tr.score(final, held)
    shipped = RelevanceCrossEncoder(args.adapter).score(
        [(rows[i]["question"], rows[i]["claim"]) for i in held]
    )
    gap = max(abs(trained[i] - offset - float(s)) for i, s in zip(held, shipped, strict=True))
    print(f"wrote {args.adapter} ({args.adapter.stat().st_size} bytes, score_offset {offset}) "
          f"and {args.oof}; largest score change from float16: {gap:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
