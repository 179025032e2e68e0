"""Every skip is visible: each metric a case did not get carries a bounded reason code and its
text on the evaluation span and in ``nexagauge_skipped_total{reason, node}``; the codes are the
one set of :mod:`nexagauge.graph.skips`.

Real parts: the executor over the bundled topology and real nodes (no judge, the local judge,
disabled blocks), the real emitter, an in-memory span exporter and a fresh Prometheus registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nexagauge.emit.emitter import Emitter
from nexagauge.emit.prometheus import EvaluatorMetrics
from nexagauge.emit.spans import EvaluationSpanWriter
from nexagauge.graph.executor import CaseResult, evaluate
from nexagauge.graph.runtime import NO_JUDGE, Runtime
from nexagauge.graph.skips import (
    DESCRIPTIONS,
    EVALUATION_SKIPS,
    METRIC_SKIPS,
    SkipReason,
    skip_code,
)
from nexagauge.graph.topology import load_topology
from nexagauge.judge.base import NEEDS_LLM
from nexagauge.settings import EmitSettings, Settings

from .conftest import target

GEVAL = {"metrics": [{"name": "helpful", "criteria": "Is it helpful?"}]}
CONVERSATION = [{"input": "hi", "output": "hello"}, {"input": "where?", "output": "Paris."}]


async def run(record: dict[str, Any], judge: str, only: list[str] | None = None) -> CaseResult:
    s = Settings(judge={"mode": judge}, cache={"enabled": False})
    rt = Runtime.create(s, use_cache=False)
    try:
        (res,) = await evaluate([record], "eval", runtime=rt, only=only)
    finally:
        await rt.aclose()
    return res


def skips(res: CaseResult) -> dict[str, SkipReason | None]:
    metric_nodes = set(load_topology().metric_nodes)
    return {
        n: o.skip for n, o in res.outcomes.items() if n in metric_nodes and o.status == "skipped"
    }


async def test_no_judge_and_missing_fields() -> None:
    res = await run({"input": "Where is Paris?", "output": "Paris is in France."}, "none")
    assert skips(res) == {
        "relevance": SkipReason.NO_JUDGE,
        "grounding": SkipReason.NOT_ELIGIBLE,  # no context
        "redteam": SkipReason.NO_JUDGE,
        "geval": SkipReason.NOT_ELIGIBLE,
        "refmatch": SkipReason.NOT_ELIGIBLE,
        "refalign": SkipReason.NOT_ELIGIBLE,
        "conversation_relevance": SkipReason.NOT_ELIGIBLE,
        "agent_signals": SkipReason.NOT_ELIGIBLE,  # no agent run
        "task_completion": SkipReason.NOT_ELIGIBLE,  # no agent run
    }
    assert res.outcomes["grounding"].reason == "not eligible: no context"


async def test_local_judge_cannot_run_llm_metrics() -> None:
    record = {"output": "Paris.", "geval": GEVAL, "conversation": CONVERSATION}
    res = await run(record, "local", only=["redteam", "geval", "conversation_relevance"])
    assert (
        skips(res)
        == {
            "redteam": SkipReason.JUDGE_UNSUPPORTED,
            "geval": SkipReason.JUDGE_UNSUPPORTED,  # its prerequisite geval_steps was skipped: root cause
            "conversation_relevance": SkipReason.JUDGE_UNSUPPORTED,
        }
    )
    assert res.outcomes["geval"].reason == f"geval_steps skipped: {NEEDS_LLM}"


async def test_disabled_blocks() -> None:
    record = {
        "input": "q",
        "output": "Paris.",
        "reference": "Paris.",
        "relevance": False,
        "redteam": {"enabled": False},
        "refalign": False,
    }
    res = await run(record, "none", only=["relevance", "redteam", "refalign", "refmatch"])
    assert skips(res) == {
        "relevance": SkipReason.DISABLED,
        "redteam": SkipReason.DISABLED,
        "refalign": SkipReason.DISABLED,
    }


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (NO_JUDGE, SkipReason.NO_JUDGE),
        (NEEDS_LLM, SkipReason.JUDGE_UNSUPPORTED),
        ("not eligible: no context, reference", SkipReason.NOT_ELIGIBLE),
        ("no input", SkipReason.NOT_ELIGIBLE),
        ("no geval block", SkipReason.NOT_ELIGIBLE),
        ("no claims", SkipReason.NOTHING_TO_JUDGE),
        ("no claims in the output", SkipReason.NOTHING_TO_JUDGE),
        (
            "no redteam rubrics (replace_defaults with no custom rubrics)",
            SkipReason.NOTHING_TO_JUDGE,
        ),
        ("relevance disabled in the record", SkipReason.DISABLED),
        ("conversation_relevance disabled", SkipReason.DISABLED),
        ("not needed for this case (grounding: no context)", SkipReason.NOT_NEEDED),
        ("claims failed: TimeoutError: judge", SkipReason.PREREQUISITE_FAILED),
        ("claims skipped: not needed for this case (x)", SkipReason.NOT_NEEDED),
        ("rate_limit", SkipReason.RATE_LIMIT),
        ("budget_day", SkipReason.BUDGET_DAY),
        ("duplicate_turn", SkipReason.DUPLICATE_TURN),
        ("a reason nobody wrote down", SkipReason.OTHER),
    ],
)
def test_skip_code_of_every_known_text(text: str, code: SkipReason) -> None:
    assert skip_code(text) is code


def test_the_set_is_partitioned_and_described() -> None:
    assert set(METRIC_SKIPS) | set(EVALUATION_SKIPS) | {SkipReason.OTHER} == set(SkipReason)
    assert not set(METRIC_SKIPS) & set(EVALUATION_SKIPS)
    assert set(DESCRIPTIONS) == set(SkipReason)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "emit.md").read_text("utf-8")
    for code, text in DESCRIPTIONS.items():
        assert f"| `{code.value}` |" in docs and text in docs, f"docs/emit.md lacks {code}"


async def test_skips_on_the_span_and_in_prometheus() -> None:
    res = await run({"input": "Where is Paris?", "output": "Paris is in France."}, "none")
    m = EvaluatorMetrics(CollectorRegistry())
    em = Emitter(m, EvaluationSpanWriter.in_memory(), EmitSettings(dedupe_journal=False))
    try:
        await em.emit(target(), res)
        (span,) = em.spans.memory.get_finished_spans()
        attrs = dict(span.attributes or {})
        expected = skips(res)
        for node, code in expected.items():
            assert code is not None
            assert attrs[f"nexagauge.evaluation.skipped.{node}"] == code.value
            assert attrs[f"nexagauge.evaluation.skip_reason.{node}"] == res.outcomes[node].reason
            assert (
                m.registry.get_sample_value(
                    "nexagauge_skipped_total", {"reason": code.value, "node": node}
                )
                == 1.0
            )
        on_span = {k for k in attrs if k.startswith("nexagauge.evaluation.skipped.")}
        assert len(on_span) == len(expected)
    finally:
        await em.aclose()
