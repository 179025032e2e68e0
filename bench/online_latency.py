"""Online throughput and latency of ``nexagauge serve`` with a 300 ms LLM judge.

Everything real, on loopback: a RAG app traced with ``@nexagauge.trace`` (5 spans per trace,
see ``_common.RagApp``) runs at a fixed rate; each trace is encoded as OTLP protobuf the moment
its root span ends and produced to Kafka (Tansu) without a key to a rotating partition, as the
rotel collector writes it. ``python -m nexagauge serve`` runs as its own process with its default
pipeline (re-key stage + evaluator, the adaptive concurrency limit between ``online.min_in_flight``
and ``online.max_in_flight`` (8..128), ``judge.max_concurrency = 96``,
grace 2 s, judge cache on, dedupe journal on) evaluating **relevance + grounding** of every trace
(``sampling.default_rate = 1``) with the LLM judge pointed at ``bench/llm_server.py
--latency-ms 300`` (schema-valid JSON after a 300 ms sleep per call). Each question and answer is
unique, so there are no judge cache hits. Evaluation spans are exported over OTLP/HTTP to a sink in this
process.

Latency = evaluation span end (when the scores were emitted, the evaluator's clock) - end of the
evaluated ``answer`` span (the app's clock; same machine). Split into *wait* (span end ->
evaluation start: collector-less Kafka hop, re-key hop, 2 s grace, queueing for a slot) and
*evaluate* (evaluation start -> scores emitted: the judge round trips).

Phases: warm-up (5 traces, not counted); **idle** for ``--idle`` s (nothing produced: the serve
process's CPU per second while it waits); **steady** at ``--rate`` traces/s (below capacity) for
``--duration`` s -> p50/p95 latency; **saturation** at ``--burst-rate`` traces/s (above capacity)
for ``--burst-duration`` s -> evaluations/s at the configured concurrency (completions per
second between the first and last completion of that phase; the default 100/s is above what one
member completes on this machine; the concurrency limit's 0.5 s samples are reported). The judge server's counters give
judge calls per evaluation; the serve process's CPU time (user + system, ``/proc/<pid>/stat``)
over each phase divided by its evaluations gives CPU per evaluation; ``/metrics`` gives ``nexagauge_evaluation_latency_seconds`` (mean) as a
cross-check.

    python bench/online_latency.py [--quick] [--rate 8] [--duration 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    ROOT,
    Broker,
    LlmServer,
    OtlpHttpSink,
    RagApp,
    exit_on_sigterm,
    load_line,
    machine,
    percentile,
    table,
)

from nexagauge.sdk import conventions as C

PARTITIONS = 4


def toml(d: dict[str, dict[str, Any]]) -> str:
    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return json.dumps(str(v))

    return "\n".join(
        f"[{sec}]\n" + "\n".join(f"{k} = {val(v)}" for k, v in kv.items()) for sec, kv in d.items()
    )


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except OSError:
        return 0, ""


class Serve:
    """``python -m nexagauge serve --config`` in a child process, stopped with SIGTERM."""

    def __init__(self, cfg: Path, log: Path, metrics_port: int) -> None:
        self.log_path = log
        self.log = log.open("wb")
        self.metrics_port = metrics_port
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nexagauge", "serve", "--config", str(cfg)],
            cwd=cfg.parent,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "200", "PYTHONPATH": str(ROOT)},
        )

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while http_get(f"http://127.0.0.1:{self.metrics_port}/readyz")[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not become ready: " + self.tail())
            time.sleep(0.2)

    def metrics(self) -> str:
        return http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")[1]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the serve process has used so far (``/proc``)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def tail(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc


async def produce_at_rate(
    app: RagApp, producer: Any, topic: str, rate: float, duration: float, start_i: int, tag: str
) -> dict[tuple[bytes, bytes], int]:
    """Run the app ``rate`` times per second for ``duration`` s; produce each trace at once.

    Returns {(trace id, answer span id): answer span end ns}.
    """
    n = max(1, round(rate * duration))
    out: dict[tuple[bytes, bytes], int] = {}
    t0 = time.perf_counter()
    for k in range(n):
        due = t0 + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        i = start_i + k
        t = app.trace(i, unique=f"{tag}-{i}")
        out[(t.trace_id, t.answer_span_id)] = t.end_ns
        await producer.send(topic, t.request, partition=i % PARTITIONS)
    await producer.flush()
    return out


async def wait_evals(
    sink: OtlpHttpSink, want: dict[tuple[bytes, bytes], int], within_s: float
) -> dict[tuple[bytes, bytes], tuple[int, int]]:
    """Wait until every wanted span has an evaluation span; returns key -> (start ns, end ns)."""
    deadline = time.monotonic() + within_s
    got: dict[tuple[bytes, bytes], tuple[int, int]] = {}
    while time.monotonic() < deadline:
        for s in sink.snapshot():
            if s.name == C.NG_EVALUATION_SPAN_NAME:
                k = (s.trace_id, s.parent_span_id)
                if k in want:
                    got[k] = (s.start_ns, s.end_ns)
        if len(got) >= len(want):
            break
        await asyncio.sleep(0.25)
    return got


def latencies(
    want: dict[tuple[bytes, bytes], int], got: dict[tuple[bytes, bytes], tuple[int, int]]
) -> dict[str, Any]:
    total = [(got[k][1] - end) / 1e9 for k, end in want.items() if k in got]
    wait = [(got[k][0] - end) / 1e9 for k, end in want.items() if k in got]
    ev = [(got[k][1] - got[k][0]) / 1e9 for k in want if k in got]
    ends = sorted(got[k][1] for k in want if k in got)
    span = (ends[-1] - ends[0]) / 1e9 if len(ends) > 1 else float("nan")
    return {
        "n": len(want),
        "evaluated": len(total),
        "p50_s": percentile(total, 50),
        "p95_s": percentile(total, 95),
        "max_s": max(total) if total else float("nan"),
        "wait_p50_s": percentile(wait, 50),
        "eval_p50_s": percentile(ev, 50),
        "eval_p95_s": percentile(ev, 95),
        "evals_per_s": (len(ends) - 1) / span
        if span and span == span and span > 0
        else float("nan"),
    }


def prom_value(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            m = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? ([0-9.eE+-]+)", line)
            if m:
                total += float(m.group(2))
    return total


async def amain(a: argparse.Namespace) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    from nexagauge.demo.stack import free_port

    out: dict[str, Any] = {"machine_before": machine(), "args": vars(a)}
    tmp = Path(tempfile.mkdtemp(prefix="bench-online-"))
    judge = LlmServer(a.judge_ms)
    sink = OtlpHttpSink()
    app = RagApp()
    tag = uuid.uuid4().hex[:6]
    try:
        with Broker() as b:
            topic = f"spans-{tag}"
            await b.create_topics({topic: PARTITIONS})
            mport = free_port()
            online: dict[str, Any] = {"nodes": ["relevance", "grounding"]}
            if a.max_in_flight:
                online["max_in_flight"] = a.max_in_flight
            judge_cfg: dict[str, Any] = {
                "base_url": judge.url + "/v1",
                "api_key": "sk-bench-not-a-real-key",
                "mode": "llm",
            }
            if a.judge_concurrency:
                judge_cfg["max_concurrency"] = a.judge_concurrency
            kafka_extra = {"fetch_max_wait_ms": a.fetch_max_wait_ms} if a.fetch_max_wait_ms else {}
            cfg = tmp / "nexagauge.toml"
            cfg.write_text(
                toml(
                    {
                        "kafka": {
                            "bootstrap_servers": b.bootstrap,
                            "traces_topic": topic,
                            "logs_topic": f"logs-{tag}",
                            "rekeyed_topic": f"bytrace-{tag}",
                            "dlq_topic": f"dlq-{tag}",
                            "group_id": f"evaluator-{tag}",
                            "topic_partitions": PARTITIONS,
                            **kafka_extra,
                        },
                        "online": online,
                        "sampling": {"default_rate": 1.0},
                        "judge": judge_cfg,
                        "cache": {"dir": str(tmp / "cache")},
                        "emit": {
                            "otlp_endpoint": sink.endpoint,
                            "otlp_protocol": "http/protobuf",
                            "metrics_port": mport,
                        },
                    }
                )
                + "\n"
            )
            from nexagauge.settings import load_settings

            eff = load_settings(cfg)
            out["config"] = {
                "max_in_flight": eff.online.max_in_flight,
                "adaptive_concurrency": eff.online.adaptive_concurrency,
                "judge_max_concurrency": eff.judge.max_concurrency,
                "trace_grace_s": eff.online.trace_grace_s,
                "rekey": eff.online.rekey,
                "fetch_max_wait_ms": eff.kafka.fetch_max_wait_ms,
            }
            serve = Serve(cfg, tmp / "serve.log", mport)
            producer = AIOKafkaProducer(
                bootstrap_servers=b.bootstrap, max_request_size=8 << 20, linger_ms=5, acks=1
            )
            await producer.start()
            try:
                await asyncio.to_thread(serve.wait_ready)
                i = 0
                warm = await produce_at_rate(app, producer, topic, 5, 1, i, tag)
                i += len(warm)
                got = await wait_evals(sink, warm, 90)
                if len(got) < len(warm):
                    raise RuntimeError(
                        f"warm-up: {len(got)}/{len(warm)} evaluated; " + serve.tail()
                    )
                # idle: nothing produced; what the process burns waiting (polls, timers, ticks)
                await asyncio.sleep(1.0)
                _phase("idle", serve)
                idle0, t_idle = serve.cpu_s(), time.monotonic()
                await asyncio.sleep(a.idle)
                out["serve_idle_cpu_ms_per_s"] = (
                    1000 * (serve.cpu_s() - idle0) / (time.monotonic() - t_idle)
                )
                calls0 = judge.stats()
                _phase("steady", serve)
                cpu0 = serve.cpu_s()
                steady = await produce_at_rate(app, producer, topic, a.rate, a.duration, i, tag)
                i += len(steady)
                got = await wait_evals(sink, steady, 60 + a.duration)
                calls1 = judge.stats()
                cpu1 = serve.cpu_s()
                out["steady"] = latencies(steady, got)
                out["steady"]["rate"] = a.rate
                _phase("saturation", serve)
                watch = asyncio.create_task(_watch_limit(serve))
                burst = await produce_at_rate(
                    app, producer, topic, a.burst_rate, a.burst_duration, i, tag
                )
                got = await wait_evals(sink, burst, 120 + a.burst_duration * 3)
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
                out["concurrency_limit"] = _limits
                out["saturation"] = latencies(burst, got)
                out["saturation"]["rate"] = a.burst_rate
                calls2 = judge.stats()
                cpu2 = serve.cpu_s()
                text = serve.metrics()
            finally:
                await producer.stop()
                rc = serve.stop()
            out["serve_exit"] = rc
            n_ok = prom_value(text, "nexagauge_evaluations_total")
            out["prom"] = {
                "evaluations_total": n_ok,
                "latency_count": prom_value(text, "nexagauge_evaluation_latency_seconds_count"),
                "latency_sum": prom_value(text, "nexagauge_evaluation_latency_seconds_sum"),
            }
            out["serve_cpu_ms_per_eval"] = {
                "steady": 1000 * (cpu1 - cpu0) / max(1, out["steady"]["evaluated"]),
                "saturation": 1000 * (cpu2 - cpu1) / max(1, out["saturation"]["evaluated"]),
            }
            out["judge_calls"] = {
                "steady_per_eval": _calls(calls1, calls0) / max(1, out["steady"]["evaluated"]),
                "saturation_per_eval": _calls(calls2, calls1)
                / max(1, out["saturation"]["evaluated"]),
            }
    finally:
        sink.close()
        judge.close()
    shutil.rmtree(tmp, ignore_errors=True)  # kept when the run failed: the serve log is in it
    out["machine_after"] = machine()
    return out


_limits: list[tuple[float, float]] = []


async def _watch_limit(serve: Serve) -> None:
    """Sample (concurrency limit, evaluations in flight) from /metrics twice a second."""
    while True:
        text = await asyncio.to_thread(serve.metrics)
        _limits.append(
            (
                prom_value(text, "nexagauge_concurrency_limit"),
                prom_value(text, "nexagauge_evaluations_in_flight"),
            )
        )
        await asyncio.sleep(0.5)


def _phase(name: str, serve: Serve) -> None:
    """A progress line on stderr (a profiler attached to the serve pid can follow the phases)."""
    print(
        f"phase {name} (serve pid {serve.proc.pid}) at {time.time():.1f}",
        file=sys.stderr,
        flush=True,
    )


def _spread(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    ys = sorted(xs)
    return f"{ys[0]:.0f}/{ys[len(ys) // 2]:.0f}/{ys[-1]:.0f}"


def _calls(after: dict[str, Any], before: dict[str, Any]) -> float:
    def n(s: dict[str, Any]) -> float:
        return float(sum(d.get("chat", 0) for d in (s.get("per_case") or {}).values()))

    return n(after) - n(before)


def report(r: dict[str, Any]) -> str:
    c = r["config"]
    rows = []
    for ph in ("steady", "saturation"):
        x = r[ph]
        rows.append(
            [
                ph,
                x["rate"],
                f"{x['evaluated']}/{x['n']}",
                x["evals_per_s"],
                x["p50_s"],
                x["p95_s"],
                x["max_s"],
                x["wait_p50_s"],
                x["eval_p50_s"],
            ]
        )
    p = r["prom"]
    mean = p["latency_sum"] / p["latency_count"] if p["latency_count"] else float("nan")
    s, t = r["steady"], r["saturation"]
    return "\n".join(
        [
            f"Online (nexagauge serve, relevance + grounding, judge {r['args']['judge_ms']:.0f} ms/call; "
            f"max_in_flight {c['max_in_flight']}, judge.max_concurrency "
            f"{c['judge_max_concurrency']}, grace {c['trace_grace_s']} s, rekey {c['rekey']})",
            table(
                [
                    "phase",
                    "offered/s",
                    "evaluated",
                    "evals/s",
                    "p50 s",
                    "p95 s",
                    "max s",
                    "wait p50 s",
                    "evaluate p50 s",
                ],
                rows,
            ),
            f"judge calls per evaluation: {r['judge_calls']['steady_per_eval']:.2f} (steady), "
            f"{r['judge_calls']['saturation_per_eval']:.2f} (saturation); /metrics: "
            f"{p['evaluations_total']:.0f} evaluations, mean nexagauge_evaluation_latency_seconds "
            f"{mean:.2f} s; serve exit {r['serve_exit']}",
            f"serve process CPU per evaluation (re-key, decode, assembly, extraction, judge "
            f"client, emission): {r['serve_cpu_ms_per_eval']['steady']:.1f} ms (steady), "
            f"{r['serve_cpu_ms_per_eval']['saturation']:.1f} ms (saturation); idle: "
            f"{r['serve_idle_cpu_ms_per_s']:.1f} ms of CPU per second",
            "concurrency limit during saturation (min/median/max of 0.5 s samples): "
            + _spread([x[0] for x in r.get("concurrency_limit") or []])
            + "; in flight: "
            + _spread([x[1] for x in r.get("concurrency_limit") or []]),
            f"RESULT serve CPU {r['serve_cpu_ms_per_eval']['saturation']:.2f} ms/evaluation "
            f"saturation, {r['serve_cpu_ms_per_eval']['steady']:.2f} ms steady, idle "
            f"{r['serve_idle_cpu_ms_per_s']:.2f} ms/s",
            f"RESULT online {t['evals_per_s']:.1f} evaluations/s at saturation; p50 "
            f"{s['p50_s']:.2f} s, p95 {s['p95_s']:.2f} s span end -> score at {s['rate']:g} traces/s",
            load_line(r["machine_before"], r["machine_after"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short phases (smoke)")
    ap.add_argument("--rate", type=float, help="steady traces/s (default 8)")
    ap.add_argument("--duration", type=float, help="steady seconds (default 30)")
    ap.add_argument("--burst-rate", type=float, help="saturation traces/s (default 100)")
    ap.add_argument("--burst-duration", type=float, help="saturation seconds (default 10)")
    ap.add_argument("--judge-ms", type=float, default=300.0)
    ap.add_argument(
        "--fetch-max-wait-ms", type=int, help="kafka.fetch_max_wait_ms (default: settings)"
    )
    ap.add_argument("--idle", type=float, help="idle seconds measured (default 10)")
    ap.add_argument("--max-in-flight", type=int, help="online.max_in_flight (default: settings)")
    ap.add_argument(
        "--judge-concurrency", type=int, help="judge.max_concurrency (default: settings)"
    )
    ap.add_argument("--json", help="write raw figures here")
    a = ap.parse_args(argv)
    exit_on_sigterm()
    a.rate = a.rate or (4.0 if a.quick else 8.0)
    a.duration = a.duration or (3.0 if a.quick else 30.0)
    a.burst_rate = a.burst_rate or (20.0 if a.quick else 100.0)
    a.burst_duration = a.burst_duration or (1.5 if a.quick else 10.0)
    a.idle = a.idle or (2.0 if a.quick else 10.0)
    r = asyncio.run(amain(a))
    print(report(r))
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
