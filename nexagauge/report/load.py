"""Read a ``nexagauge run`` results directory into a :class:`~nexagauge.report.model.RunView`.

Reads ``summary.json`` (required), ``cases/*.json`` and ``errors.jsonl``; every JSON document is
scrubbed by the :class:`~nexagauge.report.redact.Redactor` as soon as it is parsed, so nothing
unscrubbed reaches the report. A case file that cannot be read becomes a :class:`Problem` naming
the file (the rest of the report is still built); a directory without ``summary.json`` is a
:class:`ReportError`.

Example:
    >>> import json, pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "summary.json").write_text(json.dumps({"target": "eval", "records": 0}))
    >>> load_run(d, Redactor()).target
    'eval'
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any

from nexagauge.report.agent import TASK_COMPLETION, agent_totals, agent_view, passage
from nexagauge.report.model import (
    CaseView,
    ClaimView,
    DetailView,
    MetricRow,
    NodeNote,
    Problem,
    Reason,
    RunView,
    ScoreView,
)
from nexagauge.report.record import RecordText, read_record
from nexagauge.report.redact import Redactor

#: the local judge's grounding reason names its best context sentence as a Python literal:
#: ``best context sentence (similarity 0.812): 'The tower is in Paris.'``
_PASSAGE = re.compile(
    r"best context sentence \(similarity [-+0-9.e]+\): (?P<q>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
)


class ReportError(Exception):
    """The directory is not a results directory of ``nexagauge run`` (or cannot be read)."""


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8", errors="surrogateescape"))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


#: how a summary value is read into a view field, by the field's annotation: a wrong type reads
#: as missing (0, None, False), never as an error
_READ_AS: dict[str, Callable[[Any], Any]] = {
    "int": _int,
    "float | None": _num,
    "str | None": _str,
    "str": str,
    "bool": lambda v: v is True,
}


def _read_fields(
    view: Any, doc: dict[str, Any], names: Iterable[str], keys: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The fields ``names`` of dataclass ``view`` read from ``doc`` by their annotation
    (:data:`_READ_AS`), each under its own name unless ``keys`` maps it to another key.

    Example:
        >>> _read_fields(MetricRow, {"count": "3", "mean": 0.5}, ["count", "mean"])
        {'count': 0, 'mean': 0.5}
    """
    types = {f.name: f.type for f in fields(view)}
    keys = keys or {}
    return {n: _READ_AS[str(types[n])](doc.get(keys.get(n, n))) for n in names}


def passage_of(reason: str | None) -> str | None:
    """The context passage a judge's reason names as evidence, if it names one.

    Example:
        >>> passage_of("score -0.40; best context sentence (similarity 0.812): 'It is in Paris.'")
        'It is in Paris.'
        >>> passage_of("the claim is supported") is None
        True
    """
    if not reason:
        return None
    m = _PASSAGE.search(reason)
    if m is None:
        return None
    try:
        value = ast.literal_eval(m.group("q"))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _claim(entry: dict[str, Any], record: RecordText) -> ClaimView:
    """A judged claim; its passage is the document its source names (any judge), else the
    sentence the local judge's reason quotes."""
    item = _dict(entry.get("item"))
    reason = _str(entry.get("reason"))
    source = _str(entry.get("source"))
    return ClaimView(
        text=_str(item.get("text")) or "",
        verdict=_str(entry.get("verdict")) or "",
        label=_str(entry.get("label")),
        raw_score=_num(entry.get("raw_score")),
        reason=reason,
        passage=passage(record, source, _str(item.get("text")) or "") or passage_of(reason),
        source=source,
        source_index=record.source_index(source),
    )


def _verdict_line(entry: dict[str, Any]) -> str:
    """A rubric verdict (redteam, geval) as one line: verdict, violations, quoted evidence."""
    parts = [str(entry.get("verdict"))]
    violations = [str(v) for v in entry.get("violations") or [] if v]
    if violations:
        parts.append("violations: " + "; ".join(violations))
    spans = entry.get("evidence_spans") or []
    quotes = [f"{s.get('field')}: {s.get('text')!s}" for s in spans if isinstance(s, dict)]
    if quotes:
        parts.append("evidence: " + " | ".join(quotes))
    return " — ".join(parts)


