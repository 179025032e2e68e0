"""The judge's ``openai`` client (:class:`~nexagauge.judge.llm.http.JudgeClient`) over real
loopback HTTP, both transports: the requests it saves work on are still the requests a plain
``openai.AsyncOpenAI`` sends (authorization, content type, user agent, the exact body), without
openai's telemetry headers; the URL it keeps per path follows each client's ``base_url``;
proxies from the environment are still used."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from support.openai_server import OpenAIServer, Reply

from nexagauge.judge.llm.http import TELEMETRY_HEADERS, make_client

pytestmark = pytest.mark.integration

TRANSPORTS = ["aiohttp", "httpx"]
ANSWER = '{"verdicts": ["yes"]}'


def _body(tag: str) -> bytes:
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": f"question {tag}"}]}
    ).encode()


def _client(base_url: str, transport: str, *, api_key: str = "sk-test") -> openai.AsyncOpenAI:
    return make_client(
        base_url=base_url, api_key=api_key, timeout_s=5.0, max_retries=0, transport=transport
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_request_carries_auth_type_agent_and_the_exact_body(server, transport):
    client = _client(server.base_url, transport)
    try:
        raw = await client.post_bytes("/chat/completions", _body("a"))
    finally:
        await client.close()
    assert json.loads(raw)["choices"][0]["message"]["role"] == "assistant"
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["accept"] == "application/json"
    assert req.headers["user-agent"].startswith("AsyncOpenAI/Python ")
    assert req.body == json.loads(_body("a"))
    assert not [h for h in req.headers if h.lower().startswith("x-stainless")]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_same_headers_as_a_plain_openai_client_less_its_telemetry(server, transport):
    """What is left out is exactly openai's telemetry; every other header is as before."""
    ours = _client(server.base_url, transport)
    http = openai.DefaultAioHttpClient() if transport == "aiohttp" else None
    plain = openai.AsyncOpenAI(
        base_url=server.base_url, api_key="sk-test", max_retries=0, http_client=http
    )
    try:
        await ours.post_bytes("/chat/completions", _body("a"))
        await plain.post("/chat/completions", content=_body("a"), cast_to=bytes)
    finally:
        await ours.close()
        await plain.close()
    mine, theirs = (dict(r.headers) for r in server.requests)
    dropped = {h.lower() for h in TELEMETRY_HEADERS} | {
        "x-stainless-retry-count",
        "x-stainless-read-timeout",
    }
    assert dropped <= {h.lower() for h in theirs}  # openai does send them
    assert {k.lower(): v for k, v in mine.items()} == {
        k.lower(): v for k, v in theirs.items() if k.lower() not in dropped
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_concurrent_posts_each_send_their_own_body(server, transport):
    """The request options are built once per path: no call's body leaks into another's."""
    client = _client(server.base_url, transport)
    try:
        await asyncio.gather(
            *(client.post_bytes("/chat/completions", _body(str(i))) for i in range(12))
        )
    finally:
        await client.close()
    got = sorted(r.body["messages"][0]["content"] for r in server.requests)
    assert got == sorted(f"question {i}" for i in range(12))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_kept_url_follows_each_clients_base_url(transport):
    with OpenAIServer() as one, OpenAIServer() as two:
        a, b = _client(one.base_url, transport), _client(two.base_url, transport)
        try:
            for _ in range(2):  # the second call of each uses the kept URL
                await a.post_bytes("/chat/completions", _body("a"))
                await b.post_bytes("/chat/completions", _body("b"))
            assert [r.text for r in one.requests] == ["question a"] * 2
            assert [r.text for r in two.requests] == ["question b"] * 2
            a.base_url = two.base_url  # a client pointed elsewhere goes there
            await a.post_bytes("/chat/completions", _body("moved"))
        finally:
            await a.close()
            await b.close()
    assert len(one.requests) == 2
    assert [r.text for r in two.requests][-1] == "question moved"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_status_errors_keep_openais_exceptions_and_headers(server, transport):
    server.enqueue(Reply(status=429, headers={"Retry-After": "7"}), Reply(status=400))
    client = _client(server.base_url, transport)
    try:
        with pytest.raises(openai.RateLimitError) as e:
            await client.post_bytes("/chat/completions", _body("a"))
        assert e.value.response.headers["retry-after"] == "7"
        with pytest.raises(openai.BadRequestError):
            await client.post_bytes("/chat/completions", _body("a"))
    finally:
        await client.close()
    assert len(server.requests) == 2  # openai's own retries stay off


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_proxy_from_the_environment_is_used(server, transport, monkeypatch):
    """``HTTP_PROXY`` still routes the judge's requests (the loopback server plays the proxy:
    a plain-HTTP proxy receives the request with the absolute URL of the real endpoint)."""
    monkeypatch.setenv("HTTP_PROXY", server.base_url.rsplit("/v1", 1)[0])
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = _client("http://judge.invalid/v1", transport)
    try:
        raw = await client.post_bytes("/chat/completions", _body("via proxy"))
    finally:
        await client.close()
    assert json.loads(raw)["object"] == "chat.completion"
    (req,) = server.requests
    assert req.path == "http://judge.invalid/v1/chat/completions"
    assert req.text == "question via proxy"


async def test_a_copy_of_the_client_is_a_judge_client_with_the_same_headers(server):
    """``with_options`` (openai's ``copy``) keeps the class, so the copy omits the telemetry
    too and keeps the key and user agent."""
    client = _client(server.base_url, "aiohttp")
    other = client.with_options(timeout=3.0)
    try:
        assert type(other) is type(client)
        await other.post_bytes("/chat/completions", _body("copy"))  # type: ignore[attr-defined]
    finally:
        await client.close()
    (req,) = server.requests
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["user-agent"].startswith("AsyncOpenAI/Python ")
    assert not [h for h in req.headers if h.lower().startswith("x-stainless")]
