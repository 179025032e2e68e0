"""The case fingerprint and the upstream digests of cache keys are computed once (issue 33):
the fingerprint is a JSON dump of the whole case, asked for by every cacheable node's key."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nexagauge.graph import executor as ex_mod
from nexagauge.graph.executor import Executor
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import Runtime
from nexagauge.schema.case import EvalCase, parse_record
from nexagauge.settings import Settings


def test_fingerprint_is_memoized_and_forgotten_by_a_changed_copy() -> None:
    case = parse_record({"input": "Q?", "output": "A.", "context": ["D."]})
    fp = case.fingerprint()
    assert case.fingerprint() is fp
    changed = case.model_copy(update={"output": "B."})
    assert changed.fingerprint() != fp
    assert changed.fingerprint() == EvalCase.model_validate(changed.model_dump()).fingerprint()
    assert case.model_copy().fingerprint() == fp
    # equality, dumps and validation see only the fields
    twin = parse_record({"input": "Q?", "output": "A.", "context": ["D."]})
    assert twin == case and "_fingerprint" not in case.model_dump()
    assert EvalCase.model_validate_json(case.model_dump_json()) == case


def test_each_upstream_output_is_digested_once_per_case(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    calls: list[str] = []
    real = ex_mod._digest

    def counted(model: Any) -> str:
        calls.append(type(model).__name__)
        return real(model)

    monkeypatch.setattr(ex_mod, "_digest", counted)
    s = Settings(judge={"mode": "none"}, cache={"dir": str(tmp_path)})
    rt = Runtime.create(s)
    ex = Executor(rt, plan("eval", only=["refmatch", "relevance", "grounding"]))
    case = parse_record(
        {
            "input": "Where is Paris?",
            "output": "Paris is in France.",
            "reference": "France.",
            "context": ["Paris is the capital of France."],
        }
    )
    asyncio.run(ex.run_case(case))
    assert calls and len(calls) == len(set(calls)), calls
