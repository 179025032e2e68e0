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

import openai

log = logging.getLogger(__name__)

HttpClient = Literal["aiohttp", "httpx"]


def make_client(
    *,
    base_url: str | None,
    api_key: str | None,
    timeout_s: float,
    max_retries: int,
    transport: HttpClient,
) -> openai.AsyncOpenAI:
    """A new ``AsyncOpenAI`` on the chosen transport (call it inside the loop that will use it).

    ``api_key`` ``None`` leaves openai's own fallback (``OPENAI_API_KEY``) in charge.
    """
    kwargs: dict[str, Any] = {
        "base_url": base_url,
        "api_key": api_key,
        "timeout": timeout_s,
        "max_retries": max_retries,
    }
    if transport == "aiohttp":
        kwargs["http_client"] = openai.DefaultAioHttpClient(timeout=timeout_s)
    return openai.AsyncOpenAI(**kwargs)


class ClientPool:
    """``AsyncOpenAI`` clients keyed by (running event loop, endpoint key)."""

    def __init__(self, transport: HttpClient) -> None:
        self.transport: HttpClient = transport
        self._clients: dict[
            tuple[int, Any], tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI]
        ] = {}

    def get(
        self,
        key: Any,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
    ) -> openai.AsyncOpenAI:
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
