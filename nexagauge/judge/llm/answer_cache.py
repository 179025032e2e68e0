"""The judge-answer cache: valid answers stored by the content hash of what was asked.

The key covers everything that can change an answer - endpoint, model, temperature, seed, prompt
id (with its version), the rendered messages, the response schema and the logprobs request - so
identical content in another trace or run is judged once; a hit costs nothing. Only valid answers
are stored; a stale or corrupt entry reads as a miss (the judge is asked again). The store is a
``nexagauge.graph.cache`` blob store (disk for CLI runs, a bounded memory LRU under ``serve``).

Example:
    >>> from nexagauge.settings import JudgeSettings
    >>> from nexagauge.judge.promptlib import load_prompt
    >>> p = load_prompt("reask")
    >>> a = cache_key(JudgeSettings(seed=1), p, [], {}, None)
    >>> a == cache_key(JudgeSettings(seed=2), p, [], {}, None)
    False
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from nexagauge.judge.promptlib import Prompt
from nexagauge.settings import JudgeSettings

#: bump when the cached entry layout or the meaning of a cached answer changes
CACHE_FORMAT = 1
CACHE_NAMESPACE = "judge"


def cache_key(
    s: JudgeSettings, prompt: Prompt, messages: Any, schema: Any, logprobs: int | None
) -> str:
    """The content key of one question to the judge (see module docstring)."""
    from nexagauge.graph.cache import ContentStore

    return ContentStore.key(
        {
            "format": CACHE_FORMAT,
            "endpoint": s.base_url or "",
            "model": s.model,
            "temperature": s.temperature,
            "seed": s.seed,
            "prompt": prompt.id,
            "messages": messages,
            "schema": schema,
            "top_logprobs": logprobs,
        }
    )


def load_answer(
    store: Any, key: str, model: type[BaseModel]
) -> tuple[BaseModel, list[dict[str, Any]] | None] | None:
    """The cached answer under ``key`` as ``(value, logprobs)``; ``None`` on a miss or a stale
    or corrupt entry."""
    hit = store.get(key)
    if hit is None:
        return None
    try:
        entry = json.loads(hit)
        value = model.model_validate_json(entry["content"])
    except (ValueError, KeyError, TypeError):
        return None  # stale/corrupt entry: call again
    return value, entry.get("logprobs")


def save_answer(
    store: Any,
    key: str,
    value: BaseModel,
    model: str,
    logprobs: list[dict[str, Any]] | None,
) -> None:
    """Store a valid answer (its JSON, the judge model, its logprobs) under ``key``."""
    entry = {"content": value.model_dump_json(), "model": model, "logprobs": logprobs}
    store.put(key, json.dumps(entry).encode())
