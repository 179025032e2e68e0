"""The ``nexagauge`` command: one subcommand per module of :data:`SUBCOMMANDS`.

Each subcommand module exposes ``add_parser(subparsers)`` (registers its parser) and
``run(args) -> int`` (the exit status). Modules are imported one by one: a module that is missing
or fails to import is reported as an unavailable subcommand (``nexagauge serve`` then prints why
and exits 2) while every other subcommand keeps working.

Exit statuses shared by the subcommands: 0 success; 1 evaluation problems (bad records, node
errors); 2 usage or configuration errors; 3 a ``--fail-under`` bound was breached; 130 interrupted.

Example:
    >>> parser, _ = build_parser()
    >>> parser.parse_args(["nodes"]).command
    'nodes'
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType
from typing import Any

#: subcommand modules, in the order ``nexagauge --help`` lists them
SUBCOMMANDS: tuple[str, ...] = (
    "run",
    "report",
    "estimate",
    "cache",
    "nodes",
    "serve",
    "dlq",
    "demo",
)

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
EXIT_FAIL_UNDER = 3
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A usage/configuration problem: printed as ``nexagauge: error: ...``, exit status 2."""


def _version() -> str:
    try:
        return metadata.version("nexagauge")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _load(name: str) -> tuple[ModuleType | None, str | None]:
    try:
        mod = importlib.import_module(f"nexagauge.cli.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"nexagauge.cli.{name}":
            return None, f"the {name!r} command is not installed in this build"
        return None, _missing_dependency(name, e) or f"the {name!r} command cannot start: {e}"
    except Exception as e:  # a broken module must not take the other commands down
        return None, f"the {name!r} command failed to load: {type(e).__name__}: {e}"
    if not (callable(getattr(mod, "add_parser", None)) and callable(getattr(mod, "run", None))):
        return None, f"the {name!r} command module lacks add_parser()/run()"
    return mod, None


def _missing_dependency(command: str, exc: ModuleNotFoundError) -> str | None:
    """The message for a third-party module missing because the evaluator extra is not installed.

    The base install (``pip install nexagauge``) is the tracing SDK only; the commands need
    ``pip install 'nexagauge[evaluator]'``. None when the missing module is part of nexagauge.
    """
    missing = (exc.name or "").partition(".")[0]
    if not missing or missing == "nexagauge":
        return None
    return (
        f"the {command!r} command needs the evaluator, which is not installed "
        f"(missing module {missing!r}): pip install 'nexagauge[evaluator]'"
    )


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The top-level parser and the subcommands that could not be loaded (name -> why)."""
    parser = argparse.ArgumentParser(
        prog="nexagauge",
        description="Evaluate LLM applications: offline datasets (run/estimate) and online traces.",
    )
    parser.add_argument("--version", action="version", version=f"nexagauge {_version()}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    unavailable: dict[str, str] = {}
    for name in SUBCOMMANDS:
        mod, why = _load(name)
        if mod is None:
            assert why is not None
            unavailable[name] = why
            p = sub.add_parser(name, help=f"(unavailable) {why}", add_help=False)
            p.set_defaults(_unavailable=why)
            continue
        before = set(sub.choices)
        try:
            mod.add_parser(sub)
        except Exception as e:
            why = f"the {name!r} command failed to register: {type(e).__name__}: {e}"
            unavailable[name] = why
            if name not in sub.choices:
                sub.add_parser(name, help=f"(unavailable) {why}", add_help=False)
            sub.choices[name].set_defaults(_unavailable=why)
            continue
        for added in set(sub.choices) - before:
            sub.choices[added].set_defaults(_handler=mod.run)
    return parser, unavailable


def parse_pairs(items: Sequence[str] | None, flag: str) -> dict[str, str]:
    """``["a=b", "c=d"]`` -> ``{"a": "b", "c": "d"}`` for repeated ``KEY=VALUE`` flags.

    Example:
        >>> parse_pairs(["output=model_answer"], "--field")
        {'output': 'model_answer'}
    """
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise CliError(f"{flag} expects KEY=VALUE, got {item!r}")
        if key.strip() in out:
            raise CliError(f"{flag} {key.strip()!r} given twice")
        out[key.strip()] = value.strip()
    return out


def add_command(sub: Any, name: str, doc: str | None) -> argparse.ArgumentParser:
    r"""Register subcommand ``name`` with the texts of its module docstring ``doc``: the summary
    line is its line in ``nexagauge --help``, the paragraph after it its ``--help`` description
    (argparse re-wraps it, so it is written like any docstring paragraph).

    Example:
        >>> sub = argparse.ArgumentParser(prog="x").add_subparsers()
        >>> add_command(sub, "hello", "say hello\n\nPrint a greeting,\nthen exit.").description
        'Print a greeting,\nthen exit.'
    """
    summary, description = (doc or "").split("\n\n")[:2]
    return sub.add_parser(name, help=summary, description=description)


def load_cli_settings(args: argparse.Namespace, **run_overrides: Any) -> Any:
    """Settings with the documented precedence, ``--config`` and per-command ``run`` overrides."""
    from pydantic import ValidationError

    from nexagauge.settings import load_settings

    try:
        settings = load_settings(getattr(args, "config", None))
    except FileNotFoundError as e:
        raise CliError(str(e)) from None
    except ValidationError as e:
        raise CliError(f"invalid settings: {e}") from None
    except ValueError as e:  # e.g. a TOML syntax error in the config file
        raise CliError(f"invalid config: {e}") from None
    upd = {k: v for k, v in run_overrides.items() if v is not None}
    if upd:
        settings.run = settings.run.model_validate({**settings.run.model_dump(), **upd})
    return settings


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    from nexagauge.online.delivery.redact import install_log_redaction

    install_log_redaction()  # no secret (app data, the judge key) in any log line


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of ``nexagauge``; returns the exit status."""
    parser, _unavailable = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "_unavailable", None):
        print(f"nexagauge: error: {args._unavailable}", file=sys.stderr)
        return EXIT_USAGE
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    _setup_logging(args.verbose)
    handler = getattr(args, "_handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(handler(args))
    except CliError as e:
        print(f"nexagauge: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as e:
        why = _missing_dependency(args.command, e)
        if why is None:
            raise
        print(f"nexagauge: error: {why}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nnexagauge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `nexagauge nodes | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
