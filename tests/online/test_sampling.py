"""Sampling: deterministic by trace id, subset property, rules, sessions, hard limits."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.sampling import Decision as OtelDecision
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from nexagauge.online.ingest.sampling import Limiter, Sampler
from nexagauge.settings import SamplingRule, SamplingSettings


def decide(s: Sampler, tid: bytes, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("service", "svc")
    kw.setdefault("span_name", "chat")
    kw.setdefault("attrs", {})
    return s.decide(tid, **kw)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.floats(0, 1), st.floats(0, 1))
def test_lower_rate_sample_is_subset_of_higher(tid: bytes, a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    s_lo = Sampler(SamplingSettings(default_rate=lo, always_on_error=False, by_conversation=False))
    s_hi = Sampler(SamplingSettings(default_rate=hi, always_on_error=False, by_conversation=False))
    if decide(s_lo, tid).sampled:
        assert decide(s_hi, tid).sampled


def test_same_decision_as_opentelemetry_trace_id_ratio_based() -> None:
    for rate in (0.1, 0.25, 0.5):
        ours = Sampler(SamplingSettings(default_rate=rate, always_on_error=False))
        otel = TraceIdRatioBased(rate)
        for _ in range(500):
            tid = os.urandom(16)
            want = otel.should_sample(None, int.from_bytes(tid, "big"), "x").decision
            assert decide(ours, tid).sampled == (want == OtelDecision.RECORD_AND_SAMPLE)


def test_rate_is_roughly_honoured() -> None:
    s = Sampler(SamplingSettings(default_rate=0.1, always_on_error=False))
    n = sum(decide(s, os.urandom(16)).sampled for _ in range(5000))
    assert 350 < n < 650


def test_rules_choose_rate_and_nodes_and_always() -> None:
    s = Sampler(
        SamplingSettings(
            default_rate=0.0,
            rules=[
                SamplingRule(
                    name="vip", attribute={"tier": "gold"}, always=True, nodes=["grounding"]
                ),
                SamplingRule(name="checkout", service="checkout-*", rate=1.0, nodes=["relevance"]),
                SamplingRule(name="noisy", span_name="healthcheck", rate=0.0),
            ],
        )
    )
    tid = os.urandom(16)
    d = decide(s, tid, attrs={"tier": "gold"})
    assert (d.sampled, d.rule, d.nodes) == (True, "vip", ("grounding",))
    d = decide(s, tid, service="checkout-eu")
    assert (d.sampled, d.rule, d.nodes) == (True, "checkout", ("relevance",))
    assert not decide(s, tid, span_name="healthcheck").sampled
    assert not decide(s, tid).sampled  # default rate 0


def test_error_traces_always_evaluated() -> None:
    s = Sampler(SamplingSettings(default_rate=0.0, always_on_error=True))
    d = decide(s, os.urandom(16), error=True)
    assert d.sampled and d.rule == "error"
    s_off = Sampler(SamplingSettings(default_rate=0.0, always_on_error=False))
    assert not decide(s_off, os.urandom(16), error=True).sampled


def test_conversation_sampled_whole() -> None:
    s = Sampler(SamplingSettings(default_rate=0.3, by_conversation=True, always_on_error=False))
    for conv in (f"conv-{i}" for i in range(50)):
        decisions = {decide(s, os.urandom(16), conversation_id=conv).sampled for _ in range(20)}
        assert len(decisions) == 1  # every turn (trace) of a conversation: same decision


def test_may_sample_is_a_superset_of_decide() -> None:
    st_ = SamplingSettings(
        default_rate=0.05,
        rules=[SamplingRule(name="r", span_name="special", rate=0.5)],
        always_on_error=False,
    )
    s = Sampler(st_)
    for _ in range(2000):
        tid = os.urandom(16)
        name = "special" if tid[0] % 2 else "chat"
        if decide(s, tid, span_name=name).sampled:
            assert s.may_sample(tid, [("svc", name, {})])


def test_rate_limit_and_budget_skip_with_reasons() -> None:
    now = [0.0]
    lim = Limiter(SamplingSettings(max_evaluations_per_second=2.0), clock=lambda: now[0])
    got = [lim.try_acquire() for _ in range(4)]
    assert got == [None, None, "rate_limit", "rate_limit"]
    now[0] = 1.0
    assert lim.try_acquire() is None

    lim = Limiter(SamplingSettings(budget_usd_per_hour=0.20), clock=lambda: now[0])
    assert lim.try_acquire() is None
    lim.finish(0.06)
    assert lim.try_acquire() is None  # spent 0.06 + expected 0.06 < 0.20
    lim.finish(0.06)
    assert lim.try_acquire() is None  # 0.12 + 0.06 < 0.20
    assert lim.try_acquire() == "budget_hour"  # 0.12 + one in flight + one more would pass it
    lim.finish(0.06)
    assert lim.try_acquire() == "budget_hour"  # 0.18 + 0.06 > 0.20: never overspend
    now[0] += 3601
    assert lim.try_acquire() is None  # the rolling hour moved on
    lim2 = Limiter(SamplingSettings(budget_usd_per_day=0.0), clock=lambda: now[0])
    assert lim2.try_acquire() == "budget_day"


def test_decode_time_filter_never_drops_a_span_decide_would_sample() -> None:
    rules = [SamplingRule(name="vip", attribute={"tier": "gold"}, always=True)]
    for by_conv in (True, False):
        s = Sampler(SamplingSettings(default_rate=0.2, by_conversation=by_conv, rules=rules))
        for i in range(3000):
            tid = os.urandom(16)
            conv = f"conv-{i}" if i % 2 else None
            marks: dict = {"gen_ai.conversation.id": conv} if conv else {}
            if i % 50 == 0:
                marks["tier"] = "gold"
            err = i % 97 == 0
            d = decide(s, tid, attrs=marks, error=err, conversation_id=conv)
            if d.sampled:
                assert s.could_sample_span(tid, "svc", "chat", marks, err)
                assert s.may_sample(
                    tid,
                    [("svc", "chat", marks)],
                    error=err,
                    conversation_ids=[conv] if conv else [],
                )
