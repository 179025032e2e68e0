"""A loopback OpenAI-compatible judge for benchmarks: answers schema-valid JSON and counts.

Every tool under test (nexa-gauge, DeepEval, Ragas) points at the same server, so calls and
tokens are measured by one referee with one policy, not by each tool's own accounting:

- prompt tokens: cl100k tokens of every message plus the response schema / tool definitions
  (OpenAI bills function and schema definitions as prompt tokens);
- completion tokens: cl100k tokens of every returned choice (``n`` choices count ``n`` times).

Answers are produced from the JSON schema the client asks for (``response_format`` json_schema,
a forced tool call as Instructor sends, or a JSON schema quoted in the prompt as Ragas' legacy
prompts do) and from knowledge of the benchmark cases: the server finds which case a request is
about, answers statements/claims with that case's sentences, gives one verdict per statement it
finds in the prompt, and writes reasons of realistic length. Verdicts are a deterministic
function of the statement, so every tool gets the same verdict for the same sentence.

Run: ``python bench/llm_server.py --cases bench/data/rag_cases.jsonl [--latency-ms 300]``; it
prints ``PORT <n>`` and serves ``/v1/chat/completions``, ``/v1/embeddings``, ``GET /stats`` and
``POST /reset``.

The answers come from ``_llm_answers`` (schema filling from the benchmark cases), the counting
from ``_llm_ledger``; this module reads the HTTP requests and serves them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _llm_answers import Answerer, Case, _h, load_cases
from _llm_ledger import Ledger, Request, ntokens

DUMP = __import__("os").environ.get("BENCH_LLM_DUMP")  # append request bodies here (debugging)


class Referee(Answerer):
    """Schema-filling answers (:class:`Answerer`) plus accounting (:class:`Ledger`), thread-safe."""

    def __init__(self, cases: list[Case], latency_s: float) -> None:
        super().__init__(cases)
        self.latency_s = latency_s
        self.ledger = Ledger()

    def record(self, r: Request) -> None:
        self.ledger.record(r)

    def stats(self) -> dict[str, Any]:
        return self.ledger.stats()

    def reset(self) -> None:
        self.ledger.reset()
        self.forget_case()


def _balanced_object(text: str, i: int) -> Any:
    """Parse the JSON object starting at ``text[i] == "{"`` (string-aware), or ``None``."""
    depth, in_str, esc = 0, False, False
    for j in range(i, len(text)):
        ch = text[j]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                try:
                    return json.loads(text[i : j + 1])
                except ValueError:
                    return None
    return None


def _schema_in_text(text: str) -> dict[str, Any] | None:
    """A JSON schema quoted in the prompt (Instructor JSON mode, Ragas legacy prompts): the first
    object with ``properties`` after a "json schema" marker, else the first one anywhere."""
    marker = max(text.lower().rfind("json_schema"), text.lower().rfind("json schema"))
    candidates: list[dict[str, Any]] = []
    for m in re.finditer(r"\{\s*\"", text):
        if candidates and m.start() < marker:
            continue
        obj = _balanced_object(text, m.start())
        if isinstance(obj, dict) and ("properties" in obj or "$defs" in obj):
            if m.start() > marker >= 0:
                return obj
            candidates.append(obj)
    return candidates[0] if candidates else None


def _message_text(messages: list[dict[str, Any]]) -> str:
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        out.append(str(c or ""))
    return "\n".join(out)


def make_handler(ref: Referee) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out in two writes: without TCP_NODELAY, Nagle holds the body until
        # the client's delayed ACK (~40 ms per request on loopback); real servers set it too
        disable_nagle_algorithm = True

        def log_message(self, *a: Any) -> None:
            return

        def handle(self) -> None:
            # the client went away (a member stopped mid-call): nobody to answer
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                super().handle()

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/stats"):
                self._send(200, ref.stats())
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            t0 = time.monotonic()
            body = json.loads(
                self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}"
            )
            if self.path.rstrip("/").endswith("/reset"):
                ref.reset()
                return self._send(200, {"ok": True})
            if ref.latency_s:
                time.sleep(ref.latency_s)
            if self.path.endswith("/embeddings"):
                return self._embeddings(body, t0)
            if self.path.endswith("/chat/completions"):
                return self._chat(body, t0)
            self._send(404, {"error": {"message": f"no route {self.path}"}})

        def _embeddings(self, body: dict[str, Any], t0: float) -> None:
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
            data = []
            for k, t in enumerate(inputs):
                t = t if isinstance(t, str) else json.dumps(t)
                v = [((_h(t, str(d)) % 2000) - 1000) / 1000 for d in range(64)]
                norm = sum(x * x for x in v) ** 0.5 or 1
                data.append({"object": "embedding", "index": k, "embedding": [x / norm for x in v]})
            case = ref.find_case(" ".join(str(x) for x in inputs))
            pt = sum(ntokens(str(x)) for x in inputs)
            ref.record(
                Request(case.case_id if case else None, t0, time.monotonic(), pt, 0, "embeddings")
            )
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "emb"),
                    "usage": {"prompt_tokens": pt, "total_tokens": pt},
                },
            )

        def _chat(self, body: dict[str, Any], t0: float) -> None:
            if DUMP:
                with open(DUMP, "a", encoding="utf-8") as f:
                    f.write(json.dumps(body) + "\n")
            messages = body.get("messages") or []
            text = _message_text(messages)
            case = ref.find_case(text)
            rf = body.get("response_format") or {}
            tools = body.get("tools") or []
            schema: dict[str, Any] | None = None
            tool_name = None
            extra = ""
            if rf.get("type") == "json_schema":
                schema = rf["json_schema"].get("schema") or {}
                extra = json.dumps(rf["json_schema"])
            elif tools:
                fn = tools[0].get("function", {})
                schema, tool_name = fn.get("parameters") or {}, fn.get("name", "tool")
                extra = json.dumps(tools)
            else:
                schema = _schema_in_text(text)
            n = int(body.get("n") or 1)
            choices = []
            completion_tokens = 0
            for k in range(n):
                answer = ref.fill(schema, text, case) if schema else {"answer": "yes"}
                content = json.dumps(answer)
                completion_tokens += ntokens(content)
                if tool_name:
                    msg = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{k}",
                                "type": "function",
                                "function": {"name": tool_name, "arguments": content},
                            }
                        ],
                    }
                    finish = "tool_calls"
                else:
                    msg = {"role": "assistant", "content": content}
                    finish = "stop"
                choices.append(
                    {"index": k, "message": msg, "finish_reason": finish, "logprobs": None}
                )
            prompt_tokens = ntokens(text) + 4 * len(messages) + (ntokens(extra) if extra else 0)
            ref.record(
                Request(
                    case.case_id if case else None,
                    t0,
                    time.monotonic(),
                    prompt_tokens,
                    completion_tokens,
                    "chat",
                )
            )
            self._send(
                200,
                {
                    "id": f"chatcmpl-{int(t0 * 1e6)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "bench"),
                    "choices": choices,
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
            )

    return H


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    ref = Referee(load_cases(a.cases), a.latency_ms / 1000)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), make_handler(ref))
    srv.daemon_threads = True
    print(f"PORT {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
