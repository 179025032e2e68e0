"""``refalign``: semantic alignment of the output with the reference by embeddings (spec 002).

**Units.** The output and the reference are cut into units:

- default: sentences (:mod:`nexagauge.text.sentences`); output units come from the ``refiner``
  chunks (so the refiner's near-duplicate removal applies), or from the output itself when the
  refiner did not run;
- ``refalign.atomic_chunks: true`` with an LLM judge configured: atomic claims extracted by the
  judge (:meth:`Judge.extract_claims`, one call for the output chunks and one for the reference
  chunks; the judge cost is reported). Without an LLM judge the node falls back to sentences and
  says so in ``meta["units"]``.

**Matching.** Every output unit ``i`` and reference unit ``j`` get ``s_ij = cos(e_i, e_j)`` from
the process-wide embedding service. A pair is *eligible* when ``s_ij >= similarity_threshold``
and (with ``refine_top_k = k``) ``j`` is among the ``k`` most similar reference units of ``i``.
Units are then matched **one-to-one**: the matching maximizes the number of matched pairs, then
their total similarity (lexicographic, so one more match always wins). It is solved exactly as an
assignment problem - Hungarian algorithm via ``scipy.optimize.linear_sum_assignment`` when
SciPy is installed, else the built-in O(n^3) Hungarian (:func:`hungarian`), same optimum.

**Metrics** (category ``reference``), with ``m`` matched pairs, ``n_o`` output and ``n_r``
reference units:

- ``refalign_precision = m / n_o`` - output units supported by the reference;
- ``refalign_recall = m / n_r`` - reference units covered by the output;
- ``refalign_f1`` - harmonic mean (0 when nothing matches);
- ``refalign_similarity`` - global similarity: cosine of the *mean-pooled* unit embeddings of
  the two sides, clipped to [0, 1]. Mean pooling over units (not one whole-text embedding) is
  used because the model truncates long inputs (256 word pieces for all-MiniLM-L6-v2) while every
  unit is embedded in full.

**Explainability.** ``refalign_precision.result`` lists every output unit (matched reference unit
and similarity, or its best candidate when unmatched); ``refalign_recall.result`` every reference
unit likewise; ``refalign_f1.result`` holds ``matched_pairs``, ``missed_reference_units`` and
``extra_output_units``. ``meta`` names the units source, embedding model, threshold, effective
``refine_top_k`` and the matching solver.

Knob validation: ``similarity_threshold`` in [0, 1] and ``refine_top_k >= 1`` are enforced when
the record is parsed (a bad value is a record error naming ``refalign.<field>``); a
``refine_top_k`` above the number of reference units is clamped, and the effective value is
reported. No units on a side (e.g. an output of only punctuation) or an embedding failure is an
error on all four metrics, never a score.

Example:
    >>> match_units(np.array([[0.9, 0.2], [0.8, 0.75]]), threshold=0.7)
    [(0, 0, 0.9), (1, 1, 0.75)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nexagauge.graph.node import CallEstimate, Node, NodeContext
from nexagauge.schema.results import ChunkList, CostEstimate, MetricResult, RefalignMetrics
from nexagauge.text.sentences import sentences

CATEGORY = "reference"
METRICS = ("refalign_precision", "refalign_recall", "refalign_f1", "refalign_similarity")
GLOBAL_METHOD = "mean_pooled_units"


# --------------------------------------------------------------------------------------------
# Assignment (Hungarian) with and without SciPy
# --------------------------------------------------------------------------------------------
def hungarian(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-cost assignment of a rectangular cost matrix (rows <= or > cols both fine).

    Pure numpy Kuhn-Munkres with potentials (shortest augmenting paths), O(n^2 m). Returns
    ``min(n, m)`` ``(row, col)`` pairs sorted by row - the same optimum as SciPy's
    ``linear_sum_assignment`` (ties may pick a different but equally good assignment).

    Example:
        >>> hungarian(np.array([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0], [3.0, 2.0, 2.0]]))
        [(0, 1), (1, 0), (2, 2)]
    """
    c = np.asarray(cost, dtype=np.float64)
    transposed = c.shape[0] > c.shape[1]
    if transposed:
        c = c.T
    n, m = c.shape  # n <= m
    if n == 0:
        return []
    inf = float("inf")
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)  # p[j] = row (1-based) assigned to column j
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used[1:]
            cur = c[i0 - 1] - u[i0] - v[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            used_idx = np.nonzero(used)[0]
            u[p[used_idx]] += delta
            v[used_idx] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while True:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
            if j0 == 0:
                break
    pairs = [(int(p[j]) - 1, j - 1) for j in range(1, m + 1) if p[j] != 0]
    if transposed:
        pairs = [(b, a) for a, b in pairs]
    return sorted(pairs)


def _solver() -> tuple[str, Any]:
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:  # pragma: no cover - scipy is normally installed with sentence-transformers
        return "hungarian(builtin)", None
    return "hungarian(scipy)", linear_sum_assignment


def match_units(
    sim: np.ndarray,
    threshold: float,
    top_k: int | None = None,
    *,
    use_scipy: bool = True,
) -> list[tuple[int, int, float]]:
    """One-to-one matching of output units (rows) to reference units (columns).

    Eligible pairs: ``sim >= threshold`` and, with ``top_k``, the column among the row's ``top_k``
    most similar. Maximizes the number of matches, then total similarity. Returns
    ``(row, col, similarity)`` sorted by row.
    """
    s = np.asarray(sim, dtype=np.float64)
    if s.size == 0:
        return []
    n, m = s.shape
    eligible = s >= threshold
    if top_k is not None and top_k < m:
        order = np.argsort(-s, axis=1, kind="stable")[:, :top_k]
        keep = np.zeros_like(eligible)
        np.put_along_axis(keep, order, True, axis=1)
        eligible &= keep
    if not eligible.any():
        return []
    # weight C + s for eligible pairs (C > 2*min(n, m) makes cardinality dominate), 0 otherwise
    big = 2.0 * min(n, m) + 2.0
    weight = np.where(eligible, big + s, 0.0)
    lsa = _solver()[1] if use_scipy else None
    if lsa is not None:
        rows, cols = lsa(weight, maximize=True)
        pairs = list(zip(rows.tolist(), cols.tolist(), strict=True))
    else:
        pairs = hungarian(-weight)
    return sorted((int(i), int(j), float(s[i, j])) for i, j in pairs if eligible[i, j])


# --------------------------------------------------------------------------------------------
# Scoring (pure, given units and embeddings)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Alignment:
    """Everything the four metrics and the explanation are built from."""

    output_units: list[str]
    reference_units: list[str]
    sim: np.ndarray
    pairs: list[tuple[int, int, float]]
    global_cosine: float

    @property
    def precision(self) -> float:
        return len(self.pairs) / len(self.output_units)

    @property
    def recall(self) -> float:
        return len(self.pairs) / len(self.reference_units)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def align(
    output_units: Sequence[str],
    reference_units: Sequence[str],
    out_vecs: np.ndarray,
    ref_vecs: np.ndarray,
    threshold: float,
    top_k: int | None,
    use_scipy: bool = True,
) -> Alignment:
    """Similarity matrix, one-to-one matching and global similarity (normalized vectors in)."""
    sim = np.clip(out_vecs @ ref_vecs.T, -1.0, 1.0)
    pairs = match_units(sim, threshold, top_k, use_scipy=use_scipy)
    mo, mr = out_vecs.mean(axis=0), ref_vecs.mean(axis=0)
    denom = float(np.linalg.norm(mo) * np.linalg.norm(mr))
    g = float(mo @ mr) / denom if denom > 0 else 0.0
    return Alignment(list(output_units), list(reference_units), sim, pairs, g)


def _r(x: float) -> float:
    return round(float(x), 6)


def metrics_of(a: Alignment, meta: dict[str, Any]) -> list[MetricResult]:
    """The four MetricResults with their explainability payloads."""
    by_out = {i: (j, s) for i, j, s in a.pairs}
    by_ref = {j: (i, s) for i, j, s in a.pairs}
    prec_rows = []
    for i, u in enumerate(a.output_units):
        row: dict[str, Any] = {"index": i, "unit": u, "matched": i in by_out}
        if i in by_out:
            j, s = by_out[i]
            row.update(reference_index=j, reference_unit=a.reference_units[j], similarity=_r(s))
        else:
            j = int(np.argmax(a.sim[i]))
            row.update(best_reference_index=j, best_similarity=_r(a.sim[i, j]))
        prec_rows.append(row)
    rec_rows = []
    for j, u in enumerate(a.reference_units):
        row = {"index": j, "unit": u, "matched": j in by_ref}
        if j in by_ref:
            i, s = by_ref[j]
            row.update(output_index=i, output_unit=a.output_units[i], similarity=_r(s))
        else:
            i = int(np.argmax(a.sim[:, j]))
            row.update(best_output_index=i, best_similarity=_r(a.sim[i, j]))
        rec_rows.append(row)
    explanation = {
        "matched_pairs": [
            {
                "output_index": i,
                "output_unit": a.output_units[i],
                "reference_index": j,
                "reference_unit": a.reference_units[j],
                "similarity": _r(s),
            }
            for i, j, s in a.pairs
        ],
        "missed_reference_units": [
            {"index": r["index"], "unit": r["unit"], "best_similarity": r["best_similarity"]}
            for r in rec_rows
            if not r["matched"]
        ],
        "extra_output_units": [
            {"index": r["index"], "unit": r["unit"], "best_similarity": r["best_similarity"]}
            for r in prec_rows
            if not r["matched"]
        ],
    }
    g = min(1.0, max(0.0, a.global_cosine))
    scored = (  # (score, result) of each of METRICS, in order
        (a.precision, prec_rows),
        (a.recall, rec_rows),
        (a.f1, [explanation]),
        (g, [{"method": GLOBAL_METHOD, "cosine": _r(a.global_cosine)}]),
    )
    return [
        MetricResult(name=name, category=CATEGORY, score=_r(score), result=result, meta=meta)
        for name, (score, result) in zip(METRICS, scored, strict=True)
    ]


def _failed(error: str, meta: dict[str, Any]) -> list[MetricResult]:
    return [MetricResult.failed(name, CATEGORY, error, **meta) for name in METRICS]


# --------------------------------------------------------------------------------------------
# The node
# --------------------------------------------------------------------------------------------
def _atomic_with_llm(ctx: NodeContext) -> bool:
    judge = ctx.runtime.judge
    return bool(
        ctx.case.refalign.atomic_chunks
        and judge is not None
        and getattr(judge, "kind", None) == "llm"
        and getattr(judge, "supports_llm_tasks", False)
    )


def sentence_units(ctx: NodeContext) -> tuple[list[str], list[str]]:
    """Sentence units of the output (from the refiner chunks when present) and the reference."""
    refined = ctx.get("refiner", ChunkList)
    if refined is not None and refined.chunks:
        out = [s for c in refined.chunks for s in sentences(c.item.text)]
    else:
        out = sentences(ctx.case.output)
    return out, sentences(ctx.case.reference or "")


class RefalignNode(Node):
    """Embedding alignment of output and reference units (see module docstring)."""

    name = "refalign"
    version = "1"
    output_model = RefalignMetrics

    def skip_reason(self, ctx: NodeContext) -> str | None:
        if not ctx.case.refalign.enabled:
            return "refalign disabled in the record"
        if not (ctx.case.reference or "").strip():
            return "no reference"
        return None

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        s = ctx.runtime.settings.embeddings
        parts: dict[str, Any] = {
            "knobs": ctx.case.refalign.model_dump(mode="json"),
            "embeddings": [s.provider, s.model, str(s.model_path), s.base_url],
            "units": "atomic" if _atomic_with_llm(ctx) else "sentences",
        }
        if _atomic_with_llm(ctx):
            from nexagauge.nodes.claims import judge_meta

            parts["judge"] = judge_meta(ctx, self.name)
        return parts

    async def _atomic_units(
        self, ctx: NodeContext
    ) -> tuple[list[str], list[str], CostEstimate, str | None]:
        from nexagauge.nodes.chunk import chunk_output
        from nexagauge.nodes.claims import case_chunks

        judge = ctx.runtime.judge
        out_chunks = case_chunks(ctx)
        ref_chunks = await ctx.runtime.to_thread(
            chunk_output, ctx.case.reference or "", ctx.runtime.settings.run.chunk_max_tokens
        )
        out_x = await judge.extract_claims(out_chunks, node=self.name)
        ref_x = await judge.extract_claims(ref_chunks.chunks, node=self.name)
        cost = out_x.cost + ref_x.cost
        for side, x in (("output", out_x), ("reference", ref_x)):
            if x.error is not None:
                return [], [], cost, f"atomic unit extraction of the {side} failed: {x.error}"
        return [c.text for c in out_x.claims], [c.text for c in ref_x.claims], cost, None

    async def run(self, ctx: NodeContext) -> RefalignMetrics:
        knobs = ctx.case.refalign
        meta: dict[str, Any] = {"similarity_threshold": knobs.similarity_threshold}
        cost = CostEstimate()
        if _atomic_with_llm(ctx):
            from nexagauge.nodes.claims import judge_meta

            meta["units"] = "atomic_claims"
            meta.update({f"judge_{k}": v for k, v in judge_meta(ctx, self.name).items()})
            out_units, ref_units, cost, err = await self._atomic_units(ctx)
            if err is not None:
                return RefalignMetrics(metrics=_failed(err, meta), cost=cost)
        else:
            meta["units"] = "sentences"
            if knobs.atomic_chunks:
                meta["units"] = "sentences (atomic_chunks needs an LLM judge; none configured)"
            out_units, ref_units = await ctx.runtime.to_thread(sentence_units, ctx)
        if not out_units or not ref_units:
            side = "output" if not out_units else "reference"
            return RefalignMetrics(
                metrics=_failed(f"the {side} has no text units", meta), cost=cost
            )
        k = knobs.refine_top_k
        meta["refine_top_k"] = None if k is None else min(k, len(ref_units))
        meta["matching"] = _solver()[0]
        try:
            embedder = ctx.runtime.embedder
            meta["embeddings"] = getattr(embedder, "name", type(embedder).__name__)
            vecs = await embedder.embed([*out_units, *ref_units])
        except Exception as e:  # a failing embedding service is an error result, not a crash
            err = f"embeddings failed: {type(e).__name__}: {e}"
            return RefalignMetrics(metrics=_failed(err, meta), cost=cost)
        n = len(out_units)
        a = await ctx.runtime.to_thread(
            align, out_units, ref_units, vecs[:n], vecs[n:], knobs.similarity_threshold, k
        )
        return RefalignMetrics(metrics=metrics_of(a, meta), cost=cost)

    def estimate(self, ctx: NodeContext) -> list[CallEstimate]:
        """Two claim-extraction calls when units come from an LLM judge, else none."""
        if not _atomic_with_llm(ctx) or self.skip_reason(ctx):
            return []
        from nexagauge.judge.tasks import claims_call, claims_completion_estimate, forecast_claims
        from nexagauge.nodes.chunk import chunk_output
        from nexagauge.nodes.claims import case_chunks

        out = []
        max_tokens = ctx.runtime.settings.run.chunk_max_tokens
        ref_chunks = chunk_output(ctx.case.reference or "", max_tokens).chunks
        for chunks in (case_chunks(ctx), ref_chunks):
            texts = [c.item.text for c in chunks]
            if texts:
                call = claims_call(texts)
                completion = claims_completion_estimate(forecast_claims(texts), len(texts))
                out.append(CallEstimate(self.name, 1, call.prompt_tokens(), completion))
        return out
