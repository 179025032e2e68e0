"""evaluate production traces continuously from Kafka

``nexagauge serve``: the online evaluator (Kafka consumer group -> scores as spans + metrics).

Runs until SIGTERM or SIGINT, then drains in-flight evaluations within
``online.drain_timeout_s``, commits finished offsets and leaves the consumer group (exit 0).
Scale out by starting more processes with the same ``kafka.group_id``.

Flags override the config file and ``NEXAGAUGE_*`` variables for the most common settings; every
other setting comes from the config file (``--config``) or the environment.

Example::

    nexagauge serve --bootstrap-servers kafka:9092 --traces-topic otlp_spans --rate 0.05 \\
        --only relevance,grounding --metrics-port 9464
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
from typing import Any

from nexagauge.cli.main import add_command

log = logging.getLogger("nexagauge.serve")


def add_kafka_args(p: argparse.ArgumentParser, *, group_help: str) -> None:
    """The options every command that reads the evaluator's topics takes (``serve``,
    ``dlq replay``): the config file, the brokers and the consumer group."""
    p.add_argument(
        "--config", help="TOML config file (default: $NEXAGAUGE_CONFIG or ./nexagauge.toml)"
    )
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers (host:port,...)")
    p.add_argument("--group-id", help=group_help)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``serve`` on the top-level subparsers."""
    p = add_command(subparsers, "serve", __doc__)
    add_kafka_args(p, group_help="consumer group of the evaluator")
    p.add_argument("--traces-topic", help="topic of OTLP trace export requests")
    p.add_argument("--logs-topic", help="topic of OTLP log export requests")
    p.add_argument("--encoding", choices=["otlp_proto", "otlp_json"])
    p.add_argument(
        "--no-rekey",
        action="store_true",
        help="skip the re-key stage (the producer already partitions by trace id)",
    )
    p.add_argument("--no-logs", action="store_true", help="do not consume the logs topic")
    p.add_argument("--target", help="node to evaluate (default: eval = every metric)")
    p.add_argument("--only", help="comma-separated metric nodes to run")
    p.add_argument("--rate", type=float, help="default sampling rate in [0, 1]")
    p.add_argument("--max-in-flight", type=int, help="evaluations at once before backpressure")
    p.add_argument("--grace", type=float, help="seconds after the root span ends (trace complete)")
    p.add_argument(
        "--inactivity", type=float, help="seconds without spans before a trace is complete"
    )
    p.add_argument("--metrics-host", help="bind address of /metrics, /healthz, /readyz")
    p.add_argument("--metrics-port", type=int, help="port of /metrics (0: a free port)")
    p.add_argument("--otlp-endpoint", help="where evaluation spans are exported (OTLP)")
    return p


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    kafka = {
        "bootstrap_servers": args.bootstrap_servers,
        "group_id": args.group_id,
        "traces_topic": args.traces_topic,
        "logs_topic": args.logs_topic,
        "encoding": args.encoding,
    }
    online: dict[str, Any] = {
        "target": args.target,
        "nodes": [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None,
        "max_in_flight": args.max_in_flight,
        "trace_grace_s": args.grace,
        "trace_inactivity_s": args.inactivity,
        "rekey": False if args.no_rekey else None,
        "consume_logs": False if args.no_logs else None,
    }
    sampling = {"default_rate": args.rate}
    emit = {
        "metrics_host": args.metrics_host,
        "metrics_port": args.metrics_port,
        "otlp_endpoint": args.otlp_endpoint,
    }
    out: dict[str, dict[str, Any]] = {}
    for name, sec in (("kafka", kafka), ("online", online), ("sampling", sampling), ("emit", emit)):
        vals = {k: v for k, v in sec.items() if v is not None}
        if vals:
            out[name] = vals
    return out


def settings_from_args(args: argparse.Namespace) -> Any:
    """Settings with CLI flags applied on top of config file / environment / defaults."""
    from pydantic import ValidationError

    from nexagauge.cli.main import CliError, load_cli_settings
    from nexagauge.graph.planner import PlanError, plan

    settings = load_cli_settings(args)
    for section, vals in _overrides(args).items():
        cur = getattr(settings, section)
        try:
            setattr(settings, section, type(cur).model_validate({**cur.model_dump(), **vals}))
        except ValidationError as e:
            raise CliError(f"invalid {section} settings: {e}") from None
    try:
        plan(settings.online.target, only=settings.online.nodes)
        for rule in settings.sampling.rules:
            if rule.nodes is not None:
                plan(settings.online.target, only=rule.nodes)
    except PlanError as e:
        raise CliError(str(e)) from None
    return settings


#: seconds past ``online.drain_timeout_s`` after SIGTERM at which ``nexagauge serve`` exits hard
HARD_EXIT_GRACE_S = 1.0


def arm_hard_exit(after_s: float) -> threading.Timer:
    """A daemon timer that ends the process (``os._exit(1)``) ``after_s`` seconds from now.

    The graceful stop is bounded step by step (:class:`~nexagauge.online.delivery.shutdown.Deadline`),
    but a client library can still block the interpreter's exit (a task that swallows its
    cancellation, a worker thread waiting on a dead peer); this backstop keeps the promise that
    SIGTERM ends ``nexagauge serve``. Uncommitted work is re-delivered (at-least-once).
    """

    def fire() -> None:
        log.error("nexagauge serve: not stopped %.1fs after SIGTERM; exiting now", after_s)
        logging.shutdown()
        os._exit(1)

    t = threading.Timer(after_s, fire)
    t.daemon = True
    t.start()
    return t


#: the garbage collector's generation-0 threshold under ``nexagauge serve`` (CPython's is 700)
GC_GEN0_THRESHOLD = 20_000


def tune_gc() -> None:
    """Garbage collection for a long-running evaluator, once it has started: everything alive
    now (modules, pydantic schemas, clients: a few hundred thousand objects) is moved out of the
    collector's sight (``gc.freeze``) and young collections run every 20,000 allocations instead
    of 700. Before, collections walking that start-up heap were 12 % of serve's CPU at saturation
    (py-spy, bench/online_latency.py); cyclic garbage is still collected, a little later.

    Example:
        >>> import gc
        >>> old = gc.get_threshold(); tune_gc(); gc.get_threshold()[0]
        20000
        >>> gc.unfreeze(); gc.set_threshold(*old)
    """
    gc.collect()
    gc.freeze()
    _, g1, g2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, g1, g2)


