"""Fixtures of the agent-signal tests (issue 30 items 3, 5, 7): agent runs built by hand (the
extraction that fills ``EvalCase.agent`` from traces is tested in ``tests/agents``)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)
