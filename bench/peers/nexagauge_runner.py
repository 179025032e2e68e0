"""nexa-gauge: answer relevancy + grounding (claims once, then both judges concurrently)."""

from __future__ import annotations

import argparse
import asyncio

from _common import emit, load, run_cases

from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.schema.case import parse_record
from nexagauge.settings import Settings


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--reasoning", action="store_true", help="ask for per-claim reasons too")
    a = ap.parse_args()
    settings = Settings(
        judge={"base_url": a.base_url, "api_key": "sk-bench", "model": "gpt-4o-mini"},
        cache={"enabled": False},
    )
    rt = Runtime.create(settings, use_cache=False)
    ex = Executor(rt, plan("eval", only=["relevance", "grounding"]))
    knobs = {"include_reasoning": a.reasoning}

    async def evaluate(c):
        rec = {**c, "relevance": knobs, "grounding": knobs}
        res = await ex.run_case(parse_record(rec, 0))
        rep = res.report
        errs = {k: v for k, v in rep.errors.items()} if rep else {}
        if errs:
            raise RuntimeError(f"metric errors: {errs}")
        return dict(rep.scores) if rep else {}

    report = await run_cases(load(a.cases, a.limit), evaluate, a.base_url)
    await rt.aclose()
    emit(report)


if __name__ == "__main__":
    asyncio.run(main())