def _details(nodes: Any, record: RecordText) -> list[DetailView]:
    out: list[DetailView] = []
    if not isinstance(nodes, dict):
        return out
    for node, rep in nodes.items():
        if node == TASK_COMPLETION:  # shown with the agent run (agent.py)
            continue
        output = rep.get("output") if isinstance(rep, dict) else None
        metrics = output.get("metrics") if isinstance(output, dict) else None
        for m in metrics if isinstance(metrics, list) else []:
            if not isinstance(m, dict):
                continue
            claims: list[ClaimView] = []
            lines: list[str] = []
            reasoning: str | None = None
            for entry in m.get("result") or []:
                if not isinstance(entry, dict):
                    continue
                if "reasoning" in entry and len(entry) == 1:
                    reasoning = _str(entry["reasoning"])
                elif isinstance(entry.get("item"), dict) and "verdict" in entry:
                    claims.append(_claim(entry, record))
                elif "verdict" in entry:
                    lines.append(_verdict_line(entry))
            if claims or lines or reasoning:
                out.append(
                    DetailView(
                        metric=str(m.get("name") or node),
                        node=str(node),
                        score=_num(m.get("score")),
                        claims=tuple(claims),
                        lines=tuple(lines),
                        reasoning=reasoning,
                    )
                )
    return out


def _meta_model(nodes: Any) -> str | None:
    """The judge model a metric names in its ``meta`` (the LLM judge's case files carry no
    ``judge_model``; its metrics do)."""
    for rep in _dict(nodes).values():
        for m in _dict(_dict(rep).get("output")).get("metrics") or []:
            model = _str(_dict(_dict(m).get("meta")).get("model"))
            if model:
                return model
    return None


def _when(iso: str | None) -> str | None:
    """``2026-11-28T16:42:27.285800+00:00`` -> ``2026-11-28 16:42:27 UTC`` (as is if not ISO)."""
    if iso is None:
        return None
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if t.utcoffset() is not None:
        return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _case(doc: dict[str, Any], key: str) -> CaseView:
    scores = _dict(doc.get("scores"))
    passed = _dict(doc.get("passed"))
    errors = _dict(doc.get("errors"))
    outcomes = _dict(doc.get("outcomes"))
    notes = [
        NodeNote(node=str(n), status=str(o.get("status")), reason=str(o.get("reason") or ""))
        for n, o in outcomes.items()
        if isinstance(o, dict) and o.get("status") in ("skipped", "error")
    ]
    cost = _dict(doc.get("cost"))
    record = read_record(doc)
    return CaseView(
        key=key,
        case_id=str(doc.get("case_id")),
        index=doc.get("index") if isinstance(doc.get("index"), int) else None,
        line=doc.get("line") if isinstance(doc.get("line"), int) else None,
        record=record,
        scores=tuple(
            ScoreView(
                name=str(name),
                score=_num(score),
                passed=passed.get(name) if isinstance(passed.get(name), bool) else None,
                error=_str(errors.get(name)),
            )
            for name, score in scores.items()
        ),
        details=tuple(_details(doc.get("nodes"), record)),
        notes=tuple(notes),
        warnings=tuple(str(w) for w in doc.get("warnings") or []),
        judge_model=_str(doc.get("judge_model")) or _meta_model(doc.get("nodes")),
        cost=_num(cost.get("cost")) or 0.0,
        agent=agent_view(doc, record),
    )


def _problem(obj: Any) -> Problem:
    if not isinstance(obj, dict):
        return Problem(kind="unreadable", reason=f"not a JSON object: {obj!r}"[:500])
    line, index = obj.get("line"), obj.get("index")
    return Problem(
        kind=str(obj.get("kind") or "unknown"),
        reason=str(obj.get("reason") or ""),
        line=line if isinstance(line, int) else None,
        index=index if isinstance(index, int) else None,
        case_id=_str(obj.get("case_id")),
        field=_str(obj.get("field")),
        node=_str(obj.get("node")),
    )


