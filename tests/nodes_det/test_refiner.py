"""Near-duplicate removal: nexagauge.text.dedup and the refiner node."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.nodes.chunk import chunk_output
from nexagauge.nodes.refiner import RefinerNode, refine
from nexagauge.schema.results import ChunkList
from nexagauge.text import dedup
from nexagauge.text.dedup import Duplicate, comparison_form, find_duplicates, jaccard, sketch

from .conftest import ctx

A = "The Eiffel Tower is in Paris, France."


def test_comparison_form_ignores_case_spacing_punctuation() -> None:
    assert comparison_form(A) == "the eiffel tower is in paris france"
    assert comparison_form("THE  eiffel\ntower -- is in PARIS; France!!") == comparison_form(A)
    assert comparison_form("--- !!") == "--- !!"  # no words: normalized text


def test_jaccard_hand_computed() -> None:
    # 5-shingles: {abcde, bcdef} vs {abcde, bcdeg}: 1 shared of 3 distinct -> 1/3
    assert jaccard(sketch("abcdef"), sketch("abcdeg")) == pytest.approx(1 / 3)
    assert jaccard(sketch("abc"), sketch("abc")) == 1.0  # shorter than a shingle: whole text
    # "the eiffel tower is in paris france" has 35 chars -> 31 distinct 5-shingles; adding "s"
    # adds exactly one new shingle ("ances"): J = 31 / 32 = 0.96875
    a = comparison_form(A)
    assert len(a) == 35 and len(sketch(a).hashes) == 31
    assert jaccard(sketch(a), sketch(a + "s")) == pytest.approx(31 / 32)


def test_exact_near_and_distinct() -> None:
    texts = [A, "the eiffel tower is in PARIS france", A[:-1] + "s.", "Rome is in Italy.", A]
    assert find_duplicates(texts, 0.92) == [
        Duplicate(1, 0, 1.0, "exact"),
        Duplicate(2, 0, round(31 / 32, 6), "shingle_jaccard"),
        Duplicate(4, 0, 1.0, "exact"),
    ]
    # threshold above 31/32: the "Frances" variant is kept
    assert [d.index for d in find_duplicates(texts, 0.97)] == [1, 4]


def test_duplicate_points_to_best_then_earliest_kept() -> None:
    b = "Completely different sentence about the Louvre museum."
    texts = [b, A, b + "!", A + " "]
    dups = find_duplicates(texts, 0.9)
    assert [(d.index, d.duplicate_of) for d in dups] == [(2, 0), (3, 1)]


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="threshold"):
        find_duplicates([A], 0.0)
    with pytest.raises(ValueError, match="window"):
        find_duplicates([A], 0.9, window=0)


def test_window_bounds_near_duplicate_search_but_not_exact() -> None:
    fillers = ["Rome is in Italy.", "Madrid is in Spain.", "Berlin is in Germany."]
    near = A[:-1] + "s."
    texts = [A, *fillers, near, A]
    # window 3: the near-duplicate only sees the 3 fillers, so it is kept; the exact copy is
    # still found through the hash map over all kept texts
    assert [(d.index, d.duplicate_of) for d in find_duplicates(texts, 0.92, window=3)] == [(5, 0)]
    assert [(d.index, d.duplicate_of) for d in find_duplicates(texts, 0.92, window=4)] == [
        (4, 0),
        (5, 0),
    ]


def test_comparisons_are_bounded_by_window(monkeypatch) -> None:
    calls = 0
    real = dedup.jaccard

    def counting(a, b, size=dedup.SKETCH):
        nonlocal calls
        calls += 1
        return real(a, b, size)

    monkeypatch.setattr(dedup, "jaccard", counting)
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(500)]
    texts = [" ".join(rng.choice(vocab) for _ in range(12)) for _ in range(400)]
    dups = find_duplicates(texts, 0.92, window=50)
    assert dups == []
    assert 0 < calls <= 400 * 50  # O(n * window), not O(n^2) = 79,800


def test_sketch_truncates_large_texts_and_estimates() -> None:
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz "
    base = "".join(rng.choice(letters) for _ in range(4000))
    other = base[:3000] + "".join(rng.choice(letters) for _ in range(1000))
    sa, sb = sketch(base), sketch(other)
    assert sa.truncated and len(sa.hashes) == dedup.SKETCH
    grams = lambda t: {t[i : i + 5] for i in range(len(t) - 4)}  # noqa: E731
    ga, gb = grams(base), grams(other)
    exact = len(ga & gb) / len(ga | gb)
    assert jaccard(sa, sb) == pytest.approx(exact, abs=0.08)
    assert jaccard(sa, sa) == 1.0


def test_deterministic_across_hash_seeds() -> None:
    """Python's str hash is salted per process; the result must not depend on it."""
    code = (
        "from nexagauge.text.dedup import find_duplicates\n"
        "t=['Paris is nice.','paris is nice!','Rome is in Italy.','The tower is 330 m tall.',"
        "'The tower is 330 m tall!!','the tower is 331 m tall.']\n"
        "print(find_duplicates(t, 0.8))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "12345")
    }
    assert len(outs) == 1, outs


