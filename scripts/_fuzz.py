"""What the on-demand fuzz scripts share (``fuzz_online.py``, ``fuzz_records.py``).

Each script has two parts: the suite's property tests re-run with many more examples
(``NEXAGAUGE_FUZZ_EXAMPLES``), then a time-bounded mutation campaign. The scripts bring their
seeds, mutations and invariants; this module brings the command line, the property run and the
campaign loop (seeded, so a seed replays the same inputs; every failing input saved to ``--out``
with its traceback).

Example (a script's ``main``)::

    a = arguments(__doc__, examples=2000).parse_args()
    return finish(a, "tests/online/test_properties.py",
                  lambda: campaign(a.seconds, a.seed, a.out, generate, check, files))
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def arguments(doc: str | None, examples: int, examples_help: str = "") -> argparse.ArgumentParser:
    """The options every fuzz script has (a script adds its own to the parser it gets back)."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="mutation campaign length")
    ap.add_argument(
        "--examples", type=int, default=examples, help=examples_help or "examples per property test"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("fuzz-out"))
    ap.add_argument("--skip-properties", action="store_true")
    return ap


def run_properties(test_file: str, examples: int) -> int:
    """Exit status of pytest on ``test_file`` (repository-relative) with ``examples`` per property."""
    env = {**os.environ, "NEXAGAUGE_FUZZ_EXAMPLES": str(examples), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", test_file]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def campaign(
    seconds: float,
    seed: int,
    out: Path,
    generate: Callable[[random.Random], T],
    check: Callable[[T, int], object],
    files: Callable[[T], dict[str, bytes]],
) -> int:
    """Check generated inputs until ``seconds`` have passed; returns the number of failures.

    ``generate`` makes the next input from the seeded generator; ``check(input, n)`` (``n`` counts
    inputs from 1) raises on a broken invariant; then ``files(input)`` (suffix -> content) is
    saved to ``out`` as ``fail-<k>.<suffix>`` next to ``fail-<k>.txt``, the traceback.
    """
    rnd = random.Random(seed)
    n = failures = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        item = generate(rnd)
        n += 1
        try:
            check(item, n)
        except Exception:
            failures += 1
            out.mkdir(parents=True, exist_ok=True)
            for suffix, content in files(item).items():
                (out / f"fail-{failures}.{suffix}").write_bytes(content)
            (out / f"fail-{failures}.txt").write_text(traceback.format_exc())
    rate = n / max(seconds, 1e-9)
    print(f"mutation campaign: {n} inputs in {seconds:.0f} s ({rate:.0f}/s), {failures} failures")
    return failures


def finish(a: argparse.Namespace, test_file: str, run_campaign: Callable[[], int]) -> int:
    """Both parts as the options say; the exit status (1 when any invariant failed)."""
    rc = 0 if a.skip_properties else run_properties(test_file, a.examples)
    failures = run_campaign() if a.seconds > 0 else 0
    return 1 if rc or failures else 0
