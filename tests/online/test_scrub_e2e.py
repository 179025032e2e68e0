"""Issue 31 end to end: nothing sensitive leaves ``nexagauge serve``, on real parts.

A support bot under each of three real instrumentation libraries (``tests/online/sensitive_apps.py``:
openai-v2 in its default content mode, OpenInference, Traceloop), whose questions, retrieved
passages and answers carry an OpenAI key, an AWS key id and secret, a GitHub token, a JWT, a
``DB_PASSWORD=`` line, a card number, an IBAN, an email, a phone number and a national id, all
recorded verbatim by the library -> OTLP gRPC -> the rotel collector -> Tansu -> ``nexagauge
-vv serve`` (subprocess; re-key, evaluator, conversation stage; ``online.scrub_pii = true``)
with a loopback LLM judge that records every request and refuses one case with a 400 content
filter (a dead letter).

One run of the stack, then: no value (nor its digits without grouping) in any judge request, the
dead letter, any log line (aiokafka's debug lines included), the turns topic, the conversation
changelog, any evaluation span or evaluation result record; every other case has its scores.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.sensitive import PERSONAL_FRAGMENTS, SECRET_FRAGMENTS, SENTENCES, leaks
from support.serve_process import REPO, ServeProcess

from nexagauge.sdk import conventions as C

from .kafka_helpers import read_all, topics, write_serve_config
from .sensitive_apps import FILTER_MARKER, KINDS, answer_for

pytestmark = pytest.mark.integration
EVERYTHING = SECRET_FRAGMENTS + PERSONAL_FRAGMENTS


def _records(recs: list[Any]) -> str:
    return "\n".join(repr(r.key) + repr(r.value) + repr(list(r.headers or ())) for r in recs)


def test_serve_sends_and_writes_nothing_sensitive(tmp_path: Path, broker: Any) -> None:
    from support.broker import free_port
    from support.collector import RotelCollector
    from support.openai_server import OpenAIServer, Reply, Request
    from support.otlp_receiver import OtlpReceiver

    names = topics("scrub")
    metrics_port = free_port()

    def judge_answer(req: Request) -> Reply | None:
        if FILTER_MARKER in req.text:  # the provider's content filter refuses this case
            err = {"message": "content filtered", "type": "invalid_request_error"}
            return Reply(status=400, body={"error": {**err, "code": "content_filter"}})
        return None  # the server's schema-valid answer

    with (
        OtlpReceiver() as rx,
        OpenAIServer(handler=judge_answer) as judge,
        OpenAIServer(handler=lambda req: Reply(content=answer_for(req.text))) as llm,
        RotelCollector(
            broker.bootstrap, traces_topic=names["traces_topic"], logs_topic=names["logs_topic"]
        ) as col,
    ):
        cfg = write_serve_config(
            tmp_path,
            broker,
            names,
            judge_server=judge,
            receiver=rx,
            metrics_port=metrics_port,
            online={
                "nodes": ["relevance", "grounding", "conversation_relevance"],
                "trace_grace_s": 2.0,  # openai-v2 content arrives in log records, later
                "conversation_reorder_s": 0.5,
                "scrub_pii": True,
            },
        )
        env = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BLRP_SCHEDULE_DELAY": "100"}
        srv = ServeProcess(cfg, metrics_port, tmp_path / "serve.log", verbosity=2, env=env)
        with srv:
            apps = {
                kind: subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.online.sensitive_apps",
                        kind,
                        col.grpc_endpoint,
                        llm.base_url,
                        str(tmp_path / f"{kind}.json"),
                    ],
                    cwd=REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=(tmp_path / f"{kind}.err").open("wb"),
                    env=srv.env,
                )
                for kind in KINDS
            }
            turns: list[dict[str, Any]] = []
            try:
                for kind, app in apps.items():
                    rc = app.wait(timeout=120)
                    err_text = (tmp_path / f"{kind}.err").read_text(errors="replace")
                    assert rc == 0, f"{kind}: {err_text[-3000:]}"
                    turns += json.loads((tmp_path / f"{kind}.json").read_text())
            finally:
                for app in apps.values():
                    if app.poll() is None:
                        app.kill()
                        app.wait()
            scored = {t["trace_id"] for t in turns if t["value"] != "filtered"}
            filtered = {t["trace_id"] for t in turns if t["value"] == "filtered"}
            assert len(scored) == len(KINDS) * len(SENTENCES) and len(filtered) == 1

            # -- scores present for every case (the refused one is dead-lettered) ---------------
            relevancy = C.NG_EVALUATION_SCORE_PREFIX + "answer_relevancy"
            grounding = C.NG_EVALUATION_SCORE_PREFIX + "grounding"

            def trace_evals() -> dict[str, dict[str, Any]]:
                return {
                    s.trace_id: s.attributes
                    for s in rx.spans
                    if s.name == C.NG_EVALUATION_SPAN_NAME and relevancy in s.attributes
                }

            deadline = time.monotonic() + 90
            while set(trace_evals()) < scored and time.monotonic() < deadline:
                time.sleep(0.5)
            evals = trace_evals()
            assert set(evals) >= scored, sorted(scored - set(evals))
            assert all(evals[t].get(grounding) is not None for t in scored)
            dlq = asyncio.run(read_all(broker.bootstrap, names["dlq_topic"], 1))
            time.sleep(1.5)  # conversation scores and result records of the last turns
        serve_log = srv.log_text()
        assert srv.rc == 0, serve_log[-3000:]
        turn_recs = asyncio.run(read_all(broker.bootstrap, names["turns_topic"], 10**6, 3.0))
        changelog = asyncio.run(
            read_all(broker.bootstrap, names["conversation_changelog_topic"], 10**6, 3.0)
        )
        requests = json.dumps([r.body for r in judge.chat_requests()])

    # the judge did see each case (placeholders in place of the values)
    assert len(judge.chat_requests()) > 3 * len(scored)
    assert "[scrubbed:api_key#1]" in requests and "[scrubbed:iban#1]" in requests
    assert leaks(requests, EVERYTHING) == []
    # the dead letter: the refused case, scrubbed (replayable: it carries the case)
    assert dlq and any(
        dict(r.headers).get("nexagauge.dlq.reason") == b"evaluation_failed" for r in dlq
    )
    assert "scrubbed:iban#1" in _records(dlq)
    assert leaks(_records(dlq), EVERYTHING) == []
    # the turns topic and the conversation changelog (compacted, kept indefinitely)
    assert turn_recs and changelog
    assert leaks(_records(turn_recs) + _records(changelog), EVERYTHING) == []
    # evaluation spans and result records
    assert leaks(repr([s.attributes for s in rx.spans]), EVERYTHING) == []
    assert rx.logs and leaks(repr([(g.body, g.attributes) for g in rx.logs]), EVERYTHING) == []
    # the log at -vv (aiokafka's debug lines print each produced record), and its start line
    assert "DEBUG aiokafka" in serve_log
    assert "scrubbing secrets and personal data (PII on)" in serve_log
    assert "case text goes to the judge at 127.0.0.1" in serve_log
    assert leaks(serve_log, EVERYTHING) == []
