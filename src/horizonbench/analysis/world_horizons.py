"""The horizon of a world study: which worlds fit in T, what the other horizon setting
would change, and the paper's T scan (T-Fine, Table 7).

A study sets T one of two ways (``worlds.horizon``): ``paper``, the regime's fixed T of
Table 11 (Regime III: 40), or ``relative``, T = ceil(factor x L*) per world. At a fixed
T an episode whose optimal plan is longer (L* > T) cannot be won by any agent: it is
left out of every rate, and a cell with only such worlds has no rate at all. Which
cells that hits is a property of the worlds, not of the agents, so it is read here from
the episodes' L*:

- :func:`horizon_check`: per (env, sc, dd) cell, the worlds, their L* (min, median,
  max), the T the run used, the worlds it could not win, and how many would be
  unwinnable at the regime's T, whichever setting the run used (a relative run says
  what the paper's T would cut; a paper run's own count is the same number);
- :func:`t_fine`: the horizon rows of the Table 4 table (``analysis/ablations.py``,
  which a T scan is: ``worlds.ablations: {T: [...]}`` around the paper's T) as Table 7,
  T as a number and Table 4's coarse levels marked as the paper marks them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.schemas.worlds import REGIMES

__all__ = ["CHECK_COLUMNS", "T_FINE_COLUMNS", "TABLE4_T_LEVELS", "horizon_check", "horizon_tables", "t_fine"]

CHECK_COLUMNS = [
    "env",
    "sc",
    "dd",
    "worlds",
    "lstar_min",
    "lstar_median",
    "lstar_max",
    "t_min",
    "t_max",
    "unwinnable",
    "regime_t",
    "unwinnable_at_regime_t",
    "horizon",
]
#: Table 7's columns: the key, T, then the Table 4 table's rates and difference
#: (``schemas.tables``: n through diff_high), Table 4's levels marked, the horizon
T_FINE_COLUMNS = [
    *("env", "model", "sc", "dd", "t", "n", "successes", "p", "wilson_low", "wilson_high"),
    *("n_unwinnable", "p_all", "diff", "diff_low", "diff_high", "coarse_reference", "horizon"),
]
#: Table 4's horizon levels: Table 7 marks them (*) as the coarse ablation's cells
TABLE4_T_LEVELS: tuple[int, ...] = (10, 20, 40, 80)
#: the episode columns :func:`horizon_check` reads (a hand-made table may lack them)
_CHECK_NEEDS = (
    "env",
    "regime",
    "sc",
    "dd",
    "seed",
    "archetype",
    "horizon",
    "optimal_length",
    "horizon_short",
)


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def horizon_check(episodes: pd.DataFrame, horizon: str = "") -> pd.DataFrame:
    """Per (env, sc, dd): the cell's distinct worlds (seed and archetype: every agent
    meets the same ones, so each counts once), their L*, the range of T the run gave
    the cell (``t_min``, ``t_max``), ``unwinnable`` (worlds with L* > their T; in a T
    scan, at the regime's T) and ``unwinnable_at_regime_t`` (L* > the regime's fixed
    T), over the episodes at the regime's secondary axes (an ablation of branching, say,
    has the same worlds). ``horizon`` names the run's setting."""
    if episodes.empty or not set(_CHECK_NEEDS) <= set(episodes.columns):
        return _empty(CHECK_COLUMNS)
    worlds = episodes.drop_duplicates(["env", "sc", "dd", "seed", "archetype", "horizon"])
    rows = []
    for (env, sc, dd), cell in worlds.groupby(["env", "sc", "dd"], sort=True):
        regime = REGIMES.get(str(cell["regime"].iloc[0]))
        regime_t = int(regime.horizon) if regime is not None else -1
        t = cell["horizon"].to_numpy(np.int64)
        if cell.groupby(["seed", "archetype"])["horizon"].nunique().max() > 1 and (t == regime_t).any():
            cell = cell[cell["horizon"] == regime_t]  # a T scan: its backdrop T decides
        unique = cell.drop_duplicates(["seed", "archetype"])
        lstar_u = unique["optimal_length"].to_numpy(np.int64)
        lstar = lstar_u
        rows.append(
            {
                "env": str(env),
                "sc": int(sc),
                "dd": int(dd),
                "worlds": len(unique),
                "lstar_min": int(lstar.min()),
                "lstar_median": float(np.median(lstar_u)),
                "lstar_max": int(lstar.max()),
                "t_min": int(t.min()),
                "t_max": int(t.max()),
                "unwinnable": int((unique["horizon_short"].astype(bool)).sum()),
                "regime_t": regime_t,
                "unwinnable_at_regime_t": int((lstar_u > regime_t).sum()) if regime_t > 0 else 0,
                "horizon": horizon,
            }
        )
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def t_fine(ablations: pd.DataFrame) -> pd.DataFrame:
    """Table 7 from the Table 4 table (``analysis.ablations.ablation_table``): its
    horizon rows, one per (env, model, sc, dd, T), the backdrop's T included, in T
    order, with ``t`` as a number and ``coarse_reference`` marking Table 4's levels
    (10, 20, 40, 80), which Table 7 stars. The rates are that table's: Wilson intervals
    over the worlds T >= L*, ``n_unwinnable`` (T < L*, left out of n; a T where no world
    fits has n 0 and no rate), ``p_all`` (those worlds as failures) and the paired
    difference from the backdrop. Empty when the run scanned no T."""
    if ablations.empty:
        return _empty(T_FINE_COLUMNS)
    rows = ablations[ablations["axis"] == "horizon"]
    if rows.empty:
        return _empty(T_FINE_COLUMNS)
    t = rows["level"].astype(int)
    out = rows.assign(t=t, coarse_reference=t.isin(TABLE4_T_LEVELS))
    out = out.sort_values(["env", "model", "sc", "dd", "t"], kind="stable").reset_index(drop=True)
    return out[T_FINE_COLUMNS]


def horizon_tables(episodes: pd.DataFrame, horizon: str = "") -> dict[str, pd.DataFrame]:
    """The tables of the backdrop's episodes by file name
    (``<run>/analysis/worlds_<name>.parquet``); :func:`t_fine` reads the Table 4 table."""
    return {"horizons": horizon_check(episodes, horizon)}
