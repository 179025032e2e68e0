"""A loopback OpenAI-compatible HTTP server for tests and benchmarks (stdlib only).

Real HTTP on ``127.0.0.1`` (port 0 = a free port), served by a ``ThreadingHTTPServer`` in a
background thread, so the real ``openai`` client (or any HTTP client) can talk to it.

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` (``GET /v1/models`` too).

How a request is answered, first match wins:

1. the **queue** (``server.enqueue(Reply(...), ...)``): scripted replies consumed in order;
2. the **handler** (``OpenAIServer(handler=fn)`` or ``server.handler = fn``): called with a
   :class:`Request`; return a :class:`Reply` or ``None`` to fall through;
3. **smart mode**: a schema-valid JSON answer. It knows nexa-gauge's claim prompts (``claims``:
   sentences of each tagged chunk; ``relevance``/``grounding``: verdicts from word overlap of each
   claim with the input/context) and otherwise generates a minimal instance of the requested
   JSON schema (``response_format`` json_schema, or the schema quoted in the system message in
   JSON mode; a prompt saying "exactly N" gets N distinct items in its open-ended top-level
   array). Embeddings are deterministic unit vectors derived from a hash of each input.

A :class:`Reply` can set the HTTP ``status``, extra ``headers`` (``Retry-After``), a ``delay``
before answering (timeouts), the message ``content`` (any text, e.g. malformed JSON), or a raw
``body`` (dict -> JSON, str/bytes -> sent as is, e.g. a broken HTTP payload), and ``logprobs``
(sent when the request has ``logprobs: true``; without it the server sends none, like endpoints
without logprob support, unless started with ``auto_logprobs=True``).

Accounting: ``server.requests`` records every request (path, JSON body, headers);
``server.stats`` counts requests and prompt/completion tokens (cl100k, offline; the chat
framing of 3 tokens per message + 3, and - like OpenAI - the response schema's tokens, unless
``count_schema_tokens=False``). Replies carry the same numbers in ``usage``.

Example:
    >>> import openai, asyncio
    >>> with OpenAIServer() as srv:
    ...     srv.enqueue(Reply(content='{"ok": true}'))
    ...     client = openai.OpenAI(base_url=srv.base_url, api_key="k")
    ...     r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    ...     (r.choices[0].message.content, srv.stats.requests)
    ('{"ok": true}', 1)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nexagauge.judge.tokens import count_tokens

__all__ = ["OpenAIServer", "Reply", "Request", "ServerStats", "smart_chat_content"]


@dataclass
class Request:
    """One received request."""

    index: int
    path: str
    body: Any  # parsed JSON (or None if the body was not JSON)
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def text(self) -> str:
        """All message contents joined (for assertions)."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)

    @property
    def response_format(self) -> dict[str, Any] | None:
        return (self.body or {}).get("response_format")

    @property
    def schema_name(self) -> str | None:
        rf = self.response_format or {}
        return (
            (rf.get("json_schema") or {}).get("name") if rf.get("type") == "json_schema" else None
        )

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema asked for (json_schema mode, or quoted in the prompt in JSON mode)."""
        rf = self.response_format or {}
        if rf.get("type") == "json_schema":
            return (rf.get("json_schema") or {}).get("schema")
        m = re.search(r"JSON schema: (\{.*\})\s*$", self.text, re.M)
        if m:
            try:
                return json.loads(m.group(1))
            except json.JSONDecodeError:
                return None
        return None


@dataclass
class Reply:
    """A scripted answer (see module docstring)."""

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: Any = None
    error_message: str = "scripted error"
    prompt_tokens: int | None = None  # override usage
    completion_tokens: int | None = None
    #: ``choices[0].logprobs.content`` to send when the request asks for logprobs (default: none,
    #: or with ``OpenAIServer(auto_logprobs=True)`` each content token at logprob 0.0 with
    #: ``top_logprobs`` = that token + alternates at -10.0)
    logprobs: list[dict[str, Any]] | None = None


@dataclass
class ServerStats:
    requests: int = 0
    chat_requests: int = 0
    embedding_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0  # highest number of requests being answered at the same time

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


Handler = Callable[[Request], "Reply | None"]


class OpenAIServer:
    """The loopback server (see module docstring). Use as a context manager or start/stop."""

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        count_schema_tokens: bool = True,
        embedding_dim: int = 64,
        model: str = "gpt-4o-mini",
        auto_logprobs: bool = False,
    ) -> None:
        self.handler = handler
        self.count_schema_tokens = count_schema_tokens
        self.embedding_dim = embedding_dim
        self.model = model
        self.auto_logprobs = auto_logprobs
        self.requests: list[Request] = []
        self.stats = ServerStats()
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> OpenAIServer:
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body are two writes: without TCP_NODELAY, Nagle holds the body until
            # the client's delayed ACK (~40 ms per request on loopback)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    server._send(self, 200, {"object": "list", "data": [{"id": server.model}]})
                else:
                    server._send(self, 404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.stats = ServerStats()

    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- serving ---------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        with self._lock:
            req = Request(
                len(self.requests), h.path, body, {k.lower(): v for k, v in h.headers.items()}
            )
            self.requests.append(req)
            self.stats.requests += 1
            reply = self._queue.popleft() if self._queue else None
        with self._lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            self._answer(h, req, reply, body)
        finally:
            with self._lock:
                self.stats.in_flight -= 1

    def _answer(
        self, h: BaseHTTPRequestHandler, req: Request, reply: Reply | None, body: Any
    ) -> None:
        if reply is None and self.handler is not None:
            reply = self.handler(req)
        reply = reply or Reply()
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            err = (
                reply.body
                if reply.body is not None
                else {
                    "error": {
                        "message": reply.error_message,
                        "type": "scripted",
                        "code": reply.status,
                    }
                }
            )
            self._send(h, reply.status, err, reply.headers)
            return
        if h.path.rstrip("/").endswith("/embeddings"):
            self._send(
                h,
                200,
                reply.body if reply.body is not None else self._embeddings(req),
                reply.headers,
            )
            return
        if not h.path.rstrip("/").endswith("/chat/completions"):
            self._send(h, 404, {"error": {"message": f"unknown path {h.path}"}})
            return
        if reply.body is not None:
            self._send(h, 200, reply.body, reply.headers)
            return
        content = reply.content if reply.content is not None else smart_chat_content(req)
        pt = reply.prompt_tokens if reply.prompt_tokens is not None else self.prompt_tokens(req)
        ct = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else count_tokens(content)
        )
        with self._lock:
            self.stats.chat_requests += 1
            self.stats.prompt_tokens += pt
            self.stats.completion_tokens += ct
        resp = {
            "id": f"chatcmpl-{req.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": (body or {}).get("model", self.model)
            if isinstance(body, dict)
            else self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": self._logprobs(body, content, reply),
                }
            ],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }
        self._send(h, 200, resp, reply.headers)

    def _logprobs(self, body: Any, content: str, reply: Reply) -> dict[str, Any] | None:
        if not isinstance(body, dict) or not body.get("logprobs"):
            return None
        if reply.logprobs is not None:
            return {"content": reply.logprobs}
        if not self.auto_logprobs:
            return None
        from nexagauge.text.tokens import get_encoding

        enc = get_encoding()
        k = int(body.get("top_logprobs") or 0)
        out = []
        for tid in enc.encode(content, disallowed_special=()):
            tok = enc.decode([tid])
            alts = [{"token": tok, "logprob": 0.0, "bytes": None}]
            alts += [{"token": f"alt{i}", "logprob": -10.0, "bytes": None} for i in range(k - 1)]
            out.append({"token": tok, "logprob": 0.0, "bytes": None, "top_logprobs": alts[:k]})
        return {"content": out}

    def prompt_tokens(self, req: Request) -> int:
        """Prompt tokens as billed: 3 per message + 3, plus the json_schema (if counted)."""
        n = 3 + sum(3 + count_tokens(str(m.get("content") or "")) for m in req.messages)
        rf = req.response_format or {}
        if self.count_schema_tokens and rf.get("type") == "json_schema":
            n += count_tokens(
                json.dumps((rf.get("json_schema") or {}).get("schema"), separators=(",", ":"))
            )
        return n

    def _embeddings(self, req: Request) -> dict[str, Any]:
        inp = (req.body or {}).get("input", [])
        texts = [inp] if isinstance(inp, str) else list(inp)
        data = []
        tokens = 0
        for i, t in enumerate(texts):
            tokens += count_tokens(str(t))
            data.append(
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": deterministic_vector(str(t), self.embedding_dim),
                }
            )
        with self._lock:
            self.stats.embedding_requests += 1
            self.stats.prompt_tokens += tokens
        return {
            "object": "list",
            "data": data,
            "model": (req.body or {}).get("model", "embed"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        if isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
            h.wfile.write(data)


# ------------------------------------------------------------------------------ smart mode
def deterministic_vector(text: str, dim: int) -> list[float]:
    """A unit vector from a hash of ``text`` (same text -> same vector)."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        d = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        out.extend((b - 127.5) / 127.5 for b in d)
        counter += 1
    v = out[:dim]
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


