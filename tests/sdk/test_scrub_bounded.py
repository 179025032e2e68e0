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
    real_scrub, real_all_clean = Scrubber.scrub, Scrubber.all_clean

    def scrub(self: Scrubber, attribute: str, text: str) -> Any:
        sizes.append(len(text))
        return real_scrub(self, attribute, text)

    def all_clean(self: Scrubber, texts: list[str]) -> bool:
        sizes.extend(len(t) for t in texts)
        return real_all_clean(self, texts)

    monkeypatch.setattr(Scrubber, "scrub", scrub)
    monkeypatch.setattr(Scrubber, "all_clean", all_clean)
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
