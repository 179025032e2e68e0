"""Generate ``docs/attributes.md`` from :mod:`nexagauge.sdk.conventions` (its ``#:`` comments).

The docs page is generated, never hand-edited, so it cannot drift from the names the code uses;
``tests/sdk/test_docs.py`` fails when the committed page differs from :func:`render`.

Regenerate::

    python -m nexagauge.sdk._attrdoc --write
"""

from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from nexagauge.sdk import conventions

_SECTION = re.compile(r"^# == Section: (?P<title>.+?)\s*$")
_DOC = re.compile(r"^#:\s?(?P<text>.*)$")
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "attributes.md"


@dataclass
class Entry:
    constant: str
    value: str
    doc: str


@dataclass
class Section:
    title: str
    entries: list[Entry] = field(default_factory=list)


def parse(source: str | None = None) -> list[Section]:
    """Sections and documented constants of ``conventions.py``, in source order.

    Raises ``ValueError`` naming the constant when one has no ``#:`` comment or lies outside a
    section (both would leave a name undocumented).
    """
    text = source if source is not None else Path(conventions.__file__).read_text("utf-8")
    lines = text.splitlines()
    assigns: dict[int, tuple[str, str]] = {}
    for node in ast.parse(text).body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            assigns[node.lineno] = (node.target.id, node.value.value)
    sections: list[Section] = []
    pending: list[str] = []
    for lineno, line in enumerate(lines, start=1):
        m = _SECTION.match(line)
        if m:
            sections.append(Section(m.group("title")))
            pending = []
            continue
        d = _DOC.match(line)
        if d:
            pending.append(d.group("text").strip())
            continue
        if lineno in assigns:
            name, value = assigns[lineno]
            if not sections:
                raise ValueError(f"{name} is defined before any '# == Section:' line")
            if not pending:
                raise ValueError(f"{name} has no '#:' documentation comment")
            sections[-1].entries.append(Entry(name, value, " ".join(pending)))
            pending = []
        elif line.strip() and not line.startswith("#"):
            pending = []
    return sections


def render() -> str:
    """The markdown page listing every name (generated; see module docstring)."""
    out = [
        "# Attribute and event names",
        "",
        "<!-- Generated from nexagauge/sdk/conventions.py by "
        "`python -m nexagauge.sdk._attrdoc --write`; do not edit by hand. -->",
        "",
        "Every span attribute, event and value name nexa-gauge writes or reads. The single source is",
        "`nexagauge/sdk/conventions.py` (import the constant, never type the name). Names ending in",
        "`.` are prefixes (`prefix + suffix`); `{...}` marks a format placeholder.",
        "",
        "What the SDK writes on a `@nexagauge.trace` span: `gen_ai.operation.name`,",
        "`gen_ai.workflow.name`, `nexagauge.sdk.version`, `gen_ai.input.messages`,",
        "`gen_ai.output.messages`, `gen_ai.retrieval.documents`, `gen_ai.conversation.id`,",
        "`nexagauge.user.id`, `nexagauge.eval.*`, `nexagauge.turn.end`, the stream attributes, and",
        "`nexagauge.scrubbed` / `nexagauge.truncated` / `nexagauge.original_length.*` when a value",
        "was altered. JSON-valued attributes are compact JSON strings.",
        "",
    ]
    for section in parse():
        out += [f"## {section.title}", "", "| Name | Constant | Meaning |", "| --- | --- | --- |"]
        for e in section.entries:
            value = e.value.replace("|", "\\|")
            doc = e.doc.replace("|", "\\|")
            out.append(f"| `{value}` | `{e.constant}` | {doc} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="render docs/attributes.md")
    parser.add_argument("--write", action="store_true", help=f"write {DOC_PATH}")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        DOC_PATH.write_text(page, encoding="utf-8")
    else:
        print(page, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
