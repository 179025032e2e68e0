"""``nexagauge.cli.demo.until_stop_signal``: SIGTERM and SIGHUP cancel the demo's task like Ctrl-C.

Real signals sent to this process: the awaited coroutine's ``finally`` (where the demo stops its
children) runs, the result is 128 + the signal number, a repeated signal does not interrupt the
cleanup, and the handlers are removed afterwards. ``tests/demo/test_demo_signals.py`` checks the
same on the real ``nexagauge demo`` process tree.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from nexagauge.cli.demo import STOP_SIGNALS, until_stop_signal


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=[s.name for s in STOP_SIGNALS])
def test_a_stop_signal_cancels_the_main_task_and_its_cleanup_runs(
    sig: signal.Signals, capsys: pytest.CaptureFixture[str]
) -> None:
    steps: list[str] = []

    async def demo() -> int:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, os.kill, os.getpid(), sig)
        try:
            await asyncio.sleep(30)
            return 0
        finally:
            steps.append("cleanup started")
            os.kill(os.getpid(), sig)  # a repeated signal must not cut the cleanup short
            await asyncio.sleep(0.1)
            steps.append("cleanup finished")

    async def main() -> int:
        return await until_stop_signal(demo())

    assert asyncio.run(main()) == 128 + sig
    assert steps == ["cleanup started", "cleanup finished"]
    assert f"{sig.name}: stopping" in capsys.readouterr().out
    assert signal.getsignal(sig) == signal.SIG_DFL  # handlers removed with the loop's


def test_a_finished_demo_returns_its_own_status() -> None:
    async def demo() -> int:
        return 1

    async def main() -> int:
        return await until_stop_signal(demo())

    assert asyncio.run(main()) == 1
