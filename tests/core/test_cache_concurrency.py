"""The content-addressed cache under concurrent writers (threads and processes) and corruption."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from pathlib import Path

import pytest

from nexagauge.graph.cache import ContentStore, NodeCache, cache_stats, clear_cache
from nexagauge.schema.results import CostEstimate, MetricResult, NodeMetrics


def _value(writer: int, key_no: int, size: int = 20_000) -> bytes:
    """A large value identifying its writer, so a torn mix of two writes is detectable."""
    head = f"w{writer:03d}-k{key_no:03d}".encode()
    return head + b"|" + bytes([65 + writer % 26]) * size + b"|" + head


def _valid(value: bytes, key_no: int) -> bool:
    head, _, rest = value.partition(b"|")
    body = rest[: -len(head) - 1]
    return (
        value.endswith(b"|" + head)
        and head.endswith(f"k{key_no:03d}".encode())
        and len(body) == 20_000
        and len(set(body)) == 1
        and body[0] == 65 + int(head[1:4]) % 26
    )


def _keys(n: int) -> list[str]:
    return [ContentStore.key({"k": i}) for i in range(n)]


def test_threads_same_and_different_keys(tmp_path: Path) -> None:
    store = ContentStore(tmp_path)
    keys = _keys(8)
    errors: list[str] = []
    start = threading.Barrier(12)
    for k in range(8):  # once written, a key must stay readable while it is being rewritten
        store.put(keys[k], _value(99, k))

    def work(w: int) -> None:
        start.wait()
        for rnd in range(25):
            shared = rnd % 4  # keys 0-3: everyone writes them; keys 4-7: writer-specific
            own = 4 + w % 4
            for k in (shared, own):
                store.put(keys[k], _value(w, k))
                got = store.get(keys[k])
                if got is None or not _valid(got, k):
                    errors.append(f"missing or torn value for key {k}")
            for k in range(8):  # readers always see a whole value (atomic replace)
                got = store.get(keys[k])
                if got is None or not _valid(got, k):
                    errors.append(f"missing or torn read of key {k}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for k in range(8):
        got = store.get(keys[k])
        assert got is not None and _valid(got, k)
    assert not list(tmp_path.rglob(".tmp-*")), "temporary files are cleaned up"


def _process_writer(root: str, writer: int, rounds: int, go: float) -> None:
    while time.time() < go:  # start together
        time.sleep(0.001)
    store = ContentStore(root)
    keys = _keys(6)
    for rnd in range(rounds):
        for k in (rnd % 3, 3 + writer % 3):
            store.put(keys[k], _value(writer, k))
            got = store.get(keys[k])
            if got is not None and not _valid(got, k):
                os._exit(3)


def test_processes_same_and_different_keys(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    seen = [False] * 6
    go = time.time() + 0.3
    procs = [ctx.Process(target=_process_writer, args=(str(tmp_path), w, 40, go)) for w in range(4)]
    for p in procs:
        p.start()
    store = ContentStore(tmp_path)
    keys = _keys(6)
    torn = 0
    while any(p.is_alive() for p in procs):  # the parent reads while children write
        for k in range(6):
            got = store.get(keys[k])
            torn += got is not None and not _valid(got, k)
            seen[k] = seen[k] or got is not None
            torn += seen[k] and got is None  # once visible, a key never disappears
    for p in procs:
        p.join(30)
        assert p.exitcode == 0, "a writer process saw a torn value"
    assert torn == 0
    for k in range(6):
        got = store.get(keys[k])
        assert got is not None and _valid(got, k)
    assert cache_stats(tmp_path).entries == 6
    assert not list(tmp_path.rglob(".tmp-*"))


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b"",  # empty file (e.g. a crash before any write reached the disk)
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b"garbage" + b[7:],  # bad magic
        lambda b: b[:-5] + b"XXXXX",  # payload does not match its checksum
        lambda b: b.replace(b"\n", b"", 2),  # no header separator
    ],
)
def test_corrupted_entries_are_misses_and_removed(tmp_path: Path, damage: object) -> None:
    cache = NodeCache(tmp_path)
    key = cache.key(node="n", version="1", case="fp", config={}, upstream={})
    value = NodeMetrics(metrics=[MetricResult(name="m", category="c", score=0.5)])
    cache.put(key, value)
    assert cache.get(key, NodeMetrics) == value
    path = tmp_path / "nodes" / key[:2] / key
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    assert cache.get(key, NodeMetrics) is None
    assert not path.exists()
    cache.put(key, value)  # and it can be written again
    assert cache.get(key, NodeMetrics) == value


def test_incompatible_model_is_a_miss(tmp_path: Path) -> None:
    cache = NodeCache(tmp_path)
    key = cache.key(node="n", version="1", case="fp", config={}, upstream={})
    cache.store.put(key, b'{"metrics": "not a list"}')
    assert cache.get(key, NodeMetrics) is None and cache.misses == 1


def test_keys_depend_on_every_part() -> None:
    base = dict(node="n", version="1", case="fp", config={"a": 1}, upstream={"u": "d"})
    cache = NodeCache("/nonexistent")
    k = cache.key(**base)  # type: ignore[arg-type]
    for part, other in [
        ("node", "m"),
        ("version", "2"),
        ("case", "fp2"),
        ("config", {"a": 2}),
        ("upstream", {"u": "e"}),
    ]:
        assert cache.key(**{**base, part: other}) != k  # type: ignore[arg-type]
    assert cache.key(**{**base, "config": {"a": 1}}) == k  # type: ignore[arg-type]


def test_clear_by_namespace_and_age(tmp_path: Path) -> None:
    nodes, judge = ContentStore(tmp_path, "nodes"), ContentStore(tmp_path, "judge")
    k_old, k_new = _keys(2)
    nodes.put(k_old, b"a")
    nodes.put(k_new, b"b")
    judge.put(k_old, b"c")
    old = time.time() - 10 * 86400
    os.utime(tmp_path / "nodes" / k_old[:2] / k_old, (old, old))
    assert cache_stats(tmp_path).namespaces == {"nodes": 2, "judge": 1}
    assert clear_cache(tmp_path, "nodes", older_than_s=7 * 86400) == 1
    assert nodes.get(k_old) is None and nodes.get(k_new) == b"b"
    assert clear_cache(tmp_path, "judge") == 1
    assert clear_cache(tmp_path) == 1
    assert cache_stats(tmp_path).entries == 0
    assert CostEstimate() == CostEstimate.zero()


@pytest.mark.parametrize(
    ("backend", "service", "expected"),
    [
        ("auto", False, "disk"),
        ("auto", True, "memory"),
        ("disk", True, "disk"),
        ("memory", False, "memory"),
    ],
)
def test_cache_backend_resolution(
    tmp_path: Path, backend: str, service: bool, expected: str
) -> None:
    from nexagauge.graph.runtime import Runtime
    from nexagauge.settings import Settings

    s = Settings(
        judge={"mode": "none"}, cache={"dir": str(tmp_path), "backend": backend, "memory_mb": 1}
    )
    cache = Runtime.create(s, service=service).cache
    assert cache is not None
    if expected == "memory":
        assert cache.root is None and cache.memory is not None
        assert cache.memory.max_bytes == 1024 * 1024
        assert cache.namespace("judge") is cache.memory
    else:
        assert cache.root == tmp_path and cache.memory is None


def test_memory_store_stays_within_its_budget_under_concurrent_writers() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from nexagauge.graph.cache import MemoryStore

    store = MemoryStore(max_bytes=50_000)

    def write(worker: int) -> None:
        for i in range(2_000):
            store.put(f"{worker:02x}{i:062x}", bytes(100 + (i % 50)))
            assert store.bytes <= store.max_bytes

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    assert 0 < store.bytes <= 50_000
    assert store.bytes == sum(len(store.get(k) or b"") for k in list(store._data))
    store.put("ff" * 32, bytes(60_000))  # larger than the whole budget: not stored
    assert store.get("ff" * 32) is None and store.bytes <= 50_000


def test_node_cache_needs_exactly_one_backend(tmp_path: Path) -> None:
    from nexagauge.graph.cache import MemoryStore

    with pytest.raises(ValueError, match="either a directory or a MemoryStore"):
        NodeCache()
    with pytest.raises(ValueError, match="either a directory or a MemoryStore"):
        NodeCache(tmp_path, memory=MemoryStore(10))
