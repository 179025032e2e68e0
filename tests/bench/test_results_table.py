"""bench/README.md's combined table is bench/results/results.md's, row for row (two places that
report the same figures must agree)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rows(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.startswith("|")]


def test_the_readme_combined_table_is_the_committed_results_table() -> None:
    readme = (ROOT / "bench" / "README.md").read_text("utf-8")
    head = "### Combined table (`bench/results/results.md`)"
    assert head in readme
    after = readme.split(head, 1)[1]
    table: list[str] = []
    for line in after.strip("\n").splitlines():
        if not line.startswith("|"):
            break
        table.append(line.rstrip())
    results = _rows((ROOT / "bench" / "results" / "results.md").read_text("utf-8"))
    assert table == results