_TAGGED = re.compile(r"<(x[0-9a-f]{8})(?: i=(\d+))?>\n?(.*?)\n?</\1>", re.S)
_SENT = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {
    "the",
    "a",
    "an",
    "is",
    "are",
    "was",
    "of",
    "in",
    "to",
    "and",
    "it",
    "for",
    "on",
    "at",
    "by",
    "with",
}


def _words(t: str) -> set[str]:
    return {w for w in _WORD.findall(t.lower()) if w not in _STOP}


def _blocks(req: Request) -> list[tuple[str | None, str]]:
    """Tagged data blocks of the user messages (the system message only names the tag)."""
    text = "\n".join(str(m.get("content") or "") for m in req.messages if m.get("role") == "user")
    return [(m.group(2), m.group(3)) for m in _TAGGED.finditer(text)]


def smart_chat_content(req: Request) -> str:
    """A schema-valid answer for ``req`` (see module docstring)."""
    schema = req.schema or {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    if "chunks" in props:  # nexa-gauge claim extraction
        chunks = [t for i, t in _blocks(req) if i is not None]
        out = [
            [s.strip() for s in _SENT.split(c.strip()) if s.strip() and not s.strip().endswith("?")]
            for c in chunks
        ]
        return json.dumps({"chunks": out})
    if "verdicts" in props:  # nexa-gauge relevance / grounding
        blocks = [t for _, t in _blocks(req)]
        target, claims_block = [*blocks, "", ""][:2]
        claims = [
            re.sub(r"^\d+\.\s*", "", line) for line in claims_block.splitlines() if line.strip()
        ]
        n = props["verdicts"].get("maxItems", len(claims))
        items = props["verdicts"].get("items", {})
        tw = _words(target)
        verdicts: list[Any] = []
        for c in (claims + [""] * n)[:n]:
            cw = _words(c)
            overlap = len(cw & tw) / len(cw) if cw else 0.0
            if items.get("type") == "integer":
                verdicts.append(max(1, min(5, 1 + round(overlap * 4))))
            else:
                verdicts.append("yes" if overlap >= 0.3 else "no")
        ans: dict[str, Any] = {"verdicts": verdicts}
        if "reasoning" in props:
            ans["reasoning"] = "Verdicts follow word overlap with the target."
        return json.dumps(ans)
    ans = instance_of(schema) if schema else {}
    m = re.search(r"exactly (\d+)\b", req.text)
    if m and isinstance(ans, dict):  # "... with exactly N questions": N distinct array items
        n = int(m.group(1))
        for k, v in ans.items():
            if isinstance(v, list) and v and props.get(k, {}).get("maxItems") is None:
                ans[k] = [_distinct(v[0], i) for i in range(n)]
    return json.dumps(ans)


def _distinct(item: Any, i: int) -> Any:
    """``item`` with ``i`` appended to its strings (so generated list items differ)."""
    if isinstance(item, str):
        return f"{item} {i + 1}"
    if isinstance(item, dict):
        return {k: _distinct(v, i) for k, v in item.items()}
    return item


def instance_of(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A minimal instance of a JSON schema (objects, arrays, enums, scalars, $ref, anyOf)."""
    if not isinstance(schema, dict):
        return None
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return instance_of(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return instance_of(schema[key][0], defs)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object":
        return {k: instance_of(v, defs) for k, v in schema.get("properties", {}).items()}
    if t == "array":
        return [
            instance_of(schema.get("items", {}), defs)
            for _ in range(max(1, schema.get("minItems", 1)))
        ]
    if t == "integer":
        return int(schema.get("minimum", 1))
    if t == "number":
        return float(schema.get("minimum", 0.5))
    if t == "boolean":
        return False
    if t == "string":
        return "ok"
    return None