async def serve(
    settings: Any,
    *,
    emitter: Any = None,
    stop: asyncio.Event | None = None,
    hard_exit: bool = False,
) -> int:
    """Run the service until SIGTERM/SIGINT (or ``stop``), then shut down gracefully.

    Returns the process exit code (0 after a clean drain). ``nexagauge serve`` calls it with
    ``hard_exit=True``: the process then ends at most ``online.drain_timeout_s`` + 1 s after the
    signal whatever the broker does (:func:`arm_hard_exit`).

    Example::

        settings = nexagauge.load_settings("nexagauge.toml", kafka={"bootstrap_servers": "kafka:9092"})
        raise SystemExit(asyncio.run(nexagauge.serve(settings)))
    """
    from nexagauge.online.service import OnlineService

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    drain = settings.online.drain_timeout_s
    armed: list[threading.Timer] = []

    def on_signal() -> None:
        stop.set()
        if hard_exit and not armed:
            armed.append(arm_hard_exit(drain + HARD_EXIT_GRACE_S))

    for sig in (signal.SIGTERM, signal.SIGINT):
        # not available off the main thread or on some platforms: then only ``stop`` ends it
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    svc = OnlineService(settings, emitter=emitter)
    try:
        await svc.start()
    except BaseException:
        await svc.stop()
        raise
    if hard_exit:  # the process is ours (``nexagauge serve``), not an embedding application's
        tune_gc()
    k = settings.kafka
    log.warning(
        "nexagauge serve: consuming %s from %s as group %s; metrics on http://%s:%s/metrics",
        k.rekeyed_topic if settings.online.rekey else k.traces_topic,
        k.bootstrap_servers,
        k.group_id,
        settings.emit.metrics_host,
        svc.metrics_port,
    )
    healthy = await svc.run_until(stop)
    if not healthy:
        log.error("nexagauge serve: a consumer loop failed; stopped")
        return 1
    log.warning("nexagauge serve: stopped (offsets committed, left the group)")
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``nexagauge serve``; returns the exit status."""
    from aiokafka.errors import KafkaConnectionError

    from nexagauge.cli.main import CliError

    settings = settings_from_args(args)
    try:
        return asyncio.run(serve(settings, hard_exit=True))
    except KafkaConnectionError as e:
        raise CliError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers!r} "
            f"(kafka.bootstrap_servers / --bootstrap-servers): {e}"
        ) from None
