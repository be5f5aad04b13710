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
- :func:`t_fine`: success per T of a horizon scan at one cell (the backdrop's T and
  every ``ablations.horizon`` level), Wilson intervals, the worlds T < L* left out, and
  Table 4's coarse levels marked as the paper marks them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horizonbench.analysis import phase
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
T_FINE_COLUMNS = [
    "env",
    "model",
    "sc",
    "dd",
    "t",
    "n",
    "successes",
    "p",
    "wilson_low",
    "wilson_high",
    "n_unwinnable",
    "coarse_reference",
    "horizon",
]
#: Table 4's horizon levels: Table 7 marks them (*) as the coarse ablation's cells
TABLE4_T_LEVELS: tuple[int, ...] = (10, 20, 40, 80)
_SECONDARY = ("branching", "observation", "mutation")
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


def _backdrop_secondaries(episodes: pd.DataFrame) -> pd.DataFrame:
    """The episodes whose branching, observation and mutation are the regime's: the
    grid and the horizon scan, not another axis's ablation."""
    keep = pd.Series(True, index=episodes.index)
    if not {"regime", *_SECONDARY} <= set(episodes.columns):  # a table without the axes
        return episodes
    for regime, part in episodes.groupby("regime", sort=True):
        r = REGIMES.get(str(regime))
        if r is None:
            continue
        same = np.ones(len(part), dtype=bool)
        for axis in _SECONDARY:
            same &= part[axis].astype(str).to_numpy() == str(getattr(r, axis))
        keep.loc[part.index] = same
    return episodes[keep]


def horizon_check(episodes: pd.DataFrame, horizon: str = "") -> pd.DataFrame:
    """Per (env, sc, dd): the cell's distinct worlds (seed and archetype: every agent
    meets the same ones, so each counts once), their L*, the range of T the run gave
    the cell (``t_min``, ``t_max``), ``unwinnable`` (worlds with L* > their T; in a T
    scan, at the regime's T) and ``unwinnable_at_regime_t`` (L* > the regime's fixed
    T), over the episodes at the regime's secondary axes (an ablation of branching, say,
    has the same worlds). ``horizon`` names the run's setting."""
    if episodes.empty or not set(_CHECK_NEEDS) <= set(episodes.columns):
        return _empty(CHECK_COLUMNS)
    eps = _backdrop_secondaries(episodes)
    worlds = eps.drop_duplicates(["env", "sc", "dd", "seed", "archetype", "horizon"])
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


def t_fine(episodes: pd.DataFrame, horizon: str = "") -> pd.DataFrame:
    """Table 7: success per (env, model, sc, dd, T) over the episodes at the regime's
    secondary axes, for a study whose T varies at fixed (sc, dd) (a horizon ablation;
    empty for one T per cell, and for a relative horizon, whose T follows each world).

    A stop (budget, format) is a failure as in every world rate
    (``analysis.worlds.eligible``); ``n_unwinnable`` counts the level's episodes with
    T < L*, left out of n; a level where every world is longer than T keeps its row
    with n 0 and a NaN rate. ``coarse_reference`` marks Table 4's levels (10, 20, 40,
    80), which Table 7 stars."""
    from horizonbench.analysis.worlds import eligible  # worlds.world_tables calls this module

    if episodes.empty or horizon.startswith("relative") or "horizon" not in episodes.columns:
        return _empty(T_FINE_COLUMNS)
    eps = _backdrop_secondaries(episodes)
    keys = ["env", "model", "sc", "dd"]
    levels = eps.groupby(keys, sort=True)["horizon"].nunique()
    scanned = levels[levels > 1].index
    if not len(scanned):
        return _empty(T_FINE_COLUMNS)
    eps = eps.set_index(keys).loc[scanned].reset_index()
    won = eligible(eps)
    rows = []
    for (env, model, sc, dd, t), part in eps.groupby([*keys, "horizon"], sort=True):
        sel = won[(won["env"] == env) & (won["model"] == model) & (won["sc"] == sc) & (won["dd"] == dd)]
        sel = sel[sel["horizon"] == t]
        n = len(sel)
        k = int(sel["success"].astype(bool).sum())
        low, high = phase.wilson_interval(k, n) if n else (math.nan, math.nan)
        rows.append(
            {
                "env": str(env),
                "model": str(model),
                "sc": int(sc),
                "dd": int(dd),
                "t": int(t),
                "n": n,
                "successes": k,
                "p": k / n if n else math.nan,
                "wilson_low": float(low),
                "wilson_high": float(high),
                "n_unwinnable": int(part["horizon_short"].astype(bool).sum()),
                "coarse_reference": int(t) in TABLE4_T_LEVELS,
                "horizon": horizon,
            }
        )
    return pd.DataFrame(rows, columns=T_FINE_COLUMNS)


def horizon_tables(episodes: pd.DataFrame, horizon: str = "") -> dict[str, pd.DataFrame]:
    """This module's tables by file name (``<run>/analysis/worlds_<name>.parquet``)."""
    return {"horizons": horizon_check(episodes, horizon), "t_fine": t_fine(episodes, horizon)}
