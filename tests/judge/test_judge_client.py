"""The judge's ``openai`` client (:class:`~nexagauge.judge.llm.http.JudgeClient`) over real
loopback HTTP, both transports: the requests it saves work on are still the requests a plain
``openai.AsyncOpenAI`` sends (authorization, content type, user agent, the exact body), without
openai's telemetry headers; the URL it keeps per path follows each client's ``base_url``;
proxies from the environment are still used."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx2
import openai
import pytest
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport
from support.openai_server import OpenAIServer, Reply

from nexagauge.judge.llm.http import TELEMETRY_HEADERS, WholeBodyTransport, make_client

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
        await ours.post_bytes("/chat/completions", _body("b"))  # built from the kept headers
    finally:
        await ours.close()
        await plain.close()
    mine, theirs, again = (dict(r.headers) for r in server.requests)
    assert {k.lower(): v for k, v in again.items()} == {k.lower(): v for k, v in mine.items()}
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


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_kept_requests_are_the_requests_httpx2_builds(transport):
    """A request built from kept headers equals httpx2's own build of it (method, URL, every
    header in order, body, timeout); a change of the client's headers in place is seen, and
    requests of other kinds are httpx2's."""
    http = _client("http://127.0.0.1:9/v1", transport)._client
    url = "http://127.0.0.1:9/v1/chat/completions"
    hdrs = [("Authorization", "Bearer k"), ("Content-Type", "application/json"), ("X-A", "1")]

    def both(**kw):
        ours = http.build_request("POST", url, headers=hdrs, **kw)
        theirs = httpx2.AsyncClient.build_request(http, "POST", url, headers=hdrs, **kw)
        return [(r.method, r.url, r.headers.raw, r.content, r.extensions) for r in (ours, theirs)]

    for body in (b'{"a": 1}', b'{"bb": 22}', b"", "é".encode() * 300):
        for timeout in (httpx2.USE_CLIENT_DEFAULT, httpx2.Timeout(3.0, read=9.0)):
            mine, theirs = both(content=body, timeout=timeout)
            assert mine == theirs
            if body:
                assert (b"Content-Length", str(len(body)).encode()) == mine[2][-1]
    assert http._kept_requests  # the later builds were made from kept headers
    http.headers["X-Client"] = "changed in place"
    mine, theirs = both(content=b"{}")
    assert mine == theirs and (b"X-Client", b"changed in place") in mine[2]
    for kw in ({"json": {"a": 1}}, {"content": b"{}", "params": {"q": "1"}}, {"content": "text"}):
        mine, theirs = both(**kw)
        assert mine == theirs


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_compressed_answer_is_decoded(server, transport):
    """An endpoint that gzips its answer (the OpenAI API does): the body read whole is still
    decoded by httpx2."""
    completion = {"object": "chat.completion", "choices": [{"message": {"content": "ok"}}]}
    server.enqueue(
        Reply(
            body=gzip.compress(json.dumps(completion).encode()),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )
    )
    client = _client(server.base_url, transport)
    try:
        raw = await client.post_bytes("/chat/completions", _body("gz"))
    finally:
        await client.close()
    assert json.loads(raw) == completion


async def test_aiohttp_clients_read_answers_whole_proxied_or_not(monkeypatch):
    """Every aiohttp transport of the judge's client reads bodies whole, the proxy's too."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    client = _client("http://judge.invalid/v1", "aiohttp")
    try:
        http = client._client
        transports = [http._transport, *(t for t in http._mounts.values() if t is not None)]
        assert len(transports) >= 2
        assert all(type(t) is WholeBodyTransport for t in transports)
        assert isinstance(http._transport, AiohttpTransport)
    finally:
        await client.close()


async def test_a_read_timeout_while_the_body_is_read_is_openais_timeout(server):
    """A body that stops arriving times out as openai's ``APITimeoutError``, as when streamed."""
    server.enqueue(Reply(delay=2.0))
    client = make_client(
        base_url=server.base_url, api_key="k", timeout_s=0.3, max_retries=0, transport="aiohttp"
    )
    try:
        with pytest.raises(openai.APITimeoutError):
            await client.post_bytes("/chat/completions", _body("slow"))
    finally:
        await client.close()


async def test_a_refused_connection_is_openais_connection_error():
    with OpenAIServer() as gone:
        url = gone.base_url
    client = _client(url, "aiohttp")
    try:
        with pytest.raises(openai.APIConnectionError):
            await client.post_bytes("/chat/completions", _body("refused"))
    finally:
        await client.close()
