"""Agent traffic from the real libraries through the real stack (issue 30).

The scripted support agent of Fjordhem Home (``tests/agents/script.py``: two declared tools,
order lookup returning JSON and policy lookup returning text; runs grounded in a tool result,
contradicting it, retrieval + tool, a failing tool, the same call three times, an undeclared
tool, parallel and two-round calls) instrumented with ``opentelemetry-instrumentation-openai-v2``
(latest experimental mode, content on the span, plus the app's own ``invoke_agent`` /
``execute_tool`` / ``retrieval`` spans), ``openinference-instrumentation-openai`` (AGENT / TOOL /
RETRIEVER spans), ``traceloop-sdk`` (``@agent`` / ``@tool`` / ``@task``) and the
``openai-agents`` SDK with its OpenInference instrumentor (its own venv) -> OTLP gRPC -> rotel ->
Tansu -> ``nexagauge serve`` (subprocess) with an LLM judge on loopback that grounds honestly
(``honest_judge.py``: a claim is supported only if its ids, numbers and most words are in the
context it is sent) -> evaluation spans to an OTLP receiver. One stack for every library.

Asserted per library and run: exactly one evaluation, of the final answer (no tool-call step is
ever an answer: the claim extractions see final answers only); one conversation turn per user
turn; every tool result in the grounding context with its source label; a grounded answer scores
1 and a contradicting one 0, with the source that contradicts it on the result record; the
agent signals (failed tool calls, loops, undeclared tools) on exactly the runs that have them; a
secret in a tool result reaches no judge; nothing lost (no dead letter, no rejected span, every
evaluation ok).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nexagauge.sdk import conventions as C

from . import script as S
from .honest_judge import grounding_reply

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SDK_PY = REPO / ".venv-agents" / "bin" / "python"
LIBRARIES = ("openai-v2", "openinference", "traceloop")
KINDS = (*LIBRARIES, "openai-agents")
GROUNDING = C.NG_EVALUATION_SCORE_PREFIX + "grounding"
CONV = C.NG_EVALUATION_SCORE_PREFIX + "conversation_relevance"


@dataclass
class Seen:
    """What the stack did with every library's runs (filled once, read by every test)."""

    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    trace_evals: list[Any] = field(default_factory=list)
    conv_evals: list[Any] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)
    #: the ``gen_ai.evaluation.result`` log records (the default ``emit.result_events``)
    results: list[Any] = field(default_factory=list)
    metrics: str = ""
    log: str = ""

    def evals_of(self, kind: str) -> dict[str, list[Any]]:
        ids = {r["trace_id"]: r["key"] for r in self.runs[kind]}
        out: dict[str, list[Any]] = {k: [] for k in ids.values()}
        for s in self.trace_evals:
            if s.trace_id in ids:
                out[ids[s.trace_id]].append(s)
        return out


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status), r.read().decode()
    except OSError:
        return 0, ""


