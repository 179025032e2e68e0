"""Real parts the whole suite shares (docs/CONTRIBUTING.md, "Test suite time").

Starting a real part per test costs little on its own (Tansu is ready in ~50 ms), but a suite of
hundreds of integration tests pays it hundreds of times, and a part shared by every test of a
session is also the part a new test area reuses without writing a launcher. What is shared:

* :func:`kafka_broker` - one Tansu broker per session (per worker under ``pytest -n``). A test
  never shares *topics* or *consumer groups*: it takes fresh names (``support.broker.unique``;
  ``tests/online/kafka_helpers.topics`` gives the evaluator's whole set) and creates them with
  ``kafka_broker.create_topics({name: partitions})``. A test that stops, restarts or cuts the
  broker starts its own ``TansuBroker`` (or puts a ``TansuProxy`` in front of this one and cuts
  the proxy).

Parallel runs (``scripts/test.sh`` runs ``pytest -n 4 --dist loadgroup``, pytest-xdist): most
integration tests wait (on a judge's latency, a consumer group, a scrape, a subprocess) more than
they compute, so several workers overlap the waits even on 2 cores. :class:`SuiteScheduling`
replaces xdist's ``loadscope`` so that

* a *work unit* - what one worker runs, in order - is a test module (its module-scoped fixtures
  are set up once), or a whole area for the areas of :data:`ONE_WORKER_AREAS` (session-scoped
  fixtures too costly to pay once per worker, or tests that must not compete for the CPU), or
  every test marked ``pytest.mark.xdist_group(name)`` with the same name, whichever module holds
  it (tests that drive processes against a clock - kill mid-stream, SIGTERM during a drain - are
  grouped so that they never run next to each other);
* units holding a ``slow`` test start first, then those holding an ``integration`` test, then the
  rest: the longest units do not start last and leave one worker running alone at the end (mark
  a test ``slow`` when it takes more than a few seconds on its own).

Tests run in parallel must already be independent (free ports, temp dirs, their own processes
and topics, process accounting by descendants: ``support.procs``); that is the suite's rule anyway.

Every area's own ``conftest.py`` adds the area's fixtures; this file also puts ``tests/`` on
``sys.path`` so that ``support`` (the reusable servers of ``tests/support/``) imports anywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:  # makes tests/support importable as `support`
    sys.path.insert(0, _TESTS)

if TYPE_CHECKING:
    from support.broker import TansuBroker

#: areas (``tests/<area>/``) whose tests all run on one worker, one after the other: ``report``
#: has session-scoped fixtures (the report's CLI runs, a browser) that would otherwise run on each
#: worker; each ``demo`` test runs a whole ``nexagauge demo`` whose local judge must keep up with a
#: fixed traffic rate, so two of them never compete. Not ``local``: its modules compute for minutes
#: (calibration, swaps, cross-encoder training) and gain more from running side by side than its
#: session-scoped models (loaded in seconds) cost once per worker.
ONE_WORKER_AREAS = frozenset({"demo", "report"})


def work_unit(nodeid: str) -> str:
    """The unit of scheduling of a test: its ``xdist_group`` (the ``@name`` suffix xdist adds to
    the node id under ``--dist loadgroup``), else its module, or its area for
    :data:`ONE_WORKER_AREAS`.

    >>> work_unit("tests/online/test_kafka.py::test_x[a]"), work_unit("tests/demo/test_a.py::t")
    ('tests/online/test_kafka.py', 'tests/demo')
    >>> work_unit("tests/online/test_chaos.py::test_y@online-delivery")
    'online-delivery'
    """
    if nodeid.rfind("@") > nodeid.rfind("]"):  # as xdist's loadgroup: '@' may sit in a param
        return nodeid.rsplit("@", 1)[1]
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in ONE_WORKER_AREAS:
        return "/".join(parts[:2])
    return path


def _unit_of(item: pytest.Item) -> str:
    groups = sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
         for m in item.iter_markers("xdist_group")}
    )  # fmt: skip
    if groups:
        return "_".join(groups)
    nodeid = item.nodeid
    if nodeid.rfind("@") > nodeid.rfind("]"):
        nodeid = nodeid.rsplit("@", 1)[0]
    return work_unit(nodeid)


def _rank(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    return 1 if item.get_closest_marker("integration") else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, order the collection by unit (slow units first, see the module docstring);
    each unit keeps its tests in their order. Serial runs keep pytest's order."""
    if not hasattr(config, "workerinput"):
        return
    first_seen: dict[str, int] = {}
    rank: dict[str, int] = {}
    unit = {id(item): _unit_of(item) for item in items}
    for item in items:
        u = unit[id(item)]
        first_seen.setdefault(u, len(first_seen))
        rank[u] = min(rank.get(u, 2), _rank(item))
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (rank[unit[id(it)]], first_seen[unit[id(it)]], order[id(it)]))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (or ``loadscope``) schedules by :func:`work_unit`, in collection
    order."""
    if config.getoption("dist") not in ("loadgroup", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the order pytest_collection_modifyitems made
    return SuiteScheduling(config, log)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[TansuBroker]:
    """One real Kafka-protocol broker (Tansu, in-memory) for every test of the session.

    Use fresh topic and group names per test; never stop or restart it (see the module
    docstring). Example::

        async def test_x(kafka_broker):
            topic = unique("spans")
            await kafka_broker.create_topics({topic: 3})
            ... kafka_broker.bootstrap ...
    """
    from support.broker import TansuBroker

    with TansuBroker() as broker:
        yield broker
