"""work with the online evaluator's dead-letter topic

``nexagauge dlq replay``: evaluate dead-lettered evaluations again after a fix.

Reads ``kafka.dlq_topic`` (as consumer group ``<kafka.group_id>-dlq-replay``) from where the last
replay stopped up to the topic's current end, re-evaluates every failed evaluation that carries
its case, and emits the results exactly as ``nexagauge serve`` would (evaluation spans to the
OTLP endpoint, idempotent per evaluation id). What still fails is dead-lettered again (or, with
``--emit-failed``, emitted as a failed evaluation). Poison messages and records without a case are
counted, not replayed, unless ``--poison`` sends the raw ones back to their source topic. See
docs/online.md "Dead letters and replay".

Exit status: 0 when every replayable record evaluated, 1 when some failed again or crashed.

Example::

    nexagauge dlq replay --bootstrap-servers kafka:9092 --dry-run
    nexagauge dlq replay --bootstrap-servers kafka:9092 --otlp-endpoint http://collector:4317
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from nexagauge.cli.main import add_command
from nexagauge.cli.serve import add_kafka_args


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``dlq`` (with its ``replay`` action) on the top-level subparsers."""
    p = add_command(subparsers, "dlq", __doc__)
    actions = p.add_subparsers(dest="dlq_action", metavar="ACTION")
    r = actions.add_parser(
        "replay",
        help="re-evaluate dead-lettered evaluations and emit them as serve would",
        description=(__doc__ or "").split("\n\n")[2],
    )
    add_kafka_args(r, group_help="the evaluator's consumer group (replay uses <it>-dlq-replay)")
    r.add_argument("--dlq-topic", help="the dead-letter topic (kafka.dlq_topic)")
    r.add_argument("--otlp-endpoint", help="where evaluation spans are exported (OTLP)")
    r.add_argument(
        "--from-beginning",
        action="store_true",
        help="re-read the whole topic (already emitted evaluations are not counted again)",
    )
    r.add_argument("--limit", type=int, help="stop after this many dead letters")
    r.add_argument(
        "--emit-failed",
        action="store_true",
        help="emit what still fails as failed evaluations instead of dead-lettering it again",
    )
    r.add_argument(
        "--poison",
        action="store_true",
        help="also send poison messages (kept raw) back to their source topic, for serve to "
        "read again after a fix (e.g. a raised kafka.max_message_bytes)",
    )
    r.add_argument("--dry-run", action="store_true", help="only count what would be replayed")
    return p


def _settings(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from nexagauge.cli.main import CliError, load_cli_settings

    settings = load_cli_settings(args)
    kafka = {
        "bootstrap_servers": args.bootstrap_servers,
        "group_id": args.group_id,
        "dlq_topic": args.dlq_topic,
    }
    emit = {"otlp_endpoint": args.otlp_endpoint}
    for name, vals in (("kafka", kafka), ("emit", emit)):
        upd = {k: v for k, v in vals.items() if v is not None}
        if upd:
            cur = getattr(settings, name)
            try:
                setattr(settings, name, type(cur).model_validate({**cur.model_dump(), **upd}))
            except ValidationError as e:
                raise CliError(f"invalid {name} settings: {e}") from None
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be >= 1")
    return settings


def run(args: argparse.Namespace) -> int:
    """Entry point of ``nexagauge dlq ...``; returns the exit status."""
    from aiokafka.errors import KafkaConnectionError

    from nexagauge.cli.main import EXIT_FAILURES, EXIT_OK, EXIT_USAGE, CliError
    from nexagauge.online.replay import replay_dead_letters

    if getattr(args, "dlq_action", None) != "replay":
        print(
            "usage: nexagauge dlq replay [options]  (see nexagauge dlq replay --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    settings = _settings(args)
    try:
        stats = asyncio.run(
            replay_dead_letters(
                settings,
                from_beginning=args.from_beginning,
                limit=args.limit,
                emit_failed=args.emit_failed,
                dry_run=args.dry_run,
                poison=args.poison,
            )
        )
    except KafkaConnectionError as e:
        raise CliError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers!r} "
            f"(kafka.bootstrap_servers / --bootstrap-servers): {e}"
        ) from None
    print(("dry run: " if args.dry_run else "") + stats.summary())
    for err in stats.errors:
        print(f"  still failing: {err}")
    return EXIT_FAILURES if stats.failed_again or stats.crashed else EXIT_OK
