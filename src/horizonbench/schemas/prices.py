"""List prices per million tokens, so every attempt has a cost and a run has a total.

The shipped table holds the providers' published standard prices for common models, as
the horizonbench authors knew them on :data:`PRICES_AS_OF`. Prices change: a model
entry's ``input_cost_per_mtok`` / ``output_cost_per_mtok`` override the table, and a
model the table does not know (and no override) costs 0 and is flagged
``price: unknown`` in the manifest, never guessed. Batch APIs bill
:data:`BATCH_DISCOUNT` of the standard price (both providers document half price).
"""

from __future__ import annotations

from dataclasses import dataclass

#: when the shipped prices were taken from the providers' pricing pages
PRICES_AS_OF = "2025-11-01"
BATCH_DISCOUNT = 0.5


@dataclass(frozen=True, slots=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    source: str  # "config" | "table <as-of>" | "unknown"

    def cost(self, input_tokens: int, output_tokens: int, *, batch: bool = False) -> float:
        usd = (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6
        return usd * BATCH_DISCOUNT if batch else usd


#: (provider, model id prefix) -> (input, output) USD per million tokens; the longest
#: matching prefix wins, so dated snapshots ("gpt-4.1-mini-2025-04-14") find their alias
DEFAULT_PRICES: dict[tuple[str, str], tuple[float, float]] = {
    ("openai", "gpt-5"): (1.25, 10.00),
    ("openai", "gpt-5-mini"): (0.25, 2.00),
    ("openai", "gpt-5-nano"): (0.05, 0.40),
    ("openai", "gpt-4.1"): (2.00, 8.00),
    ("openai", "gpt-4.1-mini"): (0.40, 1.60),
    ("openai", "gpt-4.1-nano"): (0.10, 0.40),
    ("openai", "gpt-4o"): (2.50, 10.00),
    ("openai", "gpt-4o-mini"): (0.15, 0.60),
    ("openai", "o3"): (2.00, 8.00),
    ("openai", "o3-mini"): (1.10, 4.40),
    ("openai", "o4-mini"): (1.10, 4.40),
    ("anthropic", "claude-opus-4-1"): (15.00, 75.00),
    ("anthropic", "claude-opus-4-0"): (15.00, 75.00),
    ("anthropic", "claude-opus-4-5"): (5.00, 25.00),
    ("anthropic", "claude-sonnet-4-5"): (3.00, 15.00),
    ("anthropic", "claude-sonnet-4-0"): (3.00, 15.00),
    ("anthropic", "claude-sonnet-4-2"): (3.00, 15.00),
    ("anthropic", "claude-3-7-sonnet"): (3.00, 15.00),
    ("anthropic", "claude-haiku-4-5"): (1.00, 5.00),
    ("anthropic", "claude-3-5-haiku"): (0.80, 4.00),
}


def price_for(
    provider: str,
    model: str | None,
    input_override: float | None,
    output_override: float | None,
) -> Price:
    """The price of one model entry: config overrides first, then the shipped table."""
    if input_override is not None or output_override is not None:
        return Price(float(input_override or 0.0), float(output_override or 0.0), "config")
    if provider in ("offline", "local"):  # computed here, nothing billed
        return Price(0.0, 0.0, provider)
    best: tuple[float, float] | None = None
    best_len = -1
    for (prov, prefix), value in DEFAULT_PRICES.items():
        if prov == provider and model and model.startswith(prefix) and len(prefix) > best_len:
            best, best_len = value, len(prefix)
    if best is None:
        return Price(0.0, 0.0, "unknown")
    return Price(best[0], best[1], f"table {PRICES_AS_OF}")
