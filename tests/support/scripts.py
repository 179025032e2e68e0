"""Import a script that is not in a package (``bench/*.py``, a data set's ``build.py``) by path,
or a module of a package under ``bench/`` (``bench/local_judge/``) by its name.

Tests use the benchmarks' and builders' helpers directly (``prepare``, the folds, the parser).
The module is registered under ``name`` in ``sys.modules`` (dataclasses and pickling need it), and
the script's directory goes on ``sys.path`` so its own sibling imports resolve.

Example:
    >>> builder = load_script("build_local_judge_sets", ROOT / "tests/data/build_local_judge_sets.py")
    >>> lja = bench_module("local_judge.accuracy")
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_script(name: str, path: Path) -> ModuleType:
    """The module of the script at ``path``, executed once under ``name``."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def bench_module(name: str) -> ModuleType:
    """The module ``name`` of a package under ``bench/`` (``"local_judge.eval"``), imported once:
    the same module object its sibling scripts import, so their dataclasses are one class."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)
