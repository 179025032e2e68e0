"""estimate judge calls, tokens and USD of a run (calls no judge)

Estimate what `nexagauge run` would cost: judge calls and tokens per node, USD from the price
table. No judge is called.

``nexagauge estimate <node> --input PATH``: what a run would cost, without calling any judge.

For every record, the planned nodes are walked in order: deterministic utility nodes (``scan``,
``chunk``, ``refiner``) really run (they are cheap and their output sizes the judge prompts);
judge nodes are asked for ``Node.estimate`` (planned calls and tokens) and never run, unless
their result is already in the node cache (looked up with the executor's key): a run would reuse
it, so it counts as ``cached`` and costs nothing (``--no-cache`` estimates a cold run). Other
nodes cost nothing. A node that is ineligible for a record (missing field, disabled block,
prerequisite ineligible, or a judge call nothing planned would read: ``nexagauge.graph.demand``)
contributes nothing for it. USD comes from the judge price table
(``nexagauge.judge.llm.pricing``; ``judge.price_table`` adds your own prices) for each node's
effective judge model; a model without a price shows ``unknown``.

Example:
    nexagauge estimate relevance --input sample.jsonl --limit 5
    nexagauge estimate eval --input sample.jsonl --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from nexagauge.cli._output import format_table
from nexagauge.cli.main import EXIT_FAILURES, EXIT_OK, add_command, load_cli_settings
from nexagauge.cli.run import add_common_input_args, make_plan, open_reader, parse_field_map


def add_parser(sub: Any) -> None:
    p = add_command(sub, "estimate", __doc__)
    add_common_input_args(p)
    p.add_argument(
        "--no-cache", action="store_true", help="estimate as if nothing were in the node cache"
    )
    p.add_argument("--json", action="store_true", help="print the estimate as JSON")


@dataclass
class NodeEstimate:
    node: str
    model: str | None = None
    cases: int = 0
    cached: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = 0.0
    errors: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "model": self.model,
            "cases": self.cases,
            "cached": self.cached,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "usd": self.usd,
            "errors": self.errors,
            "skipped": dict(self.skipped),
        }


def run(args: argparse.Namespace) -> int:
    field_map = parse_field_map(args.field)
    settings = load_cli_settings(args)
    plan_ = make_plan(args)
    reader = open_reader(args, field_map)
    doc = asyncio.run(_estimate(settings, plan_, reader, field_map, use_cache=not args.no_cache))
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        _print(doc)
    return EXIT_FAILURES if doc["failed_records"] or doc["errors"] else EXIT_OK


def _price_table(settings: Any) -> Any:
    try:
        from nexagauge.judge.llm.pricing import PriceTable
    except ImportError:  # pragma: no cover - pricing ships with the judge package
        return None
    return PriceTable.load(settings.judge.price_table)


def _cached(rt: Any, node: Any, ctx: Any, reqs: tuple[str, ...], outputs: dict[str, Any]) -> Any:
    """The node's cached output for this case, looked up exactly as the executor would."""
    from nexagauge.graph.executor import _digest

    cache = rt.cache
    if cache is None or any(r not in outputs for r in reqs) or not node.cacheable(ctx):
        return None
    key = cache.key(
        node=node.name,
        version=node.version,
        case=ctx.case.fingerprint(),
        config=dict(node.cache_key_parts(ctx)),
        upstream={r: _digest(outputs[r]) for r in reqs},
    )
    return cache.get(key, node.output_model)


