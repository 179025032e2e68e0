"""Chunking invariants of nexagauge.text.segment.chunk_spans (examples + property tests)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexagauge.text.segment import chunk_spans
from nexagauge.text.tokens import count_tokens


def _wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in ("W", "F")


def _cut_allowed(text: str, i: int) -> bool:
    """A chunk may start/end at position i: text edge, whitespace, or a CJK (wide) character."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    return a.isspace() or b.isspace() or _wide(a) or _wide(b)


def check_invariants(text: str, spans: list[tuple[int, int]], max_tokens: int) -> None:
    # 1. in order, non-overlapping, trimmed, non-empty
    pos = 0
    rebuilt = []
    for s, e in spans:
        assert pos <= s < e <= len(text), (spans, len(text))
        gap = text[pos:s]
        assert gap.strip() == "", f"non-whitespace {gap!r} between chunks was dropped"
        chunk = text[s:e]
        assert chunk == chunk.strip() and chunk, chunk
        rebuilt += [gap, chunk]
        pos = e
    tail = text[pos:]
    assert tail.strip() == "", f"non-whitespace tail {tail!r} dropped"
    # 2. concatenating chunks with the gaps reproduces the output exactly
    assert "".join(rebuilt) + tail == text
    # 3. every non-whitespace character is in exactly one chunk
    covered = sum(e - s for s, e in spans)
    assert covered + sum(c.isspace() for c in text) >= len(text) - 0  # whitespace may be inside
    assert sum(not c.isspace() for s, e in spans for c in text[s:e]) == sum(
        not c.isspace() for c in text
    )
    # 4. never inside a word; over-budget only for a single unsplittable word
    for s, e in spans:
        assert _cut_allowed(text, s) and _cut_allowed(text, e), (text[max(0, s - 3) : e + 3], s, e)
        n = count_tokens(text[s:e])
        if n > max_tokens:
            word = text[s:e]
            assert not any(c.isspace() for c in word), f"over budget ({n}) but splittable: {word!r}"
            assert not any(_wide(c) for c in word) or len(word) == 1, word


def test_whole_text_fits_one_chunk() -> None:
    text = "  The Eiffel Tower is in Paris.\n"
    assert chunk_spans(text, 128) == [(2, 31)]


def test_sentences_packed_until_budget() -> None:
    # "Paris is in France." = Paris, is, in, France, . = 5 tokens; both sentences = 10 > 6
    text = "Paris is in France. Rome is in Italy."
    assert count_tokens("Paris is in France.") == 5
    assert chunk_spans(text, 6) == [(0, 19), (20, 37)]
    # with a budget of 10 both fit together (5 + 5, the space attaches to "Rome")
    assert chunk_spans(text, 10) == [(0, 37)]


def test_paragraph_boundary_preferred_over_sentence() -> None:
    p1 = "Alpha beta gamma. Delta epsilon."
    p2 = "Zeta eta theta. Iota kappa."
    text = f"{p1}\n\n{p2}"
    budget = max(count_tokens(p1), count_tokens(p2))
    assert count_tokens(text) > budget
    spans = chunk_spans(text, budget)
    assert [text[s:e] for s, e in spans] == [p1, p2]


def test_long_paragraph_splits_at_sentences_not_words() -> None:
    sents = [f"Sentence number {i} talks about Paris." for i in range(12)]
    text = " ".join(sents)
    spans = chunk_spans(text, 20)
    check_invariants(text, spans, 20)
    for s, e in spans:
        assert text[s:e].endswith("."), text[s:e]  # every chunk ends at a sentence end
    assert len(spans) > 1


def test_abbreviations_are_not_sentence_ends() -> None:
    first = "Dr. Smith met Mr. Jones in the U.S. yesterday."
    text = first + " They talked about e.g. the weather. Then left."
    budget = count_tokens(first)  # the first sentence fits exactly, the whole text does not
    spans = chunk_spans(text, budget)
    check_invariants(text, spans, budget)
    chunks = [text[s:e] for s, e in spans]
    assert chunks[0] == first, chunks
    assert not any(c.endswith(("Dr.", "Mr.", "U.S.", "e.g.")) for c in chunks), chunks


def test_single_long_word_is_its_own_chunk() -> None:
    url = "https://example.com/" + "a1b2c3" * 100
    text = f"See {url} for details."
    spans = chunk_spans(text, 8)
    check_invariants(text, spans, 8)
    assert url in [text[s:e] for s, e in spans]


def test_words_when_no_sentence_boundary() -> None:
    text = " ".join(["word"] * 100)  # " word" = 1 token each
    spans = chunk_spans(text, 10)
    check_invariants(text, spans, 10)
    assert [count_tokens(text[s:e]) for s, e in spans] == [10] * 10


def test_cjk_without_spaces() -> None:
    text = "東京は日本の首都です。大阪は大きな都市です。" * 10
    spans = chunk_spans(text, 12)
    check_invariants(text, spans, 12)
    assert len(spans) > 1


def test_empty_and_whitespace() -> None:
    assert chunk_spans("", 10) == []
    assert chunk_spans(" \n\t ", 10) == []
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_spans("x", 0)


def test_deterministic() -> None:
    text = "One. Two three four. Five six seven eight nine.\n\nTen eleven. " * 20
    assert chunk_spans(text, 9) == chunk_spans(text, 9)


# ------------------------------------------------------------------------------------------
# Property tests
# ------------------------------------------------------------------------------------------
_word = st.sampled_from(
    ["Paris", "the", "tower", "is", "324", "m", "tall", "e.g.", "U.S.", "Dr.", "don't", "x",
     "naïve", "東京", "です", "🙂", "a-b", "3.14", "https://x.org/a?b=c", "A" * 40, "supercalifragilistic"]
)  # fmt: skip
_sep = st.sampled_from([" ", " ", " ", ". ", "! ", "? ", ", ", "\n", "\n\n", " \n \n ", "\t", "。",
                        "\u00a0", "  ", "...", "", ";"])  # fmt: skip
_structured = st.lists(st.tuples(_word, _sep), max_size=120).map(
    lambda pairs: "".join(w + s for w, s in pairs)
)
_chaos = st.text(
    alphabet=st.sampled_from([*"ab .!?\n\t東。é1", "\u00a0", "\u3000", "\r"]), max_size=300
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(_structured, _chaos), max_tokens=st.integers(min_value=1, max_value=40))
def test_chunk_invariants_property(text: str, max_tokens: int) -> None:
    check_invariants(text, chunk_spans(text, max_tokens), max_tokens)


@settings(max_examples=60, deadline=None)
@given(text=_structured)
def test_larger_budget_never_more_chunks_than_words(text: str) -> None:
    spans = chunk_spans(text, 128)
    check_invariants(text, spans, 128)
    assert len(spans) <= max(1, len(text.split()))
