"""emit.alerts: the score alert checks (the same rules as dashboards/ alert rules) fire above
their threshold only when both windows hold their guard's samples, and say so in ``detail``."""

from __future__ import annotations

from nexagauge.emit.alerts import (
    DROP_MIN_SAMPLES_1H,
    DROP_MIN_SAMPLES_7D,
    GROUNDING,
    GROUNDING_DROP,
    RELEVANCE,
    check_score_alerts,
)


def test_grounding_drop_fires_only_with_both_guards_met() -> None:
    base = {GROUNDING: [0.9] * DROP_MIN_SAMPLES_7D}
    rec = {GROUNDING: [0.5] * DROP_MIN_SAMPLES_1H}
    drop = {c.alert: c for c in check_score_alerts(base, rec)}["NexagaugeGroundingDropped"]
    assert drop.value is not None and drop.value > GROUNDING_DROP and drop.fires
    assert drop.detail == (
        f"baseline mean - recent mean; {DROP_MIN_SAMPLES_7D} baseline / {DROP_MIN_SAMPLES_1H} "
        f"recent (guards {DROP_MIN_SAMPLES_7D} / {DROP_MIN_SAMPLES_1H})"
    )
    short = {GROUNDING: [0.5] * (DROP_MIN_SAMPLES_1H - 1)}
    drop = {c.alert: c for c in check_score_alerts(base, short)}["NexagaugeGroundingDropped"]
    assert drop.condition and not drop.guard_met and not drop.fires


def test_relevance_drift_has_no_value_without_both_windows() -> None:
    (drift,) = check_score_alerts({}, {RELEVANCE: [0.5, 0.6]})
    assert drift.alert == "NexagaugeRelevanceDrift" and drift.value is None and not drift.fires
    assert drift.detail.startswith("PSI of the score histogram; 0 baseline / 2 recent")
