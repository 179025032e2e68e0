"""Size and speed of the HTML report (issue 32): 1,000 cases <= 10 MB, first case shown < 3 s.

What it runs, all in one run on this machine:

1. Two real ``nexagauge run eval --only relevance,grounding,refmatch`` runs of the same 1,000
   RAG cases (the 52 hand-written cases of ``bench/data/rag_cases.jsonl`` cycled, each with its
   own case id, a reference and metadata) against the loopback judge ``bench/llm_server.py``;
   in the second run every 7th answer is another case's answer (regressions to compare). The
   second run writes its report with ``--baseline`` the first: the full report, comparison
   included, is what is measured.
2. Rendering time in Python (``nexagauge report``'s path: load, scrub, compare, render) against
   the baseline of only ``json.loads`` of the same files.
3. Headless Chromium (Debian ``chromium-headless-shell`` driven by playwright, every request
   but the file blocked and counted), ``--rounds`` fresh pages each: time to DOMContentLoaded
   (the page's own navigation timing) and wall time from navigation to the first case visible,
   against the same measurements of a one-case page of a few kilobytes (the browser's fixed
   cost) in the same rounds; medians and ratios.

Run: ``python bench/report_size_speed.py [--cases 1000] [--rounds 5] [--json FILE]``;
``--quick``: 60 cases, 2 rounds (a smoke run: figures, not measurements);
``--results DIR --baseline-results DIR`` measure existing results directories instead.
Exit status 1 when a target is missed (size > 10 MB or first case > 3 s for 1,000+ cases).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _llm_child import LlmServer
from _machine import machine_line
from _tables import table
from _traces import CASES, ROOT

MAX_BYTES = 10 * 1024 * 1024
MAX_FIRST_CASE_S = 3.0


def dataset(n: int, second: bool) -> list[str]:
    """``n`` records from the benchmark cases; ``second``: every 7th answer swapped."""
    base = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    out = []
    for i in range(n):
        c = dict(base[i % len(base)])
        c["case_id"] = f"{c['case_id']}-{i:04d}"
        c["reference"] = base[i % len(base)]["output"]
        c["metadata"] = {"copy": i // len(base), "source": "bench/data/rag_cases.jsonl"}
        if second and i % 7 == 3:
            c["output"] = base[(i + 5) % len(base)]["output"]
        out.append(json.dumps(c))
    return out


def nexagauge(args: list[str], env: dict[str, str]) -> float:
    exe = Path(sys.executable).with_name("nexagauge")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "nexagauge"]
    t0 = time.perf_counter()
    p = subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"nexagauge {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return time.perf_counter() - t0


def make_runs(n: int, work: Path) -> tuple[Path, Path, dict[str, float]]:
    judge = LlmServer(latency_ms=0)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NEXAGAUGE_", "OPENAI_"))}
        env.update(
            NEXAGAUGE_JUDGE_BASE_URL=judge.url + "/v1",
            NEXAGAUGE_JUDGE_API_KEY="bench-key",
            NEXAGAUGE_JUDGE_MODE="llm",
            NEXAGAUGE_CACHE_DIR=str(work / "cache"),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        times = {}
        for name, second in (("base", False), ("new", True)):
            data = work / f"{name}.jsonl"
            data.write_text("\n".join(dataset(n, second)) + "\n")
            args = ["run", "eval", "--only", "relevance,grounding,refmatch", "-i", str(data)]
            args += ["-o", str(work / name), "--no-cache", "--no-progress", "-q", "--no-report"]
            times[f"run_{name}_s"] = nexagauge(args, env)
    finally:
        judge.close()
    return work / "base", work / "new", times


def render_times(results: Path, baseline: Path, out: Path, rounds: int) -> dict[str, float]:
    from nexagauge.report.render import write_report

    reads, renders = [], []
    files = [
        *sorted((results / "cases").glob("*.json")),
        *sorted((baseline / "cases").glob("*.json")),
    ]
    for _ in range(rounds):
        t0 = time.perf_counter()
        for f in files:
            json.loads(f.read_text(encoding="utf-8"))
        reads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        write_report(results, out, baseline=baseline)
        renders.append(time.perf_counter() - t0)
    read, render = statistics.median(reads), statistics.median(renders)
    return {"json_read_s": read, "render_s": render, "render_vs_read": render / read}


def _counter(url: str, foreign: list[str]) -> Any:
    def count(request: Any) -> None:
        if request.url != url:
            foreign.append(request.url)

    return count


def browser_times(report: Path, tiny: Path, rounds: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    if str(ROOT / "tests") not in sys.path:  # the browser set-up the report's tests use
        sys.path.insert(0, str(ROOT / "tests"))
    from support.browser import BROWSER_ARGS, INSTALL_HINT, chromium_path, only

    exe = chromium_path()
    if exe is None:
        raise SystemExit(INSTALL_HINT)
    figures: dict[str, list[float]] = {k: [] for k in ("dcl", "first", "tiny_dcl", "tiny_first")}
    foreign: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=BROWSER_ARGS)
        try:
            for _ in range(rounds):
                for path, key in ((tiny, "tiny_"), (report, "")):
                    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
                    page = ctx.new_page()
                    url = path.resolve().as_uri()
                    page.on("request", _counter(url, foreign))
                    page.route("**/*", only(url))
                    t0 = time.perf_counter()
                    page.goto(url, wait_until="domcontentloaded")
                    page.locator("details.case").first.wait_for(state="visible")
                    figures[key + "first"].append(time.perf_counter() - t0)
                    dcl = page.evaluate(
                        "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
                    )
                    figures[key + "dcl"].append(float(dcl) / 1000)
                    ctx.close()
        finally:
            browser.close()
    med = {k: statistics.median(v) for k, v in figures.items()}
    return {
        "dcl_s": med["dcl"],
        "first_case_s": med["first"],
        "tiny_dcl_s": med["tiny_dcl"],
        "tiny_first_case_s": med["tiny_first"],
        "dcl_vs_tiny": med["dcl"] / med["tiny_dcl"],
        "first_case_vs_tiny": med["first"] / med["tiny_first"],
        "max_first_case_s": max(figures["first"]),
        "foreign_requests": len(foreign),
    }


def tiny_report(work: Path) -> Path:
    """A one-case results directory (the browser's fixed cost), rendered by the same code."""
    from nexagauge.report.render import write_report

    d = work / "tiny"
    (d / "cases").mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"target": "eval", "records": 1, "cases": 1}))
    doc = {"case_id": "one", "index": 0, "scores": {"g": 1.0}, "passed": {"g": True},
           "record": {"input": "q", "output": "a", "context": ["c"]}}  # fmt: skip
    (d / "cases" / "one.json").write_text(json.dumps(doc))
    return write_report(d, work / "tiny.html")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="60 cases, 2 rounds (smoke)")
    ap.add_argument("--results", type=Path, help="measure this results directory")
    ap.add_argument("--baseline-results", type=Path, help="its baseline (with --results)")
    ap.add_argument("--json", help="write raw figures here")
    a = ap.parse_args()
    if a.quick:
        a.cases, a.rounds = 60, 2
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        work = Path(tmp)
        figures: dict[str, Any] = {"machine": machine_line()}
        if a.results:
            new, base = a.results, a.baseline_results or a.results
        else:
            base, new, times = make_runs(a.cases, work)
            figures.update(times)
        report = work / "report.html"
        figures.update(render_times(new, base, report, a.rounds))
        n = len(list((new / "cases").glob("*.json")))
        size = report.stat().st_size
        figures.update(cases=n, bytes=size, bytes_per_case=size / max(1, n))
        figures.update(browser_times(report, tiny_report(work), a.rounds))
    ok_size = size <= MAX_BYTES * max(1, n) / 1000 if n < 1000 else size <= MAX_BYTES
    ok_speed = figures["first_case_s"] < MAX_FIRST_CASE_S
    figures.update(size_ok=ok_size, first_case_ok=ok_speed)
    print(figures["machine"])
    rows = [
        ["cases", n, ""],
        ["report size (MB)", round(size / 1e6, 2), "limit 10 MiB (10.49 MB) for 1,000 cases"],
        ["bytes per case", round(size / max(1, n)), ""],
        ["render in Python (s)", round(figures["render_s"], 3),
         f"{figures['render_vs_read']:.1f}x json.loads of the same files"],
        ["DOMContentLoaded (s)", round(figures["dcl_s"], 3),
         f"{figures['dcl_vs_tiny']:.1f}x a one-case page ({figures['tiny_dcl_s']:.3f} s)"],
        ["first case visible (s)", round(figures["first_case_s"], 3),
         f"{figures['first_case_vs_tiny']:.1f}x a one-case page; limit {MAX_FIRST_CASE_S} s"],
        ["requests other than the file", figures["foreign_requests"], "must be 0"],
    ]  # fmt: skip
    print(table(["measure", "value", "note"], rows))
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if ok_size and ok_speed and figures["foreign_requests"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
