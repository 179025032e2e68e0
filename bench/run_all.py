"""Run every benchmark of issue 9 and print one combined table (Markdown).

Benchmarks, each in its own process, one after another (they share 2 cores; never in parallel):
``judge_cost`` (judge calls/tokens vs DeepEval and Ragas), ``sdk_overhead`` (``@nexagauge.trace``
vs a hand-written OpenTelemetry span), ``ingest`` (pipeline vs raw aiokafka ceiling),
``online_latency`` (``nexagauge serve`` with a 300 ms judge) and ``memory`` (10,000 buffered
traces). Each benchmark's own full output is kept under ``--outdir``; the combined table is
printed and written to ``<outdir>/results.md``.

    python bench/run_all.py [--quick] [--only ingest,memory] [--outdir bench/results]

``--quick`` runs every benchmark on tiny inputs (a smoke run: figures, not measurements).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, machine, machine_line, table

Row = list[Any]


def _judge_cost(quick: bool, js: Path) -> list[str]:
    a = ["--json", str(js)]
    return a + (["--limit", "3", "--skip-latency"] if quick else [])


def _plain(quick: bool, js: Path) -> list[str]:
    return ["--quick"] if quick else []


def _with_json(quick: bool, js: Path) -> list[str]:
    return (["--quick"] if quick else []) + ["--json", str(js)]


def _ingest(quick: bool, js: Path) -> list[str]:
    return (["--quick"] if quick else ["--rekey"]) + ["--json", str(js)]


def rows_judge_cost(js: dict[str, Any], out: str) -> list[Row]:
    rows: list[Row] = []
    r = js.get("rows", {})
    cheapest = js.get("cheapest_peer")
    for tool, x in r.items():
        lat = next((v for k, v in x.items() if k.startswith("wall_ms@")), float("nan"))
        rows.append(
            [
                "judge_cost",
                f"{tool}: calls / tokens / round trips / CPU ms / wall ms@300 per case",
                f"{x['calls']:.1f} / {x['tokens']:,.0f} / {x.get('round_trips', float('nan')):.0f} / "
                f"{x['cpu_ms']:.1f} / {lat:,.0f}",
                "",
                "",
            ]
        )
    ng = r.get("nexagauge")
    if ng and cheapest:
        ratio = ng["tokens"] / r[cheapest]["tokens"]
        rows.append(
            [
                "judge_cost",
                f"nexagauge tokens vs cheapest peer ({cheapest})",
                f"{ratio:.2f}x",
                "<= 0.5x, <= 3 calls, <= 2 round trips, < 5 ms CPU",
                "met"
                if ratio <= 0.5
                and ng["calls"] <= 3
                and ng["cpu_ms"] < 5
                and ng.get("round_trips", 2) <= 2
                else "NOT met",
            ]
        )
    for tool, why in js.get("skipped", {}).items():
        rows.append(["judge_cost", f"{tool}", f"skipped: {why}", "", ""])
    return rows


def rows_sdk_overhead(js: dict[str, Any], out: str) -> list[Row]:
    """Rows of bench/sdk_overhead.py's table: per kind (sync/async, passages retrieved again or
    new texts on every call) CPU ns and ratio, then off."""
    rows: list[Row] = []
    ratios: dict[str, float] = {}
    for line in out.splitlines():
        m = re.match(
            r"(sync|async|sync-fresh|async-fresh|tool|async-tool) (.+?)\s{2,}(\d+)\s+([0-9.]+)"
            r"\s+([0-9.]+)(?:\s+[0-9.]+)?$",
            line,
        )
        if m:
            kind, label, ns, ratio = m.group(1), m.group(2), int(m.group(3)), float(m.group(4))
            rows.append(
                [
                    "sdk_overhead",
                    f"{kind} {label}: CPU ns per call, ratio",
                    f"{ns:,}, {ratio:.2f}",
                    "",
                    "",
                ]
            )
            if label in ("@nexagauge.trace (defaults)", "@nexagauge.tool (defaults)"):
                ratios[kind] = ratio
        m = re.match(r"\s+off, (.+?)\s{2,}(-?\d+)$", line)
        if m:
            ns = int(m.group(2))
            rows.append(
                [
                    "sdk_overhead",
                    f"off, {m.group(1)}: ns added per call",
                    f"{ns:,}",
                    "<= 1,000",
                    "met" if ns <= 1000 else "NOT met",
                ]
            )
    for suffix, what in (("", ""), ("-fresh", ", new texts on every call (worst case)")):
        pair = [ratios[k + suffix] for k in ("sync", "async") if k + suffix in ratios]
        if pair:
            rows.append(
                [
                    "sdk_overhead",
                    f"ratio @nexagauge.trace (defaults) / minimal hand-written span{what}, "
                    "sync, async",
                    ", ".join(f"{r:.2f}" for r in pair),
                    "<= 1.10",
                    "met" if max(pair) <= 1.10 else "NOT met",
                ]
            )
    tools = [ratios[k] for k in ("tool", "async-tool") if k in ratios]
    if tools:
        rows.append(
            [
                "sdk_overhead",
                "ratio @nexagauge.tool (defaults) / hand-written execute_tool span, sync, async",
                ", ".join(f"{r:.2f}" for r in tools),
                "<= 1.10",
                "met" if max(tools) <= 1.10 else "NOT met",
            ]
        )
    return rows


def rows_ingest(js: dict[str, Any], out: str) -> list[Row]:
    s = js["summary"]
    ceil = s["decode+attrs"]["spans_s"]
    rows: list[Row] = []
    for v, x in s.items():
        rows.append(
            [
                "ingest",
                f"{v}: spans/s (spans per CPU-s)",
                f"{x['spans_s']:,.0f} ({x['spans_cpu_s']:,.0f})",
                "",
                "",
            ]
        )
    ratio = s["pipeline"]["spans_s"] / ceil
    rows.append(
        [
            "ingest",
            "pipeline / decode+attrs ceiling (wall)",
            f"{ratio:.0%}",
            ">= 70%",
            "met" if ratio >= 0.7 else "NOT met",
        ]
    )
    return rows


def rows_online(js: dict[str, Any], out: str) -> list[Row]:
    s, t, c = js["steady"], js["saturation"], js["config"]
    return [
        [
            "online_latency",
            f"evaluations/s at saturation ({'adaptive, ' if c.get('adaptive_concurrency') else ''}"
            f"max_in_flight {c['max_in_flight']}, judge concurrency {c['judge_max_concurrency']})",
            f"{t['evals_per_s']:.1f}",
            "",
            "",
        ],
        [
            "online_latency",
            f"span end -> score p50 / p95 at {s['rate']:g} traces/s (grace {c['trace_grace_s']} s)",
            f"{s['p50_s']:.2f} s / {s['p95_s']:.2f} s",
            "",
            "",
        ],
        [
            "online_latency",
            "of which evaluation (judge round trips) p50",
            f"{s['eval_p50_s']:.2f} s",
            "",
            "",
        ],
        [
            "online_latency",
            "judge calls per evaluation",
            f"{js['judge_calls']['steady_per_eval']:.2f}",
            "",
            "",
        ],
        _cpu_row(js),
        [
            "online_latency",
            "serve process CPU while idle",
            f"{js['serve_idle_cpu_ms_per_s']:.1f} ms/s" if "serve_idle_cpu_ms_per_s" in js else "",
            "",
            "",
        ],
    ]


def _cpu_row(js: dict[str, Any]) -> Row:
    """Serve CPU per evaluation against the issue-33 targets (<= 6 ms steady, <= 4 ms at
    saturation)."""
    steady, sat = js["serve_cpu_ms_per_eval"]["steady"], js["serve_cpu_ms_per_eval"]["saturation"]
    return [
        "online_latency",
        "serve process CPU per evaluation, steady / saturation",
        f"{steady:.1f} ms / {sat:.1f} ms",
        "<= 6 ms / <= 4 ms",
        "met" if steady <= 6 and sat <= 4 else "NOT met",
    ]


def rows_memory(js: dict[str, Any], out: str) -> list[Row]:
    mib = 1 / 1024
    return [
        [
            "memory",
            "baseline RSS (warm, empty buffer)",
            f"{js['baseline_kib'] * mib:.0f} MiB",
            "",
            "",
        ],
        [
            "memory",
            f"RSS with {js['buffered_traces']:,} traces buffered (peak)",
            f"{js['buffered_kib'] * mib:.0f} MiB ({js['peak_kib'] * mib:.0f} MiB)",
            "",
            "",
        ],
        [
            "memory",
            "RSS per buffered trace",
            f"{js['per_trace_kib']:.1f} KiB ({js['otlp_bytes_per_trace'] / 1024:.1f} KiB OTLP)",
            "",
            "",
        ],
    ]


BENCHES: dict[
    str, tuple[Callable[[bool, Path], list[str]], Callable[[dict[str, Any], str], list[Row]]]
] = {
    "judge_cost": (_judge_cost, rows_judge_cost),
    "sdk_overhead": (_plain, rows_sdk_overhead),
    "ingest": (_ingest, rows_ingest),
    "online_latency": (_with_json, rows_online),
    "memory": (_with_json, rows_memory),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny inputs (smoke run)")
    ap.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHES)}")
    ap.add_argument("--outdir", default=str(ROOT / "bench" / "results"))
    ap.add_argument(
        "--merge",
        action="store_true",
        help="with --only: take the other benchmarks' figures from their last outputs in --outdir",
    )
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.only.split(",")] if a.only else list(BENCHES)
    bad = set(names) - set(BENCHES)
    if bad:
        ap.error(f"unknown benchmarks {sorted(bad)}")
    outdir = Path(a.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    failed: list[str] = []
    header = [
        f"# nexa-gauge benchmarks ({'quick' if a.quick else 'full'} run, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        machine_line(),
    ]
    loads = {"before": machine()["load"]}
    for name in BENCHES if a.merge else names:
        args_fn, rows_fn = BENCHES[name]
        if name not in names:  # --merge: reuse the last output of this benchmark
            js, txt = outdir / f"{name}.json", outdir / f"{name}.txt"
            if txt.exists():
                data = json.loads(js.read_text()) if js.exists() else {}
                rows.extend(rows_fn(data, txt.read_text().split("\n--- stderr ---")[0]))
            continue
        js = outdir / f"{name}.json"
        js.unlink(missing_ok=True)
        cmd = [sys.executable, str(ROOT / "bench" / f"{name}.py"), *args_fn(a.quick, js)]
        print(f"== {name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
        took = time.perf_counter() - t0
        (outdir / f"{name}.txt").write_text(p.stdout + ("\n--- stderr ---\n" + p.stderr[-5000:]))
        print(p.stdout, flush=True)
        if p.returncode != 0:
            failed.append(name)
            rows.append([name, "FAILED", f"exit {p.returncode}", "", p.stderr.strip()[-200:]])
            continue
        data = json.loads(js.read_text()) if js.exists() else {}
        got = rows_fn(data, p.stdout)
        if not got:
            rows.append([name, "no figures parsed", "", "", ""])
        rows.extend(got)
        print(f"== {name} took {took:.0f} s", file=sys.stderr, flush=True)
    loads["after"] = machine()["load"]
    if a.merge and set(BENCHES) - set(names):
        reused = ", ".join(n for n in BENCHES if n not in names)
        header.append(f"(this run: {', '.join(names)}; {reused}: their last outputs in {outdir})")
    lines = [
        *header,
        f"load average (1/5/15 min) before {loads['before']}, after {loads['after']}",
        "",
        table(["benchmark", "figure", "value", "target", "status"], rows),
    ]
    text = "\n".join(lines) + "\n"
    (outdir / "results.md").write_text(text)
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
