"""Ragas: answer relevancy + faithfulness, current (collections) or legacy API (run in .bench-venv)."""

from __future__ import annotations

import argparse
import asyncio
import os
import warnings

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.filterwarnings("ignore")

from _common import emit, load, run_cases  # noqa: E402


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--api", choices=["current", "legacy"], default="current")
    a = ap.parse_args()
    cases = load(a.cases, a.limit)
    if a.api == "current":
        from openai import AsyncOpenAI
        from ragas.embeddings.base import embedding_factory
        from ragas.llms import llm_factory
        from ragas.metrics.collections import AnswerRelevancy, Faithfulness

        client = AsyncOpenAI(base_url=a.base_url, api_key="sk-bench")
        llm = llm_factory("gpt-4o-mini", client=client, temperature=0)
        emb = embedding_factory("openai", model="text-embedding-3-small", client=client)
        ar, ff = AnswerRelevancy(llm=llm, embeddings=emb), Faithfulness(llm=llm)

        async def evaluate(c):
            r1, r2 = await asyncio.gather(
                ar.ascore(user_input=c["input"], response=c["output"]),
                ff.ascore(
                    user_input=c["input"], response=c["output"], retrieved_contexts=c["context"]
                ),
            )
            return {"answer_relevancy": r1.value, "faithfulness": r2.value}

    else:
        from langchain_openai import ChatOpenAI, OpenAIEmbeddings
        from ragas import SingleTurnSample
        from ragas.embeddings import LangchainEmbeddingsWrapper
        from ragas.llms import LangchainLLMWrapper
        from ragas.metrics._answer_relevance import ResponseRelevancy
        from ragas.metrics._faithfulness import Faithfulness as LegacyFaithfulness

        llm = LangchainLLMWrapper(
            ChatOpenAI(model="gpt-4o-mini", base_url=a.base_url, api_key="sk-bench", temperature=0)
        )
        emb = LangchainEmbeddingsWrapper(
            OpenAIEmbeddings(
                model="text-embedding-3-small",
                base_url=a.base_url,
                api_key="sk-bench",
                check_embedding_ctx_length=False,
            )
        )
        ar, ff = ResponseRelevancy(llm=llm, embeddings=emb), LegacyFaithfulness(llm=llm)

        async def evaluate(c):
            s = SingleTurnSample(
                user_input=c["input"], response=c["output"], retrieved_contexts=c["context"]
            )
            r1, r2 = await asyncio.gather(ar.single_turn_ascore(s), ff.single_turn_ascore(s))
            return {"answer_relevancy": r1, "faithfulness": r2}

    emit(await run_cases(cases, evaluate, a.base_url))


if __name__ == "__main__":
    asyncio.run(main())