async def _estimate(
    settings: Any,
    plan_: Any,
    reader: Any,
    field_map: dict[str, str],
    *,
    use_cache: bool = True,
) -> dict[str, Any]:
    from nexagauge.cli._scrub import RunScrub
    from nexagauge.cli.main import CliError
    from nexagauge.graph.demand import unused_judge_nodes
    from nexagauge.graph.node import NodeContext
    from nexagauge.graph.runtime import Runtime
    from nexagauge.io.readers import ReaderError
    from nexagauge.nodes import load_node
    from nexagauge.schema.case import RecordError

    rt = Runtime.create(settings, use_cache=False if not use_cache else None)
    scrub = RunScrub(settings)
    topo = plan_.topology
    try:
        nodes = {n: load_node(n) for n in plan_.nodes}
    except ImportError as e:
        await rt.aclose()
        raise CliError(f"a node of this plan is not available in this build: {e}") from None
    prices = _price_table(settings)
    judge_nodes = [n for n in plan_.nodes if topo.nodes[n].judge]
    est = {n: NodeEstimate(n, model=settings.judge.for_node(n).model) for n in judge_nodes}
    records = cases = failed = 0
    bad: list[dict[str, Any]] = []
    input_error = None
    try:
        for index, raw in scrub.records(reader, field_map, settings.rubrics):
            records += 1
            line = reader.pop_line(index)
            try:
                if isinstance(raw, Exception):
                    raise raw
                case = raw  # parsed and scrubbed (run.scrub): counts what a run would send
            except RecordError as e:
                failed += 1
                bad.append({"index": index, "line": line, "reason": str(e)})
                continue
            cases += 1
            outputs: dict[str, Any] = {}
            statuses: dict[str, tuple[str, str | None]] = {}
            unused = unused_judge_nodes(plan_, nodes, case, rt)  # what a run would skip too
            for name in plan_.nodes:
                spec = topo.nodes[name]
                missing = [f for f in spec.fields if not case.has(f)]
                reqs = plan_.requires(name)
                why: str | None = None
                if missing:
                    why = f"not eligible: no {', '.join(missing)}"
                elif name in unused:
                    why = "not needed for this case"
                elif not spec.soft_requires and any(
                    statuses[r][0] != "ok" for r in reqs if r not in unused
                ):
                    why = "prerequisite not eligible"
                elif (
                    spec.block
                    and getattr(getattr(case, spec.block, None), "enabled", True) is False
                ):
                    why = f"{spec.block} disabled in the record"
                if why:
                    statuses[name] = ("skipped", why)
                    if name in est:
                        est[name].skipped[why] += 1
                    continue
                ctx = NodeContext(
                    case=case,
                    upstream=dict(outputs),
                    runtime=rt,
                    statuses=dict(statuses),
                    plan_nodes=plan_.nodes,
                    metric_nodes=plan_.metric_nodes,
                )
                statuses[name] = ("ok", None)
                try:
                    if spec.judge:
                        e_ = est[name]
                        e_.cases += 1
                        hit = _cached(rt, nodes[name], ctx, reqs, outputs)
                        if hit is not None:  # a run would reuse it: no call
                            e_.cached += 1
                            outputs[name] = hit
                            continue
                        calls = nodes[name].estimate(ctx)
                        for c in calls:
                            e_.calls += c.calls
                            e_.input_tokens += c.input_tokens
                            e_.output_tokens += c.output_tokens
                    elif spec.kind == "utility":
                        outputs[name] = await nodes[name].run(ctx)
                except Exception as e:  # a node bug must not stop the estimate of other records
                    statuses[name] = ("error", f"{type(e).__name__}: {e}")
                    if name in est:
                        est[name].errors += 1
                    bad.append({"index": index, "line": line, "node": name, "reason": str(e)})
    except ReaderError as e:
        input_error = str(e)
    finally:
        await rt.aclose()

    unpriced = []
    for e_ in est.values():
        if prices is None or e_.model is None or prices.lookup(e_.model) is None:
            e_.usd = None if e_.calls else 0.0
            if e_.calls:
                unpriced.append(e_.model)
        else:
            e_.usd = prices.cost(e_.model, e_.input_tokens, e_.output_tokens)
    total_usd: float | None = sum(e_.usd or 0.0 for e_ in est.values())
    if unpriced:
        total_usd = None
    return {
        "target": plan_.target,
        "nodes_planned": list(plan_.nodes),
        "judge": rt.judge_kind,
        "records": records,
        "cases": cases,
        "failed_records": failed,
        "errors": sum(e_.errors for e_ in est.values()),
        "input_error": input_error,
        "problems": bad[:100],
        "nodes": [e_.as_dict() for e_ in est.values()],
        "total": {
            "cached": sum(e_.cached for e_ in est.values()),
            "calls": sum(e_.calls for e_ in est.values()),
            "input_tokens": sum(e_.input_tokens for e_ in est.values()),
            "output_tokens": sum(e_.output_tokens for e_ in est.values()),
            "usd": total_usd,
        },
        "unpriced_models": sorted(set(m for m in unpriced if m)),
    }


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def _print(doc: dict[str, Any]) -> None:
    rows = [
        [
            n["node"],
            n["model"] or "-",
            n["cases"],
            n["cached"],
            n["calls"],
            n["input_tokens"],
            n["output_tokens"],
            _usd(n["usd"]),
        ]
        for n in doc["nodes"]
    ]
    t = doc["total"]
    rows.append(
        [
            "TOTAL",
            "",
            doc["cases"],
            t["cached"],
            t["calls"],
            t["input_tokens"],
            t["output_tokens"],
            _usd(t["usd"]),
        ]
    )
    headers = ["node", "model", "cases", "cached", "calls", "in_tokens", "out_tokens", "usd"]
    print(format_table(headers, rows))
    print(
        f"{doc['cases']} cases, {doc['failed_records']} failed records; "
        f"{t['calls']} judge calls, {t['input_tokens']} input + {t['output_tokens']} output tokens, "
        f"estimated {_usd(t['usd'])} (no judge was called)"
    )
    if doc["unpriced_models"]:
        print(f"no price for {', '.join(doc['unpriced_models'])}: add it with judge.price_table")
    if doc["judge"] != "llm":
        print(
            f"note: the configured judge is {doc['judge'] or 'none'}; calls and USD are for the "
            "judge models listed (nodes a local judge runs itself plan no paid calls)"
        )
    for p in doc["problems"][:10]:
        print(f"  line {p['line']}: {p['reason']}")
    if doc["input_error"]:
        print(f"input error: {doc['input_error']}")