# ------------------------------------------------------------------------------------------
# refine() and the node
# ------------------------------------------------------------------------------------------
def _output_with_repeats() -> str:
    return (
        "The Eiffel Tower is in Paris.\n\n"
        "It was completed in 1889 for the World's Fair.\n\n"
        "The Eiffel tower is in Paris!\n\n"
        "It is 330 metres tall.\n\n"
        "It was completed in 1889 for the Worlds Fair."
    )


def test_refine_drops_duplicates_and_keeps_indices() -> None:
    chunks = chunk_output(_output_with_repeats(), 16)
    assert len(chunks.chunks) == 5
    refined = refine(chunks, 0.92)
    assert [c.index for c in refined.chunks] == [0, 1, 3]
    assert [(d["index"], d["duplicate_of"], d["method"]) for d in refined.dropped] == [
        (2, 0, "exact"),
        (4, 1, "exact"),
    ]
    assert refined.dropped[0]["chunk"]["item"]["text"] == "The Eiffel tower is in Paris!"
    assert refined.chunks[1] == chunks.chunks[1]  # kept chunks are unchanged


@settings(max_examples=80, deadline=None)
@given(
    sentences=st.lists(
        st.sampled_from(["Paris is nice.", "PARIS is nice!", "Rome is old.", "It rains a lot.",
                         "It rains a lot!!", "The tower is tall.", "x", "Tall is the tower."]),
        max_size=25,
    ),
    threshold=st.floats(min_value=0.5, max_value=1.0),
)  # fmt: skip
def test_refine_partition_property(sentences: list[str], threshold: float) -> None:
    chunks = chunk_output("\n\n".join(sentences) or "x", 6)
    refined = refine(chunks, threshold)
    kept = [c.index for c in refined.chunks]
    dropped = [d["index"] for d in refined.dropped]
    # every chunk is either kept or listed as dropped, exactly once, and order is preserved
    assert sorted(kept + dropped) == [c.index for c in chunks.chunks]
    assert kept == sorted(kept)
    kept_set = set(kept)
    for d in refined.dropped:
        assert d["duplicate_of"] in kept_set and d["duplicate_of"] < d["index"]
        assert d["similarity"] >= threshold or d["method"] == "exact"
    assert refine(chunks, threshold) == refined  # deterministic
    if chunks.chunks:
        assert chunks.chunks[0].index in kept_set  # the first occurrence is always kept


async def test_refiner_node_uses_upstream_and_settings(case, make_runtime) -> None:
    output = "The Eiffel Tower is in Paris France.\n\nThe Eiffel Tower is in Paris Frances."
    c = case(output)
    # Jaccard of the two chunks' comparison forms is 31/32 = 0.96875
    for similarity, expected_kept in [(0.95, [0]), (0.99, [0, 1])]:
        rt = make_runtime(chunk_max_tokens=10, refiner_similarity=similarity)
        chunks = chunk_output(output, 10)
        assert len(chunks.chunks) == 2
        out = await RefinerNode().run(ctx(c, rt, chunk=chunks))
        assert isinstance(out, ChunkList)
        assert [ch.index for ch in out.chunks] == expected_kept
        assert rt.offloaded == 0  # a few chunks: inline, cheaper than a thread hop
        assert RefinerNode().cache_key_parts(ctx(c, rt))["similarity"] == similarity


