"""Runs ``nexagauge serve``'s real service loop in a subprocess with a recording emitter.

Used by the multi-process tests (two consumers sharing partitions, SIGTERM mid-stream): the
emitter appends one line per emitted evaluation (``case_id``) to ``--record`` and flushes, so the
test can count by trace what was evaluated, across processes and restarts. Settings come from
``NEXAGAUGE_*`` environment variables exactly as for ``nexagauge serve``.

    python -m tests.online.serve_runner --record /tmp/x.jsonl [--emit-delay 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from typing import Any

from nexagauge.cli.serve import serve
from nexagauge.settings import load_settings


class RecordingEmitter:
    def __init__(self, path: str, delay: float) -> None:
        self.fh = open(path, "a", buffering=1)  # noqa: SIM115 - closed in aclose
        self.delay = delay

    async def emit(self, target: Any, case_result: Any, *, started_ns: int | None = None) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.fh.write(json.dumps({"case": target.case_id, "pid": os.getpid()}) + "\n")
        self.fh.flush()

    async def aclose(self) -> None:
        self.fh.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", required=True)
    ap.add_argument("--emit-delay", type=float, default=0.0)
    a = ap.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s"
    )
    settings = load_settings()
    rc = asyncio.run(serve(settings, emitter=RecordingEmitter(a.record, a.emit_delay)))
    print("RUNNER EXIT", rc, file=sys.stderr, flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