def _run_app(kind: str, endpoint: str, llm_url: str, out: Path, env: dict[str, str]) -> None:
    if kind == "openai-agents":
        cmd = [str(SDK_PY), "-m", "tests.agents.sdk_app", endpoint, llm_url, str(out)]
    else:
        cmd = [sys.executable, "-m", "tests.agents.agent_app", kind, endpoint, llm_url, str(out)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, f"{kind}: {p.stderr[-3000:]}"


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    from online.kafka_helpers import topics, write_serve_config
    from support.broker import TansuBroker, free_port
    from support.collector import RotelCollector
    from support.openai_server import OpenAIServer, Reply
    from support.otlp_receiver import OtlpReceiver

    tmp = tmp_path_factory.mktemp("agents")
    kinds = [k for k in KINDS if k != "openai-agents" or SDK_PY.exists()]
    names = topics("agents")
    metrics_port = free_port()
    out = Seen()
    with (
        TansuBroker() as broker,
        OtlpReceiver() as rx,
        OpenAIServer() as judge,
        OpenAIServer() as llm,
        RotelCollector(broker.bootstrap, traces_topic=names["traces_topic"]) as col,
    ):
        llm.handler = lambda req: Reply(body=S.llm_reply(req.body or {}, req.index))
        judge.handler = grounding_reply
        cfg = write_serve_config(
            tmp,
            broker,
            names,
            judge_server=judge,
            receiver=rx,
            metrics_port=metrics_port,
            partitions={names["traces_topic"]: 3},
            online={
                "nodes": ["relevance", "grounding", "conversation_relevance"],
                # generous on a shared 2-core machine: a turn judged after a later one of
                # its conversation may be skipped as late (by design)
                "trace_grace_s": 1.0,
                "conversation_reorder_s": 3.0,
            },
            judge={"model": "gpt-4o-mini"},
        )
        log_path = tmp / "serve.log"
        log = log_path.open("wb")
        env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100", "PYTHONPATH": str(REPO)}
        serve = subprocess.Popen(
            [sys.executable, "-m", "nexagauge", "-v", "serve", "--config", str(cfg)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        base = f"http://127.0.0.1:{metrics_port}"
        try:
            deadline = time.monotonic() + 60
            while _get(base + "/readyz")[0] != 200:
                assert serve.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "serve never became ready"
                time.sleep(0.2)
            for kind in kinds:
                path = tmp / f"{kind}.json"
                _run_app(kind, col.grpc_endpoint, llm.base_url, path, env)
                out.runs[kind] = json.loads(path.read_text())
            n = sum(len(v) for v in out.runs.values())
            n_conv = sum(len(v) for v in out.runs.values() if v[0]["conversation_id"])
            try:
                rx.wait_for_spans(
                    lambda s: s.name == C.NG_EVALUATION_SPAN_NAME, timeout=180, count=n + n_conv
                )
            except TimeoutError:
                got = Counter(
                    (s.trace_id, CONV in s.attributes)
                    for s in rx.spans
                    if s.name == C.NG_EVALUATION_SPAN_NAME
                )
                missing = [
                    (k, r["key"], conv)
                    for k, rs in out.runs.items()
                    for r in rs
                    for conv in ((False, True) if r["conversation_id"] else (False,))
                    if not got[(r["trace_id"], conv)]
                ]
                pytest.fail(
                    f"evaluations missing (kind, run, conversation): {missing}\n"
                    f"{_get(base + '/metrics')[1][-3000:]}\n{log_path.read_text()[-4000:]}"
                )
            time.sleep(2.0)  # anything extra (a step scored, a second turn) would arrive now
            evals = [s for s in rx.spans if s.name == C.NG_EVALUATION_SPAN_NAME]
            out.conv_evals = [s for s in evals if CONV in s.attributes]
            out.trace_evals = [s for s in evals if CONV not in s.attributes]
            out.requests = judge.chat_requests()
            out.results = [
                rec for rec in rx.logs if rec.event_name == C.GEN_AI_EVALUATION_RESULT_EVENT
            ]
            out.metrics = _get(base + "/metrics")[1]
            yield out
        finally:
            if serve.poll() is None:
                serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
            log.close()
            out.log = log_path.read_text(errors="replace")[-3000:]


def _require(seen: Seen, kind: str) -> None:
    if kind not in seen.runs:
        pytest.skip(f"{SDK_PY} missing: scripts/test.sh builds .venv-agents")


def _run(key: str) -> S.Run:
    return next(r for r in S.RUNS if r.key == key)


def _call_ids(kind: str, run: S.Run) -> list[str]:
    tag = kind.replace("-", "")
    return [
        f"call_{tag}_{run.key}_{r}_{i}"
        for r, (_, calls) in enumerate(run.rounds)
        for i in range(len(calls))
    ]


def _grounding_contexts(seen: Seen) -> list[str]:
    return [r.text for r in seen.requests if "supported by the context" in r.text]


@pytest.mark.parametrize("kind", KINDS)
def test_one_evaluation_per_run(seen: Seen, kind: str) -> None:
    _require(seen, kind)
    evals = seen.evals_of(kind)
    assert {k: len(v) for k, v in evals.items()} == {r["key"]: 1 for r in seen.runs[kind]}, seen.log
    for r in seen.runs[kind]:
        assert r["answer"] == _run(r["key"]).answer  # the app's answers are the scripted ones


def test_no_step_is_ever_an_answer(seen: Seen) -> None:
    """Claim extraction (one call per evaluated answer) only ever saw final answers: never a
    "Let me look up..." preamble, never an OpenInference raw response JSON."""
    claims = [r for r in seen.requests if "chunks" in ((r.schema or {}).get("properties") or {})]
    assert len(claims) == len(seen.trace_evals)
    finals = {r.answer for r in S.RUNS}
    for req in claims:
        assert any(a in req.text for a in finals), req.text[-500:]
        for step in ("Let me look up", "Let me check", "Now the returns", "chatcmpl", "tool_calls"):
            assert step not in req.text


@pytest.mark.parametrize("kind", KINDS)
def test_one_conversation_turn_per_user_turn(seen: Seen, kind: str) -> None:
    _require(seen, kind)
    runs = seen.runs[kind]
    if not runs[0]["conversation_id"]:
        # the openai-agents instrumentor records no session: no conversation, no turns
        ids = {r["trace_id"] for r in runs}
        assert not [s for s in seen.conv_evals if s.trace_id in ids]
        return
    per_trace = Counter(s.trace_id for s in seen.conv_evals)
    assert {r["trace_id"]: per_trace[r["trace_id"]] for r in runs} == {
        r["trace_id"]: 1 for r in runs
    }


@pytest.mark.parametrize("kind", KINDS)
def test_every_tool_result_is_in_the_grounding_context_with_its_label(
    seen: Seen, kind: str
) -> None:
    _require(seen, kind)
    contexts = _grounding_contexts(seen)
    for r in seen.runs[kind]:
        run = _run(r["key"])
        ids = _call_ids(kind, run)
        mine = [c for c in contexts if ids[0] in c]
        assert len(mine) == 1, f"{kind} {run.key}: {len(mine)} grounding calls saw its tool calls"
        [ctx] = mine
        for cid, call in zip(ids, run.calls, strict=True):
            head = f"tool {call.name} (call {cid})"
            assert f"Result of {head}" in ctx or f"Failure of {head}" in ctx, (cid, ctx[:1500])
        if run.key == "grounded":  # JSON rendered readably
            assert "status: shipped\ncarrier: PostNord\neta: 2026-12-03" in ctx
        if run.retrieval:
            assert S.PASSAGE in ctx


def _grounding_event(seen: Seen, trace_id: str) -> dict[str, Any]:
    """The grounding result record of the evaluation of trace ``trace_id``."""
    found = [
        dict(rec.attributes)
        for rec in seen.results
        if rec.trace_id == trace_id and rec.attributes.get(C.GEN_AI_EVALUATION_NAME) == "grounding"
    ]
    assert len(found) == 1, (trace_id, len(found))
    return found[0]


@pytest.mark.parametrize("kind", KINDS)
def test_grounded_answers_score_high_and_contradicting_ones_low(seen: Seen, kind: str) -> None:
    _require(seen, kind)
    for key, [span] in seen.evals_of(kind).items():
        run = _run(key)
        score = span.attributes.get(GROUNDING)
        labels = [
            f"tool:{c.name}#{cid}" for cid, c in zip(_call_ids(kind, run), run.calls, strict=True)
        ]
        event = _grounding_event(seen, span.trace_id)
        if not run.grounded:
            assert score == 0.0, (kind, key, span.attributes)
            assert event.get(C.NG_EVALUATION_CONTRADICTED_BY) == labels[:1], event
        elif not run.failing:
            assert score == 1.0, (kind, key, span.attributes)
            assert set(event.get(C.NG_EVALUATION_SUPPORTED_BY, [])) <= set(labels) | {
                f"doc:{S.PASSAGE_ID}"
            }


@pytest.mark.parametrize("kind", KINDS)
def test_agent_signals_on_exactly_the_runs_that_have_them(seen: Seen, kind: str) -> None:
    """Failed tool calls, loops and undeclared tools (the signals of issue 30 item 3, computed
    from what this extraction read) are ``fail`` on exactly the runs that have them; without
    recorded definitions (the openai-agents instrumentor) undeclared tools are unknown."""
    _require(seen, kind)
    signals = {
        C.AGENT_SIGNAL_TOOL_FAILURES: lambda r: r.failing,
        C.AGENT_SIGNAL_LOOPS: lambda r: r.loop,
        C.AGENT_SIGNAL_UNDECLARED_TOOLS: lambda r: r.undeclared,
    }
    for r in seen.runs[kind]:
        run = _run(r["key"])
        got = {
            rec.attributes.get(C.GEN_AI_EVALUATION_NAME): rec.attributes.get(
                C.GEN_AI_EVALUATION_SCORE_LABEL
            )
            for rec in seen.results
            if rec.trace_id == r["trace_id"]
        }
        for name, has in signals.items():
            want = "fail" if has(run) else "pass"
            if name == C.AGENT_SIGNAL_UNDECLARED_TOOLS and kind == "openai-agents":
                want = C.AGENT_DEFINITIONS_NOT_RECORDED
            assert got.get(name) == want, (kind, run.key, name, got)


def test_tool_results_are_scrubbed_before_the_judge(seen: Seen) -> None:
    """A credential in a tool result (order A-1042's) reaches no judge request, while the rest
    of the result does."""
    assert not [r for r in seen.requests if S.SECRET in json.dumps(r.body)]
    assert any("payment_api_key: [scrubbed:" in r.text for r in seen.requests)


def test_nothing_lost(seen: Seen) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    samples = [
        (s.name, dict(s.labels), s.value)
        for fam in text_string_to_metric_families(seen.metrics)
        for s in fam.samples
    ]
    dead = sum(v for n, _, v in samples if n == "nexagauge_dlq_messages_total")
    rejected = {
        lb.get("reason"): v
        for n, lb, v in samples
        if n == "nexagauge_skipped_total"
        and lb.get("reason") in ("invalid_span", "extract_error", "invalid_case")
        and v
    }
    assert dead == 0 and not rejected, (dead, rejected)
    assert all(s.attributes.get(C.NG_EVALUATION_STATUS) == "ok" for s in seen.trace_evals), [
        s.attributes for s in seen.trace_evals if s.attributes.get(C.NG_EVALUATION_STATUS) != "ok"
    ]
