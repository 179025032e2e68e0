"""``openai.AsyncOpenAI`` clients for the judge and remote embeddings, one per event loop.

Two things every caller needs and gets here once:

- **The HTTP transport.** ``aiohttp`` (default) is openai's own alternative transport
  (``openai[aiohttp]``, :class:`openai.DefaultAioHttpClient`): the same client, requests, errors
  and proxy environment (``HTTP(S)_PROXY``/``NO_PROXY``), with a C HTTP parser under it instead
  of httpx's pure-Python stack. Measured on the benchmark judge (``bench/judge_cost.py``): ~0.65
  ms of client CPU per judge request against ~0.95 ms with httpx - a third of an evaluation's
  client CPU. ``httpx`` keeps openai's default transport (``judge.http_client = "httpx"``), for
  an environment where aiohttp misbehaves.
- **Event-loop affinity.** Neither transport's connections may cross event loops, so
  :class:`ClientPool` keeps one client per (running loop, endpoint) and forgets the clients of
  closed loops (the CLI, tests and the online service each run their own loop).
- **Less work per request.** :class:`JudgeClient` is ``openai.AsyncOpenAI`` without its platform
  telemetry headers, with the URL, default headers and request options of a path built once:
  ~350 -> ~230 us of client CPU per judge call at concurrency 16 on aiohttp (~660 -> ~510 on
  httpx), the same requests otherwise (``tests/judge/test_judge_client.py``). Below openai,
  httpx2 merges, normalises and scans the same headers on every request and the aiohttp
  transport hands a judge answer of a few KB over as a stream read chunk by chunk through three
  generator layers: :class:`_KeptRequests` builds a request whose headers it has built before
  from a copy, and :class:`WholeBodyTransport` reads the body in one call (~230 -> ~200 us).

Example:
    >>> pool = ClientPool("aiohttp")
    >>> pool.transport
    'aiohttp'
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Literal

import httpx2
import openai
from aiohttp import BasicAuth, ClientSession, ClientTimeout
from openai._models import FinalRequestOptions
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport, map_aiohttp_exceptions

log = logging.getLogger(__name__)

HttpClient = Literal["aiohttp", "httpx"]

#: openai's platform telemetry headers (language, package version, OS, architecture, runtime,
#: async library): facts about this process, not about the request, that no endpoint needs to
#: answer a judge call. Omitted, they are 7 fewer headers for httpx2's pure-Python header
#: handling to normalise, merge and scan on every request.
TELEMETRY_HEADERS: tuple[str, ...] = (
    "X-Stainless-Lang",
    "X-Stainless-Package-Version",
    "X-Stainless-OS",
    "X-Stainless-Arch",
    "X-Stainless-Runtime",
    "X-Stainless-Runtime-Version",
    "X-Stainless-Async",
)

#: per-request telemetry headers openai adds unless a request omits them: its own retry count
#: (always 0 here: openai's retries are off, :mod:`~nexagauge.judge.llm.retry` retries) and the
#: read timeout (a client setting)
_REQUEST_HEADERS_OMITTED: dict[str, openai.Omit] = {
    "x-stainless-retry-count": openai.Omit(),
    "x-stainless-read-timeout": openai.Omit(),
}


class _MemoURLs:
    """An ``httpx2.AsyncClient`` mix-in: the parsed ``URL`` of each absolute URL string, kept.

    openai hands httpx2 every request's URL as a string, and httpx2 parses it again with its
    pure-Python parser. The judge posts to one or two URLs for its life, and ``URL`` objects
    are immutable, so each string is parsed once (per client ``base_url``, which relative URLs
    are merged with).
    """

    _memo_urls: dict[str, httpx2.URL]
    _memo_urls_base: Any = None

    def _merge_url(self, url: httpx2.URL | str) -> httpx2.URL:
        if not isinstance(url, str):
            return super()._merge_url(url)  # type: ignore[misc]
        base = self.base_url  # type: ignore[attr-defined]
        if base is not self._memo_urls_base:
            self._memo_urls = {}
            self._memo_urls_base = base
        got = self._memo_urls.get(url)
        if got is None:
            got = super()._merge_url(url)  # type: ignore[misc]
            if len(self._memo_urls) < 64:  # a bound, should a caller vary its URLs
                self._memo_urls[url] = got
        return got


class _KeptRequests(_MemoURLs):
    """An ``httpx2.AsyncClient`` mix-in: a request like one built before is built from a copy.

    openai hands httpx2 the same method, URL and header list on every judge call (only the
    body differs); httpx2 then merges those headers with the client's, normalises every name
    and value, looks each automatic header up and copies the list three times. The first
    request of a shape is built by httpx2 itself and its headers kept (without the body's
    ``Content-Length``); later ones copy them and add their own length, in httpx2's order
    (``Host`` first, ``Content-Length`` last). A request of another kind (a body that is not
    ``bytes`` or is empty, form data, files, JSON, query parameters, cookies, extensions) is
    httpx2's.
    """

    _kept_requests: dict[tuple[Any, ...], tuple[str, httpx2.URL, httpx2.Headers]]

    def build_request(
        self,
        method: str,
        url: httpx2.URL | str,
        *,
        content: Any = None,
        data: Any = None,
        files: Any = None,
        json: Any = None,
        params: Any = None,
        headers: Any = None,
        cookies: Any = None,
        timeout: Any = httpx2.USE_CLIENT_DEFAULT,
        extensions: Any = None,
    ) -> httpx2.Request:
        own: httpx2.AsyncClient = self  # type: ignore[assignment]
        if (
            type(content) is not bytes
            or not content  # (httpx2 puts an empty body's length after ``Host``)
            or data is not None
            or files is not None
            or json is not None
            or params
            or cookies
            or extensions
            or not isinstance(url, str)
            or not isinstance(headers, list)
            or own.cookies
            or own.params
        ):
            return super().build_request(  # type: ignore[misc]
                method,
                url,
                content=content,
                data=data,
                files=files,
                json=json,
                params=params,
                headers=headers,
                cookies=cookies,
                timeout=timeout,
                extensions=extensions,
            )
        t = own.timeout if timeout is httpx2.USE_CLIENT_DEFAULT else timeout
        ext = {"timeout": httpx2.Timeout(t).as_dict()}
        # what the built headers depend on: this call's method, URL and headers, and the
        # client's base URL and headers (either may be replaced or changed in place)
        key = (method, url, tuple(headers), own.base_url, tuple(own.headers.raw))
        kept = getattr(self, "_kept_requests", None)
        if kept is None:
            kept = self._kept_requests = {}
        hit = kept.get(key)
        if hit is None:
            first = super().build_request(  # type: ignore[misc]
                method, url, content=content, headers=headers, timeout=timeout
            )
            raw = [(k, v) for k, v in first.headers.raw if k.lower() != b"content-length"]
            if len(kept) >= 64:  # a bound, should a caller vary its headers
                kept.clear()
            kept[key] = (first.method, first.url, httpx2.Headers(raw))
            return first
        m, u, base = hit
        h = httpx2.Headers(base)
        h["Content-Length"] = str(len(content))
        request = httpx2.Request(m, u, headers=h, stream=httpx2.ByteStream(content), extensions=ext)
        request.read()  # ``request.content`` is the body, as for ``Request(content=...)``
        return request


class WholeBodyTransport(AiohttpTransport):
    """openai's aiohttp transport, handing each response on with its body read whole.

    The same request (method, URL, headers, body, timeouts, proxy, TLS server name) and the
    same exception mapping as :class:`AiohttpTransport`; the body is read in one call inside
    it (under the same read timeout) instead of being streamed to httpx2 chunk by chunk,
    which then decodes (``Content-Encoding``) and closes it as before. For clients that never
    stream a response: the judge and remote embeddings, whose answers are a few KB. A request
    whose body is a stream goes through :class:`AiohttpTransport` unchanged.
    """

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            data: bytes | None = request.content or None
        except httpx2.RequestNotRead:
            return await super().handle_async_request(request)
        if not isinstance(self.client, ClientSession):
            self.client = self.get_client()
        timeout = request.extensions.get("timeout", {})
        proxy = self.proxy
        with map_aiohttp_exceptions():
            async with self.client.request(
                method=request.method,
                url=str(request.url),
                headers=request.headers,
                data=data,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=ClientTimeout(
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                    connect=timeout.get("pool"),
                ),
                server_hostname=request.extensions.get("sni_hostname"),
                proxy=str(proxy.url) if proxy else None,
                proxy_auth=BasicAuth(proxy.auth[0], proxy.auth[1])
                if proxy and proxy.auth
                else None,
                proxy_headers=proxy.headers if proxy else None,
            ) as response:
                body = await response.read()
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx2.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=httpx2.ByteStream(body),
            request=request,
            extensions=extensions,
        )


def _whole_body(transport: Any) -> Any:
    """``transport`` as a :class:`WholeBodyTransport` (the same state; only its
    ``handle_async_request`` differs), unless it is another kind of transport."""
    if type(transport) is AiohttpTransport:
        transport.__class__ = WholeBodyTransport
    return transport


class _AioHttpClient(_KeptRequests, openai.DefaultAioHttpClient):
    """openai's aiohttp transport (its defaults: timeout, connection limits, redirects), each
    response read whole (:class:`WholeBodyTransport`), proxied ones too."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _whole_body(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _whole_body(super()._init_proxy_transport(*args, **kwargs))


