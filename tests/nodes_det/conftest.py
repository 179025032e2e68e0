"""Fixtures for the deterministic nodes (scan, chunk, refiner, refmatch) and nexagauge.text.

Nodes are run directly: ``NodeContext(case, upstream, runtime)`` with ``Runtime(settings=...)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from nexagauge.graph.node import NodeContext
from nexagauge.graph.runtime import Runtime
from nexagauge.schema.case import EvalCase, parse_record
from nexagauge.settings import Settings
from nexagauge.text import wordnet


class CountingRuntime(Runtime):
    """A real Runtime that counts how often CPU work was sent to its thread pool."""

    offloaded: int = 0

    async def to_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.offloaded += 1
        return await super().to_thread(fn, *args, **kwargs)


@pytest.fixture
async def make_runtime() -> AsyncIterator[Callable[..., CountingRuntime]]:
    made: list[Runtime] = []

    def make(**run: Any) -> CountingRuntime:
        rt = CountingRuntime(settings=Settings(run=run) if run else Settings())
        made.append(rt)
        return rt

    yield make
    for rt in made:
        await rt.aclose()


@pytest.fixture
def case() -> Callable[..., EvalCase]:
    def make(output: str, reference: str | None = None, **extra: Any) -> EvalCase:
        rec: dict[str, Any] = {"case_id": "c1", "output": output, **extra}
        if reference is not None:
            rec["reference"] = reference
        return parse_record(rec, index=0)

    return make


def ctx(case: EvalCase, runtime: Runtime, **upstream: Any) -> NodeContext:
    return NodeContext(case=case, upstream=upstream, runtime=runtime)


@pytest.fixture(scope="session")
def system_wordnet() -> tuple[wordnet.SynonymSource, wordnet.WordNetInfo]:
    """The process-wide WordNet (Debian ``wordnet-base``); skips when it is not installed.

    Uses :func:`wordnet.default_synonyms`, so the ~2 s load happens once per test session and is
    shared with nodes that use the default synonym source.
    """
    if wordnet.locate() is None:
        pytest.skip("no WordNet database installed (apt-get install wordnet-base)")
    src, info = wordnet.default_synonyms()
    assert info.variant == "wordnet", info
    return src, info
