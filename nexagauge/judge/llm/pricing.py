"""Model price table: USD per million input/output tokens, from ``pricing.toml`` plus user files.

Unknown models cost 0.0 and are reported once in the log (a self-hosted vLLM/Ollama model has no
per-token price; add an entry if yours does).

Example:
    >>> t = PriceTable.load()
    >>> round(t.cost("gpt-4o-mini-2024-07-18", 1_000_000, 0), 2)
    0.15
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
BUILTIN = Path(__file__).with_name("pricing.toml")


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M prompt tokens
    output: float  # USD per 1M completion tokens


@dataclass
class PriceTable:
    prices: dict[str, Price] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set, repr=False)

    @classmethod
    def load(cls, extra: str | Path | None = None) -> PriceTable:
        """The built-in table, overridden/extended by ``extra`` (same TOML layout)."""
        t = cls()
        t._merge(BUILTIN)
        if extra is not None:
            t._merge(Path(extra))
        return t

    def _merge(self, path: Path) -> None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"price table {path}: {e}") from None
        models = data.get("models", {})
        if not isinstance(models, dict):
            raise ValueError(f"price table {path}: [models] must be a table")
        for name, entry in models.items():
            try:
                self.prices[name] = Price(float(entry["input"]), float(entry["output"]))
            except (KeyError, TypeError, ValueError):
                raise ValueError(
                    f"price table {path}: models.{name!r} needs numeric 'input' and 'output'"
                ) from None

    def lookup(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        base = model.rsplit("/", 1)[-1]  # "openai/gpt-4o-mini" (LiteLLM style)
        if base in self.prices:
            return self.prices[base]
        best = max((k for k in self.prices if base.startswith(k)), key=len, default=None)
        return self.prices[best] if best else None

    def cost(self, model: str, input_tokens: float, output_tokens: float) -> float:
        """USD of one call; 0.0 (logged once) for a model without a price."""
        p = self.lookup(model)
        if p is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning("no price for judge model %r: its cost is reported as 0.0", model)
            return 0.0
        return (input_tokens * p.input + output_tokens * p.output) / 1_000_000