class _HttpxClient(_KeptRequests, openai.DefaultAsyncHttpxClient):
    """openai's default httpx2 transport (its defaults: timeout, connection limits, redirects)."""


class JudgeClient(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` with less work around each request, the same requests otherwise.

    openai stays the client of record: authentication, base URL, proxies and TLS, timeouts,
    status errors and their exception types all come from it. What is left out is work whose
    result never changes for a client (a sampled profile put openai's request pipeline at ~1.2
    ms per judge call, the judge's main client cost):

    - the platform telemetry headers (:data:`TELEMETRY_HEADERS`) and the per-request retry
      count / read-timeout headers are not sent;
    - the request URL is built once per path (:meth:`_prepare_url`) and parsed once by httpx2;
    - the default headers (``Accept``, ``Content-Type``, ``User-Agent``, organisation, project)
      are merged once;
    - :meth:`post_bytes` posts an encoded body from request options built once per path.

    Example:
        >>> c = JudgeClient(base_url="http://127.0.0.1:9/v1", api_key="k")
        >>> str(c._prepare_url("chat/completions"))
        'http://127.0.0.1:9/v1/chat/completions'
    """

    def __init__(self, **kwargs: Any) -> None:
        # openai documents ``Omit()`` as the way to remove one of its default headers
        headers: dict[str, Any] = {name: openai.Omit() for name in TELEMETRY_HEADERS}
        headers.update(kwargs.pop("default_headers", None) or {})
        super().__init__(default_headers=headers, **kwargs)
        self._urls: dict[str, httpx2.URL] = {}
        self._urls_base: Any = None
        self._defaults: dict[str, Any] | None = None
        self._post_options: dict[str, FinalRequestOptions] = {}

    @property
    def user_agent(self) -> str:
        # openai names the client class: the endpoint sees the same agent as before
        return f"AsyncOpenAI/Python {self._version}"

    @property
    def default_headers(self) -> dict[str, Any]:
        # merged once: every part (user agent, organisation, project, custom headers) is fixed
        # when the client is made
        defaults: dict[str, Any] | None = getattr(self, "_defaults", None)
        if defaults is None:  # (openai's constructor may ask before ours has run)
            defaults = dict(super().default_headers)
            if hasattr(self, "_defaults"):
                self._defaults = defaults
        return defaults

    def _prepare_url(self, url: str) -> httpx2.URL:
        # openai parses the path and merges it with base_url on every request; the result
        # depends on nothing else, so it is kept per path (per base_url, should it be changed)
        base = self._base_url
        if base is not self._urls_base:
            self._urls = {}
            self._urls_base = base
        got = self._urls.get(url)
        if got is None:
            got = super()._prepare_url(url)
            if len(self._urls) < 64:
                self._urls[url] = got
        return got

    async def post_bytes(self, path: str, content: bytes) -> bytes:
        """POST an encoded JSON body to ``path`` and return the raw response body.

        The same request, errors and exceptions as ``client.post(path, content=content,
        cast_to=bytes)``, from request options built once per path (openai builds them per call
        from its pydantic model's defaults).

        Example:
            >>> # raw = await client.post_bytes("/chat/completions", b'{"model": "m", ...}')
        """
        template = self._post_options.get(path)
        if template is None:
            template = FinalRequestOptions.construct(
                method="post", url=path, headers=dict(_REQUEST_HEADERS_OMITTED)
            )
            self._post_options[path] = template
        options = template.model_copy(update={"content": content})
        return await self.request(bytes, options)


def make_client(
    *,
    base_url: str | None,
    api_key: str | None,
    timeout_s: float,
    max_retries: int,
    transport: HttpClient,
) -> JudgeClient:
    """A new :class:`JudgeClient` on the chosen transport (call it inside the loop that will
    use it).

    ``api_key`` ``None`` leaves openai's own fallback (``OPENAI_API_KEY``) in charge.
    """
    http: httpx2.AsyncClient
    if transport == "aiohttp":
        http = _AioHttpClient(timeout=timeout_s)
    else:
        http = _HttpxClient(timeout=timeout_s)
    return JudgeClient(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout_s,
        max_retries=max_retries,
        http_client=http,
    )


class ClientPool:
    """``AsyncOpenAI`` clients keyed by (running event loop, endpoint key)."""

    def __init__(self, transport: HttpClient) -> None:
        self.transport: HttpClient = transport
        self._clients: dict[tuple[int, Any], tuple[asyncio.AbstractEventLoop, JudgeClient]] = {}

    def get(
        self,
        key: Any,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
    ) -> JudgeClient:
        """The client for ``key`` on the running loop, created on first use."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get((id(loop), key))
        if entry is not None and entry[0] is loop:
            return entry[1]
        # a loop id can be reused after its loop closed: drop clients of closed loops first
        self._clients = {k: v for k, v in self._clients.items() if not v[0].is_closed()}
        client = make_client(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            max_retries=max_retries,
            transport=self.transport,
        )
        self._clients[(id(loop), key)] = (loop, client)
        return client

    async def aclose(self) -> None:
        """Close the running loop's clients (those of other, closed loops are just dropped)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        mine = [k for k, v in self._clients.items() if v[0] is loop]
        for k in mine:
            _, client = self._clients.pop(k)
            with contextlib.suppress(Exception):  # closing must never fail a shutdown
                await client.close()
        self._clients = {k: v for k, v in self._clients.items() if not v[0].is_closed()}
