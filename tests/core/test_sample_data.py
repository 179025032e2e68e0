"""The bundled sample exercises every branch of the activation matrix (and stays that way)."""

from __future__ import annotations

import json

from nexagauge.graph.topology import load_topology
from nexagauge.io import iter_records
from nexagauge.schema.case import FIELD_ALIASES, RecordError, ScoringMode, parse_record

from .conftest import SAMPLE, SAMPLE_BAD

RAW = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
CASES = [parse_record(r, i) for i, r in enumerate(RAW)]


def test_sample_is_valid_and_large_enough() -> None:
    assert len(CASES) >= 20
    assert len({c.case_id for c in CASES}) == len(CASES)


def test_every_node_is_eligible_for_some_case_and_ineligible_for_another() -> None:
    topo = load_topology()
    for name, spec in topo.nodes.items():
        if not spec.fields:
            continue
        eligible = [c for c in CASES if all(c.has(f) for f in spec.fields)]
        assert eligible, f"no sample case activates {name}"
        if set(spec.fields) != {"output"}:  # every case has an output
            assert len(eligible) < len(CASES), f"every sample case activates {name}"


def test_every_alias_and_knob_branch_appears() -> None:
    keys = {k for r in RAW for k in r}
    for logical, aliases in FIELD_ALIASES.items():
        if logical == "conversation":
            assert keys & set(aliases)
            continue
        for alias in aliases:
            assert alias in keys, f"alias {alias!r} not in the sample"
    assert any("case_id" not in r and "id" not in r for r in RAW)  # content-derived ids
    assert any(isinstance(r.get("contexts"), list) for r in RAW)  # list joining
    for block in ("relevance", "grounding", "redteam", "geval"):
        knobs = [getattr(c, block) for c in CASES if block in c.explicit_blocks]
        assert any(k.scoring_mode is ScoringMode.SCALE for k in knobs), block
        assert any(k.include_reasoning for k in knobs), block
    assert any(c.redteam.metrics for c in CASES)  # a custom rubric
    assert any(c.geval and any(m.evaluation_steps for m in c.geval.metrics) for c in CASES)
    assert any(c.geval and any(m.criteria for m in c.geval.metrics) for c in CASES)
    assert any("refalign" in c.explicit_blocks for c in CASES)
    assert any(not c.grounding.enabled for c in CASES)  # a disabled node
    assert sum(1 for c in CASES if c.conversation) >= 2  # chat messages and turns


def test_bad_sample_has_each_kind_of_error() -> None:
    fields = []
    for i, raw in iter_records(SAMPLE_BAD):
        try:
            if isinstance(raw, RecordError):
                raise raw
            parse_record(raw, i)
        except RecordError as e:
            fields.append(e.field)
    assert fields == [
        None,
        "output",
        "relevance.scoring_mode",
        "output",
        "output",
        None,
        "geval.metrics[0].name",  # no criteria/steps, and no configured rubric of that name
    ]
