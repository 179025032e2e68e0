"""Judge cost side by side: nexa-gauge vs DeepEval vs Ragas on the same cases and the same judge.

Every tool evaluates answer relevancy + faithfulness/grounding for the same 52 hand-written RAG
cases (bench/data/rag_cases.jsonl) against ONE loopback OpenAI-compatible server
(bench/llm_server.py) that answers schema-valid JSON and counts requests and cl100k tokens with
one policy for all. Each tool runs in its own process (peers in .bench-venv, see
bench/requirements-peers.txt), cases one after another. Two passes: 0 ms judge latency (client
CPU, throughput) and 300 ms (sequential round trips and wall time per case).

    python bench/judge_cost.py [--limit N] [--tools nexagauge,deepeval,...] [--skip-latency]

Prints absolute figures per case and ratios against the cheapest peer, measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CASES, ROOT, LlmServer

PEER_PY = ROOT / ".bench-venv" / "bin" / "python"

TOOLS: dict[str, tuple[str, list[str]]] = {
    "nexagauge": ("self", ["nexagauge_runner.py"]),
    "nexagauge+reasons": ("self", ["nexagauge_runner.py", "--reasoning"]),
    "deepeval": ("peer", ["deepeval_runner.py"]),
    "deepeval-no-reason": ("peer", ["deepeval_runner.py", "--no-reason"]),
    "ragas": ("peer", ["ragas_runner.py", "--api", "current"]),
    "ragas-legacy": ("peer", ["ragas_runner.py", "--api", "legacy"]),
}


def run_tool(name: str, server: LlmServer, limit: int | None) -> dict:
    kind, args = TOOLS[name]
    py = sys.executable if kind == "self" else str(PEER_PY)
    if kind == "peer" and not PEER_PY.exists():
        return {
            "skipped": f"{PEER_PY} missing: python3.11 -m venv .bench-venv && "
            ".bench-venv/bin/pip install -r bench/requirements-peers.txt"
        }
    server.reset()
    cmd = [py, *args, "--base-url", server.url + "/v1", "--cases", str(CASES)]
    if limit:
        cmd += ["--limit", str(limit)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "bench" / "peers")}
    t0 = time.perf_counter()
    p = subprocess.run(
        cmd, cwd=ROOT / "bench" / "peers", env=env, capture_output=True, text=True, timeout=3600
    )
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"skipped": f"failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}"}
    rep = json.loads(line[7:])
    rep["process_s"] = time.perf_counter() - t0
    rep["server"] = server.stats()
    return rep


def per_case(rep: dict) -> dict[str, float]:
    pc = rep["server"]["per_case"]
    n = rep["cases"]

    def mean(key: str) -> float:
        return sum(d[key] for d in pc.values()) / n

    return {
        "calls": mean("chat"),
        "emb_calls": mean("embeddings"),
        "prompt_tok": mean("prompt"),
        "completion_tok": mean("completion"),
        "tokens": mean("prompt") + mean("completion"),
        "round_trips": statistics.median(d["round_trips"] for d in pc.values()) if pc else 0,
        "cpu_ms": 1000 * rep["cpu_s"] / n,
        "wall_ms": 1000 * rep["wall_s"] / n,
        "errors": rep["errors"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, help="first N cases only (smoke runs)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--skip-latency", action="store_true", help="only the 0 ms pass")
    ap.add_argument("--latency-ms", type=float, default=300.0)
    ap.add_argument("--json", help="also write the raw figures here")
    a = ap.parse_args()
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        ap.error(f"unknown tools {sorted(unknown)}; choose from {', '.join(TOOLS)}")
    rows: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    passes = [0.0] if a.skip_latency else [0.0, a.latency_ms]
    for latency in passes:
        srv = LlmServer(latency)
        try:
            for t in tools:
                if t in skipped:
                    continue
                rep = run_tool(t, srv, a.limit)
                if "skipped" in rep:
                    skipped[t] = rep["skipped"]
                    continue
                pc = per_case(rep)
                row = rows.setdefault(t, {})
                if latency == 0:
                    row.update({k: v for k, v in pc.items() if k != "round_trips"})
                else:
                    row["round_trips"] = pc["round_trips"]
                    row[f"wall_ms@{int(latency)}"] = pc["wall_ms"]
        finally:
            srv.close()
    peers = [t for t in rows if not t.startswith("nexagauge")]
    cheapest = min(peers, key=lambda t: rows[t]["tokens"]) if peers else None
    cols = [
        "calls",
        "emb_calls",
        "prompt_tok",
        "completion_tok",
        "tokens",
        "round_trips",
        "cpu_ms",
        "wall_ms",
        f"wall_ms@{int(a.latency_ms)}",
        "errors",
    ]
    print(
        f"\nJudge cost per case ({a.limit or 52} cases; answer relevancy + faithfulness/grounding)"
    )
    print(
        f"{'tool':20}"
        + "".join(f"{c:>15}" for c in cols)
        + (f"{'tokens vs ' + cheapest:>26}" if cheapest else "")
    )
    for t, r in rows.items():
        line = f"{t:20}" + "".join(f"{r.get(c, float('nan')):>15.1f}" for c in cols)
        if cheapest:
            line += f"{r['tokens'] / rows[cheapest]['tokens']:>25.2f}x"
        print(line)
    for t, why in skipped.items():
        print(f"{t:20} skipped: {why}")
    if a.json:
        Path(a.json).write_text(
            json.dumps({"rows": rows, "skipped": skipped, "cheapest_peer": cheapest}, indent=2)
        )


if __name__ == "__main__":
    main()
