"""Table 4 of the world-model paper: one-axis ablations around a backdrop, paired.

An ablation changes one secondary axis (horizon, branching, observation, mutation) of the
backdrop and keeps the rest; with ``worlds.ablations`` every level plays the backdrop's
worlds (``Study.episodes``), so a level and the backdrop can be compared world by world.
:func:`ablation_table` gives one row per (env, model, sc, dd, axis, level), the backdrop's
own level included:

- ``n``, ``successes``, ``p`` and its Wilson interval over the episodes any agent could
  win (``analysis.worlds.eligible``: T >= L*, budget stops counted as failures), and
  ``n_unwinnable`` (T < L*, left out), never a silent 0;
- ``p_all``: success over every episode with T < L* counted as a failure. A horizon
  ablation needs it: at T = 10 hardly any world can be won, which ``p`` (measured
  worlds only) cannot show and the paper's Table 4 (0.000 at T = 10) does;
- ``diff`` = level minus backdrop with a 95% interval. Paired (``paired`` true) when
  the level replays the backdrop's worlds (every level seed is a backdrop seed): ``diff``
  is then taken over the ``n_pairs`` worlds measured at both (a horizon ablation measures
  other worlds at each T), the interval is Newcombe's for paired proportions (his method
  10, with the pairs' phi correlation) and ``p_value`` McNemar's exact test on the
  discordant pairs. Otherwise the two groups' measured episodes are compared as
  independent: Newcombe's hybrid interval and Fisher's exact test;
- ``p_holm``: ``p_value`` Holm-adjusted over the levels of one (env, model) family.

Pure statistics on the episodes table; ``tasks/analyse/worlds.py`` writes the result as
``<run>/analysis/worlds_ablations.parquet``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horizonbench.analysis import effect_sizes, phase, worlds
from horizonbench.analysis.world_effects import ablation_labels, newcombe_interval
from horizonbench.schemas.worlds import MUTATION_LEVELS, OBSERVATION_MODES

#: the ablated axes in Table 4's order
AXES = ("horizon", "branching", "observation", "mutation")

ABLATION_COLUMNS = [
    "env",
    "model",
    "sc",
    "dd",
    "axis",
    "level",
    "is_backdrop",
    "n",
    "successes",
    "p",
    "wilson_low",
    "wilson_high",
    "n_unwinnable",
    "p_all",
    "diff",
    "diff_low",
    "diff_high",
    "paired",
    "n_pairs",
    "p_value",
    "p_holm",
    "horizon",
]


def paired_newcombe(a: int, b: int, c: int, d: int, conf: float = 0.95) -> tuple[float, float, float]:
    """The difference p1 - p2 of two paired proportions and Newcombe's interval for it
    (method 10: the two Wilson intervals joined with the pairs' phi correlation).

    ``a`` pairs succeed in both, ``b`` only in the first, ``c`` only in the second,
    ``d`` in neither. Why Newcombe and not Wald: the ablation cells sit at 0/n and n/n
    (Table 4's T = 10 row), where Wald's interval collapses to a point."""
    n = a + b + c + d
    if n == 0:
        return math.nan, math.nan, math.nan
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = phase.wilson_interval(a + b, n, conf)
    l2, u2 = phase.wilson_interval(a + c, n, conf)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(denom) if denom > 0 else 0.0
    diff = p1 - p2
    lo = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    hi = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return diff, max(-1.0, diff - math.sqrt(max(lo, 0.0))), min(1.0, diff + math.sqrt(max(hi, 0.0)))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: the discordant pairs against a fair coin (1 when none)."""
    if b + c == 0:
        return 1.0
    from scipy import stats  # lazily: 0.3 s of imports that only these tests need

    return float(stats.binomtest(b, b + c, 0.5).pvalue)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment over the finite p-values (:func:`effect_sizes.holm`);
    a NaN (a level with nothing to compare) stays NaN and is not counted."""
    idx = [i for i, p in enumerate(pvalues) if np.isfinite(p)]
    out = [math.nan] * len(pvalues)
    for i, q in zip(idx, effect_sizes.holm([pvalues[i] for i in idx]), strict=True):
        out[i] = float(q)
    return out


def level_order(axis: str, level: str) -> tuple[float, str]:
    """Levels ascending: numbers by value, observation and mutation in Table 11's order."""
    if level.lstrip("-").isdigit():
        return (float(level), level)
    named = OBSERVATION_MODES if axis == "observation" else MUTATION_LEVELS
    return (float(named.index(level)) if level in named else math.inf, level)


def _rate(part: pd.DataFrame) -> dict[str, object]:
    measured = part["_measured"].to_numpy(bool)
    n, k = int(measured.sum()), int(part["_won"].to_numpy(bool).sum())
    low, high = phase.wilson_interval(k, n) if n else (math.nan, math.nan)
    total = len(part)
    return {
        "n": n,
        "successes": k,
        "p": k / n if n else math.nan,
        "wilson_low": low,
        "wilson_high": high,
        "n_unwinnable": int(part["horizon_short"].astype(bool).sum()),
        "p_all": k / total if total else math.nan,
    }


def _compare(level: pd.DataFrame, base: pd.DataFrame) -> dict[str, object]:
    """Level against backdrop (one cell). Paired when the level replays the backdrop's
    worlds (every level seed is a backdrop seed): the difference over the worlds measured
    at both (a horizon ablation measures different worlds at each T). Otherwise the two
    groups' measured episodes are compared as independent."""
    nan = math.nan
    empty = {"diff": nan, "diff_low": nan, "diff_high": nan, "paired": False, "n_pairs": 0, "p_value": nan}
    at = pd.Index(base["seed"]).get_indexer(level["seed"])
    if (at >= 0).all():
        both = level["_measured"].to_numpy(bool) & base["_measured"].to_numpy(bool)[at]
        if not both.any():
            return empty | {"paired": True}
        yl = level["_won"].to_numpy(bool)[both]
        yb = base["_won"].to_numpy(bool)[at[both]]
        a, b = int((yl & yb).sum()), int((yl & ~yb).sum())
        c, d = int((~yl & yb).sum()), int((~yl & ~yb).sum())
        diff, low, high = paired_newcombe(a, b, c, d)
        return {
            "diff": diff, "diff_low": low, "diff_high": high,
            "paired": True, "n_pairs": int(both.sum()), "p_value": mcnemar_exact(b, c),
        }  # fmt: skip
    lv = level["_won"].to_numpy(bool)[level["_measured"].to_numpy(bool)]
    bs = base["_won"].to_numpy(bool)[base["_measured"].to_numpy(bool)]
    if not lv.size or not bs.size:
        return empty
    kl, kb = int(lv.sum()), int(bs.sum())
    low, high = newcombe_interval(kl, lv.size, kb, bs.size)
    table = [[kl, lv.size - kl], [kb, bs.size - kb]]
    from scipy import stats  # lazily, as in mcnemar_exact

    return {
        "diff": kl / lv.size - kb / bs.size, "diff_low": low, "diff_high": high,
        "paired": False, "n_pairs": 0, "p_value": float(stats.fisher_exact(table)[1]),
    }  # fmt: skip


def _backdrop_level(base: pd.DataFrame, axis: str) -> str:
    values = base[axis].astype(str).unique()
    return str(values[0]) if len(values) == 1 else "per world"


def ablation_table(episodes: pd.DataFrame, horizon: str = "") -> pd.DataFrame:
    """Table 4 from an episodes table whose ablated episodes carry their labels (the
    ``:<axis>=<level>`` of their ids): one row per (env, model, sc, dd, axis, level),
    the backdrop's level first marked ``is_backdrop``; ``horizon`` (how T was set)
    goes into every row. A run without ablations gives an empty table."""
    if episodes.empty:
        return pd.DataFrame(columns=ABLATION_COLUMNS)
    labels = ablation_labels(episodes)
    if not (labels != "").any():
        return pd.DataFrame(columns=ABLATION_COLUMNS)
    df = episodes.assign(_label=labels.to_numpy(), _row=np.arange(len(episodes)))
    # which episodes a rate counts, and their success, by analysis.worlds' own rule
    measured = worlds.eligible(df)
    df["_measured"] = False
    df["_won"] = False
    df.loc[df.index[measured["_row"].to_numpy()], "_measured"] = True
    df.loc[df.index[measured["_row"].to_numpy()], "_won"] = measured["success"].astype(bool).to_numpy()
    rows: list[dict[str, object]] = []
    for (env, model), family in df.groupby(["env", "model"], sort=True):
        start = len(rows)
        for (sc, dd), cell in family.groupby(["sc", "dd"], sort=True):
            base = cell[cell["_label"] == ""]
            ablated = cell[cell["_label"] != ""]
            if base.empty:
                continue
            found: dict[str, dict[str, pd.DataFrame]] = {}
            for label, part in ablated.groupby("_label", sort=True):
                axis, level = str(label).split("=", 1)
                found.setdefault(axis, {})[level] = part
            head = {"env": str(env), "model": str(model), "sc": int(sc), "dd": int(dd), "horizon": horizon}
            for axis in [a for a in AXES if a in found] + sorted(set(found) - set(AXES)):
                levels = {**found[axis], _backdrop_level(base, axis): base}
                for level in sorted(levels, key=lambda v, ax=axis: level_order(ax, v)):
                    part = levels[level]
                    is_base = part is base
                    row = {**head, "axis": axis, "level": level, "is_backdrop": is_base, **_rate(part)}
                    if is_base:
                        nan = math.nan
                        row |= {"diff": 0.0, "diff_low": nan, "diff_high": nan, "paired": False}
                        row |= {"n_pairs": 0, "p_value": nan}
                    else:
                        row |= _compare(part, base)
                    rows.append(row)
        adjusted = holm([float(r["p_value"]) for r in rows[start:]])
        for r, p in zip(rows[start:], adjusted, strict=True):
            r["p_holm"] = p
    return pd.DataFrame(rows, columns=ABLATION_COLUMNS)


def flagged(table: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The levels whose difference from the backdrop survives Holm at ``alpha``: what
    the report (and the calibration) reads as an effect of the axis."""
    if table.empty:
        return table
    return table[(~table["is_backdrop"].astype(bool)) & (table["p_holm"] < alpha)]
