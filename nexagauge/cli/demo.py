"""run the whole online pipeline locally (broker, collector, evaluator, demo app)

Starts an embedded Kafka-protocol broker and OTLP collector, the evaluator with the local judge
(or NEXAGAUGE_JUDGE_BASE_URL's LLM judge), and a RAG app traced with @nexagauge.trace whose
answers drift after a while; prints live progress and a summary, serves /metrics while running,
and stops every process it started.

``nexagauge demo``: the full online pipeline locally (see :mod:`nexagauge.demo.run`).

Ctrl-C, SIGTERM and SIGHUP (``kill``, a service manager, a closed terminal) all run the same
orderly shutdown: the demo's task is cancelled, so its cleanup stops the app, the evaluator, the
collector and the broker. The exit status then follows the shell convention for a death by that
signal: 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP); 0 after a full run, 1 if it failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Coroutine
from typing import Any

from nexagauge.cli.main import add_command

#: signals that stop the demo like Ctrl-C does (SIGINT is asyncio.run's own)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    # every flag's dest is the DemoOptions field it sets (run() passes them by name)
    p = add_command(subparsers, "demo", __doc__)
    p.add_argument(
        "--duration",
        dest="duration_s",
        metavar="DURATION",
        type=float,
        default=90.0,
        help="seconds of app traffic (default 90)",
    )
    p.add_argument("--rate", type=float, default=6.0, help="questions per second (default 6)")
    p.add_argument(
        "--drift-after",
        dest="drift_after_s",
        metavar="DRIFT_AFTER",
        type=float,
        help="seconds before drift starts (default: half)",
    )
    p.add_argument("--drift-share", type=float, default=0.6, help="share of drifted answers (0.6)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--metrics-port", type=int, default=9464, help="port of /metrics (0: any free)")
    p.add_argument("--config", help="a nexagauge.toml settings file")
    return p


def run(args: argparse.Namespace) -> int:
    from nexagauge.demo import from_flags
    from nexagauge.demo.run import DemoOptions, run_demo

    if args.duration_s <= 0 or args.rate <= 0 or not 0 <= args.drift_share <= 1:
        raise SystemExit(
            "nexagauge demo: --duration and --rate must be > 0, --drift-share in [0, 1]"
        )
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    opts: DemoOptions = from_flags(DemoOptions, args)
    try:
        return asyncio.run(until_stop_signal(run_demo(opts)))
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


async def until_stop_signal(main: Coroutine[Any, Any, int]) -> int:
    """Await ``main``; on SIGTERM or SIGHUP cancel it, as ``asyncio.run`` does on Ctrl-C, so its
    ``finally`` cleanup runs, and return 128 + the signal number.

    Must run as the main task (where the signal handlers of the loop live). A repeated signal is
    ignored while the cleanup runs: it is bounded, and on Linux the children die with the process
    anyway (:func:`nexagauge.demo.stack.popen`).

    Example::

        raise SystemExit(asyncio.run(until_stop_signal(run_demo(DemoOptions()))))
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        if not received and task is not None:
            received.append(sig)
            task.cancel()
            # after SIGHUP the terminal may be gone: the message must not stop the shutdown
            with contextlib.suppress(OSError, ValueError):
                print(f"\n{sig.name}: stopping every process the demo started ...", flush=True)

    installed = []
    for sig in STOP_SIGNALS:
        # not available off the main thread or on some platforms: then only Ctrl-C stops it
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
    try:
        return await main
    except asyncio.CancelledError:
        if not received or task is None:
            raise
        task.uncancel()
        return 128 + received[0]
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
