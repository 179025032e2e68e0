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
  httpx), the same requests otherwise (``tests/judge/test_judge_client.py``).

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
from openai._models import FinalRequestOptions

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


class _AioHttpClient(_MemoURLs, openai.DefaultAioHttpClient):
    """openai's aiohttp transport (its defaults: timeout, connection limits, redirects)."""


class _HttpxClient(_MemoURLs, openai.DefaultAsyncHttpxClient):
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
