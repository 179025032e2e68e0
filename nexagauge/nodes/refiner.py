"""``refiner``: removes near-duplicate chunks of the output (bounded and deterministic).

Input: the ``chunk`` node's :class:`ChunkList` (if it is missing, the output is chunked here with
the same function, so the refiner never silently sees nothing). Duplicates are found by
:func:`nexagauge.text.dedup.find_duplicates`: equal normalized text (NFKC, case-folded, collapsed
whitespace), or Jaccard similarity of character 5-gram shingles >= ``run.refiner_similarity``.

Bounds: each chunk is compared with at most the 128 most recently kept chunks
(:data:`~nexagauge.text.dedup.WINDOW`), each comparison on at most 512 shingle hashes
(:data:`~nexagauge.text.dedup.SKETCH`); exact duplicates are found over all chunks with a hash
map. Work is O(n * 128 * 512) in the worst case for n chunks, linear in n.

Determinism: same chunks -> same output; the first occurrence is kept and later copies are
dropped. Kept chunks keep their ``index`` from ``chunk`` (so ``source_chunk_index`` of claims
refers to the same chunk in both lists; indices of a refined list may have gaps). Every dropped
chunk is listed in ``ChunkList.dropped`` as
``{"index", "duplicate_of", "similarity", "method", "chunk"}``, where ``duplicate_of`` is the
``index`` of the kept chunk it duplicates - nothing disappears without a trace.

Example:
    >>> from nexagauge.nodes.chunk import chunk_output
    >>> chunks = chunk_output("Paris is in France.\\n\\nParis is in France!\\n\\nRome.", 6)
    >>> refined = refine(chunks, 0.92)
    >>> [c.index for c in refined.chunks], [(d["index"], d["duplicate_of"]) for d in refined.dropped]
    ([0, 2], [(1, 0)])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexagauge.graph.node import Node, NodeContext
from nexagauge.nodes.chunk import chunk_output
from nexagauge.schema.results import ChunkList
from nexagauge.text import dedup


def refine(chunks: ChunkList, threshold: float) -> ChunkList:
    """Drop near-duplicate chunks (pure; see module docstring)."""
    items = chunks.chunks
    dups = dedup.find_duplicates([c.item.text for c in items], threshold)
    by_pos = {d.index: d for d in dups}
    kept = []
    dropped: list[dict[str, Any]] = list(chunks.dropped)
    for pos, c in enumerate(items):
        d = by_pos.get(pos)
        if d is None:
            kept.append(c)
            continue
        dropped.append(
            {
                "index": c.index,
                "duplicate_of": items[d.duplicate_of].index,
                "similarity": d.similarity,
                "method": d.method,
                "chunk": c.model_dump(mode="json"),
            }
        )
    return ChunkList(chunks=kept, dropped=dropped)


class RefinerNode(Node):
    """Removes near-duplicate chunks (see module docstring)."""

    name = "refiner"
    version = "1"
    output_model = ChunkList

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        run = ctx.runtime.settings.run
        return {
            "similarity": run.refiner_similarity,
            "max_tokens": run.chunk_max_tokens,
            "shingle": dedup.SHINGLE,
            "window": dedup.WINDOW,
            "sketch": dedup.SKETCH,
        }

    async def run(self, ctx: NodeContext) -> ChunkList:
        run = ctx.runtime.settings.run
        chunks = ctx.get("chunk", ChunkList)
        if chunks is None:
            output = ctx.case.output
            chunks = await ctx.runtime.cpu(len(output), chunk_output, output, run.chunk_max_tokens)
        size = sum(len(c.item.text) for c in chunks.chunks)
        return await ctx.runtime.cpu(size, refine, chunks, run.refiner_similarity)
