"""schema.knobs: a geval or redteam block with two custom metrics of one name is rejected, naming
the block and the name (a metric's result is keyed by its name)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nexagauge.schema.knobs import GevalConfig, RedteamConfig


def test_geval_metric_names_are_unique() -> None:
    m = {"name": "tone", "criteria": "polite"}
    with pytest.raises(ValidationError, match=r"duplicate geval metric names: \['tone'\]"):
        GevalConfig.model_validate({"metrics": [m, m, {"name": "other", "criteria": "x"}]})
    assert len(GevalConfig.model_validate({"metrics": [m]}).metrics) == 1


def test_redteam_metric_names_are_unique() -> None:
    m = {"name": "leak", "rubric": {"goal": "no secrets", "violations": ["a key"]}}
    with pytest.raises(ValidationError, match=r"duplicate redteam metric names: \['leak'\]"):
        RedteamConfig.model_validate({"metrics": [m, m]})
