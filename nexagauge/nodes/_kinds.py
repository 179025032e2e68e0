"""What several nodes share: never being cached, a cache key made of the judge and its prompt, and
the strict base of judge answer schemas.

:class:`UncachedNode` is the base of nodes whose results never enter the node cache (``scan``,
``eval``, ``report``, ``agent_signals``, ``geval_steps``: cheaper than a lookup, or cached
elsewhere). :func:`judge_prompt_key` is the cache-key part of a node whose output depends on the
judge model and one prompt template (``geval``, ``conversation_relevance``, ``redteam``): a new
model or a new prompt version is a new key. :class:`StrictAnswer` is the base of the answer
models the judge must fill (``create_model(..., __base__=StrictAnswer)``): no field beyond the
schema's.

Example:
    >>> from types import SimpleNamespace
    >>> ctx = SimpleNamespace(runtime=SimpleNamespace(judge=SimpleNamespace(model="gpt-x")))
    >>> judge_prompt_key(ctx, "geval")["model"]
    'gpt-x'
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from nexagauge.graph.node import Node, NodeContext


class StrictAnswer(BaseModel):
    """Base of judge answer schemas: an answer with a field the schema lacks is invalid."""

    model_config = ConfigDict(extra="forbid")


def numbered_answer(name: str, key: str, item: type[BaseModel], n: int) -> type[BaseModel]:
    """A strict answer model of ``n`` required fields ``<key>1`` .. ``<key>n``, each an ``item``
    (one per window or rubric judged in the call)."""
    fields: dict[str, Any] = {f"{key}{i + 1}": (item, ...) for i in range(n)}
    return create_model(name, __base__=StrictAnswer, **fields)


class UncachedNode(Node):
    """A node whose results are never stored in (nor read from) the node cache."""

    def cacheable(self, ctx: NodeContext) -> bool:
        return False


def judge_prompt_key(ctx: NodeContext, prompt: str) -> dict[str, Any]:
    """The cache-key parts ``model`` (the judge's, ``None`` without one) and ``prompt`` (the id
    of template ``prompt``, which changes with its text)."""
    from nexagauge.judge.promptlib import load_prompt

    return {"model": getattr(ctx.runtime.judge, "model", None), "prompt": load_prompt(prompt).id}