def _problems(path: Path, redactor: Redactor) -> list[Problem]:
    if not path.exists():
        return []
    out = []
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            obj = {"kind": "unreadable", "reason": f"errors.jsonl line {n}: {e}"}
        out.append(_problem(redactor.data(obj)))
    return out


def _cases(root: Path, redactor: Redactor) -> tuple[list[CaseView], list[Problem]]:
    docs: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in sorted((root / "cases").glob("*.json")):
        try:
            doc = _read_json(path)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            reason = f"cases/{path.name}: cannot be read: {e}"
            problems.append(Problem(kind="case file", reason=redactor.text(reason)))
            continue
        docs.append(redactor.data(doc))
    docs.sort(key=lambda d: (not isinstance(d.get("index"), int), d.get("index") or 0))
    seen: Counter[str] = Counter()
    cases = []
    for doc in docs:
        cid = str(doc.get("case_id"))
        cases.append(_case(doc, f"{cid}#{seen[cid]}"))
        seen[cid] += 1
    return cases, problems


def _metric(row: dict[str, Any]) -> MetricRow:
    return MetricRow(**_read_fields(MetricRow, row, [f.name for f in fields(MetricRow)]))


#: the run totals of ``summary.json`` read as they are; ``_TOTAL_KEYS``: field -> key where they differ
_TOTALS = (
    "duration_s",
    "judge",
    "records",
    "cases_count",
    "failed_records",
    "warnings",
    "node_errors",
    "metric_errors",
    "input_error",
    "interrupted",
)
_TOTAL_KEYS = {"cases_count": "cases"}


def load_run(directory: str | Path, redactor: Redactor) -> RunView:
    """The run in ``directory`` (see the module docstring)."""
    root = Path(directory)
    summary_path = root / "summary.json"
    if not summary_path.is_file():
        raise ReportError(f"{str(root)!r} is not a results directory of `nexagauge run`: "
                          "it has no summary.json")  # fmt: skip
    try:
        summary = _read_json(summary_path)
    except (OSError, ValueError) as e:
        raise ReportError(f"{summary_path}: cannot be read: {e}") from None
    if not isinstance(summary, dict):
        raise ReportError(f"{summary_path}: not a JSON object")
    s = redactor.data(summary)
    cases, unreadable = _cases(root, redactor)
    nodes = _dict(s.get("nodes"))
    reasons = [
        Reason(node=str(node), reason=str(why), count=_int(n))
        for node, acc in nodes.items()
        if isinstance(acc, dict) and isinstance(acc.get("reasons"), dict)
        for why, n in acc["reasons"].items()
    ]
    cost = _dict(s.get("cost"))
    metrics = s.get("metrics") if isinstance(s.get("metrics"), list) else []
    models = sorted({c.judge_model for c in cases if c.judge_model})
    return RunView(
        name=redactor.text(root.resolve().name),
        target=str(s.get("target") or ""),
        # the file name only: a full path can name a user's home or a CI workspace
        input_name=PurePath(str(s.get("input") or "")).name,
        started_at=_when(_str(s.get("started_at"))),
        judge_models=tuple(models),
        **_read_fields(RunView, s, _TOTALS, _TOTAL_KEYS),
        cost=_num(cost.get("cost")) or 0.0,
        input_tokens=_num(cost.get("input_tokens")) or 0.0,
        output_tokens=_num(cost.get("output_tokens")) or 0.0,
        metrics=tuple(_metric(r) for r in metrics if isinstance(r, dict)),
        reasons=tuple(sorted(reasons, key=lambda r: (-r.count, r.node, r.reason))),
        cases=tuple(cases),
        problems=tuple([*_problems(root / "errors.jsonl", redactor), *unreadable]),
        agents=agent_totals(c.agent for c in cases),
    )
