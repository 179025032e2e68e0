"""Shared by the per-tool runners: read cases, time each case, print one JSON line.

Runners run in the tool's own environment (peers in .bench-venv) and evaluate cases one after
another, so per-case wall time and the server's per-case request chains are clean.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any


def load(path: str, limit: int | None) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for r in rows:
        if isinstance(r["context"], str):
            r["context"] = [r["context"]]
    return rows[:limit] if limit else rows


def _reset_server(base_url: str) -> None:
    import urllib.request

    root = base_url.rstrip("/").removesuffix("/v1")
    req = urllib.request.Request(root + "/reset", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass


async def run_cases(
    cases: list[dict[str, Any]],
    evaluate: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
    base_url: str | None = None,
) -> dict[str, Any]:
    """Evaluate ``cases`` one after another. With ``base_url``, one untimed warm-up evaluation
    (imports, clients, encoders: the same for every tool) runs first and the server's counters
    are reset after it, so figures are steady-state per case."""
    if base_url and cases:
        try:
            await evaluate(dict(cases[0], case_id="warmup"))
        except Exception:
            traceback.print_exc(file=sys.stderr)
        _reset_server(base_url)
    results = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for c in cases:
        w, p = time.perf_counter(), time.process_time()
        try:
            scores = await evaluate(c)
            err = None
        except Exception as e:  # a peer failing on a case is reported, not hidden
            scores, err = {}, f"{type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
        results.append(
            {
                "case_id": c["case_id"],
                "wall_s": time.perf_counter() - w,
                "cpu_s": time.process_time() - p,
                "scores": scores,
                "error": err,
            }
        )
    return {
        "cases": len(cases),
        "wall_s": time.perf_counter() - wall0,
        "cpu_s": time.process_time() - cpu0,
        "errors": sum(1 for r in results if r["error"]),
        "results": results,
    }


def emit(report: dict[str, Any]) -> None:
    print("RESULT " + json.dumps(report), flush=True)
