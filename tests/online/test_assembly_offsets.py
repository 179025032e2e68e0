"""Trace assembly (completion triggers, late spans, bounded memory) and offset contiguity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.online.delivery.offsets import OffsetTracker
from nexagauge.online.ingest.assembly import TraceBuffer
from nexagauge.online.ingest.decode import SpanRecord
from nexagauge.sdk import conventions as C


def rec(t: int, s: int, parent: int = 0, *, end: int = 10, turn_end: bool = False) -> SpanRecord:
    marks = {C.NG_TURN_END: True} if turn_end else {}
    return SpanRecord(
        t.to_bytes(16, "big"),
        s.to_bytes(8, "big"),
        parent.to_bytes(8, "big") if parent else b"",
        f"s{s}",
        1,
        end,
        False,
        "svc",
        marks,
    )


def test_root_end_waits_for_grace_then_completes_with_late_children() -> None:
    b = TraceBuffer(grace_s=2.0, inactivity_s=30.0)
    assert b.add_span(rec(1, 2, parent=1), ("t", 0, 0), now=0.0) == "new"
    assert b.add_span(rec(1, 1), ("t", 0, 1), now=0.5) == "new"  # root ended
    assert b.poll(now=2.0) == []
    assert b.add_span(rec(1, 3, parent=1), ("t", 0, 1), now=2.1) == "seen"  # within grace
    out = b.poll(now=2.6)
    assert [(t.trace_id[-1], trig, len(t.spans)) for t, trig in out] == [(1, "root_end", 3)]
    assert out[0][0].sources == {("t", 0, 0), ("t", 0, 1)}
    # a span arriving after evaluation is late: counted, never re-scored
    assert b.add_span(rec(1, 4, parent=1), ("t", 0, 2), now=3.0) == "late"
    assert b.late == 1 and len(b) == 0 and b.poll(now=100.0) == []


def test_turn_end_mark_completes_a_trace_without_root() -> None:
    b = TraceBuffer(grace_s=0.5, inactivity_s=30.0)
    b.add_span(rec(2, 5, parent=4, turn_end=True), None, now=0.0)
    assert [trig for _, trig in b.poll(now=0.6)] == ["turn_end"]


def test_inactivity_completes_rootless_traces() -> None:
    b = TraceBuffer(grace_s=0.5, inactivity_s=5.0)
    b.add_span(rec(3, 5, parent=4), None, now=0.0)
    b.add_span(rec(4, 5, parent=4), None, now=3.0)
    assert b.poll(now=4.9) == []
    assert [(t.trace_id[-1], trig) for t, trig in b.poll(now=5.0)] == [(3, "inactivity")]
    assert [(t.trace_id[-1], trig) for t, trig in b.poll(now=8.0)] == [(4, "inactivity")]


def test_next_due_is_when_poll_next_hands_a_trace_out() -> None:
    b = TraceBuffer(grace_s=2.0, inactivity_s=5.0)
    assert b.next_due(0.0) is None
    b.add_span(rec(6, 5, parent=4), None, now=0.0)  # rootless: handed on idle at 5.0
    assert b.next_due(1.0) == 4.0
    b.add_span(rec(7, 1), None, now=1.0)  # root ended: complete at 3.0
    assert b.next_due(1.5) == 1.5
    assert b.poll(now=2.9) == [] and abs(b.next_due(2.9) - 0.1) < 1e-9  # type: ignore[operator]
    assert [t.trace_id[-1] for t, _ in b.poll(now=3.0)] == [7]
    assert b.next_due(3.0) == 2.0 and b.next_due(9.0) == 0.0
    waits = TraceBuffer(grace_s=1.0, inactivity_s=60.0, content_wait_s=4.0, awaits_content=bool)
    waits.add_span(rec(8, 1), None, now=0.0)
    assert waits.next_due(0.0) == 1.0 and waits.poll(now=1.0) == []  # now waits for its logs
    assert waits.next_due(1.0) == 4.0 and len(waits.poll(now=5.0)) == 1


def test_unended_root_does_not_complete() -> None:
    b = TraceBuffer(grace_s=0.0, inactivity_s=5.0)
    b.add_span(rec(5, 1, end=0), None, now=0.0)
    assert b.poll(now=1.0) == []


def test_memory_bounds_evict_oldest_and_count() -> None:
    b = TraceBuffer(grace_s=1.0, inactivity_s=60.0, max_traces=3, max_spans=100)
    for t in range(1, 6):
        b.add_span(rec(t, 2, parent=1), None, now=float(t))
    assert len(b) == 3 and b.evicted["max_traces"] == 2
    out = b.poll(now=6.0)
    assert [(t.trace_id[-1], trig) for t, trig in out] == [(1, "evicted"), (2, "evicted")]
    b2 = TraceBuffer(max_traces=100, max_spans=5)
    for s in range(1, 5):
        b2.add_span(rec(1, s + 1, parent=1), None, now=0.0)
    for s in range(1, 4):
        b2.add_span(rec(2, s + 1, parent=1), None, now=1.0)
    assert b2.n_spans <= 5 and b2.evicted["max_spans"] == 1


def test_duplicate_span_is_stored_once() -> None:
    b = TraceBuffer()
    b.add_span(rec(1, 2, parent=1), ("t", 0, 0), now=0.0)
    b.add_span(rec(1, 2, parent=1), ("t", 0, 5), now=0.0)
    assert b.n_spans == 1


def test_drop_sources_forgets_revoked_partitions() -> None:
    b = TraceBuffer()
    b.add_span(rec(1, 2, parent=1), ("t", 0, 0), now=0.0)
    b.add_span(rec(2, 2, parent=1), ("t", 0, 1), now=0.0)
    b.add_span(rec(2, 3, parent=1), ("t", 1, 0), now=0.0)
    removed = b.drop_sources("t", {0})
    assert [t.trace_id[-1] for t in removed] == [1]
    assert len(b) == 1 and b.n_spans == 2
    assert not b.is_done((1).to_bytes(16, "big"))  # re-delivery to the new owner is not "late"


# -- offsets ------------------------------------------------------------------------------
TP = ("spans", 0)


def test_commit_only_contiguous_done_prefix() -> None:
    t = OffsetTracker()
    for off in (3, 4, 7):  # offsets need not be dense (compaction, transaction markers)
        t.begin(TP, off)
    t.acquire(TP, 4)
    for off in (3, 4, 7):
        t.release(TP, off)
    assert t.committable(TP) == 4  # 3 done, 4 still feeds a trace
    t.mark_committed(TP, 4)
    assert t.committable(TP) is None
    t.release(TP, 4)
    assert t.committable(TP) == 8


def test_stale_release_after_revocation_is_ignored() -> None:
    t = OffsetTracker()
    t.begin(TP, 0)
    t.acquire(TP, 0)
    epoch = t.epoch(TP)
    t.release(TP, 0)
    t.drop([TP])
    t.begin(TP, 0)  # re-assigned, re-delivered
    t.acquire(TP, 0)
    t.release(TP, 0)
    t.release(TP, 0, epoch)  # the old work finishing must not complete the new delivery
    assert t.committable(TP) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_committable_never_passes_an_unfinished_offset(refs: list[int], rnd) -> None:  # type: ignore[no-untyped-def]
    t = OffsetTracker()
    pending: list[int] = []
    for off, n in enumerate(refs):
        t.begin(TP, off)
        for _ in range(n):
            t.acquire(TP, off)
            pending.append(off)
        t.release(TP, off)
    rnd.shuffle(pending)
    remaining = {off: refs[off] for off in range(len(refs))}
    while True:
        pos = t.committable(TP)
        unfinished = [o for o, n in remaining.items() if n > 0]
        if pos is not None:
            assert all(o >= pos for o in unfinished)
            expected = min(unfinished) if unfinished else len(refs)
            assert pos == expected
        if not pending:
            break
        off = pending.pop()
        t.release(TP, off)
        remaining[off] -= 1
    assert t.committable(TP) == len(refs)
