"""The numbers of ``nexagauge serve`` on traffic from the real instrumentation libraries.

Every part real, on loopback: a RAG chat app (``tests/online/rag_apps.py``, 3 turns each) under
``opentelemetry-instrumentation-openai-v2`` in its three content modes, ``openinference`` with a
retriever span and ``traceloop-sdk`` with a workflow, a retriever task and a session -> OTLP gRPC
-> the rotel collector -> Tansu -> ``nexagauge serve`` (subprocess; re-key, evaluator,
conversation stage; LLM judge = a loopback OpenAI-compatible server that logs every request and
its token usage) -> evaluation spans to an OTLP receiver, metrics scraped by a real Prometheus.

Asserted, per turn and in total:
- exactly one trace evaluation per answer (retriever spans and inner LLM spans are not cases);
- its context is the documents the trace retrieved (the system prompt only where the trace has
  no retrieval: openai-v2), read back from the grounding prompts the judge received;
- cost: the judge's token log = the evaluation spans' tokens = Prometheus' token series, and
  the spans' USD = Prometheus' USD = what the budget gauge says was spent;
- one ``conversation_relevance`` score per turn, none from the per-trace graph;
- every metric a case did not get carries a reason code on its span;
- every query of the operations dashboard returns data (zero-initialised series included).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nexagauge.sdk import conventions as C

from .kafka_helpers import topics, write_serve_config
from .rag_apps import KINDS, SYSTEM, TURNS, run_apps

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
BUDGET = 50.0
CONV = C.NG_EVALUATION_SCORE_PREFIX + "conversation_relevance"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except OSError:
        return 0, ""


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out.append((dict(s.labels), float(s.value)))
    return out


def _context_blocks(req: Any) -> list[str]:
    """The context of a grounding prompt (between ``Context:`` and ``Claims:``)."""
    m = re.search(r"Context:\n(.*?)\nClaims:", req.text, re.S)
    return [m.group(1)] if m else []


def test_real_instrumentations_through_the_collector_give_exact_numbers(
    tmp_path: Path, broker: Any
) -> None:
    from support.broker import free_port
    from support.collector import RotelCollector
    from support.openai_server import OpenAIServer, Reply
    from support.otlp_receiver import OtlpReceiver
    from support.prometheus import (
        PrometheusServer,
        dashboard_expressions,
        require_binary,
        rule_files,
        without_data,
    )

    prometheus_bin = require_binary("prometheus")
    names = topics("inst")
    metrics_port = free_port()
    with (
        OtlpReceiver() as rx,
        OpenAIServer() as judge,
        OpenAIServer() as llm,
        RotelCollector(
            broker.bootstrap, traces_topic=names["traces_topic"], logs_topic=names["logs_topic"]
        ) as col,
    ):
        llm.handler = lambda req: Reply(
            content="The Lyon shop opens at 8 am on Sundays; dogs on a leash are welcome."
        )
        cfg = write_serve_config(
            tmp_path,
            broker,
            names,
            judge_server=judge,
            receiver=rx,
            metrics_port=metrics_port,
            online={
                "nodes": ["relevance", "grounding", "conversation_relevance", "geval"],
                "trace_grace_s": 0.5,
                "conversation_reorder_s": 0.5,
            },
            kafka={
                "turns_topic": names["traces_topic"] + "-turns",
                "conversation_changelog_topic": names["traces_topic"] + "-turns-changelog",
            },
            sampling={"budget_usd_per_hour": BUDGET},
            judge={"model": "gpt-4o-mini"},
        )
        log_path = tmp_path / "serve.log"
        log = log_path.open("wb")
        env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BLRP_SCHEDULE_DELAY": "100"}
        serve = subprocess.Popen(
            [sys.executable, "-m", "nexagauge", "-v", "serve", "--config", str(cfg)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        base = f"http://127.0.0.1:{metrics_port}"
        # scraping from the start, with the shipped recording/alert rules, as in deployment
        prom = PrometheusServer(
            {"nexagauge-evaluator": [f"127.0.0.1:{metrics_port}"]},
            rule_files=rule_files(),
            binary=prometheus_bin,
        )
        try:
            prom.start()
            deadline = time.monotonic() + 60
            while _get(base + "/readyz")[0] != 200:
                assert serve.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "serve never became ready"
                time.sleep(0.2)

            # -- the apps, one process per library / content mode, all at once: the openai-v2
            # traces whose content comes in log records (default and events modes) wait for
            # them past the grace (online.log_content_wait_s, tests/online/test_log_content_*) -
            turns = run_apps(KINDS, col.grpc_endpoint, llm.base_url, tmp_path, env)
            by_trace = {t["trace_id"]: t for t in turns}
            n = len(by_trace)
            assert n == len(KINDS) * TURNS

            # -- one trace evaluation per answer, one conversation score per turn -----------
            evals = rx.wait_for_spans(
                lambda s: s.name == C.NG_EVALUATION_SPAN_NAME, timeout=90, count=2 * n
            )
            time.sleep(2.0)  # anything extra (a duplicate, a retriever case) would arrive now
            evals = [s for s in rx.spans if s.name == C.NG_EVALUATION_SPAN_NAME]
            conv = [s for s in evals if CONV in s.attributes]
            trace_evals = [s for s in evals if CONV not in s.attributes]
            per_trace = Counter(s.trace_id for s in trace_evals)
            assert per_trace == Counter(list(by_trace)), (
                f"trace evaluations per trace: {per_trace}; "
                f"services: {Counter(s.attributes.get('service.name') for s in trace_evals)}"
            )
            assert Counter(s.trace_id for s in conv) == Counter(list(by_trace))
            for s in trace_evals:
                assert C.NG_EVALUATION_SCORE_PREFIX + "answer_relevancy" in s.attributes
                assert C.NG_EVALUATION_SCORE_PREFIX + "grounding" in s.attributes
                # geval has no criteria configured: not run, and the span says why
                skipped = s.attributes.get(C.NG_EVALUATION_SKIPPED_PREFIX + "geval")
                assert skipped, sorted(s.attributes)
                assert s.attributes.get(C.NG_EVALUATION_SKIP_REASON_PREFIX + "geval")
            by_conv: dict[str, list[float]] = {}
            for s in sorted(conv, key=lambda s: by_trace[s.trace_id]["turn"]):
                by_conv.setdefault(by_trace[s.trace_id]["conversation_id"], []).append(
                    s.attributes[CONV]
                )
            assert {k: len(v) for k, v in by_conv.items()} == {f"conv-{k}": TURNS for k in KINDS}

            # -- context = the retrieved documents ---------------------------------------------
            contexts = [c for r in judge.chat_requests() for c in _context_blocks(r)]
            for t in turns:
                mine = [c for c in contexts if t["documents"][0] in c]
                assert mine, f"{t['kind']} turn {t['turn']}: no grounding call saw its documents"
                for c in mine:
                    assert all(d in c for d in t["documents"]), c
                    if t["kind"].startswith("openai-v2"):  # no retrieval span: system prompt
                        assert SYSTEM in c
                    else:  # retrieval spans: exactly the documents, never the system prompt
                        assert SYSTEM not in c, c

            # -- cost: judge log = spans = Prometheus = budget ---------------------------------
            time.sleep(1.5)  # the budget gauge is refreshed by the consumer loop
            status, text = _get(base + "/metrics")
            assert status == 200
            span_in = sum(s.attributes.get(C.NG_EVALUATION_INPUT_TOKENS, 0) for s in evals)
            span_out = sum(s.attributes.get(C.NG_EVALUATION_OUTPUT_TOKENS, 0) for s in evals)
            span_usd = sum(s.attributes.get(C.NG_EVALUATION_COST_USD, 0.0) for s in evals)
            assert (span_in, span_out) == (
                judge.stats.prompt_tokens,
                judge.stats.completion_tokens,
            )
            tokens = _samples(text, "nexagauge_judge_tokens_total")
            assert {lb["node"] for lb, v in tokens if v} <= {
                "claims",
                "relevance",
                "grounding",
                "conversation_relevance",
                "chunk",
                "refiner",
                "geval",
            }
            prom_in = sum(v for lb, v in tokens if lb["direction"] == "input")
            prom_out = sum(v for lb, v in tokens if lb["direction"] == "output")
            assert (prom_in, prom_out) == (span_in, span_out)
            prom_usd = sum(v for _, v in _samples(text, "nexagauge_judge_cost_usd_total"))
            assert span_usd > 0
            assert prom_usd == pytest.approx(span_usd, rel=1e-9)
            [(_, remaining)] = [
                x
                for x in _samples(text, "nexagauge_budget_remaining_usd")
                if x[0].get("window") == "hour"
            ]
            assert BUDGET - remaining == pytest.approx(span_usd, rel=1e-6)
            calls = sum(
                v
                for lb, v in _samples(text, "nexagauge_judge_calls_total")
                if lb["outcome"] == "ok"
            )
            assert calls == judge.stats.chat_requests

            # -- every query of the operations dashboard returns data (possibly 0) --------------
            # (the drift dashboards guard their means with >= 20/50 evaluations per route and
            # compare with 7-day baselines: tests/deploy checks them at realistic volume)
            prom.wait_for("nexagauge:score_count:increase1h", timeout=30)
            sources = [
                s
                for s in dashboard_expressions(values=None)
                if s.origin.startswith("evaluator-health.json")
            ]
            assert len(sources) > 10
            empty = [f"{s.origin}: {s.expr}" for s in without_data(prom, sources)]
            assert not empty, "dashboard queries without data:\n" + "\n".join(empty)
        finally:
            prom.stop()
            if serve.poll() is None:
                serve.send_signal(signal.SIGTERM)
            try:
                rc = serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
                rc = -9
            log.close()
        assert rc == 0, log_path.read_text()[-3000:]
