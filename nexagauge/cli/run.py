"""``nexagauge run <node> --input PATH``: evaluate a dataset offline and write reports.

Writes, under ``--output-dir`` (default ``./nexagauge-out``):

- ``cases/<case_id>.json``: the ``report`` node's CaseReport plus ``index``, ``line`` and
  ``outcomes`` (per node: status, skip/error reason, cached flag, elapsed seconds);
- ``summary.json`` / ``summary.csv``: per metric count, mean, median, min, max, pass rate, errors,
  skipped; per node status counts and skip reasons; totals and ``--fail-under`` checks;
- ``report.html``: the single-file HTML report (``--report FILE`` elsewhere, ``--no-report``
  none; ``--baseline PREV_DIR`` adds the comparison with an earlier run), see
  :mod:`nexagauge.report`;
- ``errors.jsonl``: one line per bad record (index, line, case id, field, reason), per node error,
  per warning (a number read as text) and per input error; bad records and warnings are also
  named on stderr (see :mod:`nexagauge.cli._sink`).

No record stops the run: a record nothing can read is one error line, ``summary.json`` is always
written. Exit status: 0 when every record ran without node errors; 1 when a record failed, a node
errored or the input held no records; 3 when only a ``--fail-under`` bound was breached; 2 for
usage errors.

Example:
    nexagauge run refmatch --input nexagauge/data/sample.jsonl --output-dir out/refmatch
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nexagauge.cli._output import (
    SummaryBuilder,
    fmt,
    format_table,
    summary_csv,
    write_json,
)
from nexagauge.cli._progress import Progress
from nexagauge.cli._sink import ReportSink
from nexagauge.cli.main import (
    EXIT_FAIL_UNDER,
    EXIT_FAILURES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    load_cli_settings,
    parse_pairs,
)

log = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = "nexagauge-out"


def add_common_input_args(p: argparse.ArgumentParser) -> None:
    """``--input/--format/--limit/--field/--config``, shared by ``run`` and ``estimate``."""
    p.add_argument("target", metavar="NODE", help="target node (see `nexagauge nodes`), e.g. eval")
    p.add_argument("--input", "-i", required=True, metavar="PATH", help="JSON, JSONL or CSV file")
    p.add_argument(
        "--format",
        choices=("json", "jsonl", "csv", "tsv"),
        help="input format (default: by extension)",
    )
    p.add_argument("--limit", "-n", type=int, metavar="N", help="evaluate only the first N records")
    p.add_argument(
        "--field",
        action="append",
        metavar="LOGICAL=COLUMN",
        help="read a field from a custom column, e.g. --field output=model_answer (repeatable)",
    )
    p.add_argument(
        "--only", metavar="N1,N2", help="with target eval/report: only these metric nodes"
    )
    p.add_argument("--config", metavar="FILE", help="TOML settings file (default ./nexagauge.toml)")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate a dataset and write per-case reports and a summary",
        description="Evaluate a dataset offline: per-case JSON reports, a per-metric summary "
        "(JSON and CSV), errors.jsonl, and a table on the terminal.",
    )
    add_common_input_args(p)
    p.add_argument(
        "--output-dir", "-o", default=DEFAULT_OUTPUT_DIR, metavar="DIR", help="where reports go"
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the node cache")
    p.add_argument("--concurrency", "-c", type=int, metavar="N", help="cases evaluated at once")
    p.add_argument(
        "--fail-under",
        action="append",
        metavar="METRIC=BOUND",
        help="exit 3 when the metric's mean is below BOUND (repeatable), e.g. rougeL=0.4",
    )
    prog = p.add_mutually_exclusive_group()
    prog.add_argument("--progress", dest="progress", action="store_true", default=None)
    prog.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--json", action="store_true", help="print summary.json to stdout, no table")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the summary line")
    rep = p.add_mutually_exclusive_group()
    rep.add_argument(
        "--report", metavar="FILE", help="write the HTML report here (default DIR/report.html)"
    )
    rep.add_argument("--no-report", action="store_true", help="do not write the HTML report")
    p.add_argument(
        "--baseline", metavar="PREV_DIR", help="compare with an earlier run's output directory"
    )


def parse_field_map(items: list[str] | None) -> dict[str, str]:
    from nexagauge.schema.case import FIELD_ALIASES, KNOB_BLOCKS

    fm = parse_pairs(items, "--field")
    bad = sorted(set(fm) - set(FIELD_ALIASES) - set(KNOB_BLOCKS))
    if bad:
        known = ", ".join([*FIELD_ALIASES, *KNOB_BLOCKS])
        raise CliError(f"--field names unknown fields {bad}; known: {known}")
    return fm


def parse_bounds(items: list[str] | None) -> dict[str, float]:
    out = {}
    for k, v in parse_pairs(items, "--fail-under").items():
        try:
            out[k] = float(v)
        except ValueError:
            raise CliError(f"--fail-under {k}: {v!r} is not a number") from None
    return out


def parse_only(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise CliError("--only needs at least one node name")
    return names


def open_reader(args: argparse.Namespace, field_map: dict[str, str]) -> Any:
    from nexagauge.io.readers import ReaderError, RecordReader

    try:
        return RecordReader(args.input, args.format, limit=args.limit, field_map=field_map)
    except ReaderError as e:
        raise CliError(str(e)) from None


def make_plan(args: argparse.Namespace) -> Any:
    from nexagauge.graph.planner import PlanError, plan

    try:
        return plan(args.target, only=parse_only(args.only))
    except PlanError as e:
        raise CliError(str(e)) from None


def make_executor(rt: Any, plan_: Any, concurrency: int | None, field_map: dict[str, str]) -> Any:
    from nexagauge.graph.executor import Executor

    try:
        return Executor(rt, plan_, max_in_flight=concurrency, field_map=field_map)
    except ImportError as e:
        raise CliError(
            f"a node of this plan ({', '.join(plan_.nodes)}) is not available in this build: {e}"
        ) from None


def _prepare_output(out: Path) -> None:
    try:
        (out / "cases").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create output directory {str(out)!r}: {e}") from None
    # stale reports of a previous run in the same directory would mix with this run's
    for old in (out / "cases").glob("*.json"):
        old.unlink()


def check_bounds(rows: list[dict[str, Any]], bounds: dict[str, float]) -> list[dict[str, Any]]:
    """Evaluate ``--fail-under`` bounds against the summary rows (metric, node.metric or name)."""
    checks = []
    for key, bound in bounds.items():
        matches = [
            r
            for r in rows
            if key in (r["metric"], f"{r['node']}.{r['metric'].rsplit('.', 1)[-1]}")
            or key == r["metric"].rsplit(".", 1)[-1]
        ]
        if not matches:
            checks.append(
                {
                    "metric": key,
                    "bound": bound,
                    "mean": None,
                    "ok": False,
                    "why": "metric not in results",
                }
            )
            continue
        for r in matches:
            mean = r["mean"]
            if mean is None:
                checks.append(
                    {
                        "metric": r["metric"],
                        "bound": bound,
                        "mean": None,
                        "ok": False,
                        "why": "no scores",
                    }
                )
            else:
                checks.append(
                    {
                        "metric": r["metric"],
                        "bound": bound,
                        "mean": mean,
                        "ok": mean >= bound,
                        "why": None if mean >= bound else f"mean {mean:.4f} < {bound}",
                    }
                )
    return checks


def run(args: argparse.Namespace) -> int:
    field_map = parse_field_map(args.field)
    bounds = parse_bounds(args.fail_under)
    if args.concurrency is not None and args.concurrency < 1:
        raise CliError("--concurrency must be >= 1")
    settings = load_cli_settings(args, max_cases_in_flight=args.concurrency)
    check_report_args(args)
    plan_ = make_plan(args)
    reader = open_reader(args, field_map)
    return asyncio.run(_run(args, settings, plan_, reader, field_map, bounds))


async def _run(
    args: argparse.Namespace,
    settings: Any,
    plan_: Any,
    reader: Any,
    field_map: dict[str, str],
    bounds: dict[str, float],
) -> int:
    from nexagauge.cli._scrub import RunScrub
    from nexagauge.graph.runtime import NO_JUDGE, Runtime
    from nexagauge.io.readers import ReaderError

    rt = Runtime.create(settings, use_cache=False if args.no_cache else None)
    try:
        ex = make_executor(rt, plan_, args.concurrency, field_map)
        scrub = RunScrub(settings)  # run.scrub / run.scrub_pii: before any judge, cache, file
        scrub.announce(settings, rt.judge_kind)
        out = Path(args.output_dir)
        _prepare_output(out)
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        summary = SummaryBuilder(target=plan_.target, metric_nodes=plan_.metric_nodes)
        show = args.progress if args.progress is not None else sys.stderr.isatty()
        progress = Progress(
            sys.stderr,
            total=args.limit,
            fraction=(lambda: reader.bytes_read / reader.size) if reader.size else None,
            enabled=bool(show) and not args.json,
        )
        input_error: str | None = None
        interrupted = False
        # backslashreplace: an unpaired surrogate in a case id (valid JSON escaping, not
        # encodable) is written as its JSON escape "\\udXXX", so the line stays valid JSON
        with (out / "errors.jsonl").open(
            "w", encoding="utf-8", errors="backslashreplace"
        ) as errors:
            sink = ReportSink(out, errors, verbose=getattr(args, "verbose", 0) > 0)
            try:
                async for res in ex.run_records(scrub.records(reader, field_map, settings.rubrics)):
                    line = reader.pop_line(res.index)
                    if res.ok:
                        sink.case(res, line, plan_.target)
                    else:
                        sink.record_error(res, line)
                    summary.add(res)
                    progress.update(summary.records, summary.failed_records)
            except ReaderError as e:
                input_error = str(e)
                sink.error({"kind": "input", "reason": input_error})
            except Exception as e:  # a reader bug: still keep what was evaluated and the summary
                log.error("reading %s failed", args.input, exc_info=True)
                input_error = f"reading the input failed: {type(e).__name__}: {e}"
                sink.error({"kind": "input", "reason": input_error})
            except asyncio.CancelledError:  # Ctrl-C: keep what was evaluated, then stop
                interrupted = True
            finally:
                progress.close()
            if not summary.records and input_error is None and not interrupted and args.limit != 0:
                input_error = f"{args.input}: the input holds no records"
                sink.error({"kind": "input", "reason": input_error})
        duration = time.perf_counter() - t0
        rows = summary.metric_rows()
        checks = check_bounds(rows, bounds)
        breached = [c for c in checks if not c["ok"]]
        # a metric that could not be computed (score null + error) is reported, not a failure:
        # it is a property of the data (e.g. a one-word reference has no bigrams)
        failures = summary.failed_records + summary.node_errors
        if interrupted:
            status = EXIT_INTERRUPTED
        elif failures or input_error:
            status = EXIT_FAILURES
        elif breached:
            status = EXIT_FAIL_UNDER
        else:
            status = EXIT_OK
        cache = rt.cache
        doc = {
            "target": plan_.target,
            "nodes_planned": list(plan_.nodes),
            "input": str(args.input),
            "output_dir": str(out),
            "started_at": started.isoformat(),
            "duration_s": round(duration, 3),
            "judge": rt.judge_kind,
            "records": summary.records,
            "cases": summary.cases,
            "failed_records": summary.failed_records,
            "warnings": sink.warnings,
            "node_errors": summary.node_errors,
            "metric_errors": summary.metric_errors,
            "input_error": input_error,
            "interrupted": interrupted,
            "cost": summary.cost.model_dump(),
            "cache": None
            if cache is None
            else {
                "dir": str(cache.root) if cache.root is not None else None,  # None: in memory
                "hits": cache.hits,
                "misses": cache.misses,
            },
            "metrics": rows,
            "nodes": summary.node_rows(),
            "fail_under": checks,
            "exit_status": status,
        }
        write_json(out / "summary.json", doc)
        (out / "summary.csv").write_text(summary_csv(rows), encoding="utf-8")
    finally:
        await rt.aclose()
    # a report that cannot be written is an error on stderr; the results and the exit status
    # (already in summary.json) stand
    report = write_run_report(args, out, settings)

    line = (
        f"{summary.cases} cases, {summary.failed_records} failed records, "
        f"{summary.node_errors} node errors, {summary.metric_errors} metric errors, "
        f"cost ${summary.cost.cost:.4f}, {duration:.1f}s -> {out}"
    )
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        print(line, file=sys.stderr)
    else:
        if not args.quiet:
            _print_table(rows, summary, rt.judge_kind, NO_JUDGE)
        print(line)
    if input_error:
        print(f"nexagauge: input error: {input_error}", file=sys.stderr)
    sink.print_problems(summary.failed_records, out / "errors.jsonl")
    for c in breached:
        print(f"FAIL --fail-under {c['metric']}={c['bound']}: {c['why']}", file=sys.stderr)
    if interrupted:
        print(f"nexagauge: interrupted after {summary.records} records", file=sys.stderr)
    if report is not None and not args.quiet and not args.json:
        print(f"report: {report}")
    return status


def check_report_args(args: argparse.Namespace) -> None:
    """``--baseline`` must name a results directory (checked before anything is evaluated)."""
    base = getattr(args, "baseline", None)
    if base is not None and not (Path(base) / "summary.json").is_file():
        raise CliError(f"--baseline {base!r} is not an output directory of `nexagauge run`")
    if base is not None and getattr(args, "no_report", False):
        raise CliError("--baseline compares in the report: it cannot go with --no-report")


def write_run_report(args: argparse.Namespace, out: Path, settings: Any) -> Path | None:
    """The HTML report of this run (``--report FILE`` or ``DIR/report.html``); None when
    ``--no-report`` or when it could not be written (said on stderr: the results stand)."""
    from nexagauge.cli.report import write
    from nexagauge.report.render import REPORT_NAME

    if args.no_report:
        (out / REPORT_NAME).unlink(missing_ok=True)  # a stale report of an earlier run
        return None
    try:
        return write(out, args.report or out / REPORT_NAME, args.baseline, settings)
    except CliError as e:
        print(f"nexagauge: error: report not written: {e}", file=sys.stderr)
    except Exception as e:  # the results are written: a report bug must not hide them
        log.error("writing the report failed", exc_info=True)
        print(f"nexagauge: error: report not written: {type(e).__name__}: {e}", file=sys.stderr)
    return None


def _print_table(
    rows: list[dict[str, Any]], summary: SummaryBuilder, judge: Any, no_judge: str
) -> None:
    if not rows:
        print(f"(no metric nodes in the plan of {summary.target!r}: see the case reports)")
        return
    table = format_table(
        ["metric", "node", "n", "mean", "median", "pass", "errors", "skipped"],
        [
            [
                r["metric"],
                r["node"],
                r["count"],
                fmt(r["mean"]),
                fmt(r["median"]),
                "-" if r["pass_rate"] is None else f"{100 * r['pass_rate']:.0f}%",
                r["errors"],
                r["skipped"],
            ]
            for r in rows
        ],
    )
    print(table)
    notes = []
    for node in summary.metric_nodes:
        acc = summary.nodes.get(node)
        if acc is None or not acc.reasons:
            continue
        top = "; ".join(f"{why} ({n})" for why, n in acc.reasons.most_common(3))
        notes.append(f"  {node}: {top}")
    if notes:
        print("skipped/errored:")
        print("\n".join(notes))
    if judge is None and any(no_judge in (acc.reasons or {}) for acc in summary.nodes.values()):
        print(
            "  (judge nodes need a judge: set NEXAGAUGE_JUDGE_BASE_URL / OPENAI_API_KEY, "
            "or install the [embeddings] extra for the local judge)"
        )
