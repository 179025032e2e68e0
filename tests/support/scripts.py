"""Import a script that is not in a package (``bench/*.py``, a data set's ``build.py``) by path.

Tests use the benchmarks' and builders' helpers directly (``prepare``, the folds, the parser).
The module is registered under ``name`` in ``sys.modules`` (dataclasses and pickling need it), and
the script's directory goes on ``sys.path`` so its own sibling imports resolve.

Example:
    >>> bench = load_script("local_judge_accuracy", ROOT / "bench" / "local_judge_accuracy.py")
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


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
