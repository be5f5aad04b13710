"""The horizon card: how far each model reasons, one row per family and metric, and the
leaderboard of cards across runs and nights.

Why one table: the answer to "how far can my model reason?" is spread over three kinds
of fit (L0 per maze setting, eps per puzzle and mode, sc* per world environment and dd),
each in its own analysis table and report section. The card gathers them per model
with their intervals and attempt counts, and says which design chose the attempts.

Pure frames in, frames out: ``tasks/analyse/horizons.py`` reads and writes the files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from horizonbench.analysis.compare import judge_move

#: the card's columns (``schemas/horizons.py`` HORIZONS_SCHEMA)
CARD_COLUMNS = ["model", "family", "metric", "value", "low", "high", "n_attempts", "design", "note"]
#: the leaderboard's columns (``schemas/horizons.py`` LEADERBOARD_SCHEMA)
LEADERBOARD_COLUMNS = [
    "model",
    "family",
    "setting_id",
    "metric",
    "runs",
    "latest_run",
    "value",
    "low",
    "high",
    "n_attempts",
    "design",
    "previous_run",
    "previous_value",
    "previous_low",
    "previous_high",
    "moved",
    "trend",
    "history",
]
#: what each metric means on a card (the report and the compare page say the same)
METRIC_MEANING = {
    "L0": "decay length: success falls by 1/e every L0 steps of logical depth (binomial MLE)",
    "eps": "per-step error: success at depth L is (1 - eps)^L (compounding fit)",
    "sc_star": "critical complexity: the first sc at which success falls to 1/2 (world study)",
}
#: which metric a higher value of means a better model
HIGHER_IS_BETTER = {"L0": True, "eps": False, "sc_star": True}


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _text(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else str(v)


def base_family(label: str) -> str:
    """``maze@noise-2`` -> ``maze``; ``hanoi/rollout`` -> ``hanoi``."""
    return str(label).partition("/")[0].partition("@")[0]


def card_rows(
    fits: pd.DataFrame,
    compounding: pd.DataFrame,
    critical_points: pd.DataFrame | None = None,
    grid: pd.DataFrame | None = None,
    adaptive: Iterable[str] = (),
    sc_scan: bool = False,
) -> pd.DataFrame:
    """The card of a run: L0 of every maze label (the binomial MLE, the one fit with an
    interval), eps of every puzzle label and mode, sc* of every world (env, dd) and
    horizon; sorted by model, metric, family. ``adaptive`` names the labels sampled in
    waves, ``sc_scan`` says the world study's cells were chosen by a scan; ``grid`` (the
    world grid: episodes per cell) gives sc*'s episode counts."""
    steered = set(adaptive)
    rows: list[dict[str, Any]] = []
    if len(fits):
        mle = fits[fits["method"] == "binomial_mle"]
        for r in mle.itertuples():
            if base_family(r.family) != "maze":
                continue
            rows.append(
                {
                    "model": str(r.model),
                    "family": str(r.family),
                    "metric": "L0",
                    "value": _num(r.L0),
                    "low": _num(r.L0_low),
                    "high": _num(r.L0_high),
                    "n_attempts": int(r.n_attempts),
                    "design": "adaptive" if r.family in steered else "fixed",
                    "note": _text(r.note),
                }
            )
    for r in compounding.itertuples() if len(compounding) else ():
        if base_family(r.family) == "maze":
            continue
        rows.append(
            {
                "model": str(r.model),
                "family": str(r.family),
                "metric": "eps",
                "value": _num(r.eps),
                "low": _num(r.eps_low),
                "high": _num(r.eps_high),
                "n_attempts": int(r.n_attempts),
                "design": "adaptive" if base_family(r.family) in steered or r.family in steered else "fixed",
                "note": _text(r.note),
            }
        )
    if critical_points is not None and len(critical_points):
        horizons = critical_points["horizon"].nunique() if "horizon" in critical_points else 1
        counts: dict[tuple[str, str, int, str], int] = {}
        if grid is not None and len(grid):
            keys = ["env", "model", "dd"] + (["horizon"] if "horizon" in grid else [])
            for key, n in grid.groupby(keys, sort=False)["n"].sum().items():
                k = key if len(keys) == 4 else (*key, "")
                counts[(str(k[0]), str(k[1]), int(k[2]), str(k[3] or ""))] = int(n)
        for r in critical_points.itertuples():
            horizon = str(getattr(r, "horizon", "") or "")
            label = f"{r.env} dd={int(r.dd)}" + (f" {horizon}" if horizons > 1 and horizon else "")
            rows.append(
                {
                    "model": str(r.model),
                    "family": label,
                    "metric": "sc_star",
                    "value": _num(r.sc_star),
                    "low": _num(r.sc_star_low),
                    "high": _num(r.sc_star_high),
                    "n_attempts": counts.get((str(r.env), str(r.model), int(r.dd), horizon), 0),
                    "design": "adaptive" if sc_scan else "fixed",
                    "note": _text(r.reason),
                }
            )
    out = pd.DataFrame(rows, columns=CARD_COLUMNS)
    order = {"L0": 0, "eps": 1, "sc_star": 2}
    out = out.assign(_m=out["metric"].map(order)).sort_values(["model", "_m", "family"], kind="mergesort")
    return out.drop(columns="_m").reset_index(drop=True)


