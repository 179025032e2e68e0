"""Executor ordering and concurrency with fake nodes registered for the test.

The fake graph (a diamond plus a reference branch, then the real eval/report nodes)::

    s -> x -> z        s -> r -> rr
    s -> y -> z        {x, y, z, r, rr} -> eval -> report
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nexagauge.graph import executor as executor_mod
from nexagauge.graph.cache import MemoryStore, NodeCache
from nexagauge.graph.executor import CaseResult, Executor
from nexagauge.graph.node import Node, NodeContext
from nexagauge.graph.planner import plan
from nexagauge.graph.runtime import NO_JUDGE, Runtime
from nexagauge.graph.topology import parse_topology
from nexagauge.nodes.eval import EvalNode
from nexagauge.nodes.report import CaseReport, ReportNode
from nexagauge.schema.case import RecordError, parse_record
from nexagauge.schema.results import CostEstimate, MetricResult, NodeMetrics
from nexagauge.settings import Settings

TOPOLOGY = parse_topology(
    """
[nodes.s]
kind = "utility"
requires = []
[nodes.x]
kind = "metric"
requires = ["s"]
fields = ["output"]
[nodes.y]
kind = "metric"
requires = ["s"]
fields = ["output"]
[nodes.z]
kind = "metric"
requires = ["x", "y"]
fields = ["output"]
[nodes.r]
kind = "metric"
requires = ["s"]
fields = ["output", "reference"]
[nodes.rr]
kind = "metric"
requires = ["r"]
fields = ["output"]
[nodes.eval]
kind = "aggregate"
requires = ["x", "y", "z", "r", "rr"]
soft_requires = true
[nodes.report]
kind = "aggregate"
requires = ["eval"]
""",
    "fake.toml",
)

Events = list[tuple[str, str, str, float]]  # (event, node, case_id, time)


class Fake(Node):
    """A node that sleeps, records start/end, and can fail or skip, per case."""

    output_model = NodeMetrics

    def __init__(
        self,
        name: str,
        events: Events,
        delay: Callable[[NodeContext], float] = lambda ctx: 0.0,
        fail: Callable[[NodeContext], bool] = lambda ctx: False,
        skip: Callable[[NodeContext], str | None] = lambda ctx: None,
        cost: float = 0.0,
    ) -> None:
        self.name = name  # type: ignore[misc]
        self.events = events
        self.delay, self.fail, self.skip, self.cost = delay, fail, skip, cost
        self.runs = 0

    def skip_reason(self, ctx: NodeContext) -> str | None:
        return self.skip(ctx)

    async def run(self, ctx: NodeContext) -> NodeMetrics:
        self.runs += 1
        self.events.append(("start", self.name, ctx.case.case_id, time.perf_counter()))
        await asyncio.sleep(self.delay(ctx))
        self.events.append(("end", self.name, ctx.case.case_id, time.perf_counter()))
        if self.fail(ctx):
            raise ValueError(f"boom in {self.name}")
        return NodeMetrics(
            metrics=[MetricResult(name=f"m_{self.name}", category="test", score=0.75)],
            cost=CostEstimate(cost=self.cost, input_tokens=10, output_tokens=2),
        )


def make_executor(
    monkeypatch: pytest.MonkeyPatch,
    nodes: dict[str, Node],
    target: str = "z",
    *,
    max_in_flight: int = 4,
    cache: NodeCache | None = None,
) -> Executor:
    real = {"eval": EvalNode(), "report": ReportNode()}

    def load(name: str) -> Node:
        return nodes.get(name) or real[name]

    monkeypatch.setattr(executor_mod, "load_node", load)
    rt = Runtime(settings=Settings(run={"default_threshold": 0.5, "thresholds": {}}), cache=cache)
    return Executor(rt, plan(target, topology=TOPOLOGY), max_in_flight=max_in_flight)


def fakes(events: Events, **over: dict[str, Any]) -> dict[str, Node]:
    return {n: Fake(n, events, **over.get(n, {})) for n in ("s", "x", "y", "z", "r", "rr")}


def interval(events: Events, node: str, case: str) -> tuple[float, float]:
    t = {e: ts for e, n, c, ts in events if n == node and c == case}
    return t["start"], t["end"]


async def collect(ex: Executor, records: list[tuple[int, Any]]) -> list[CaseResult]:
    return [r async for r in ex.run_records(records)]


async def test_independent_nodes_of_a_case_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    ev: Events = []
    slow = {"delay": lambda ctx: 0.2}
    ex = make_executor(monkeypatch, fakes(ev, x=slow, y=slow))
    t0 = time.perf_counter()
    res = await ex.run_case(parse_record({"case_id": "c", "output": "o"}), 0)
    wall = time.perf_counter() - t0
    xs, xe = interval(ev, "x", "c")
    ys, ye = interval(ev, "y", "c")
    zs, _ = interval(ev, "z", "c")
    assert xs < ye and ys < xe, "x and y must run at the same time"
    assert zs >= max(xe, ye), "z waits for both prerequisites"
    # the overlap above is the proof; wall time only rules out a gross stall (0.2 + 0.2 would be
    # sequential; a loaded CI host can add ~0.2 s to any wall-clock window)
    assert wall < 1.0
    assert list(res.outcomes) == list(ex.plan.nodes)  # outcomes in plan order
    assert all(o.status == "ok" for n, o in res.outcomes.items() if n not in ("r", "rr"))


async def test_results_in_input_order_despite_out_of_order_completion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ev: Events = []
    # earlier cases are slower: they finish last
    delay = {"delay": lambda ctx: 0.05 * (6 - int(ctx.case.case_id))}
    ex = make_executor(monkeypatch, fakes(ev, x=delay), max_in_flight=6)
    recs = [(i, {"case_id": str(i), "output": f"o{i}"}) for i in range(6)]
    results = await collect(ex, recs)
    assert [r.index for r in results] == list(range(6))
    assert [r.case_id for r in results] == [str(i) for i in range(6)]
    finished = [c for e, n, c, _ in ev if e == "end" and n == "z"]
    assert finished != sorted(finished, key=int), "completion really was out of order"


@pytest.mark.parametrize("bound", [1, 3])
async def test_max_in_flight_is_respected(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    active: set[str] = set()
    peak = 0

    def enter(ctx: NodeContext) -> float:
        nonlocal peak
        active.add(ctx.case.case_id)
        peak = max(peak, len(active))
        return 0.02

    def leave(ctx: NodeContext) -> float:
        active.discard(ctx.case.case_id)
        return 0.0

    ev: Events = []
    ex = make_executor(
        monkeypatch, fakes(ev, s={"delay": enter}, z={"delay": leave}), max_in_flight=bound
    )
    results = await collect(ex, [(i, {"case_id": f"c{i}", "output": "o"}) for i in range(10)])
    assert len(results) == 10
    assert peak == bound  # reached, never exceeded


async def test_exception_fails_only_that_node(monkeypatch: pytest.MonkeyPatch) -> None:
    ev: Events = []
    ex = make_executor(monkeypatch, fakes(ev, y={"fail": lambda ctx: ctx.case.case_id == "bad"}))
    results = await collect(
        ex, [(0, {"case_id": "bad", "output": "o"}), (1, {"case_id": "good", "output": "o"})]
    )
    bad, good = results
    assert bad.ok and bad.outcomes["y"].status == "error"
    assert bad.outcomes["y"].reason == "ValueError: boom in y"
    assert bad.outcomes["x"].status == "ok"
    assert bad.outcomes["z"].status == "skipped"
    assert bad.outcomes["z"].reason == "y failed: ValueError: boom in y"
    assert bad.outcomes["y"].output == NodeMetrics()  # empty metrics, zero cost
    assert all(o.status in ("ok", "skipped") for o in good.outcomes.values())
    assert good.outcomes["z"].status == "ok"


async def test_skip_reasons_propagate(monkeypatch: pytest.MonkeyPatch) -> None:
    ev: Events = []
    ex = make_executor(
        monkeypatch,
        fakes(ev, x={"skip": lambda ctx: NO_JUDGE}),
        target="eval",
    )
    res = await ex.run_case(parse_record({"case_id": "c", "output": "o"}), 0)
    o = res.outcomes
    assert (o["x"].status, o["x"].reason) == ("skipped", NO_JUDGE)
    assert o["z"].reason == f"x skipped: {NO_JUDGE}"
    assert o["r"].reason == "not eligible: no reference"
    assert o["rr"].reason == "r skipped: not eligible: no reference"
    assert o["y"].status == "ok"
    for n in ("x", "z", "r", "rr"):
        assert o[n].output == NodeMetrics() and o[n].cost == CostEstimate()
    assert not any(n in ("x", "z", "r", "rr") for _, n, _, _ in ev), "skipped nodes never ran"
    # eval and report aggregate what ran and say why the rest did not
    report = res.report
    assert isinstance(report, CaseReport)
    assert report.scores == {"m_y": 0.75}
    assert report.passed == {"m_y": True}
    assert report.nodes["z"].status == "skipped" and report.nodes["z"].reason == o["z"].reason


async def test_bad_records_do_not_stop_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    ev: Events = []
    ex = make_executor(monkeypatch, fakes(ev))
    recs: list[tuple[int, Any]] = [
        (0, {"case_id": "a", "output": "o"}),
        (1, RecordError(1, None, "line 2: invalid JSON")),
        (2, {"case_id": "c"}),  # no output
        (3, {"case_id": "d", "output": "o"}),
    ]
    results = await collect(ex, recs)
    assert [r.ok for r in results] == [True, False, False, True]
    assert results[1].error == "record 1: line 2: invalid JSON"
    assert results[2].error_field == "output" and "record 2" in (results[2].error or "")


async def test_node_cache_hits_skip_the_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ev: Events = []
    nodes = fakes(ev, x={"cost": 0.01})
    cache = NodeCache(tmp_path)
    ex = make_executor(monkeypatch, nodes, cache=cache)
    case = parse_record({"case_id": "c", "output": "o"})
    first = await ex.run_case(case, 0)
    runs = {n: getattr(node, "runs", 0) for n, node in nodes.items()}
    second = await ex.run_case(case, 0)
    assert {n: getattr(node, "runs", 0) for n, node in nodes.items()} == runs  # nothing re-ran
    x1, x2 = first.outcomes["x"], second.outcomes["x"]
    assert not x1.cached and x2.cached
    assert x1.cost.cost == pytest.approx(0.01) and x2.cost.cost == 0.0  # nothing spent again
    assert x2.original_cost is not None and x2.original_cost.cost == pytest.approx(0.01)
    # a different case content is a miss
    await ex.run_case(parse_record({"case_id": "c", "output": "other"}), 0)
    assert nodes["x"].runs == runs["x"] + 1  # type: ignore[attr-defined]


async def test_in_memory_node_cache_keys_a_case_from_its_second_sighting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In memory (``serve``) a case never seen cannot hit, so its nodes compute no keys and
    store nothing; its second sighting stores, its third is served from the cache. A disk
    cache keeps storing from the first run (test above)."""
    ev: Events = []
    nodes = fakes(ev, x={"cost": 0.01})
    mem = MemoryStore(1 << 20)
    cache = NodeCache(memory=mem)
    ex = make_executor(monkeypatch, nodes, cache=cache)
    keyed: list[str] = []
    real_key = cache.key

    def key(**kw: Any) -> str:
        keyed.append(kw["node"])
        return real_key(**kw)

    monkeypatch.setattr(cache, "key", key)
    case = parse_record({"case_id": "c", "output": "o"})
    first = await ex.run_case(case, 0)
    assert keyed == [] and len(mem) == 0 and cache.unkeyed == 1
    assert not first.outcomes["x"].cached
    runs = nodes["x"].runs  # type: ignore[attr-defined]
    second = await ex.run_case(case, 0)
    assert keyed and len(mem) > 0 and not second.outcomes["x"].cached
    assert nodes["x"].runs == runs + 1  # type: ignore[attr-defined]
    third = await ex.run_case(case, 0)
    assert third.outcomes["x"].cached and third.outcomes["x"].cost.cost == 0.0
    assert nodes["x"].runs == runs + 1  # type: ignore[attr-defined]
    assert third.outcomes["x"].output.metrics == first.outcomes["x"].output.metrics  # type: ignore[union-attr]
    # another case is a first sighting again; sightings are bounded (oldest forgotten)
    monkeypatch.setattr(NodeCache, "SIGHTINGS", 2)
    for o in ("a", "b", "c"):
        await ex.run_case(parse_record({"case_id": o, "output": o}), 0)
    assert cache.unkeyed == 4
    assert not cache.admits(case.fingerprint())  # forgotten: a first sighting again


