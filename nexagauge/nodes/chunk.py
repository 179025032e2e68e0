"""``chunk``: token-aware splitting of the output into chunks.

The output is split with :func:`nexagauge.text.segment.chunk_spans` (paragraph, line, sentence,
word boundaries preferred in that order; never inside a word) so that no chunk exceeds
``settings.run.chunk_max_tokens`` cl100k tokens unless it is a single word. Every non-whitespace
character of the output lands in exactly one chunk; only whitespace between chunks is left out.
``char_start``/``char_end`` index the original output (``output[c.char_start:c.char_end] ==
c.item.text``), ``index`` is the chunk's position, ``item.id`` is ``text_id(text, "chunk",
str(index))`` (stable, unique within the case) and ``item.tokens`` the chunk's cl100k count.

Example:
    >>> [c.item.text for c in chunk_output("Paris is in France. Rome is in Italy.", 6).chunks]
    ['Paris is in France.', 'Rome is in Italy.']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexagauge.graph.node import Node, NodeContext
from nexagauge.schema.results import Chunk, ChunkList, Item, text_id
from nexagauge.text.segment import chunk_spans
from nexagauge.text.tokens import ENCODING_NAME, count_tokens


def chunk_output(output: str, max_tokens: int) -> ChunkList:
    """Chunk ``output`` into a :class:`ChunkList` (pure; the node runs it off the event loop)."""
    chunks: list[Chunk] = []
    for index, (start, end) in enumerate(chunk_spans(output, max_tokens)):
        text = output[start:end]
        item = Item(
            id=text_id(text, "chunk", str(index)),
            text=text,
            tokens=float(count_tokens(text)),
        )
        chunks.append(Chunk(item=item, index=index, char_start=start, char_end=end))
    return ChunkList(chunks=chunks)


class ChunkNode(Node):
    """Splits the output into chunks of at most ``run.chunk_max_tokens`` tokens."""

    name = "chunk"
    version = "1"
    output_model = ChunkList

    def cache_key_parts(self, ctx: NodeContext) -> Mapping[str, Any]:
        return {"max_tokens": ctx.runtime.settings.run.chunk_max_tokens, "encoding": ENCODING_NAME}

    async def run(self, ctx: NodeContext) -> ChunkList:
        max_tokens = ctx.runtime.settings.run.chunk_max_tokens
        output = ctx.case.output
        return await ctx.runtime.cpu(len(output), chunk_output, output, max_tokens)
