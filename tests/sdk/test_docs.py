"""docs/attributes.md is generated from conventions.py and lists every name; docs/sdk.md exists."""

from __future__ import annotations

import re
from pathlib import Path

import nexagauge
from nexagauge.sdk import _attrdoc
from nexagauge.sdk import conventions as C

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_attributes_page_is_up_to_date() -> None:
    committed = (DOCS / "attributes.md").read_text("utf-8")
    assert committed == _attrdoc.render(), (
        "docs/attributes.md is stale: run `python -m nexagauge.sdk._attrdoc --write`"
    )


def test_every_constant_is_documented_on_the_page() -> None:
    page = (DOCS / "attributes.md").read_text("utf-8")
    constants = {k: v for k, v in vars(C).items() if k.isupper() and isinstance(v, str)}
    documented = {e.constant for s in _attrdoc.parse() for e in s.entries}
    assert set(constants) == documented
    for name, value in constants.items():
        assert f"| `{value.replace('|', chr(92) + '|')}` | `{name}` |" in page


def test_names_follow_their_namespace() -> None:
    for section in _attrdoc.parse():
        for e in section.entries:
            if e.constant.startswith("NG_") and not e.constant.endswith("_SPAN_NAME"):
                assert e.value.startswith("nexagauge."), e.constant
            if e.constant.startswith("GEN_AI_"):
                assert e.value.startswith("gen_ai."), e.constant


def test_undocumented_constant_is_reported() -> None:
    src = "# == Section: s\n#: ok\nA: Final = 'a'\nB: Final = 'b'\n"
    try:
        _attrdoc.parse(src)
    except ValueError as exc:
        assert "B has no" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("undocumented constant accepted")


def test_sdk_page_documents_every_public_name() -> None:
    page = (DOCS / "sdk.md").read_text("utf-8")
    sdk_names = [n for n in nexagauge.__all__ if n not in nexagauge._LAZY and n != "__version__"]
    missing = [n for n in sdk_names if not re.search(rf"\b{re.escape(n)}\b", page)]
    assert not missing, f"docs/sdk.md does not mention {missing}"
