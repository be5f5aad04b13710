"""Prices per model (shipped table, config overrides, batch discount) and the budget cap."""

from __future__ import annotations

import threading

import pytest

from horizonbench.models.budget import Budget
from horizonbench.schemas.config import ModelSpec
from horizonbench.schemas.prices import BATCH_DISCOUNT, DEFAULT_PRICES, PRICES_AS_OF, price_for


def test_longest_prefix_wins_so_snapshots_find_their_alias() -> None:
    assert price_for("openai", "gpt-4.1-mini-2025-04-14", None, None).input_per_mtok == 0.40
    assert price_for("openai", "gpt-4.1-2025-04-14", None, None).input_per_mtok == 2.00
    assert price_for("anthropic", "claude-sonnet-4-5-20250929", None, None).output_per_mtok == 15.0
    assert price_for("openai", "gpt-4.1", None, None).source == f"table {PRICES_AS_OF}"


def test_unknown_models_cost_nothing_and_say_so() -> None:
    unknown = price_for("openai_compatible", "Qwen/Qwen2.5-7B-Instruct", None, None)
    assert (unknown.input_per_mtok, unknown.output_per_mtok, unknown.source) == (0.0, 0.0, "unknown")
    # the same id at another provider is not guessed from the table either
    assert price_for("anthropic", "gpt-4.1", None, None).source == "unknown"


def test_config_overrides_the_table_and_batches_cost_half() -> None:
    spec = ModelSpec(name="m", provider="openai", model="gpt-4.1-mini", input_cost_per_mtok=1.0)
    price = spec.price()
    assert (price.input_per_mtok, price.output_per_mtok, price.source) == (1.0, 0.0, "config")
    assert price.cost(2_000_000, 0) == pytest.approx(2.0)
    assert price.cost(2_000_000, 0, batch=True) == pytest.approx(2.0 * BATCH_DISCOUNT)
    assert spec.cost_usd(1_000_000, 0) == pytest.approx(1.0)


def test_every_shipped_price_is_positive_and_output_costs_more() -> None:
    for (provider, prefix), (inp, out) in DEFAULT_PRICES.items():
        assert provider in ("openai", "anthropic") and prefix
        assert 0 < inp < out


def test_budget_admits_up_to_the_cap_counting_calls_in_flight() -> None:
    budget = Budget(1.0)
    assert budget.reserve(0.4) and budget.reserve(0.4)
    assert not budget.reserve(0.4) and budget.exhausted  # 1.2 > 1.0 with two in flight
    budget.settle(0.4, 0.1)  # one came back cheaper than estimated
    assert budget.reserve(0.4)
    assert budget.spent_usd == pytest.approx(0.1)


def test_budget_is_thread_safe() -> None:
    budget = Budget(100.0)
    admitted = []

    def take() -> None:
        for _ in range(100):
            if budget.reserve(1.0):
                admitted.append(1)
                budget.settle(1.0, 1.0)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 100 and budget.spent_usd == pytest.approx(100.0)


def test_no_budget_never_refuses() -> None:
    budget = Budget(None)
    assert all(budget.reserve(1e9) for _ in range(100)) and not budget.exhausted
    with pytest.raises(ValueError):
        Budget(-1)


def test_new_config_fields_have_defaults_and_old_configs_still_parse() -> None:
    spec = ModelSpec(
        name="old", provider="openai", model="gpt-4.1-mini", max_retries=4, input_cost_per_mtok=0.4
    )
    assert spec.rate_window_s == 1.0 and spec.stop_after_errors == 3 and not spec.batch
    assert spec.counts_requested_tokens()  # OpenAI counts max_tokens at admission
    assert not ModelSpec(name="a", provider="anthropic", model="claude-haiku-4-5").counts_requested_tokens()
    with pytest.raises(ValueError, match="batch"):
        ModelSpec(name="v", provider="openai_compatible", model="m", base_url="http://x", batch=True)
