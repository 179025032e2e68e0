"""The judge circuit breaker: unit behaviour, and the real judge client (openai over loopback
HTTP) waiting out an outage instead of failing the call."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from support.openai_server import OpenAIServer, Reply

from nexagauge.judge.llm.breaker import CircuitBreaker
from nexagauge.judge.llm.client import LLMJudge
from nexagauge.schema.case import RelevanceConfig
from nexagauge.schema.results import Claim, Item
from nexagauge.settings import JudgeSettings

CLAIMS = [
    Claim(item=Item(id="0" * 16, text="The tower is in Paris.", tokens=3.0), source_chunk_index=0)
]
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_retries": 2, "timeout_s": 5.0}


def _judge(server: OpenAIServer, **kw: object) -> LLMJudge:
    return LLMJudge(JudgeSettings(base_url=server.base_url, api_key="k", **{**FAST, **kw}))


async def _judge_once(judge: LLMJudge) -> object:
    return await judge.judge_claims(
        "relevance", CLAIMS, "Where is it?", RelevanceConfig(), node="relevance"
    )


# -- unit ----------------------------------------------------------------------------------------
async def test_opens_on_the_failure_ratio_of_a_full_window_only() -> None:
    b = CircuitBreaker(window=10, failure_ratio=0.8, cooldown_s=60)
    for ok in [False] * 7 + [True] * 3:  # 70% < 80%
        b.record(ok=ok)
    assert b.state == "closed"
    for _ in range(9):
        b.record(ok=False)  # the window slides: 9 failures + 1 success = 90%
    assert b.state == "open" and b.opened == 1
    waiter = asyncio.ensure_future(b.admit())
    await asyncio.sleep(0.02)
    assert not waiter.done()  # requests wait while open
    b.record(ok=True)  # a request in flight came back: the endpoint is up
    await asyncio.wait_for(waiter, 1)
    assert b.state == "closed"
    await b.aclose()


async def test_probes_with_growing_cooldown_until_the_judge_answers() -> None:
    answers = [False, False, True]
    probe_times: list[float] = []

    async def probe() -> bool:
        probe_times.append(time.monotonic())
        return answers.pop(0)

    states: list[str] = []
    b = CircuitBreaker(
        window=2,
        failure_ratio=1.0,
        cooldown_s=0.05,
        max_cooldown_s=1,
        probe=probe,
        on_change=states.append,
    )
    b.record(ok=False)
    b.record(ok=False)
    t0 = time.monotonic()
    await asyncio.wait_for(b.admit(), 5)
    assert b.state == "closed" and b.probes == 3
    gaps = [probe_times[0] - t0] + [y - x for x, y in itertools.pairwise(probe_times)]
    assert gaps[0] >= 0.04 and gaps[1] >= 0.09 and gaps[2] >= 0.19  # 0.05, 0.1, 0.2
    assert states == ["open", "half_open", "open", "half_open", "open", "half_open", "closed"]
    await b.aclose()


async def test_pause_returns_early_when_the_circuit_closes() -> None:
    b = CircuitBreaker(window=1, failure_ratio=1.0, cooldown_s=60)
    b.record(ok=False)
    t0 = time.monotonic()
    sleeper = asyncio.ensure_future(b.pause(30))
    await asyncio.sleep(0.02)
    b.record(ok=True)
    await asyncio.wait_for(sleeper, 1)
    assert time.monotonic() - t0 < 1
    await b.aclose()


# -- the real client over loopback HTTP ------------------------------------------------------------


@pytest.mark.integration
async def test_without_a_breaker_an_outage_longer_than_the_retries_fails_the_call(
    server: OpenAIServer,
) -> None:
    """The defect the breaker fixes: 3 transient errors and the call is a failed result."""
    for _ in range(3):
        server.enqueue(Reply(status=503))
    judge = _judge(server)
    try:
        j = await _judge_once(judge)
    finally:
        await judge.aclose()
    assert not j.ok and "gave up after 3 attempts" in (j.error or "")  # type: ignore[attr-defined]


@pytest.mark.integration
async def test_with_a_breaker_the_call_waits_out_the_outage_and_probes(
    server: OpenAIServer,
) -> None:
    down = {"on": True}

    def handler(req: object) -> Reply | None:
        return Reply(status=500 if len(server.requests) % 2 else 429) if down["on"] else None

    server.handler = handler
    judge = _judge(server)
    b = judge.breaker = CircuitBreaker(
        window=4, failure_ratio=1.0, cooldown_s=0.05, max_cooldown_s=0.2, probe=judge.probe
    )
    try:
        call = asyncio.ensure_future(_judge_once(judge))
        for _ in range(200):
            if b.state != "closed" and b.probes >= 2:
                break
            await asyncio.sleep(0.01)
        assert b.state != "closed" and b.probes >= 2 and not call.done()
        sent_while_open = len(server.requests)
        await asyncio.sleep(0.1)
        # while open only probes go out (one per cooldown), not the waiting call's retries
        assert len(server.requests) - sent_while_open <= 2
        down["on"] = False
        j = await asyncio.wait_for(call, 10)
    finally:
        await b.aclose()
        await judge.aclose()
    assert j.ok and b.state == "closed"  # type: ignore[attr-defined]
    probes = [r for r in server.requests if (r.body or {}).get("max_tokens") == 1]
    assert probes and all(r.body["messages"][0]["content"] == "ping" for r in probes)


@pytest.mark.integration
async def test_with_a_breaker_a_permanent_4xx_still_fails_at_once(server: OpenAIServer) -> None:
    server.enqueue(Reply(status=401, error_message="Incorrect API key"))
    judge = _judge(server)
    b = judge.breaker = CircuitBreaker(window=1, failure_ratio=1.0, probe=judge.probe)
    try:
        j = await _judge_once(judge)
    finally:
        await b.aclose()
        await judge.aclose()
    assert not j.ok and "HTTP 401" in (j.error or "")  # type: ignore[attr-defined]
    assert b.state == "closed" and len(server.requests) == 1


@pytest.mark.integration
async def test_timeouts_are_transient_and_waited_out(server: OpenAIServer) -> None:
    for _ in range(4):
        server.enqueue(Reply(delay=0.6))  # longer than the client's timeout
    judge = _judge(server, timeout_s=0.2)
    b = judge.breaker = CircuitBreaker(
        window=3, failure_ratio=1.0, cooldown_s=0.05, max_cooldown_s=0.1, probe=judge.probe
    )
    try:
        j = await asyncio.wait_for(_judge_once(judge), 20)
    finally:
        await b.aclose()
        await judge.aclose()
    assert j.ok and b.opened >= 1  # type: ignore[attr-defined]


def test_backoff_after_thousands_of_attempts_stays_at_the_cap() -> None:
    """Behind the breaker a call retries for as long as an outage lasts (8 h at the 30 s cap
    is ~1,000 attempts): the delay must not overflow."""
    from nexagauge.judge.llm.retry import retry_delay

    s = JudgeSettings(backoff_base_s=0.5, backoff_max_s=30.0)
    assert all(15.0 <= retry_delay(s, n, None) <= 30.0 for n in (10, 1100, 100_000))
