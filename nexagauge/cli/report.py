"""render the HTML report of a results directory of `nexagauge run`

Render one self-contained HTML file (summary, charts, cases with claims, bad records, and a
comparison with --baseline) from a results directory.

``nexagauge report RESULTS_DIR -o FILE``: the single-file HTML report of a results directory.

Renders what ``nexagauge run`` wrote (``summary.json``, ``cases/``, ``errors.jsonl``) into one
self-contained HTML file (no request of any kind when opened; see
:mod:`nexagauge.report.render`). ``--baseline PREV_DIR`` adds the comparison with an earlier
run. Every text is scrubbed with the SDK's secret rules and the configured secrets (judge and
embedding API keys, the Kafka password) are replaced wherever they occur; ``--pii`` also scrubs
personal data. ``nexagauge run`` writes the same report itself (``--report``, or
``report.html`` in its output directory unless ``--no-report``).

Exit status: 0 written; 2 not a results directory, or the file cannot be written.

Example:
    nexagauge report nexagauge-out -o report.html --baseline last-week-out
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nexagauge.cli.main import EXIT_OK, CliError, add_command, load_cli_settings


def add_parser(sub: Any) -> None:
    p = add_command(sub, "report", __doc__)
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="output directory of `nexagauge run`")
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="HTML file to write (default RESULTS_DIR/report.html)",
    )
    p.add_argument(
        "--baseline", metavar="PREV_DIR", help="results directory of an earlier run to compare with"
    )
    p.add_argument(
        "--pii", action="store_true", help="also scrub personal data (default: run.scrub_pii)"
    )
    p.add_argument("--config", metavar="FILE", help="TOML settings file (its secrets are scrubbed)")


def configured_secrets(settings: Any) -> list[str]:
    """The configured secrets a report must never show (see :func:`settings_secrets`)."""
    from nexagauge.report.redact import settings_secrets

    return settings_secrets(settings)


def write(
    results_dir: str | Path,
    output: str | Path,
    baseline: str | Path | None,
    settings: Any,
    pii: bool = False,
) -> Path:
    """Write the report; a :class:`ReportError` becomes a :class:`CliError` (exit status 2).
    Personal data is scrubbed with ``pii`` or when the run scrubs it (``run.scrub_pii``)."""
    from nexagauge.report.load import ReportError
    from nexagauge.report.render import write_report

    try:
        return write_report(
            results_dir,
            output,
            baseline=baseline,
            literals=configured_secrets(settings),
            pii=pii or settings.run.scrub_pii,
        )
    except ReportError as e:
        raise CliError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    from nexagauge.report.render import REPORT_NAME

    settings = load_cli_settings(args)
    output = args.output or Path(args.results_dir) / REPORT_NAME
    path = write(args.results_dir, output, args.baseline, settings, pii=args.pii)
    print(f"report: {path}")
    return EXIT_OK
