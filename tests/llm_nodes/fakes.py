"""An in-process scripted judge for unit tests of the LLM nodes (integration tests use the real
openai client against the loopback server in tests/support/openai_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from nexagauge.judge.base import JudgeReply
from nexagauge.schema.results import CostEstimate


@dataclass
class Call:
    prompt: str
    variables: Mapping[str, Any]
    schema: dict[str, Any]
    node: str
    top_logprobs: int | None


@dataclass
class ScriptedJudge:
    """``answer(call) -> (dict answer | None, error | None, logprobs | None)``."""

    answer: Callable[[Call], tuple[Any, str | None, list[dict[str, Any]] | None]]
    kind: str = "llm"
    model: str = "fake-model"
    supports_llm_tasks: bool = True
    delay_s: float = 0.0
    calls: list[Call] = field(default_factory=list)

    async def structured(
        self,
        prompt: str,
        variables: Mapping[str, Any],
        response_model: type[BaseModel],
        *,
        node: str,
        untrusted: Sequence[str] = (),
        max_tokens: int | None = None,
        top_logprobs: int | None = None,
    ) -> JudgeReply[Any]:
        call = Call(prompt, dict(variables), response_model.model_json_schema(), node, top_logprobs)
        self.calls.append(call)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        data, error, logprobs = self.answer(call)
        cost = CostEstimate(cost=0.001, input_tokens=100, output_tokens=10)
        if error:
            return JudgeReply(None, cost=cost, error=error)
        return JudgeReply(response_model.model_validate(data), cost=cost, logprobs=logprobs)

    async def aclose(self) -> None:
        return None

    def prompts(self, name: str) -> list[Call]:
        return [c for c in self.calls if c.prompt == name]