def _trend(values: list[float | None]) -> float | None:
    """Least-squares slope of log(value) per run over the series' finite positive
    values: the relative change per run (0.1: about 10% up a night). None under two."""
    pts = [(i, math.log(v)) for i, v in enumerate(values) if v is not None and math.isfinite(v) and v > 0]
    if len(pts) < 2:
        return None
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    slope = float(np.polyfit(x, y, 1)[0])
    return round(math.expm1(slope), 9)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.3g}"


def leaderboard(cards: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """One row per (model, family, metric) across runs: the latest run's value and
    interval, the previous run's, ``moved`` (compare's rule: a z test of the log
    difference, each side's spread from the half of its interval facing the other),
    ``trend`` (relative change per run, log-linear) and ``history`` (the values in run
    order). ``cards`` has ``run`` and ``setting_id`` columns (runs of different
    settings are never compared: ``analysis.compare.setting_of``); ``order`` is the runs
    in series order."""
    if cards.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in LEADERBOARD_COLUMNS})
    rank = {run: i for i, run in enumerate(order)}
    df = cards.assign(_i=cards["run"].map(rank)).sort_values(
        ["model", "metric", "family", "setting_id", "_i"], kind="mergesort"
    )
    rows = []
    keys = ["model", "metric", "family", "setting_id"]
    for (model, metric, family, setting_id), part in df.groupby(keys, sort=False):
        recs = part.to_dict("records")
        last = recs[-1]
        prev = recs[-2] if len(recs) > 1 else None
        moved = None
        if prev is not None:
            vals = [_num(last[k]) for k in ("value", "low", "high")] + [
                _num(prev[k]) for k in ("value", "low", "high")
            ]
            if all(v is not None for v in vals):
                moved = judge_move(*vals)  # type: ignore[arg-type]
        values = [_num(r["value"]) for r in recs]
        rows.append(
            {
                "model": model,
                "family": family,
                "setting_id": setting_id,
                "metric": metric,
                "runs": len(recs),
                "latest_run": last["run"],
                "value": _num(last["value"]),
                "low": _num(last["low"]),
                "high": _num(last["high"]),
                "n_attempts": int(last["n_attempts"]),
                "design": last["design"],
                "previous_run": prev["run"] if prev else None,
                "previous_value": _num(prev["value"]) if prev else None,
                "previous_low": _num(prev["low"]) if prev else None,
                "previous_high": _num(prev["high"]) if prev else None,
                "moved": moved,
                "trend": _trend(values),
                "history": " -> ".join(_fmt(v) for v in values),
            }
        )
    out = pd.DataFrame(rows, columns=LEADERBOARD_COLUMNS)
    metric_order = {"L0": 0, "eps": 1, "sc_star": 2}
    out = out.assign(_m=out["metric"].map(metric_order)).sort_values(
        ["_m", "family", "model"], kind="mergesort"
    )
    return out.drop(columns="_m").reset_index(drop=True)