async def test_refiner_node_without_upstream_chunks_itself(case, make_runtime) -> None:
    c = case(_output_with_repeats())
    rt = make_runtime(chunk_max_tokens=16)
    out = await RefinerNode().run(ctx(c, rt))
    assert [ch.index for ch in out.chunks] == [0, 1, 3]
    assert len(out.dropped) == 2


async def test_refiner_node_offloads_large_outputs(case, make_runtime) -> None:
    from nexagauge.graph.runtime import INLINE_CPU_CHARS

    paragraph = "The Eiffel Tower is 330 metres tall and stands in Paris, France. "
    output = "\n\n".join([paragraph * 3] * (INLINE_CPU_CHARS // len(paragraph) // 3 + 2))
    rt = make_runtime(chunk_max_tokens=64)
    chunks = chunk_output(output, 64)
    out = await RefinerNode().run(ctx(case(output), rt, chunk=chunks))
    assert rt.offloaded == 1  # thousands of characters: off the event loop
    assert len(out.chunks) == 1 and len(out.dropped) == len(chunks.chunks) - 1


def _brute_force(texts: list[str], threshold: float, window: int) -> list[Duplicate]:
    """The definition, without candidate filtering: every kept text in the window is compared."""
    out, exact, kept = [], {}, []
    for i, t in enumerate(texts):
        norm = comparison_form(t)
        if norm in exact:
            out.append(Duplicate(i, exact[norm], 1.0, "exact"))
            continue
        sk = sketch(norm)
        best = max(
            ((jaccard(sk, o), -j, j) for j, o in kept[-window:]),
            default=None,
        )
        if best is not None and best[0] >= threshold:
            out.append(Duplicate(i, best[2], round(best[0], 6), "shingle_jaccard"))
            continue
        exact[norm] = i
        kept.append((i, sk))
    return out


_variant = st.tuples(
    st.sampled_from(["The tower is in Paris", "Rome is the capital of Italy", "It rains",
                     "Gustave Eiffel designed the iron lattice tower in 1889"]),
    st.sampled_from(["", ".", " today", "s", " and more", " in France", " indeed it is"]),
).map("".join)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(_variant, max_size=30),
    threshold=st.floats(min_value=0.3, max_value=1.0),
    window=st.integers(min_value=1, max_value=8),
)
def test_prefix_filter_misses_nothing(texts: list[str], threshold: float, window: int) -> None:
    assert find_duplicates(texts, threshold, window=window) == _brute_force(
        texts, threshold, window
    )


def _sketch_by_definition(normalized: str, k: int = 5) -> frozenset[int]:
    """The shingle hashes as defined: CRC-32 of each character k-gram's UTF-8 bytes."""
    grams = (
        {normalized}
        if len(normalized) <= k
        else {normalized[i : i + k] for i in range(len(normalized) - k + 1)}
    )
    return frozenset(zlib.crc32(g.encode("utf-8", "surrogatepass")) for g in grams)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "abcde",
        "abcdef",
        "the quick brown fox jumps over the lazy dog " * 3,
        "café au lait, naïve façade",  # non-ASCII: the per-character path
        "x" * 40,
        "a\u00e9" * 30,
    ],
)
def test_sketch_hashes_are_the_crc_of_each_shingle(text: str) -> None:
    """The ASCII fast path hashes byte shingles; they are the character shingles' encodings,
    so every sketch is the one its definition gives."""
    sk = sketch(text)
    full = _sketch_by_definition(text)
    assert not sk.truncated and sk.hashes == full


def test_sketch_of_many_random_texts_matches_its_definition() -> None:
    import random

    rnd = random.Random(7)
    alphabet = "abcdefghij klmnopqrstuvwxyz.,'0123456789" + "éüß"
    for _ in range(400):
        n = rnd.randint(0, 300)
        text = "".join(rnd.choice(alphabet[: 40 if rnd.random() < 0.7 else None]) for _ in range(n))
        sk = sketch(text)
        full = _sketch_by_definition(text)
        if len(full) <= 512:
            assert sk.hashes == full
        else:
            assert sk.truncated and sk.hashes == frozenset(sorted(full)[:512])
