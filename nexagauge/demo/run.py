"""``nexagauge demo``: the whole online pipeline on one machine, no Docker, no API key.

What runs (every process is stopped at the end, also on Ctrl-C, SIGTERM, SIGHUP or an error; on
Linux the children also die with the demo if it is killed outright, see
:func:`nexagauge.demo.stack.popen`):

    demo RAG app (@nexagauge.trace, child process)
      -> OTLP gRPC -> embedded collector (rotel, child process)
      -> Kafka protocol -> embedded broker (Tansu, child process)
      -> the evaluator (this process: re-key stage + evaluator stage, the local judge)
      -> scores on http://127.0.0.1:<port>/metrics and evaluation spans (kept in memory)

After ``--drift-after`` seconds a share of the app's answers drifts off-topic or loses its
grounding. The demo prints live progress, and at the end the per-metric means before and after
the drift and which alert rules would have fired (the rules' conditions and sample guards applied
with the pre-drift window as the baseline and the post-drift window as the recent hour; see
:mod:`nexagauge.emit.alerts`).

With ``NEXAGAUGE_JUDGE_BASE_URL`` (or ``OPENAI_API_KEY``) set, the same demo uses that LLM judge.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from nexagauge.emit import metric_names as mn
from nexagauge.emit.alerts import GROUNDING, RELEVANCE, check_score_alerts

PROGRESS_EVERY_S = 3.0
TOPIC_PARTITIONS = 3


@dataclass
class DemoOptions:
    duration_s: float = 90.0
    rate: float = 6.0
    drift_after_s: float | None = None  # default: half of the duration
    drift_share: float = 0.6
    seed: int = 7
    metrics_port: int = 9464
    drain_timeout_s: float = 90.0
    config: str | None = None

    @property
    def drift_at(self) -> float:
        return self.drift_after_s if self.drift_after_s is not None else self.duration_s / 2


@dataclass
class Evaluated:
    at_s: float  # seconds since the app started, at the evaluated span's end
    scores: dict[str, float]
    errors: dict[str, str]


@dataclass
class Recorder:
    """Wraps the real emitter: everything is emitted as in production and also recorded here."""

    inner: Any
    app_started_ns: int = 0
    rows: list[Evaluated] = field(default_factory=list)

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> Any:
        from nexagauge.nodes.eval import EvalSummary
        from nexagauge.nodes.report import summary_scores

        res = await self.inner.emit(target, case_result, started_ns=started_ns)
        # the eval node's summary (serve's plans have no report node: online/plans.py)
        o = case_result.outcomes.get("eval")
        if o is not None and isinstance(o.output, EvalSummary):
            at = (target.end_time_unix_nano - self.app_started_ns) / 1e9
            all_scores, _, errors = summary_scores(o.output)
            scores = {k: v for k, v in all_scores.items() if v is not None}
            self.rows.append(Evaluated(at, scores, errors))
        return res

    def __getattr__(self, name: str) -> Any:  # start/aclose/... of the real emitter
        return getattr(self.inner, name)


def _settings(opts: DemoOptions, bootstrap: str, cache_dir: str) -> Any:
    from nexagauge.settings import load_settings

    return load_settings(
        opts.config,
        kafka={"bootstrap_servers": bootstrap, "fetch_max_wait_ms": 20},
        online={
            "target": "eval",
            "nodes": ["relevance", "grounding", "agent_signals"],
            "rekey": True,  # rotel does not key messages by trace id
            "trace_grace_s": 0.5,
            "trace_inactivity_s": 5.0,
            "max_in_flight": 16,
        },
        sampling={"default_rate": 1.0},
        emit={
            "span_exporter": "memory",
            "metrics_port": opts.metrics_port,
            "dedupe_journal": False,
        },
        cache={"dir": cache_dir},
    )


async def _warm_up(svc: Any) -> None:
    """Load the judge's model now, so the first traces are not held up by it."""
    rt = getattr(svc, "runtime", None)
    if rt is None or rt.judge is None or rt.judge_kind != "local":
        return
    embedder = rt.embedder
    warm = getattr(embedder, "warmup", None)
    if warm is not None:
        await warm()
    else:
        await embedder.embed(["warm up"])


def _mean(xs: list[float]) -> str:
    return f"{statistics.fmean(xs):.3f}" if xs else "  -  "


def _window(rows: list[Evaluated], metric: str, lo: float, hi: float) -> list[float]:
    return [r.scores[metric] for r in rows if metric in r.scores and lo <= r.at_s < hi]


