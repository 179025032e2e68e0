r"""Where ``nexagauge run`` puts each result as it streams in: case files, errors.jsonl, terminal.

One case report per good record (``cases/<name>.json``, with the scrubbed ``record`` block:
question, answer, context, metadata); one errors.jsonl line per bad record,
node error, warning and input error; and the list of bad records and warnings printed on stderr
at the end, each named like errors.jsonl names it (line, record index, case id, field, reason).

Example:
    >>> import io, pathlib, tempfile
    >>> sink = ReportSink(pathlib.Path(tempfile.mkdtemp()), io.StringIO())
    >>> sink.error({"kind": "input", "reason": "no records"})
    >>> sink.errors.getvalue()
    '{"kind": "input", "reason": "no records"}\n'
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from nexagauge.cli._output import safe_filename, write_json
from nexagauge.report.record import KEY as RECORD_KEY
from nexagauge.report.record import record_block

#: bad records and warnings listed on the terminal without ``-v`` (all are in errors.jsonl)
SHOWN_PROBLEMS = 20


@dataclass
class ReportSink:
    """Writes case reports and errors as results stream in; keeps the terminal's list of problems.

    ``shown`` holds the first :data:`SHOWN_PROBLEMS` bad records and warnings (every one with
    ``verbose``), ``hidden`` counts the rest: the terminal names each bad record like errors.jsonl
    does, without keeping a line per record of a huge run in memory.
    """

    out: Path
    errors: TextIO
    verbose: bool = False
    used_names: set[str] = field(default_factory=set)
    files: int = 0
    warnings: int = 0
    shown: list[str] = field(default_factory=list)
    hidden: int = 0

    def _show(self, text: str) -> None:
        if self.verbose or len(self.shown) < SHOWN_PROBLEMS:
            self.shown.append(text)
        else:
            self.hidden += 1

    def case(self, res: Any, line: int | None, target: str) -> None:
        report = res.report
        ok_report = res.outcomes.get("report")
        if ok_report is not None and ok_report.status == "ok" and report is not None:
            doc: dict[str, Any] = report.model_dump(mode="json")
        else:
            doc = {"case_id": res.case_id, "target": target}
        doc["index"] = res.index
        doc["line"] = line
        if res.case is not None:  # what was evaluated (question, answer, context), scrubbed
            doc[RECORD_KEY] = record_block(res.case)
        warnings = list(res.case.warnings) if res.case is not None else []
        if warnings:
            doc["warnings"] = warnings
        for text in warnings:
            self.warnings += 1
            self._show(f"warning: {_where(res.index, line, res.case_id)}: {text}")
            self.error(
                {
                    "kind": "warning",
                    "index": res.index,
                    "line": line,
                    "case_id": res.case_id,
                    "reason": text,
                }
            )
        doc["outcomes"] = {
            name: {
                "status": o.status,
                "reason": o.reason,
                "cached": o.cached,
                "elapsed_s": round(o.elapsed_s, 6),
                **(
                    {"original_cost": o.original_cost.model_dump()}
                    if o.original_cost is not None
                    else {}
                ),
            }
            for name, o in res.outcomes.items()
        }
        name = safe_filename(str(res.case_id), res.index, self.used_names)
        doc["file"] = f"cases/{name}.json"
        write_json(self.out / "cases" / f"{name}.json", doc)
        self.files += 1
        for node, o in res.outcomes.items():
            if o.status == "error":
                self.error(
                    {
                        "kind": "node",
                        "index": res.index,
                        "line": line,
                        "case_id": res.case_id,
                        "node": node,
                        "reason": o.reason,
                    }
                )

    def record_error(self, res: Any, line: int | None) -> None:
        self._show(f"line {line}: {res.error}" if line is not None else str(res.error))
        self.error(
            {
                "kind": "record",
                "index": res.index,
                "line": line,
                "case_id": res.case_id,
                "field": res.error_field,
                "reason": res.error,
            }
        )

    def error(self, obj: dict[str, Any]) -> None:
        self.errors.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.errors.flush()

    def print_problems(self, failed: int, errors_path: Path) -> None:
        """Name every bad record (and warning) on stderr, as errors.jsonl does."""
        if failed:
            print(
                f"nexagauge: {failed} record(s) could not be evaluated (all in {errors_path}):",
                file=sys.stderr,
            )
        elif self.warnings:
            print(f"nexagauge: {self.warnings} warning(s) (all in {errors_path}):", file=sys.stderr)
        for text in self.shown:
            print(f"  {text}", file=sys.stderr)
        if self.hidden:
            print(f"  ... and {self.hidden} more (-v lists them all)", file=sys.stderr)


def _where(index: int, line: int | None, case_id: str | None) -> str:
    where = f"record {index}"
    if case_id:
        where += f" (case_id={case_id!r})"
    return f"line {line}: {where}" if line is not None else where
