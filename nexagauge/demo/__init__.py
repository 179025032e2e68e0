"""The local demo: embedded broker and collector, the evaluator with the local judge, and a traced RAG app."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any


def from_flags(cls: Any, args: argparse.Namespace) -> Any:
    """An instance of dataclass ``cls`` made from parsed command-line flags whose ``dest`` is the
    field they set (``nexagauge demo`` -> ``DemoOptions``, the demo app -> ``DemoApp``); fields
    without a flag keep their defaults.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Opts:
        ...     rate: float = 1.0
        ...     seed: int = 7
        >>> from_flags(Opts, argparse.Namespace(rate=2.0, command="demo"))
        Opts(rate=2.0, seed=7)
    """
    given = vars(args)
    return cls(**{f.name: given[f.name] for f in fields(cls) if f.init and f.name in given})
