from __future__ import annotations

import pytest

from nexagauge.graph.runtime import Runtime
from nexagauge.nodes.geval_steps import clear_memo
from nexagauge.settings import Settings


@pytest.fixture(autouse=True)
def _fresh_steps_memo():
    clear_memo()
    yield
    clear_memo()


@pytest.fixture
def make_runtime(tmp_path):
    def make(judge, cache: bool = False) -> Runtime:
        from nexagauge.graph.cache import NodeCache

        s = Settings(cache={"dir": str(tmp_path / "cache")})
        return Runtime(settings=s, judge=judge, cache=NodeCache(s.cache.dir) if cache else None)

    return make