async def test_wrong_output_type_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Wrong(Fake):
        async def run(self, ctx: NodeContext) -> Any:
            return {"not": "a model"}

    ev: Events = []
    nodes = fakes(ev)
    nodes["x"] = Wrong("x", ev)
    ex = make_executor(monkeypatch, nodes)
    res = await ex.run_case(parse_record({"output": "o"}), 0)
    assert res.outcomes["x"].status == "error" and "TypeError" in (res.outcomes["x"].reason or "")


async def test_small_cpu_work_runs_inline_and_large_work_off_the_loop() -> None:
    import threading

    from nexagauge.graph.runtime import INLINE_CPU_CHARS

    rt = Runtime(settings=Settings())
    loop_thread = threading.current_thread()
    try:
        small = await rt.cpu(INLINE_CPU_CHARS - 1, threading.current_thread)
        large = await rt.cpu(INLINE_CPU_CHARS, threading.current_thread)
    finally:
        await rt.aclose()
    assert small is loop_thread
    assert large is not loop_thread and large.name.startswith("nexagauge-cpu")


def test_upstream_digest_is_the_same_for_a_fresh_and_a_cached_output() -> None:
    """A cache hit comes back with every item flagged ``cached`` and a zero cost; the nodes below
    must key on the same digest either way, and on a different one when the content differs."""
    from nexagauge.schema.results import Claim, ClaimsMetrics, Item

    def claims(text: str) -> ClaimsMetrics:
        return ClaimsMetrics(
            claims=[
                Claim(item=Item(id=f"c{i}", text=f"{text} {i}", tokens=3.0), source_chunk_index=i)
                for i in range(3)
            ],
            cost=CostEstimate(input_tokens=120, output_tokens=30, cost=0.002),
        )

    fresh = claims("Paris is in France")
    hit = executor_mod._mark_cached(fresh.model_copy(update={"cost": CostEstimate()}))
    assert all(c.item.cached for c in hit.claims) and not any(c.item.cached for c in fresh.claims)
    assert executor_mod._digest(fresh) == executor_mod._digest(hit)
    assert executor_mod._digest(fresh) != executor_mod._digest(claims("Paris is in Texas"))


def test_online_plans_leave_the_report_out() -> None:
    """Nothing online reads a per-case report: serve's plans skip the node (not its target)."""
    from nexagauge.graph.runtime import Runtime
    from nexagauge.online.plans import Executors

    s = Settings(online={"nodes": ["relevance", "grounding"]})
    ex, _ = Executors(s, Runtime(settings=s)).get(None)
    assert "report" not in ex.plan.nodes and "eval" in ex.plan.nodes
    assert plan("eval").nodes[-1] == "report"  # the offline CLI keeps it
    assert plan("report", report=False).nodes[-1] == "report"  # asked for: kept
