"""One bad span costs only itself, on a real broker (Tansu) through ``OnlineService`` (issue 14
item 6, issue 15 item 6): a message mixing good traces with a span of invalid UTF-8 and a span
nested too deeply loses only those two spans; a message whose spans all lack a 16-byte trace id
gets a DLQ record (``invalid_ids``); a message with one such span counts it (``invalid_ids``)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from nexagauge.emit.metric_names import SKIPPED
from nexagauge.graph.runtime import Runtime
from nexagauge.online.delivery.dlq import HEADER_REASON
from nexagauge.online.service import OnlineService

from .kafka_helpers import make_settings, produce, read_all, topics
from .otlp import rand_tid, sdk_turn, sid, span, traces_request
from .test_kafka import Recorder, wait_for

pytestmark = pytest.mark.integration


def mixed_message(good: list[bytes]) -> bytes:
    """Whole SDK turns of the ``good`` traces plus two unreadable spans of another trace."""
    spans = [s for t in good for s in sdk_turn(t, f"Q {t.hex()[:6]}?", "A.", docs=["D."])]
    bad_t = rand_tid()
    spans += [span(bad_t, sid(50), "BADNAME"), span(bad_t, sid(51), "deep", {"k": "v"})]
    req = ExportTraceServiceRequest.FromString(traces_request(spans))
    deep = req.resource_spans[0].scope_spans[0].spans[-1].attributes[0].value
    for _ in range(60):
        deep = deep.array_value.values.add()
    deep.string_value = "x"
    return req.SerializeToString().replace(b"BADNAME", b"bad\xff\xfeXY")


def short_ids(n: int) -> bytes:
    return traces_request([span(b"\x07" * 8, sid(i + 1), f"short-{i}") for i in range(n)])


@pytest.mark.parametrize("rekey", [True, False], ids=["rekey", "direct"])
async def test_bad_spans_cost_only_themselves(broker: Any, rekey: bool) -> None:
    names = topics("badspan")
    await broker.create_topics({names["traces_topic"]: 2, names["logs_topic"]: 1})
    settings = make_settings(broker.bootstrap, names, rekey=rekey)
    good = [rand_tid() for _ in range(6)]
    one_short = rand_tid()
    partly_short = traces_request(
        [*sdk_turn(one_short, "Q?", "A."), span(b"\x07" * 8, sid(9), "short")]
    )
    values = [mixed_message(good[:3]), short_ids(3), mixed_message(good[3:]), partly_short]
    rec = Recorder()
    svc = OnlineService(
        settings, runtime=Runtime.create(settings, use_cache=False), emitter=rec, serve_http=False
    )
    await svc.start()
    stop = asyncio.Event()
    runner = asyncio.ensure_future(svc.run_until(stop))
    expected = {f"{t.hex()}:{sid(1).hex()}" for t in [*good, one_short]}
    try:
        await produce(broker.bootstrap, names["traces_topic"], values, 2)
        assert await wait_for(lambda: set(rec.cases) >= expected, 30), (
            f"evaluated {len(set(rec.cases) & expected)}/{len(expected)}"
        )
        [dead] = await read_all(broker.bootstrap, names["dlq_topic"], 1)
        assert dead.value == values[1]  # only the message with no usable span, byte for byte
        assert dict(dead.headers)[HEADER_REASON] == b"invalid_ids"

        def skipped(reason: str) -> float:
            v = svc.metrics.registry.get_sample_value(SKIPPED, {"reason": reason, "node": ""})
            return v or 0.0

        # 2 unreadable spans in each mixed message; 1 span without a trace id in partly_short
        assert await wait_for(lambda: skipped("invalid_span") == 4, 5), skipped("invalid_span")
        assert skipped("invalid_ids") == 1
        stage = svc.rekey_stage if rekey else svc.stage
        counts = stage.dropped if rekey else Counter(stage.stats.skipped)
        assert counts["invalid_span"] == 4 and counts["invalid_ids"] == 1
    finally:
        stop.set()
        await runner
