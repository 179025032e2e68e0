"""The examples in the emit modules' docstrings run and stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "target",
    "prometheus",
    "labels",
    "view",
    "spans",
    "events",
    "zero",
    "dedupe",
    "emitter",
    "http",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    mod = importlib.import_module(f"nexagauge.emit.{name}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0, f"nexagauge.emit.{name} has no examples"
    assert res.failed == 0
