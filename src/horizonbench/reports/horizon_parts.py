"""The report's opening: one horizon card per model (``analysis/horizons.parquet``), and
for an adaptive study the waves that pinned each interval (``analysis/adaptive.parquet``)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from horizonbench.analysis.horizons import METRIC_MEANING

#: how a metric is written on a card
METRIC_LABEL = {"L0": "L0", "eps": "ε", "sc_star": "sc*"}


def value_text(v: Any) -> str:
    """A card's number: 3 significant digits, an em dash when missing, ∞ for no decay."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    x = float(v)
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.3g}"


def interval_text(low: Any, high: Any) -> str:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return "no interval"
    return f"{value_text(low)} to {value_text(high)}"


def _waves_line(waves: pd.DataFrame, model: str, family: str) -> str | None:
    mine = waves[(waves["model"] == model) & (waves["family"] == family)] if len(waves) else waves
    if mine is None or mine.empty:
        return None
    last = mine.sort_values("wave").iloc[-1]
    stop = last["stop"] if isinstance(last["stop"], str) else "still going"
    hw = "no interval" if pd.isna(last["half_width"]) else f"±{float(last['half_width']):.1%}"
    return (
        f"{int(last['wave'])} waves, {int(last['calls'])} calls on {int(last['instances'])} instances, "
        f"half-width {hw} (target ±{float(last['target']):.0%}); stopped: {stop}"
    )


def horizon_cards(card: pd.DataFrame, waves: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """One card per model in the card table's order: its rows (family, metric and what
    it means, value, interval, attempts, design, and the waves of an adaptive row)."""
    waves = waves if waves is not None else pd.DataFrame()
    out = []
    for model, part in card.groupby("model", sort=False) if len(card) else ():
        rows = []
        for r in part.to_dict("records"):
            rows.append(
                {
                    "family": r["family"],
                    "metric": METRIC_LABEL.get(r["metric"], r["metric"]),
                    "meaning": METRIC_MEANING.get(r["metric"], ""),
                    "value": value_text(r["value"]),
                    "interval": interval_text(r["low"], r["high"]),
                    "n": int(r["n_attempts"]),
                    "design": r["design"],
                    "waves": _waves_line(waves, str(model), str(r["family"]))
                    if r["design"] == "adaptive"
                    else None,
                    "note": r["note"] if isinstance(r["note"], str) else None,
                }
            )
        out.append({"model": str(model), "rows": rows})
    return out
