"""Scrubbing never looks at more than is kept: values are cut to the size limit first (issue 16).

Not timed: the scrubber is spied on and the length of every text it is given is checked.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge
from nexagauge.sdk import config as sdk_config
from nexagauge.sdk import conventions as C
from nexagauge.sdk._call import SCRUB_MARGIN
from nexagauge.sdk.scrubbing import Scrubber

from .conftest import Recorder, configure_with

LIMIT = 32 * 1024


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Recorder, list[int]]]:
    rec = configure_with(InMemorySpanExporter())
    sizes: list[int] = []
    scrubber = sdk_config.STATE.scrubber
    real_scrub, real_gate = Scrubber.scrub, Scrubber.gate

    def scrub(self: Scrubber, attribute: str, text: str) -> Any:
        sizes.append(len(text))
        return real_scrub(self, attribute, text)

    def gate(self: Scrubber, texts: list[str], remember: list[str] | None = None) -> int:
        sizes.extend(len(t) for t in texts)
        return real_gate(self, texts, remember)

    monkeypatch.setattr(Scrubber, "scrub", scrub)
    monkeypatch.setattr(Scrubber, "gate", gate)
    assert scrubber is sdk_config.STATE.scrubber
    try:
        yield rec, sizes
    finally:
        nexagauge.shutdown()


def test_a_10_mb_argument_is_cut_before_it_is_scrubbed(spied: tuple[Recorder, list[int]]) -> None:
    rec, sizes = spied
    big = base64.b64encode(bytes(range(256)) * (10 * 1024 * 1024 // 256 // 4 * 3)).decode()
    assert len(big) >= 10_000_000

    @nexagauge.trace(name="upload")
    def upload(question: str, context: list[str]) -> str:
        return big

    upload(big, [big, "short passage"])
    span = rec.one("upload")
    assert sizes and max(sizes) <= LIMIT + SCRUB_MARGIN
    assert span.attributes[f"{C.NG_ORIGINAL_LENGTH_PREFIX}{C.GEN_AI_INPUT_MESSAGES}"] == len(big)
    assert len(span.attributes[C.GEN_AI_INPUT_MESSAGES]) < LIMIT + 200


def test_long_streams_and_exceptions_are_cut_before_they_are_scrubbed(
    spied: tuple[Recorder, list[int]],
) -> None:
    rec, sizes = spied
    chunk = "token-like-text-" * 4096  # 64 KiB per chunk

    @nexagauge.trace(name="gen")
    def gen(question: str) -> Iterator[str]:
        for _ in range(50):
            yield chunk

    list(gen("q"))

    @nexagauge.trace(name="boom")
    def boom(question: str) -> None:
        raise ValueError(chunk * 20)

    with pytest.raises(ValueError):
        boom("q")
    assert rec.one("gen") and rec.one("boom")
    assert max(sizes) <= LIMIT + SCRUB_MARGIN


def test_a_passage_retrieved_again_is_not_scanned_again(
    spied: tuple[Recorder, list[int]],
) -> None:
    rec, sizes = spied
    passage = "The Eiffel Tower is 330 m tall. Note: it was finished in 1889. " * 3

    @nexagauge.trace(name="rag")
    def answer(question: str, context: list[str]) -> str:
        return "330 m"

    answer("how tall?", [passage])
    assert len(passage) in sizes  # scanned the first time
    sizes.clear()
    answer("how tall is it?", [passage])
    assert len(passage) not in sizes  # remembered as clean
    assert passage in rec.spans[-1].attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS]


def test_passages_with_secrets_are_never_remembered(rec: Recorder) -> None:
    passage = "deploy notes: OPENAI_API_KEY=q8Vn2Lx7Rt4Kp9Wm3Zs6 then restart"

    @nexagauge.trace(name="rag")
    def answer(question: str, context: list[str]) -> str:
        return "ok"

    for _ in range(3):
        answer("q", [passage])
    scrubber = sdk_config.STATE.scrubber
    assert passage not in scrubber.known_clean
    for span in rec.spans:
        assert "q8Vn2Lx7Rt4Kp9Wm3Zs6" not in span.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS]


def test_the_memo_is_bounded() -> None:
    from nexagauge.sdk import scrubbing

    scrubber = Scrubber()
    texts = [f"passage {i}: " + "lorem ipsum " * 40 for i in range(scrubbing.MEMO_TEXTS * 2)]
    for i in range(0, len(texts), 64):
        batch = texts[i : i + 64]
        assert scrubber.all_clean(batch, batch)
    assert len(scrubber.known_clean) <= scrubbing.MEMO_TEXTS
    assert sum(map(len, scrubber.known_clean)) <= scrubbing.MEMO_CHARS
    assert texts[-1] in scrubber.known_clean and texts[0] not in scrubber.known_clean


def test_the_memo_keeps_a_text_used_again_and_drops_a_generation_whole() -> None:
    from nexagauge.sdk.scrubbing import MEMO_TEXTS, CleanMemo

    memo = CleanMemo()
    memo.add(["kept"])
    for i in range(MEMO_TEXTS // 2 - 1):
        memo.add([f"filler {i}"])
    assert "kept" in memo and len(memo) == MEMO_TEXTS // 2
    memo.add(["next"])  # the young generation was full: it becomes the old one
    assert "kept" in memo and "next" in memo
    for i in range(MEMO_TEXTS // 2):
        memo.add([f"more {i}"])
    assert "kept" not in memo and "next" in memo  # the old generation was dropped whole
    assert len(memo) <= MEMO_TEXTS and set(memo) >= {"next"}


@pytest.mark.parametrize(
    "question, passage, answer",
    [
        ("plain question", "plain passage: 330 m", "plain answer"),
        ("a question\non two lines", "passage\nwith newlines\n", "answer\n\nin two paragraphs"),
        ('he said "yes"', 'a "quoted" passage\nnext line', 'the answer: "330 m"'),
        ('a "quoted" question', "passage with\na newline", "answer\twith a tab and \\ backslash"),
        ("question", "passage \x01 control", 'answer "quoted"'),
    ],
)
def test_recorded_json_is_the_same_whether_or_not_escaping_was_needed(
    question: str, passage: str, answer: str
) -> None:
    """The recorder skips JSON escaping when the secret gate found nothing to escape; the JSON
    it writes is what json.dumps writes, with and without characters to escape."""
    import json

    rec = configure_with(InMemorySpanExporter())
    try:

        @nexagauge.trace(name="rag")
        def rag(question: str, context: list[str]) -> str:
            return answer

        rag(question, [passage, "second passage"])
        attrs = rec.one("rag").attributes
        assert attrs[C.GEN_AI_INPUT_MESSAGES] == json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": question}]}],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        assert json.loads(attrs[C.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == answer
        assert attrs[C.GEN_AI_RETRIEVAL_DOCUMENTS] == json.dumps(
            [{"content": passage}, {"content": "second passage"}],
            ensure_ascii=False,
            separators=(",", ":"),
        )
    finally:
        nexagauge.shutdown()


# Passages passed as a list of plain strings are kept as they are until recorded (no dict per
# passage) and written with the JSON body the memo keeps (issue 33): the recorded documents must
# be what the normalized path records, in the same order, scrubbed, and valid JSON.


def test_plain_string_passages_merge_with_added_documents_in_order(rec: Recorder) -> None:
    import json

    secret = "deploy notes: OPENAI_API_KEY=q8Vn2Lx7Rt4Kp9Wm3Zs6 then restart"

    @nexagauge.trace(name="rag")
    def answer(question: str, context: list[str]) -> str:
        nexagauge.add_context({"id": "kb-7", "text": "Opening hours: 9 to 5."})
        return "ok"

    answer("q", ["Paris is in France.", secret])
    docs = json.loads(rec.spans[-1].attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert [d.get("id") for d in docs] == [None, None, "kb-7"]
    assert docs[0]["content"] == "Paris is in France."
    assert "q8Vn2Lx7Rt4Kp9Wm3Zs6" not in json.dumps(docs) and "[scrubbed:" in docs[1]["content"]


def test_a_remembered_passage_is_recorded_as_the_first_time(rec: Recorder) -> None:
    import json

    # a tab and a backslash (escaped by JSON beyond newlines and quotes), quotes and a newline
    odd = 'Height:\t330 m; path C:\\tower; "iron"\nlattice'
    plain = 'He said "hi" twice.\nThen left.'

    @nexagauge.trace(name="rag")
    def answer(question: str, context: list[str]) -> str:
        return "ok"

    for context in ([odd, plain], [plain, odd], [odd], [plain]):
        for _ in range(2):  # the second call finds the passages in the memo
            answer("What is it?", list(context))
            recorded = json.loads(rec.spans[-1].attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS])
            assert recorded == [{"content": c} for c in context]
    assert odd in sdk_config.STATE.scrubber.known_clean


def test_documents_with_ids_are_remembered_too(rec: Recorder) -> None:
    # documents with more than a content (id, metadata) are written by the JSON encoder; their
    # clean contents are still remembered, so a document retrieved again is not scanned again
    doc = {"id": "kb-7", "text": "Opening hours: 9 to 5.", "metadata": {"source": "faq"}}

    @nexagauge.trace(name="rag")
    def answer(question: str, context: list[dict[str, Any]]) -> str:
        return "ok"

    answer("q", [doc])
    assert doc["text"] in sdk_config.STATE.scrubber.known_clean


def test_memo_admission_samples_calls_whose_passages_never_repeat() -> None:
    """After MISS_STREAK calls in a row with only new passages, one call in ADMIT_SAMPLE has its
    passages remembered; a known passage ends the streak and every call is remembered again."""
    from nexagauge.sdk.scrub_gates import ADMIT_SAMPLE, MISS_STREAK, CleanMemo

    memo = CleanMemo()
    for i in range(MISS_STREAK - 1):  # below the streak: every call's passages are kept
        memo.add([f"fresh {i}"], [f"fresh {i}"], all_new=True)
    assert len(memo) == MISS_STREAK - 1
    kept = []
    for i in range(4 * ADMIT_SAMPLE):
        text = f"later {i}"
        memo.add([text], [text], all_new=True)
        kept.append(text in memo)
    assert sum(kept) == 4  # one call in ADMIT_SAMPLE
    memo.add(["mixed"], ["mixed"], all_new=False)  # a call that also had a known passage
    memo.add(["after"], ["after"], all_new=True)
    assert "mixed" in memo and "after" in memo  # the streak ended: kept again


def test_a_passage_retrieved_again_is_remembered_during_a_miss_streak(rec: Recorder) -> None:
    """Through the recorder: an app whose passages never repeat, then one passage retrieved on
    every call: within ADMIT_SAMPLE retrievals it is remembered, and its spans stay complete."""
    from nexagauge.sdk.scrub_gates import ADMIT_SAMPLE, MISS_STREAK

    @nexagauge.trace(name="rag")
    def answer(question: str, context: list[str]) -> str:
        return "ok"

    for i in range(MISS_STREAK + 5):
        answer("q", [f"never seen passage number {i}: the tower is 330 m tall"])
    scrubber = sdk_config.STATE.scrubber
    assert f"never seen passage number {MISS_STREAK + 1}: the tower is 330 m tall" not in (
        scrubber.known_clean
    ) or f"never seen passage number {MISS_STREAK + 2}: the tower is 330 m tall" not in (
        scrubber.known_clean
    )  # sampled: not every call's passage was kept
    repeated = "the repeated passage: Paris has 2.1 million people"
    for _ in range(ADMIT_SAMPLE):
        answer("q", [repeated])
    assert repeated in scrubber.known_clean
    assert all(repeated in s.attributes[C.GEN_AI_RETRIEVAL_DOCUMENTS] for s in rec.spans[-8:])
