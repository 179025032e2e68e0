"""Every docstring example in the package runs and stays true (examples are documentation)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import nexagauge

#: modules whose import has side effects a test must not trigger (none today)
SKIP: frozenset[str] = frozenset()


def _modules() -> list[str]:
    names = [
        m.name
        for m in pkgutil.walk_packages(nexagauge.__path__, prefix="nexagauge.")
        if m.name not in SKIP
    ]
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0, f"{res.failed} docstring example(s) of {name} failed"


def test_every_public_name_documents_an_example() -> None:
    """Public API = ``nexagauge.__all__``; each carries a short example (run above when it is a
    doctest, or an ``Example::`` block where running it needs an app or a Kafka cluster)."""
    missing = [
        name
        for name in nexagauge.__all__
        if name != "__version__" and "Example" not in (getattr(nexagauge, name).__doc__ or "")
    ]
    assert not missing, f"public names without an example in their docstring: {missing}"
