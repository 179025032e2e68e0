"""``retrieval(name=...)`` keeps a bounded number of per-name entries (issue 16)."""

from __future__ import annotations

import importlib

import nexagauge

from .conftest import Recorder

# the module (``nexagauge.sdk.retrieval`` as an attribute is the public class of the same name)
retrieval_module = importlib.import_module("nexagauge.sdk.retrieval")


def test_distinct_names_do_not_grow_the_cache_without_bound(rec: Recorder) -> None:
    retrieval_module.retrieval_meta.cache_clear()
    for i in range(retrieval_module.MAX_NAMES * 3):
        with nexagauge.retrieval(query="q", name=f"search-tenant-{i}") as r:
            r.add(["doc"])
    info = retrieval_module.retrieval_meta.cache_info()
    assert info.currsize == retrieval_module.MAX_NAMES
    # every span still got its own name
    names = {s.name for s in rec.spans}
    assert len(names) == retrieval_module.MAX_NAMES * 3


def test_a_reused_name_is_served_from_the_cache(rec: Recorder) -> None:
    retrieval_module.retrieval_meta.cache_clear()
    for _ in range(5):
        with nexagauge.retrieval(query="q", name="search"):
            pass
    assert retrieval_module.retrieval_meta.cache_info().hits == 4
    assert [s.name for s in rec.spans] == ["search"] * 5
