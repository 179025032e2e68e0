"""Client CPU per judge call: the judge's ``JudgeClient`` against a plain ``openai.AsyncOpenAI``.

Both post the same real request body (a claim-extraction call of a benchmark case, encoded as
the judge encodes it) to the benchmark judge (``bench/llm_server.py``, a child process, 0 ms
latency) on the same transport, ``--calls`` calls per round with ``--concurrency`` in flight,
rounds interleaved (plain, ours, plain, ours, ...). CPU = this process's CPU time
(``time.process_time``; the server is another process) per call; the ratio ours / plain is taken
per round pair, so a busy machine slows both sides of a pair alike.

    python bench/judge_client.py [--calls 2000] [--rounds 3] [--concurrency 16] [--json out.json]

The serve process makes 3 such calls per evaluation of relevance + grounding
(``bench/online_latency.py`` measures the whole evaluation).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai
from _common import CASES, LlmServer, load_line, machine

from nexagauge.judge.llm.http import make_client
from nexagauge.judge.llm.wire import RequestBodies
from nexagauge.judge.tasks import claims_call
from nexagauge.settings import JudgeSettings

#: openai's own retries, the same on both sides: the loopback server's small accept backlog can
#: reset a connection while 16 open at once
RETRIES = 2


def request_body() -> bytes:
    """The judge's claim-extraction request for the first benchmark case's answer."""
    case = json.loads(Path(CASES).read_text().splitlines()[0])
    answer = str(case["output"])
    call = claims_call([answer])
    body = RequestBodies().encode(
        JudgeSettings(), call.messages, call.schema, call.model.__name__, "json_schema", None, None
    )
    return body.content


def _plain(base_url: str, transport: str) -> openai.AsyncOpenAI:
    http = openai.DefaultAioHttpClient(timeout=30.0) if transport == "aiohttp" else None
    return openai.AsyncOpenAI(
        base_url=base_url, api_key="k", timeout=30.0, max_retries=RETRIES, http_client=http
    )


async def _round(
    which: str, base_url: str, transport: str, body: bytes, n: int, conc: int
) -> float:
    """CPU microseconds per call of one round (client made, warmed up, then timed)."""
    if which == "plain":
        client: Any = _plain(base_url, transport)

        async def post() -> bytes:
            return await client.post("/chat/completions", content=body, cast_to=bytes)
    else:
        client = make_client(
            base_url=base_url,
            api_key="k",
            timeout_s=30.0,
            max_retries=RETRIES,
            transport=transport,  # type: ignore[arg-type]
        )

        async def post() -> bytes:
            return await client.post_bytes("/chat/completions", body)

    sem = asyncio.Semaphore(conc)

    async def one() -> None:
        async with sem:
            raw = await post()
            if not raw.startswith(b"{"):
                raise RuntimeError(f"unexpected answer {raw[:80]!r}")

    try:
        await asyncio.gather(*(one() for _ in range(min(50, n))))  # connections, first parses
        t0 = time.process_time()
        await asyncio.gather(*(one() for _ in range(n)))
        return (time.process_time() - t0) / n * 1e6
    finally:
        await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=3, help="round pairs per transport")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--transports", default="aiohttp,httpx")
    ap.add_argument("--quick", action="store_true", help="200 calls, 1 round (smoke)")
    ap.add_argument("--json", help="write raw figures here")
    a = ap.parse_args()
    if a.quick:
        a.calls, a.rounds = 200, 1
    before = machine()
    server = LlmServer(0)
    body = request_body()
    out: dict[str, Any] = {"calls": a.calls, "concurrency": a.concurrency, "body_bytes": len(body)}
    try:
        base_url = server.url + "/v1"
        for transport in a.transports.split(","):
            rows: dict[str, list[float]] = {"plain": [], "ours": []}
            for _ in range(a.rounds):
                for which in ("plain", "ours"):
                    us = asyncio.run(
                        _round(which, base_url, transport, body, a.calls, a.concurrency)
                    )
                    rows[which].append(us)
            ratios = [o / p for o, p in zip(rows["ours"], rows["plain"], strict=True)]
            out[transport] = {**rows, "ratio": ratios}
            print(
                f"{transport:8s} plain AsyncOpenAI {statistics.median(rows['plain']):6.0f} us/call, "
                f"JudgeClient {statistics.median(rows['ours']):6.0f} us/call "
                f"(ratio {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} round pairs; "
                f"{a.calls} calls, {a.concurrency} at once, body {len(body)} bytes)"
            )
    finally:
        server.close()
    after = machine()
    out["machine"] = after
    median = statistics.median(out[a.transports.split(",")[0]]["ratio"])
    print(
        f"RESULT judge client CPU per call {median:.2f}x (median ratio) a plain AsyncOpenAI ({a.transports.split(',')[0]})"
    )
    print(load_line(before, after))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
