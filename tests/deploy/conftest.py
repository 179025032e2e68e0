"""Fixtures of the deploy tests (collector, docker-compose, dashboards, alert rules).

External binaries (``promtool``, ``prometheus``, ``docker-compose``; Debian packages
``prometheus`` and ``docker-compose``) are required in CI: a test that needs a missing one fails
with the install command when ``CI`` is set and is skipped otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)

from support.prometheus import REPO, require_binary  # noqa: E402


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_binary("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return require_binary("prometheus")
