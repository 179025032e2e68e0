"""Fixtures of the online evaluator tests (support modules live in tests/support)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).resolve().parents[1]
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))


@pytest.fixture
def broker(kafka_broker: Any) -> Any:
    """The session's Tansu broker (``tests/conftest.py``); each test takes fresh topic and group
    names (``kafka_helpers.topics``). Tests that stop or restart a broker start their own."""
    return kafka_broker
