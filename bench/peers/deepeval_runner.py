"""DeepEval: AnswerRelevancyMetric + FaithfulnessMetric on the benchmark cases (run in .bench-venv)."""

from __future__ import annotations

import argparse
import asyncio
import os

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_PROGRESS_BAR", "YES")
os.environ.setdefault("ERROR_REPORTING", "NO")

from _common import emit, load, run_cases
from deepeval.metrics import AnswerRelevancyMetric, FaithfulnessMetric
from deepeval.models import OpenAIModel
from deepeval.test_case import LLMTestCase


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--no-reason", action="store_true")
    a = ap.parse_args()
    model = OpenAIModel(model="gpt-4o-mini", api_key="sk-bench", base_url=a.base_url, temperature=0)
    reason = not a.no_reason

    async def evaluate(c):
        tc = LLMTestCase(
            input=c["input"], actual_output=c["output"], retrieval_context=c["context"]
        )
        ar = AnswerRelevancyMetric(model=model, include_reason=reason, async_mode=True)
        ff = FaithfulnessMetric(model=model, include_reason=reason, async_mode=True)
        await asyncio.gather(
            ar.a_measure(tc, _show_indicator=False), ff.a_measure(tc, _show_indicator=False)
        )
        return {"answer_relevancy": ar.score, "faithfulness": ff.score}

    emit(await run_cases(load(a.cases, a.limit), evaluate, a.base_url))


if __name__ == "__main__":
    asyncio.run(main())
