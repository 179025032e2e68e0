"""The LLM judge: any OpenAI-compatible chat endpoint through ``openai.AsyncOpenAI``.

The client runs on openai's aiohttp transport by default (``judge.http_client``; see
:mod:`nexagauge.judge.llm.http`) and reads answers as raw JSON (no response-model construction):
a judge call costs ~0.65 ms of client CPU, an evaluation of relevance + grounding (3 calls,
graph included) ~3 ms (``bench/judge_cost.py``).

What it guarantees to the nodes:

- **Structured answers.** ``response_format`` ``json_schema`` (strict) generated from the pydantic
  response model; an endpoint that rejects JSON schemas is remembered and served in JSON mode
  (``json_object`` + the schema in the system message + validation). Invalid output gets one
  corrective re-ask, then the call returns an explicit ``error`` (no guessing, no padding).
- **Transient failures retried.** 429, 408/409, 5xx, timeouts and connection errors retry with
  exponential backoff and jitter, honouring ``Retry-After``/``retry-after-ms``; openai's own
  retries are disabled so these are the only ones. Other 4xx fail immediately.
- **Limits.** One process-wide concurrency limit and a requests/tokens-per-minute limiter.
- **Cost.** Token usage from the response (counted offline if the endpoint omits it), priced by
  :class:`~nexagauge.judge.llm.pricing.PriceTable`.
- **Cache.** Valid answers are stored on disk by content hash of (endpoint, model, temperature,
  seed, prompt id + version, messages, schema); a hit costs nothing and reports ``cached=True``.

Per-node settings (``judge.nodes.<node>``) override the global endpoint, key, model, temperature,
seed and timeout (:meth:`JudgeSettings.for_node`).

This module orchestrates a call (cache, request, re-ask); each concern is decided in its own
module: :mod:`~nexagauge.judge.llm.wire` (request body, reading the raw answer),
:mod:`~nexagauge.judge.llm.retry` (what is retried and how long to wait),
:mod:`~nexagauge.judge.llm.answers` (validation and the re-ask), :mod:`~nexagauge.judge.llm.usage`
(tokens, cost, counters) and :mod:`~nexagauge.judge.llm.answer_cache` (the answer cache).

Example:
    >>> from nexagauge.settings import JudgeSettings
    >>> j = LLMJudge(JudgeSettings(base_url="http://127.0.0.1:9/v1", api_key="k"))
    >>> (j.kind, j.model, j.supports_llm_tasks)
    ('llm', 'gpt-4o-mini', True)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel

from nexagauge.judge.base import (
    CallInfo,
    ClaimExtraction,
    ClaimJudgement,
    ClaimTask,
    ExtractedClaim,
    JudgeKind,
    JudgeReply,
)
from nexagauge.judge.claimtext import Anchoring
from nexagauge.judge.jsonschema import strict_schema
from nexagauge.judge.llm.answer_cache import CACHE_NAMESPACE, cache_key, load_answer, save_answer
from nexagauge.judge.llm.answers import reask_messages, validate_answer
from nexagauge.judge.llm.breaker import CircuitBreaker
from nexagauge.judge.llm.http import ClientPool, JudgeClient
from nexagauge.judge.llm.limits import RateLimiter
from nexagauge.judge.llm.pricing import PriceTable
from nexagauge.judge.llm.retry import (
    CallFailed,
    error_text,
    is_transient,
    mentions_schema,
    retry_after,
    retry_delay,
    short,
)
from nexagauge.judge.llm.usage import JudgeStats, account
from nexagauge.judge.llm.wire import (
    RequestBodies,
    answer_content,
    answer_logprobs,
    completion,
    short_bytes,
)
from nexagauge.judge.promptlib import Prompt, load_prompt, load_prompt_file
from nexagauge.judge.tasks import TaskCall, claims_call, judge_call, to_raw_verdict
from nexagauge.judge.tokens import count_message_tokens
from nexagauge.schema.case import GroundingConfig, RelevanceConfig
from nexagauge.schema.results import Chunk, Claim, CostEstimate
from nexagauge.settings import JudgeSettings

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

__all__ = ["CACHE_NAMESPACE", "JudgeStats", "LLMJudge"]


def _count_check(key: str, n: int, message: str) -> Callable[[Any], str | None]:
    """A check of a structured answer: its list ``key`` must hold ``n`` items (one per chunk or
    claim); ``message`` (with ``{got}`` and ``{n}``) names the mismatch for the one re-ask."""

    def check(data: Any) -> str | None:
        got = data.get(key) if isinstance(data, dict) else None
        if isinstance(got, list) and len(got) != n:
            return message.format(got=len(got), n=n)
        return None

    return check


@dataclass
class _Outcome:
    value: BaseModel | None
    cost: CostEstimate
    error: str | None
    info: CallInfo
    logprobs: list[dict[str, Any]] | None = None


@dataclass
class _Answer:
    content: str | None
    cost: CostEstimate
    sent: int
    logprobs: list[dict[str, Any]] | None


class LLMJudge:
    """Judge backend over an OpenAI-compatible endpoint (see module docstring)."""

    kind: JudgeKind = "llm"
    supports_llm_tasks: bool = True

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        cache_dir: str | Path | None = None,
        store: Any = None,
        price_table: PriceTable | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.prices = price_table or PriceTable.load(settings.price_table)
        self.stats = JudgeStats()
        self._sleep = sleep
        self._clients = ClientPool(settings.http_client)
        self._no_schema: dict[str, bool] = {}
        self._no_logprobs: dict[str, bool] = {}
        self._bodies = RequestBodies()
        #: called after every HTTP attempt: ``observer(node, model, outcome, latency_s)`` with
        #: outcome ``ok`` or ``error``, and with ``cached`` (latency 0) for each answer served from
        #: the answer cache (the online evaluator points it at its Prometheus metrics)
        self.observer: Callable[[str, str, str, float], None] | None = None
        self._sem: asyncio.Semaphore | None = None
        self._limiter = RateLimiter(settings.requests_per_minute, settings.tokens_per_minute)
        #: the online evaluator's circuit breaker (:mod:`nexagauge.judge.llm.breaker`): with one,
        #: transient failures wait for the endpoint and retry instead of giving up
        self.breaker: CircuitBreaker | None = None
        #: answers by content key: ``store`` (a ``nexagauge.graph.cache.BlobStore``), or files
        #: under ``cache_dir``
        self._store: Any = store
        if store is None and cache_dir is not None:
            from nexagauge.graph.cache import ContentStore

            self._store = ContentStore(cache_dir, CACHE_NAMESPACE)

    @property
    def model(self) -> str:
        return self.settings.model

    def model_for(self, node: str) -> str:
        """The model a node's calls use (per-node overrides applied)."""
        return self.settings.for_node(node).model

    # ------------------------------------------------------------------ claim tasks
    async def extract_claims(
        self, chunks: Sequence[Chunk], *, node: str = "claims"
    ) -> ClaimExtraction:
        """Claims of every chunk in one call; confidence = anchoring of the claim in its chunk."""
        if not chunks:
            return ClaimExtraction(info=CallInfo(model=self.model_for(node)))
        texts = [c.item.text for c in chunks]
        call = claims_call(texts)
        check = _count_check(
            "chunks", len(texts), "expected {n} claim lists (one per chunk), got {got}"
        )
        out = await self._call(node, call.prompt, call.messages, call.model, call.schema, check)
        if out.value is None:
            return ClaimExtraction(cost=out.cost, error=out.error, info=out.info)
        anchors = Anchoring(texts)
        claims: list[ExtractedClaim] = []
        for i, lst in enumerate(out.value.chunks):  # type: ignore[attr-defined]
            for text in lst:
                t = " ".join(str(text).split())
                if t:
                    claims.append(ExtractedClaim(t, chunks[i].index, anchors.confidence(t, i)))
        return ClaimExtraction(claims=claims, cost=out.cost, info=out.info)

    async def judge_claims(
        self,
        task: ClaimTask,
        claims: Sequence[Claim],
        target: str,
        knobs: RelevanceConfig | GroundingConfig,
        *,
        node: str,
    ) -> ClaimJudgement:
        """One verdict per claim in one call; a different count is an error (after one re-ask)."""
        if not claims:
            return ClaimJudgement(info=CallInfo(model=self.model_for(node)))
        call: TaskCall = judge_call(task, [c.item.text for c in claims], target, knobs)
        check = _count_check(
            "verdicts", len(claims), "judge returned {got} verdicts for {n} claims"
        )
        out = await self._call(node, call.prompt, call.messages, call.model, call.schema, check)
        if out.value is None:
            return ClaimJudgement(cost=out.cost, error=out.error, info=out.info)
        mode = knobs.scoring_mode
        verdicts = [to_raw_verdict(task, mode, c) for c in out.value.verdicts]  # type: ignore[attr-defined]
        reasoning = getattr(out.value, "reasoning", None) if knobs.include_reasoning else None
        return ClaimJudgement(verdicts=verdicts, cost=out.cost, reasoning=reasoning, info=out.info)

    # ------------------------------------------------------------------ generic
    async def structured(
        self,
        prompt: str | Path | Prompt,
        variables: Mapping[str, Any],
        response_model: type[T],
        *,
        node: str,
        untrusted: Sequence[str] = (),
        max_tokens: int | None = None,
        top_logprobs: int | None = None,
        check: Callable[[Any], str | None] | None = None,
    ) -> JudgeReply[T]:
        """Render a prompt (name in ``judge/prompts``, a prompt file path, or a :class:`Prompt`)
        and return a validated ``response_model`` instance, or an error.

        ``check`` may reject semantically invalid JSON (it gets the parsed JSON, returns an error
        text or ``None``); a rejection triggers the same single corrective re-ask.
        ``top_logprobs`` asks for token log-probabilities of the answer (``reply.logprobs``;
        ``None`` when the endpoint does not return them).

        Example:
            >>> # reply = await judge.structured("geval", {"output": out}, Score, node="geval",
            >>> #                                untrusted=("output",))
        """
        if isinstance(prompt, Prompt):
            p = prompt
        elif isinstance(prompt, Path) or str(prompt).endswith(".toml"):
            p = load_prompt_file(prompt)
        else:
            p = load_prompt(prompt)
        messages = p.render(variables, untrusted=untrusted)
        out = await self._call(
            node,
            p,
            messages,
            response_model,
            strict_schema(response_model),
            check,
            max_tokens,
            top_logprobs,
        )
        value = out.value if isinstance(out.value, response_model) else None
        return JudgeReply(
            value=value, cost=out.cost, error=out.error, info=out.info, logprobs=out.logprobs
        )

    # ------------------------------------------------------------------ core
    def _client(self, s: JudgeSettings) -> JudgeClient:
        key = s.api_key.get_secret_value() if s.api_key is not None else None
        return self._clients.get(
            (s.base_url, key, s.timeout_s),
            base_url=s.base_url,
            api_key=key or "not-needed",  # local endpoints (vLLM, Ollama) take any key
            timeout_s=s.timeout_s,
            max_retries=0,  # we retry ourselves (backoff, jitter, Retry-After)
        )

    async def _call(
        self,
        node: str,
        prompt: Prompt,
        messages: list[dict[str, str]],
        model: type[BaseModel],
        schema: dict[str, Any],
        check: Callable[[Any], str | None] | None = None,
        max_tokens: int | None = None,
        top_logprobs: int | None = None,
    ) -> _Outcome:
        s = self.settings.for_node(node)
        key = None
        if self._store is not None:
            key = cache_key(s, prompt, messages, schema, top_logprobs)
            hit = load_answer(self._store, key, model)
            if hit is not None:
                self.stats.cache_hits += 1
                # an answer served from the cache is a judge call that cost nothing: counted
                # as ``cached`` (no HTTP request was made, so no latency is meaningful)
                self._observe(node, s.model, "cached", 0.0)
                info = CallInfo(calls=0, cached=True, model=s.model, prompt=prompt.id)
                return _Outcome(hit[0], CostEstimate(), None, info, hit[1])

        msgs = list(messages)
        cost = CostEstimate()
        calls = 0
        error: str | None = None
        for attempt in range(2):  # the first answer, then one corrective re-ask
            try:
                ans = await self._request(s, node, msgs, schema, model, max_tokens, top_logprobs)
            except CallFailed as e:
                calls += e.calls
                self.stats.failures += 1
                info = CallInfo(calls=calls, cached=False, model=s.model, prompt=prompt.id)
                return _Outcome(None, cost, f"judge call failed: {e}", info)
            calls += ans.sent
            cost = cost + ans.cost
            content = ans.content
            value, error = validate_answer(content, model, check)
            if value is not None:
                if key is not None:
                    save_answer(self._store, key, value, s.model, ans.logprobs)
                info = CallInfo(calls=calls, cached=False, model=s.model, prompt=prompt.id)
                return _Outcome(value, cost, None, info, ans.logprobs)
            if attempt == 0:
                self.stats.reasks += 1
                log.info("judge answer for %s invalid (%s); re-asking once", node, error)
                msgs = reask_messages(msgs, content, error)
        self.stats.failures += 1
        info = CallInfo(calls=calls, cached=False, model=s.model, prompt=prompt.id)
        return _Outcome(None, cost, f"invalid judge output after one re-ask: {error}", info)

    async def _request(
        self,
        s: JudgeSettings,
        node: str,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        model: type[BaseModel],
        max_tokens: int | None,
        top_logprobs: int | None = None,
    ) -> _Answer:
        """One logical request with retries (transient errors) and mode fallbacks."""
        client = self._client(s)
        endpoint = s.base_url or "default"
        if self._sem is None:
            self._sem = asyncio.Semaphore(max(1, self.settings.max_concurrency))
        sent = 0
        attempt = 0
        while True:
            mode = s.structured_output
            if mode == "auto":
                mode = "json_object" if self._no_schema.get(endpoint) else "json_schema"
            extra = (
                {"logprobs": True, "top_logprobs": top_logprobs}
                if top_logprobs and not self._no_logprobs.get(endpoint)
                else None
            )
            # the body's fixed part (model, schema, ...) is encoded once per prompt version
            body = self._bodies.encode(s, messages, schema, model.__name__, mode, max_tokens, extra)
            # the token estimate only feeds a configured tokens-per-minute limiter
            est = (
                count_message_tokens(body.messages) + (max_tokens or 256)
                if self._limiter.active
                else 0
            )
            breaker = self.breaker
            if breaker is not None:
                await breaker.admit()  # an open circuit: wait for the judge to come back
            await self._limiter.acquire(est)
            forever = False  # a transient failure that a breaker retries without limit
            try:
                async with self._sem:
                    sent += 1
                    self.stats.requests += 1
                    self.stats.by_node[node] = self.stats.by_node.get(node, 0) + 1
                    t0 = time.perf_counter()
                    try:
                        # a POST of the encoded JSON body: the same request as
                        # ``chat.completions.create`` without its recursive parameter transform
                        # and JSON encoding of the whole body per call (wire.RequestBodies), from
                        # options built once (http.JudgeClient); the raw answer is read below
                        # without building openai's models
                        raw = await client.post_bytes("/chat/completions", body.content)
                    except Exception:
                        self._observe(node, body.model, "error", time.perf_counter() - t0)
                        raise
                    self._observe(node, body.model, "ok", time.perf_counter() - t0)
            except openai.APIStatusError as e:
                status = e.status_code
                if (
                    mode == "json_schema"
                    and s.structured_output == "auto"
                    and status in (400, 404, 415, 422, 501)
                    and mentions_schema(e)
                ):
                    log.warning("endpoint %s rejects JSON schemas; using JSON mode", endpoint)
                    self._no_schema[endpoint] = True
                    continue
                if extra is not None and status in (400, 422) and "logprob" in error_text(e):
                    log.warning("endpoint %s rejects logprobs; asking without", endpoint)
                    self._no_logprobs[endpoint] = True
                    continue
                transient = is_transient(status)
                if breaker is not None:
                    breaker.record(ok=not transient)  # a permanent 4xx: the endpoint is up
                if transient:
                    delay = retry_after(e.response.headers) if e.response is not None else None
                    reason = f"HTTP {status}: {short(e)}"
                    forever = breaker is not None
                else:
                    raise CallFailed(f"HTTP {status}: {short(e)}", sent) from None
            except (openai.APITimeoutError, openai.APIConnectionError) as e:
                if breaker is not None:
                    breaker.record(ok=False)
                forever = breaker is not None
                delay = None
                reason = (
                    f"timeout after {s.timeout_s:g}s"
                    if isinstance(e, openai.APITimeoutError)
                    else f"connection error: {short(e)}"
                )
            else:
                resp = completion(raw)
                if breaker is not None:
                    breaker.record(ok=resp is not None)
                if resp is not None:
                    content = answer_content(resp)
                    cost = account(resp, content, body.messages, s.model, self.prices, self.stats)
                    if self._limiter.active:
                        self._limiter.refund(est - cost.input_tokens - cost.output_tokens)
                    logprobs = answer_logprobs(resp) if top_logprobs else None
                    return _Answer(content, cost, sent, logprobs)
                delay = None
                reason = f"malformed response from endpoint: {short_bytes(raw)}"
            if attempt >= s.max_retries and not forever:
                raise CallFailed(f"{reason} (gave up after {sent} attempts)", sent)
            delay = retry_delay(s, attempt, delay)
            attempt += 1
            self.stats.retries += 1
            log.info("judge %s: %s; retry %d in %.2fs", node, reason, attempt, delay)
            if breaker is not None:
                await breaker.pause(delay)  # cut short when the circuit closes again
            else:
                await self._sleep(delay)

    async def probe(self) -> bool:
        """One minimal request (``max_tokens=1``) to the judge endpoint, without retries: ``True``
        when the endpoint answered (any status but a transient one), ``False`` on HTTP 5xx/429/
        408/409/425, a timeout or a connection error. The circuit breaker's probe."""
        s = self.settings
        client = self._client(s)
        body = {
            "model": s.model,
            "messages": [{"role": "user", "content": "ping"}],
            "max_tokens": 1,
            "temperature": 0,
        }
        self.stats.requests += 1
        self.stats.by_node["probe"] = self.stats.by_node.get("probe", 0) + 1
        t0 = time.perf_counter()
        try:
            await client.post("/chat/completions", body=body, cast_to=bytes)
        except openai.APIStatusError as e:
            ok = not is_transient(e.status_code)
        except (openai.APITimeoutError, openai.APIConnectionError):
            ok = False
        else:
            ok = True
        self._observe("probe", s.model, "ok" if ok else "error", time.perf_counter() - t0)
        return ok

    def _observe(self, node: str, model: str, outcome: str, latency_s: float) -> None:
        if self.observer is None:
            return
        try:
            self.observer(node, model, outcome, latency_s)
        except Exception:  # metrics must never fail a judge call
            log.exception("judge call observer failed")

    async def aclose(self) -> None:
        await self._clients.aclose()
