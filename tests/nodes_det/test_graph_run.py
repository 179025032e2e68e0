"""My nodes inside the real planner + executor + on-disk node cache (no fakes)."""

from __future__ import annotations

import pytest

from nexagauge.graph.cache import NodeCache
from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.schema.case import parse_record
from nexagauge.schema.results import ChunkList, RefmatchMetrics
from nexagauge.settings import Settings

RECORD = {
    "id": "eiffel",
    "answer": "The Eiffel Tower is in Paris.\n\nIt opened in 1889.\n\nThe Eiffel tower is in Paris!",
    "ground_truth": "The Eiffel Tower is in Paris and opened in 1889.",
}


@pytest.fixture
async def runtime(tmp_path):
    s = Settings(run={"chunk_max_tokens": 12}, cache={"dir": str(tmp_path / "cache")})
    rt = Runtime(settings=s, cache=NodeCache(s.cache.dir))
    yield rt
    await rt.aclose()


async def test_refiner_and_refmatch_through_the_executor(runtime) -> None:
    case = parse_record(RECORD, index=0)
    for target in ("refiner", "refmatch"):
        first = await Executor(runtime, plan(target)).run_case(case, 0)
        assert first.outcomes["scan"].status == "ok" and first.outcomes["scan"].output is case
        assert first.outcomes[target].status == "ok", first.outcomes[target].reason
        second = await Executor(runtime, plan(target)).run_case(case, 0)
        out1, out2 = first.outcomes[target].output, second.outcomes[target].output
        if target == "refiner":
            assert isinstance(out1, ChunkList)
            assert [c.index for c in out1.chunks] == [0, 1]
            assert [(d["index"], d["duplicate_of"]) for d in out1.dropped] == [(2, 0)]
            assert second.outcomes["refiner"].cached  # a cache round trip keeps the shape
            assert isinstance(out2, ChunkList)
            assert [c.item.text for c in out2.chunks] == [c.item.text for c in out1.chunks]
        else:
            assert isinstance(out1, RefmatchMetrics) and isinstance(out2, RefmatchMetrics)
            assert [m.name for m in out1.metrics] == [
                "rouge1",
                "rouge2",
                "rougeL",
                "bleu",
                "meteor",
            ]
            assert all(m.score is not None and 0 < m.score <= 1 for m in out1.metrics)
            assert [m.score for m in out2.metrics] == [m.score for m in out1.metrics]


async def test_refmatch_ineligible_without_reference(runtime) -> None:
    case = parse_record({"output": "Paris."}, index=0)
    res = await Executor(runtime, plan("refmatch")).run_case(case, 0)
    o = res.outcomes["refmatch"]
    assert o.status == "skipped" and "reference" in (o.reason or "")
    assert isinstance(o.output, RefmatchMetrics) and o.output.metrics == []
