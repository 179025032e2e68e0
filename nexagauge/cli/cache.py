"""show cache statistics or clear cache entries

Inspect (stats, the default) or clear the content-addressed caches.

``nexagauge cache [stats|clear]``: inspect or clear the on-disk caches.

Namespaces: ``nodes`` (node results, :class:`~nexagauge.graph.cache.NodeCache`) and ``judge``
(raw judge responses). ``--dir`` defaults to ``cache.dir`` from the settings
(``NEXAGAUGE_CACHE_DIR``, default ``.nexagauge-cache``).

Example:
    nexagauge cache stats
    nexagauge cache clear --namespace judge --older-than 7d
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from nexagauge.cli._output import format_table, human_bytes, parse_duration
from nexagauge.cli.main import EXIT_OK, CliError, add_command, load_cli_settings

NAMESPACES = ("nodes", "judge")


def add_parser(sub: Any) -> None:
    p = add_command(sub, "cache", __doc__)
    p.add_argument("action", nargs="?", choices=("stats", "clear"), default="stats")
    p.add_argument("--namespace", choices=NAMESPACES, help="only this cache (default: all)")
    p.add_argument(
        "--older-than", metavar="AGE", help="clear only entries older than AGE (45s, 30m, 12h, 7d)"
    )
    p.add_argument("--dir", metavar="DIR", help="cache directory (default: settings cache.dir)")
    p.add_argument("--config", metavar="FILE", help="TOML settings file")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _stats(root: Path, namespace: str | None) -> dict[str, Any]:
    from nexagauge.graph.cache import _entries

    per: dict[str, dict[str, int]] = {}
    for ns, f in _entries(root):
        if namespace is not None and ns != namespace:
            continue
        try:
            size = f.stat().st_size
        except OSError:  # removed by a concurrent clear
            continue
        d = per.setdefault(ns, {"entries": 0, "bytes": 0})
        d["entries"] += 1
        d["bytes"] += size
    return {
        "dir": str(root),
        "entries": sum(d["entries"] for d in per.values()),
        "bytes": sum(d["bytes"] for d in per.values()),
        "namespaces": per,
    }


def run(args: argparse.Namespace) -> int:
    from nexagauge.graph.cache import clear_cache

    root = Path(args.dir) if args.dir else Path(load_cli_settings(args).cache.dir)
    if args.action == "stats":
        if args.older_than:
            raise CliError("--older-than applies to `cache clear`")
        doc = _stats(root, args.namespace)
        if args.json:
            print(json.dumps(doc, indent=2))
        else:
            rows = [
                [ns, d["entries"], human_bytes(d["bytes"])]
                for ns, d in sorted(doc["namespaces"].items())
            ]
            rows.append(["TOTAL", doc["entries"], human_bytes(doc["bytes"])])
            print(f"cache {root}" + ("" if root.is_dir() else " (does not exist yet)"))
            print(format_table(["namespace", "entries", "size"], rows))
        return EXIT_OK
    try:
        older = parse_duration(args.older_than) if args.older_than else None
    except ValueError as e:
        raise CliError(str(e)) from None
    removed = clear_cache(root, args.namespace, older)
    if args.json:
        print(json.dumps({"dir": str(root), "removed": removed}))
    else:
        what = f"namespace {args.namespace}" if args.namespace else "all namespaces"
        age = f", older than {args.older_than}" if args.older_than else ""
        print(f"removed {removed} entries from {root} ({what}{age})")
    return EXIT_OK
