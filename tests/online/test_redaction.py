"""No secret in the evaluator's own output channels: log lines, dead-letter headers, and (with
``kafka.dlq_payload = "reference"``) dead-letter values.

Unit tests on a logging handler and a fake producer; then on real parts (Tansu, the service with
re-keying) poison messages and spans carrying an AWS key, a GitHub token, a JWT, a Slack token and
the configured judge key: neither the captured log nor the DLQ topic holds any of them."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from nexagauge.online.delivery.dlq import HEADER_DETAIL, HEADER_PAYLOAD, HEADER_SOURCE, DeadLetters
from nexagauge.online.delivery.redact import (
    MAX_TEXT,
    RedactingFilter,
    install_log_redaction,
    redact,
    register_secret,
)

JUDGE_KEY = "judge-secret-key-77aa9f"
SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THs",
    "slack": "xoxb-1234567890-1234567890123-abcdefghijklmnopqrstuvwx",
    "judge": JUDGE_KEY,
}


def leaks(text: str) -> list[str]:
    return [k for k, v in SECRETS.items() if v in text or v[:16] in text]


@pytest.fixture
def handler() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    h = logging.StreamHandler(out)
    h.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    install_log_redaction([h])
    lg = logging.getLogger("nexagauge.test.redaction")
    lg.addHandler(h)
    lg.setLevel(logging.DEBUG)
    lg.propagate = False
    yield lg, out
    lg.removeHandler(h)


def test_log_lines_arguments_and_tracebacks_are_redacted(
    handler: tuple[logging.Logger, io.StringIO],
) -> None:
    lg, out = handler
    register_secret(JUDGE_KEY)
    for name, value in SECRETS.items():
        lg.info("no case for span: input=%s", f"my {name} is {value}")
        lg.warning(f"poison message: {value}")
        try:
            raise RuntimeError(f"judge said 401 for {value}")
        except RuntimeError:
            lg.exception("evaluation failed")
    text = out.getvalue()
    assert leaks(text) == [], text
    assert text.count("[scrubbed") >= 3 * len(SECRETS)
    assert "Traceback" in text and "RuntimeError" in text  # still useful to an operator


def test_filter_is_installed_once_and_cost_is_bounded() -> None:
    h = logging.StreamHandler(io.StringIO())
    install_log_redaction([h])
    install_log_redaction([h])
    assert sum(isinstance(f, RedactingFilter) for f in h.filters) == 1
    huge = "A" * 10_000_000 + SECRETS["aws"]
    assert len(redact(huge)) < MAX_TEXT + 100  # cut first, scrubbed after: never 10 MB of regex


class Producer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_and_wait(
        self, topic: str, value: Any = None, key: Any = None, headers: Any = None
    ) -> None:
        self.sent.append({"topic": topic, "value": value, "key": key, "headers": dict(headers)})


async def test_dead_letter_headers_never_carry_secrets_and_reference_mode_drops_the_value() -> None:
    raw = json.dumps({"resourceSpans": [{"k": SECRETS["aws"]}]}).encode()
    for payload in ("raw", "reference"):
        p = Producer()
        dlq = DeadLetters(p, "dlq", [JUDGE_KEY], payload=payload)  # type: ignore[arg-type]
        detail = " ".join(SECRETS.values())
        await dlq.poison(
            topic="src",
            partition=2,
            offset=7,
            key=b"k",
            value=raw,
            reason="not_otlp",
            detail=detail,
        )
        await dlq.failed_evaluation(
            trace_id="ab" * 16, span_id="cd" * 8, config_fingerprint="f", errors={"judge": detail}
        )
        for rec in p.sent:
            assert leaks(rec["headers"][HEADER_DETAIL].decode()) == []
        poison, failed = p.sent
        assert leaks(failed["value"].decode()) == []
        assert poison["headers"][HEADER_SOURCE] == b"src/2/7"
        assert poison["headers"][HEADER_PAYLOAD] == payload.encode()
        if payload == "raw":
            assert poison["value"] == raw  # by design (documented): the app's message as is
        else:
            ref = json.loads(poison["value"])
            assert ref == {
                "source": "src/2/7",
                "size": len(raw),
                "sha256": hashlib.sha256(raw).hexdigest(),
            }


# --------------------------------------------------------------------------------------------
# real parts
# --------------------------------------------------------------------------------------------
@pytest.mark.integration
async def test_service_logs_and_dead_letters_hold_no_secret(
    broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from nexagauge.graph.runtime import Runtime
    from nexagauge.online.service import OnlineService
    from nexagauge.settings import Settings

    from .kafka_helpers import produce, read_all, settings_dict, topics
    from .test_kafka import Recorder

    caplog.set_level(logging.INFO)
    names = topics("redact")
    await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
    d = settings_dict(broker.bootstrap, names)
    d["kafka"] |= {"encoding": "otlp_json", "dlq_payload": "reference"}
    d["judge"] = {"mode": "none", "api_key": JUDGE_KEY}
    s = Settings(**d)
    # an id that is not hex (its first 40 characters used to be logged and put in the header),
    # and a JSON request whose text carries every secret
    bad_ids = [
        json.dumps(
            {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": v, "spanId": "00" * 8}]}]}]}
        ).encode()
        for v in SECRETS.values()
    ]
    garbage = [("{" + " ".join(SECRETS.values())).encode()]
    rec = Recorder()
    svc = OnlineService(
        s, runtime=Runtime.create(s, use_cache=False), emitter=rec, serve_http=False
    )
    await svc.start()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(svc.run_until(stop))
    try:
        await produce(broker.bootstrap, names["traces_topic"], bad_ids + garbage, 2)
        dlq = await read_all(broker.bootstrap, names["dlq_topic"], len(bad_ids) + 1)
        assert len(dlq) == len(bad_ids) + 1
        for r in dlq:
            h = dict(r.headers)
            assert leaks(h[HEADER_DETAIL].decode()) == [], h
            assert leaks(r.value.decode()) == []  # reference mode: no app bytes
            assert json.loads(r.value)["source"] == h[HEADER_SOURCE].decode()
        logged = caplog.text
        assert logged.count("poison message") == len(dlq)
        assert leaks(logged) == [], logged
    finally:
        stop.set()
        await runner