class Demo:
    def __init__(self, opts: DemoOptions, out: TextIO = sys.stdout) -> None:
        self.opts = opts
        self.out = out
        self.procs: list[Any] = []
        self.app: subprocess.Popen[bytes] | None = None

    def say(self, msg: str) -> None:
        print(msg, file=self.out, flush=True)

    async def run(self) -> int:
        from nexagauge.demo.stack import EmbeddedBroker, EmbeddedCollector, popen
        from nexagauge.emit.emitter import Emitter
        from nexagauge.emit.prometheus import EvaluatorMetrics
        from nexagauge.online.service import OnlineService

        o = self.opts
        tmp = tempfile.mkdtemp(prefix="nexagauge-demo-")
        svc = None
        try:
            self.say("starting the embedded Kafka-protocol broker (Tansu) ...")
            broker = EmbeddedBroker()
            self.procs.append(broker)
            settings = _settings(o, broker.bootstrap, tmp)
            k = settings.kafka
            # the input topics the collector writes to (the evaluator creates its own)
            await broker.create_topics(
                {t: TOPIC_PARTITIONS for t in (k.traces_topic, k.logs_topic)}
            )
            self.say("starting the OTLP collector (rotel, Kafka exporter) ...")
            collector = EmbeddedCollector(broker.bootstrap, k.traces_topic, k.logs_topic)
            self.procs.append(collector)
            metrics = EvaluatorMetrics.from_settings(settings.emit)
            recorder = Recorder(Emitter.from_settings(settings, metrics=metrics))
            svc = OnlineService(settings, emitter=recorder, metrics=metrics)
            self.say("starting the evaluator (loading the judge) ...")
            await svc.start()
            await _warm_up(svc)
            judge = getattr(svc.runtime, "judge_kind", None) if svc.runtime else None
            self.say(
                f"evaluator ready: judge={judge or 'none'}, scores on "
                f"http://{settings.emit.metrics_host}:{svc.metrics_port}/metrics"
            )
            stop = asyncio.Event()
            runner = asyncio.create_task(svc.run_until(stop))
            recorder.app_started_ns = time.time_ns()
            # started from this (the main) thread, so that it dies with the demo (stack.popen)
            self.app = popen(
                [
                    sys.executable,
                    "-m",
                    "nexagauge.demo.app",
                    "--endpoint",
                    collector.otlp_grpc_endpoint,
                    "--rate",
                    str(o.rate),
                    "--duration",
                    str(o.duration_s),
                    "--drift-after",
                    str(o.drift_at),
                    "--drift-share",
                    str(o.drift_share),
                    "--seed",
                    str(o.seed),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100"},
            )
            self.say(
                f"demo app running for {o.duration_s:.0f}s at ~{o.rate:g} questions/s; "
                f"{o.drift_share:.0%} of answers drift after {o.drift_at:.0f}s\n"
            )
            await self._progress(recorder, runner)
            await self._drain(recorder, self._produced())
            stop.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(runner, 30)
            app_err = self._app_failure()
            self._summary(recorder, svc)
            if app_err:
                self.say(f"\nthe demo app failed: {app_err}")
                return 1
            return 0 if recorder.rows else 1
        finally:
            await self._stop_all(svc, tmp)

    async def _stop_all(self, svc: Any, tmp: str) -> None:
        """Stop everything the demo started, in order: the app (no new traces), the evaluator
        (bounded by ``online.drain_timeout_s``), then the collector and the broker. The child
        processes are stopped even if stopping the evaluator fails or is interrupted (a second
        Ctrl-C)."""
        import shutil

        from nexagauge.demo.stack import stop_process

        try:
            if self.app is not None:
                stop_process(self.app)
            if svc is not None:
                with contextlib.suppress(Exception):
                    await svc.stop()
        finally:
            for p in reversed(self.procs):
                p.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)

    def _app_failure(self) -> str | None:
        if self.app is None or self.app.returncode in (0, None):
            return None
        err = self.app.stderr.read().decode(errors="replace") if self.app.stderr else ""
        return f"exit {self.app.returncode}: {err[-800:]}"

    async def _progress(self, rec: Recorder, runner: asyncio.Task[Any]) -> None:
        assert self.app is not None
        t0 = time.monotonic()
        while self.app.poll() is None:
            if runner.done():
                runner.result()  # the evaluator died: raise its error
                return
            await asyncio.sleep(PROGRESS_EVERY_S)
            now = time.monotonic() - t0
            recent = [r for r in rec.rows if r.at_s >= now - 10]
            rel = [r.scores[RELEVANCE] for r in recent if RELEVANCE in r.scores]
            gro = [r.scores[GROUNDING] for r in recent if GROUNDING in r.scores]
            phase = "drifting" if now >= self.opts.drift_at else "healthy "
            self.say(
                f"[{now:5.0f}s {phase}] evaluated {len(rec.rows):4d} traces | last 10s: "
                f"relevance {_mean(rel)}  grounding {_mean(gro)}  ({len(recent)} traces)"
            )

    def _produced(self) -> int | None:
        """How many traces the app produced (its last line: ``demo-app done: {counts}``)."""
        if self.app is None or self.app.stdout is None:
            return None
        out = self.app.stdout.read().decode(errors="replace")
        for line in reversed(out.splitlines()):
            if line.startswith("demo-app done:"):
                with contextlib.suppress(ValueError, SyntaxError):
                    counts = ast.literal_eval(line.split(":", 1)[1].strip())
                    return int(sum(counts.values()))
        return None

    async def _drain(self, rec: Recorder, produced: int | None) -> None:
        """Wait until every produced trace is evaluated (or, if the count is unknown, until no
        new result came for a while), bounded by ``drain_timeout_s``."""
        deadline = time.monotonic() + self.opts.drain_timeout_s
        last, quiet_since = len(rec.rows), time.monotonic()
        while time.monotonic() < deadline:
            if produced is not None and len(rec.rows) >= produced:
                return
            await asyncio.sleep(0.5)
            if len(rec.rows) != last:
                last, quiet_since = len(rec.rows), time.monotonic()
            elif produced is None and time.monotonic() - quiet_since > 7.0:
                return
        if produced is not None and len(rec.rows) < produced:
            self.say(f"(drain timeout: {len(rec.rows)} of {produced} traces evaluated)")

    def _summary(self, rec: Recorder, svc: Any) -> None:
        o = self.opts
        rows = rec.rows
        self.say(f"\n=== nexa-gauge demo summary: {len(rows)} traces evaluated ===")
        self.say(
            f"{'metric':18} {'before drift':>14} {'after drift':>14} {'n before':>9} {'n after':>8}"
        )
        base: dict[str, list[float]] = {}
        recent: dict[str, list[float]] = {}
        for m in (RELEVANCE, GROUNDING):
            b = _window(rows, m, float("-inf"), o.drift_at)
            a = _window(rows, m, o.drift_at, float("inf"))
            base[m], recent[m] = b, a
            self.say(f"{m:18} {_mean(b):>14} {_mean(a):>14} {len(b):>9} {len(a):>8}")
        errors = sum(1 for r in rows if r.errors)
        if errors:
            self.say(f"({errors} evaluations carried metric errors)")
        self.say(
            "\nalert rules (pre-drift window as the 7-day baseline, post-drift as the last hour):"
        )
        for chk in check_score_alerts(base, recent):
            value = "n/a" if chk.value is None else f"{chk.value:.3f}"
            state = (
                "FIRES"
                if chk.fires
                else ("condition met, sample guard not met" if chk.condition else "quiet")
            )
            self.say(f"  {chk.alert:30} {state:38} value {value} vs {chk.threshold} ({chk.detail})")
        metrics = getattr(svc, "metrics", None)
        if metrics is not None:
            self.say(f"\n{agent_summary(metrics.registry)}")
        stats = getattr(getattr(svc, "stage", None), "stats", None)
        if stats is not None:
            self.say(f"\nevaluator: {stats}")


def agent_summary(registry: Any) -> str:
    """One line on the agent runs the evaluator saw (from its Prometheus series)."""

    def total(name: str, **labels: str) -> int:
        return int(
            sum(
                s.value
                for m in registry.collect()
                for s in m.samples
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
            )
        )

    return (
        f"agent signals: {total(mn.AGENT_RUNS)} agent runs, "
        f"{total(mn.AGENT_TOOL_CALLS)} tool calls ({total(mn.AGENT_TOOL_CALLS, outcome='failed')} "
        f"failed), {total(mn.AGENT_LOOPS)} loops, "
        f"{total(mn.AGENT_UNDECLARED_TOOL_CALLS)} calls to undeclared tools"
    )


async def run_demo(opts: DemoOptions, out: TextIO = sys.stdout) -> int:
    return await Demo(opts, out).run()
