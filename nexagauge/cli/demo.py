"""``nexagauge demo``: the full online pipeline locally (see :mod:`nexagauge.demo.run`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "demo",
        help="run the whole online pipeline locally (broker, collector, evaluator, demo app)",
        description=(
            "Starts an embedded Kafka-protocol broker and OTLP collector, the evaluator with the "
            "local judge (or NEXAGAUGE_JUDGE_BASE_URL's LLM judge), and a RAG app traced with "
            "@nexagauge.trace whose answers drift after a while; prints live progress and a "
            "summary, serves /metrics while running, and stops every process it started."
        ),
    )
    p.add_argument(
        "--duration", type=float, default=90.0, help="seconds of app traffic (default 90)"
    )
    p.add_argument("--rate", type=float, default=6.0, help="questions per second (default 6)")
    p.add_argument("--drift-after", type=float, help="seconds before drift starts (default: half)")
    p.add_argument("--drift-share", type=float, default=0.6, help="share of drifted answers (0.6)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--metrics-port", type=int, default=9464, help="port of /metrics (0: any free)")
    p.add_argument("--config", help="a nexagauge.toml settings file")
    return p


def run(args: argparse.Namespace) -> int:
    from nexagauge.demo.run import DemoOptions, run_demo

    if args.duration <= 0 or args.rate <= 0 or not 0 <= args.drift_share <= 1:
        raise SystemExit(
            "nexagauge demo: --duration and --rate must be > 0, --drift-share in [0, 1]"
        )
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    opts = DemoOptions(
        duration_s=args.duration,
        rate=args.rate,
        drift_after_s=args.drift_after,
        drift_share=args.drift_share,
        seed=args.seed,
        metrics_port=args.metrics_port,
        config=args.config,
    )
    try:
        return asyncio.run(run_demo(opts))
    except KeyboardInterrupt:
        return 130
