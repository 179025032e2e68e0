"""Corpus test: every secret kind x every place the SDK records text = 0 leaks in exported spans.

Each kind is a text as an app would hold it (an env line, a header, a connection string...) and
the part that must never be exported. Each placement records that text the way an app would: as an
argument, a return value, a document (content, id, metadata), a span name, a static attribute, a
session or user id, an evaluation knob, an exception, a stream, a chat message, an LLM response.
Everything exported is searched: span names, attributes, event attributes, status descriptions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nexagauge
from nexagauge.sdk import conventions as C
from nexagauge.sdk.scrubbing import scrub_text

from .conftest import Recorder, configure_with

_AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
_PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"

#: (kind, text holding the secret, the part that must not be exported)
KINDS: list[tuple[str, str, str]] = [
    ("openai_env", "export OPENAI_API_KEY=q8Vn2Lx7Rt4Kp9Wm3Zs6", "q8Vn2Lx7Rt4Kp9Wm3Zs6"),
    ("aws_secret_env", f"AWS_SECRET_ACCESS_KEY={_AWS_SECRET}", "wJalrXUtnFEMI"),
    ("db_password_env", "DB_PASSWORD=Tr0ub4dor3x!", "Tr0ub4dor3x"),
    ("github_token_env", "GITHUB_TOKEN=a1b2c3d4e5f6g7h8i9j0", "a1b2c3d4e5f6g7h8i9j0"),
    ("db_pass", "db_pass=hunterhunter2", "hunterhunter2"),
    ("aws_asia", "creds ASIAY34FZKBOKMUTVV7A in use", "ASIAY34FZKBOKMUTVV7A"),
    ("aws_akia", "key AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_bare", f"the secret is {_AWS_SECRET} ok", "wJalrXUtnFEMI"),
    ("aws_json", f'{{"AccessKeyId": "x", "SecretAccessKey": "{_AWS_SECRET}"}}', "wJalrXUtnFEMI"),
    (
        "google_ya29",
        "token ya29.a0AfH6SMCexampleTokenValue_abcdefXYZ",
        "a0AfH6SMCexampleTokenValue",
    ),
    (
        "azure_account_key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq==;EndpointSuffix=x",
        "Eby8vdM02xNOcqF",
    ),
    ("bearer_no_digit", "Authorization: Bearer abcdefghijklmnopqrstuvwxyzABCD", "mnopqrstuvwxyzAB"),
    ("bearer_bare", "curl -H 'Bearer abcdefghijklmnopqrstuvwxyzABCD'", "mnopqrstuvwxyzAB"),
    ("openai_key", "use sk-proj-abcdefghijklmnopqrstuvwx1234", "abcdefghijklmnopqrstuvwx"),
    ("anthropic_key", "sk-ant-api03-abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    ("github_pat", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123"),
    (
        "jwt",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "dozjgNryP4J3jVmNHl0w5N",
    ),
    ("password_assign", "login with password=s3cr3tPassw0rd", "s3cr3tPassw0rd"),
    ("password_json", '{"password": "correct horse battery"}', "correct horse"),
    ("url_credentials", "postgres://admin:s3cr3tPw@db.internal:5432/app", "s3cr3tPw"),
    ("slack", "xoxb-1234567890-abcdefghijklmnop", "abcdefghijklmnop"),
    ("google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "SyA1234567890abcdefghij"),
    ("stripe", "sk_live_abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    (
        "private_key",
        f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}\n-----END PRIVATE KEY-----",
        _PEM_BODY[:30],
    ),
    ("pin", "card pin: 4821", "4821"),
]


class _Doc:
    """A LangChain-like document object."""

    def __init__(self, page_content: str, metadata: dict[str, Any]) -> None:
        self.page_content = page_content
        self.metadata = metadata


class _Choice:
    def __init__(self, content: str) -> None:
        self.message = {"role": "assistant", "content": content}
        self.finish_reason = "stop"


class _Completion:
    """A ChatCompletion-like response."""

    def __init__(self, content: str) -> None:
        self.choices = [_Choice(content)]
        self.model = "gpt-4o"
        self.id = "chatcmpl-1"


def _placements(text: str, secret: str) -> dict[str, Callable[[], Any]]:
    """One function per placement; each records ``text`` there (and ignores its own errors)."""

    @nexagauge.trace(name="p")
    def str_input(question: str) -> str:
        return "ok"

    @nexagauge.trace(name="p")
    def dict_input(question: dict[str, Any]) -> str:
        return "ok"

    @nexagauge.trace(name="p")
    def str_output(question: str) -> str:
        return f"here: {text}"

    @nexagauge.trace(name="p")
    def dict_output(question: str) -> dict[str, Any]:
        return {"answer": text, "nested": [{"note": text}]}

    @nexagauge.trace(name="p")
    def context_arg(question: str, context: list[str]) -> str:
        return "ok"

    @nexagauge.trace(name="p")
    def add_context_doc() -> str:
        nexagauge.add_context(
            [
                {"id": text, "text": "plain", "metadata": {"source": text, "tags": [text]}},
                _Doc(text, {"author": text}),
            ]
        )
        return "ok"

    @nexagauge.retriever(name="search")
    def retriever_fn(query: str) -> list[dict[str, Any]]:
        return [{"id": "d", "content": text, "metadata": {"k": text}}]

    @nexagauge.trace(name="p")
    def retriever_in_call(question: str) -> str:
        retriever_fn(question)
        with nexagauge.retrieval(query=text, name="inline") as r:
            r.add([text])
        return "ok"

    @nexagauge.trace(name=f"job {text}")
    def named() -> None:
        return None

    def retrieval_named() -> None:
        with nexagauge.retrieval(query="q", name=f"r {text}") as r:
            r.add("doc")

    @nexagauge.trace(name="p", attributes={"app.note": text, "app.data": {"k": text}})
    def static_attrs() -> None:
        return None

    @nexagauge.trace(name="p")
    def plain() -> str:
        return "ok"

    def session_ids() -> None:
        with nexagauge.session(session_id=f"s {text}", user_id=f"u {text}"):
            plain()

    @nexagauge.trace(name="p", geval={"metrics": [{"name": "m", "criteria": text}]})
    def decorator_knobs() -> None:
        return None

    @nexagauge.trace(name="p")
    def call_knobs() -> None:
        nexagauge.set_eval_knobs(geval={"metrics": [{"name": "m", "criteria": text}]})

    @nexagauge.trace(name="p")
    def raises(question: str) -> None:
        raise RuntimeError(f"connect failed with {text}")

    @nexagauge.trace(name="p")
    def stream(question: str) -> Iterator[str]:
        for i in range(0, len(text), 5):  # the secret arrives split across chunks
            yield text[i : i + 5]

    @nexagauge.trace(name="p")
    async def astream(question: str) -> AsyncIterator[str]:
        for i in range(0, len(text), 5):
            yield text[i : i + 5]

    @nexagauge.trace(name="p")
    def chat(messages: list[dict[str, str]]) -> _Completion:
        return _Completion(f"reply {text}")

    @nexagauge.trace(name="p")
    def long_input(question: str) -> str:
        return "ok"

    async def drain() -> None:
        async for _ in astream("q"):
            pass

    def run_raises() -> None:
        with contextlib.suppress(RuntimeError):
            raises("q")

    filler = "x " * 20_000  # past the 32 KiB limit: the cut falls in the middle of the secret
    at_cut = 32 * 1024 - (text.index(secret) + len(secret) // 2)
    return {
        "input": lambda: str_input(f"my question, {text}"),
        "input_dict": lambda: dict_input({"q": text, "nested": {"v": [text]}}),
        "output": lambda: str_output("q"),
        "output_dict": lambda: dict_output("q"),
        "context_arg": lambda: context_arg("q", [f"passage one. {text}", "passage two"]),
        "document_id_metadata": add_context_doc,
        "retriever": lambda: retriever_in_call("q"),
        "span_name": named,
        "retrieval_name": retrieval_named,
        "static_attributes": static_attrs,
        "session_user_ids": session_ids,
        "decorator_knobs": decorator_knobs,
        "set_eval_knobs": call_knobs,
        "exception": run_raises,
        "stream": lambda: list(stream("q")),
        "async_stream": lambda: asyncio.run(drain()),
        "chat_messages_and_response": lambda: chat([{"role": "user", "content": text}]),
        "at_the_size_limit": lambda: long_input(filler[: at_cut - 1] + " " + text + " " + filler),
    }


def _exported_text(span: Any) -> str:
    parts = [span.name, span.status.description or ""]
    for attrs in [span.attributes, *(e.attributes for e in span.events)]:
        for key, value in (attrs or {}).items():
            parts.append(key)
            parts.extend(value if isinstance(value, (list, tuple)) else [value])
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize(("kind", "text", "secret"), KINDS, ids=[k[0] for k in KINDS])
def test_no_secret_kind_leaks_from_any_placement(kind: str, text: str, secret: str) -> None:
    assert secret in text
    rec: Recorder = configure_with(InMemorySpanExporter())
    try:
        leaks: list[str] = []
        unmarked: list[str] = []
        for placement, run in _placements(text, secret).items():
            rec.clear()
            run()
            spans = rec.spans
            assert spans, f"{placement}: nothing exported"
            exported = "\n".join(_exported_text(s) for s in spans)
            # at the cut only the first half of the secret can be kept: it must not be
            probe = secret
            if placement == "at_the_size_limit" and len(secret) >= 12:
                probe = secret[: len(secret) // 2]
            if probe in exported:
                leaks.append(placement)
            if C.NG_SCRUBBED not in exported:
                unmarked.append(placement)
        assert not leaks, f"{kind} leaked from {leaks}"
        assert not unmarked, f"{kind}: nexagauge.scrubbed missing in {unmarked}"
    finally:
        nexagauge.shutdown()


_KEYS = ["access_key", "pass", "pin", "token", "authorization", "db_pass", "AccessKey", "apiToken"]


@pytest.mark.parametrize("key", _KEYS)
def test_secret_dict_keys_are_scrubbed_everywhere(key: str) -> None:
    value = "plainvalue42"  # nothing in the value itself looks secret: only the key says so
    rec = configure_with(InMemorySpanExporter())
    try:

        @nexagauge.trace(name="k", attributes={"app.cfg": {key: value}})
        def f(question: dict[str, Any]) -> dict[str, Any]:
            nexagauge.add_context({"id": "d", "text": "doc", "metadata": {key: value}})
            return {key: value}

        f({key: value})
        exported = _exported_text(rec.one("k"))
        assert value not in exported
        assert exported.count("[scrubbed:sensitive_key]") >= 4
    finally:
        nexagauge.shutdown()


def test_ordinary_keys_and_words_are_kept(rec: Recorder) -> None:
    @nexagauge.trace(name="k")
    def f(question: dict[str, Any]) -> str:
        return "The bearer of the key passed: tokens are words; max_tokens: 256"

    f({"max_tokens": 256, "author": "Ann", "token_count": 12, "bypass": "yes"})
    span = rec.one("k")
    assert C.NG_SCRUBBED not in span.attributes
    assert "Ann" in span.attributes[C.GEN_AI_INPUT_MESSAGES]


@pytest.mark.parametrize(("kind", "text", "secret"), KINDS, ids=[k[0] for k in KINDS])
def test_scrub_text_recognises_every_kind(kind: str, text: str, secret: str) -> None:
    """The stable entry point the evaluator uses (logs, dead-letter records)."""
    assert secret not in scrub_text(text)
