"""The world-model study's analysis tables, from the episodes table.

Each function takes the episodes table (one row per agent episode, see
``schemas.tables.EPISODES_SCHEMA``) and returns a DataFrame with a leading ``env``
column, so one study can hold several environments without pooling them. Episodes
flagged ``horizon_short`` (T < L*: no agent could win) never enter a success rate, a
critical point, a cliff test, a contrast, a lag or the per-step metrics. An episode
stopped by a harness limit (``budget_exceeded``: context, output tokens or wall time)
*is* counted, as a failure: the budget is the harness's limit and part of the protocol,
and leaving those episodes out biased every rate upward exactly where collapse happens
(the episodes that fail run longest and hit the budget: a scripted agent of true
success 0.5 read 0.91). Beside each primary rate stays the rate over the episodes that
finished by the world's rules (``p_finished``), with the count of budget stops, so a
reader sees how much the limit weighs. A ``format_failure`` (the model wrote no usable
action for several steps) is a failure like any other. :func:`excluded` counts both
kinds of stop per cell. A cell whose episodes were all T < L* keeps its row in
:func:`grid` with n 0 and no rate (``n_unwinnable`` says why; never a rate of 0, never
a missing cell), and stays out of cliffs, bands and crossings.

- :func:`grid`: success per (env, model, sc, dd) cell with Wilson intervals, and the
  rate without the budget stops beside it;
- :func:`critical_points`: sc* per (env, model, dd), the first 50% crossing
  interpolated linearly along sc, with a percentile bootstrap interval;
- :func:`cliff_table`: adjacent-cell drops with Definition 1 and the one-sided
  Miettinen-Nurminen test of H0: drop <= delta0;
- :func:`band_widths`: W_trans(dd), the number of cells with 0.30 <= p <= 0.70;
- :func:`contrasts`: for each adjacent sc pair, Cohen's h on success, and on the
  episodes' mean world-state Jaccard a Mann-Whitney U test (Holm, Bonferroni and
  Benjamini-Hochberg adjusted over the whole table), its Hodges-Lehmann shift and
  Cliff's delta;
- :func:`lags`: the distribution of tau_W - tau_A over failed episodes;
- :func:`step_metrics`: the per-step metrics averaged per cell, and the collapse types;
- :func:`excluded`: per cell, the episodes left out and why;
- :func:`harness`: per (env, model, memory mode) of the model agents, success with its
  Wilson interval, the budget stops, the harness's calls, repairs, fallbacks and tokens,
  and the world-state readouts: the memory-mode comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horizonbench.analysis import effect_sizes, phase, trajectory, world_effects, world_horizons, world_shapes

GRID_COLUMNS = [
    "env",
    *phase.GRID_COLUMNS,
    "budget_exceeded",
    "n_finished",
    "p_finished",
    "n_unwinnable",
    "p_all",
    "p_all_low",
    "p_all_high",
    "horizon",
]
CRITICAL_COLUMNS = [
    "env",
    "model",
    "dd",
    "sc_star",
    "sc_star_low",
    "sc_star_high",
    "bracket_low",
    "bracket_high",
    "reason",
    "horizon",
]
CLIFF_COLUMNS = ["env", *phase.CLIFF_COLUMNS]
BAND_COLUMNS = ["env", *phase.W_TRANS_COLUMNS]
CONTRAST_COLUMNS = [
    "env",
    "model",
    "dd",
    "sc_from",
    "sc_to",
    "cohens_h",
    "cohens_h_label",
    "mw_u",
    "mw_p",
    "mw_p_holm",
    "mw_p_bonferroni",
    "mw_p_bh",
    "hodges_lehmann",
    "cliffs_delta",
    "cliffs_delta_label",
]
LAG_COLUMNS = [
    "env",
    "model",
    "n_episodes",
    "n_failed",
    "count",
    "median",
    "mean",
    "share_world_first",
    "share_simultaneous",
    "share_action_first",
    "mean_low",
    "mean_high",
    "onset_count",
    "onset_mean",
    "onset_mean_low",
    "onset_mean_high",
    "onset_share_world_first",
]
STEP_COLUMNS = [
    "env",
    "model",
    "sc",
    "dd",
    "episodes",
    "mean_jaccard",
    "consistency_rate",
    "dependency_accuracy",
    "self_check_accuracy",
    "invalid_per_episode",
    "world_state_collapses",
    "action_validity_collapses",
    "self_check_collapses",
    "compound_collapses",
    "format_collapses",
]
EXCLUDED_COLUMNS = [
    "env",
    "model",
    "sc",
    "dd",
    "episodes",
    "horizon_short",
    "budget_exceeded",
    "measured",
    "budget_detail",
]
HARNESS_COLUMNS = [
    "env",
    "model",
    "memory",
    "prompt_version",
    "episodes",
    "measured",
    "horizon_short",
    "budget_exceeded",
    "format_failures",
    "successes",
    "p",
    "wilson_low",
    "wilson_high",
    "p_finished",
    "steps",
    "calls",
    "calls_per_step",
    "repairs",
    "fallbacks",
    "input_tokens",
    "output_tokens",
    "mean_jaccard",
    "n_failed",
    "lag_count",
    "share_world_first",
    "mean_lag",
]
#: the outcome of an episode stopped by a harness limit (``harness/agent.py``)
BUDGET_EXCEEDED = "budget_exceeded"
#: the outcome of an episode whose model wrote no usable action for several steps
FORMAT_FAILURE = "format_failure"
#: collapse types counted by :func:`step_metrics` (``datasets/worlds/episode.py``)
COLLAPSE_TYPES: tuple[str, ...] = (*trajectory.COLLAPSE_TYPES, "format")


def left_out(episodes: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Two boolean masks over ``episodes``: T < L* (``horizon_short``, left out of every
    rate), and stopped by a harness limit while any agent could have won
    (``budget_exceeded`` and not ``horizon_short``: counted as failures, and left out
    only of ``p_finished``). A table without an ``outcome`` column (offline agents from
    before the harness) has no budget stops."""
    short = episodes["horizon_short"].astype(bool)
    return short, _budget(episodes) & ~short


def _budget(episodes: pd.DataFrame) -> pd.Series:
    if "outcome" in episodes.columns:
        return episodes["outcome"].eq(BUDGET_EXCEEDED).fillna(False).astype(bool)
    return pd.Series(False, index=episodes.index)


def eligible(episodes: pd.DataFrame) -> pd.DataFrame:
    """The episodes a success rate counts: those any agent could have won (T >= L*),
    budget stops included as failures (a stopped episode never succeeded)."""
    short, _ = left_out(episodes)
    out = episodes[~short].reset_index(drop=True)
    if "outcome" in out.columns:  # a stop is never a success, whatever the row says
        stopped = out["outcome"].isin([BUDGET_EXCEEDED, FORMAT_FAILURE]).fillna(False).to_numpy(bool)
        out["success"] = out["success"].astype(bool) & ~stopped
    return out


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def _by_env(episodes: pd.DataFrame):
    for env, part in eligible(episodes).groupby("env", sort=True):
        yield str(env), part.reset_index(drop=True)


def grid(episodes: pd.DataFrame, horizon: str = "") -> pd.DataFrame:
    """Success per cell over the episodes T >= L* (budget stops count as failures),
    with ``budget_exceeded`` (the cell's budget stops), ``n_finished`` and
    ``p_finished`` (the rate over the episodes that ended by the world's rules; NaN when
    none did) beside it, ``n_unwinnable`` (the cell's episodes with T < L*, left out),
    ``p_all`` with its Wilson interval (``p_all_low``, ``p_all_high``: successes over
    n + n_unwinnable, the T < L* worlds as failures: the paper's reading at a fixed T,
    e.g. Table 2 at T = 40) and ``horizon`` (how T was set, e.g. ``paper T=40``). A cell
    whose every world is longer than T keeps its row, with n 0 and a NaN ``p`` (its
    ``p_all`` is 0): unwinnable, never blank."""
    frames = [] if episodes.empty else [_unwinnable_cells(episodes)]
    for env, part in _by_env(episodes):
        cells = phase.phase_grid(part).assign(env=env)
        stops = part.assign(_stop=_budget(part).astype(np.int64), _win=part["success"].astype(np.int64))
        by = stops.groupby(["model", "sc", "dd"], sort=True).agg(
            budget_exceeded=("_stop", "sum"), _n=("_stop", "size"), _wins=("_win", "sum")
        )
        by = by.reset_index()
        by["n_finished"] = by["_n"] - by["budget_exceeded"]
        by["p_finished"] = np.where(
            by["n_finished"] > 0, by["_wins"] / by["n_finished"].clip(lower=1), np.nan
        )
        cells = cells.merge(
            by[["model", "sc", "dd", "budget_exceeded", "n_finished", "p_finished"]], how="left"
        )
        frames.append(cells)
    frames = [f for f in frames if not f.empty]
    if not frames:
        return _empty(GRID_COLUMNS)
    out = pd.concat(frames, ignore_index=True).drop_duplicates(["env", "model", "sc", "dd"], keep="last")
    out = out.sort_values(["env", "model", "sc", "dd"], kind="stable").reset_index(drop=True)
    short = episodes.assign(_short=episodes["horizon_short"].astype(np.int64))
    counts = short.groupby(["env", "model", "sc", "dd"], sort=True)["_short"].sum().rename("_k").reset_index()
    out = out.drop(columns="n_unwinnable").merge(counts.rename(columns={"_k": "n_unwinnable"}), how="left")
    n_all = (out["n"] + out["n_unwinnable"]).to_numpy()
    low, high = phase.wilson_interval(out["successes"].to_numpy(), n_all)
    out["p_all"] = np.where(n_all > 0, out["successes"] / np.maximum(n_all, 1), np.nan)
    out["p_all_low"], out["p_all_high"] = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    return out.assign(horizon=horizon)[GRID_COLUMNS]


def _unwinnable_cells(episodes: pd.DataFrame) -> pd.DataFrame:
    """A row of n 0 and NaN rates for every cell of ``episodes`` (the rows :func:`grid`
    replaces where a cell has measured episodes, so the all-unwinnable ones remain)."""
    keys = episodes[["env", "model", "sc", "dd"]].drop_duplicates()
    nan = math.nan
    return keys.assign(
        n=0,
        successes=0,
        p=nan,
        wilson_low=nan,
        wilson_high=nan,
        budget_exceeded=0,
        n_finished=0,
        p_finished=nan,
        n_unwinnable=0,
    )


def measured(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells of a :func:`grid` table with a rate (n > 0): what cliffs, bands and
    crossings read; an unwinnable cell is not a rate of 0."""
    return cells[cells["n"] > 0].reset_index(drop=True)


def critical_points(
    episodes: pd.DataFrame, bootstrap: int = 200, seed: int = 0, horizon: str = ""
) -> pd.DataFrame:
    """sc* per (env, model, dd) with its bootstrap interval; ``horizon`` names how T was
    set (a crossing at T = 40 and one at T = 1.5 L* are different readouts)."""
    rows = []
    for env, part in _by_env(episodes):
        for (model, dd), curve in part.groupby(["model", "dd"], sort=True):
            cells = curve.groupby("sc", sort=True)["success"].mean()
            point = phase.critical_point(cells.index.to_numpy(), cells.to_numpy())
            low = high = math.nan
            if bootstrap and len(cells) > 1:
                boot = phase.critical_point_bootstrap(curve[["sc", "success"]], n_boot=bootstrap, seed=seed)
                low, high = boot.low, boot.high
            bracket = point.bracket or (math.nan, math.nan)
            rows.append(
                {
                    "env": env,
                    "model": model,
                    "dd": int(dd),
                    "sc_star": point.value,
                    "sc_star_low": low,
                    "sc_star_high": high,
                    "bracket_low": float(bracket[0]),
                    "bracket_high": float(bracket[1]),
                    "reason": point.reason,
                    "horizon": horizon,
                }
            )
    return pd.DataFrame(rows, columns=CRITICAL_COLUMNS) if rows else _empty(CRITICAL_COLUMNS)


def cliff_table(cells: pd.DataFrame, delta0: float = phase.CLIFF_MARGIN) -> pd.DataFrame:
    """Adjacent drops of the :func:`grid` table, per environment."""
    frames = [
        phase.cliffs(part, delta=delta0).assign(env=env)
        for env, part in measured(cells).groupby("env", sort=True)
    ]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True)[CLIFF_COLUMNS] if frames else _empty(CLIFF_COLUMNS)


def band_widths(cells: pd.DataFrame) -> pd.DataFrame:
    frames = [phase.w_trans(part).assign(env=env) for env, part in measured(cells).groupby("env", sort=True)]
    frames = [f for f in frames if not f.empty]
    out = pd.concat(frames, ignore_index=True)[BAND_COLUMNS] if frames else _empty(BAND_COLUMNS)
    out["sc_in_band"] = [" ".join(str(int(s)) for s in v) for v in out["sc_in_band"]]
    return out


def contrasts(episodes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for env, part in _by_env(episodes):
        for (model, dd), curve in part.groupby(["model", "dd"], sort=True):
            scs = sorted(curve["sc"].unique())
            for a, b in zip(scs[:-1], scs[1:], strict=True):
                x = curve[curve["sc"] == a]
                y = curve[curve["sc"] == b]
                h = effect_sizes.cohens_h(float(x["success"].mean()), float(y["success"].mean()))
                # an episode stopped before its first step has no Jaccard: it is in the
                # success contrast (a failure) but not in the world-state one
                jx, jy = x["mean_jaccard"].to_numpy(float), y["mean_jaccard"].to_numpy(float)
                jx, jy = jx[np.isfinite(jx)], jy[np.isfinite(jy)]
                if not (jx.size and jy.size):
                    u = p = hl = d = math.nan
                elif np.ptp(np.concatenate([jx, jy])) == 0.0:
                    u, p = float(jx.size * jy.size) / 2.0, 1.0  # identical samples: no evidence
                else:
                    u, p = effect_sizes.mann_whitney(jx, jy)
                if jx.size and jy.size:
                    hl, d = effect_sizes.hodges_lehmann(jx, jy), effect_sizes.cliffs_delta(jx, jy)
                rows.append(
                    {
                        "env": env,
                        "model": model,
                        "dd": int(dd),
                        "sc_from": int(a),
                        "sc_to": int(b),
                        "cohens_h": float(h),
                        "cohens_h_label": effect_sizes.cohens_h_label(float(h)),
                        "mw_u": float(u),
                        "mw_p": float(p),
                        "hodges_lehmann": hl,
                        "cliffs_delta": d,
                        "cliffs_delta_label": None if math.isnan(d) else effect_sizes.cliffs_delta_label(d),
                    }
                )
    if not rows:
        return _empty(CONTRAST_COLUMNS)
    out = pd.DataFrame(rows)
    p = out["mw_p"].to_numpy(float)
    tested = np.isfinite(p)  # adjusted over the tests that were made
    for col, adjust in (
        ("mw_p_holm", effect_sizes.holm),
        ("mw_p_bonferroni", effect_sizes.bonferroni),
        ("mw_p_bh", effect_sizes.benjamini_hochberg),
    ):
        adjusted = np.full(p.size, math.nan)
        adjusted[tested] = adjust(p[tested])
        out[col] = adjusted
    return out[CONTRAST_COLUMNS]


def lags(episodes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for env, part in _by_env(episodes):
        for model, sub in part.groupby("model", sort=True):
            rows.append({"env": env, "model": model, **trajectory.lag_distribution(sub)})
    return pd.DataFrame(rows, columns=LAG_COLUMNS) if rows else _empty(LAG_COLUMNS)


def step_metrics(episodes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for env, part in _by_env(episodes):
        for (model, sc, dd), cell in part.groupby(["model", "sc", "dd"], sort=True):
            types = cell["collapse_type"].value_counts()
            rows.append(
                {
                    "env": env,
                    "model": model,
                    "sc": int(sc),
                    "dd": int(dd),
                    "episodes": len(cell),
                    "mean_jaccard": float(cell["mean_jaccard"].mean()),
                    "consistency_rate": float(cell["consistency_rate"].mean()),
                    "dependency_accuracy": float(cell["dependency_accuracy"].mean()),
                    "self_check_accuracy": float(cell["self_check_accuracy"].mean()),
                    "invalid_per_episode": float(cell["invalid_actions"].mean()),
                    **{f"{t}_collapses": int(types.get(t, 0)) for t in COLLAPSE_TYPES},
                }
            )
    return pd.DataFrame(rows, columns=STEP_COLUMNS) if rows else _empty(STEP_COLUMNS)


def _first_text(values: pd.Series) -> str | None:
    """The lexicographically first non-missing text (independent of row order)."""
    texts = sorted(str(v) for v in values if isinstance(v, str))
    return texts[0] if texts else None


def excluded(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per cell (env, model, sc, dd): the episodes, those left out of every rate with T
    < L* (``horizon_short``), those stopped by a harness limit (``budget_exceeded``,
    counted only when not already T < L*; they are in the rates, as failures), the
    ``measured`` rest (episodes - horizon_short: the cell's ``n`` in :func:`grid`), and
    one of the cell's budget stop details (the first in text order) as an example of the
    limit reached."""
    if episodes.empty:
        return _empty(EXCLUDED_COLUMNS)
    short, budget = left_out(episodes)
    frame = episodes[["env", "model", "sc", "dd"]].assign(
        horizon_short=short.astype(np.int64),
        budget_exceeded=budget.astype(np.int64),
        budget_detail=(
            episodes["budget_detail"].where(budget, None).astype(object)
            if "budget_detail" in episodes.columns
            else None
        ),
    )
    g = frame.groupby(["env", "model", "sc", "dd"], sort=True)
    out = g.agg(
        episodes=("horizon_short", "size"),
        horizon_short=("horizon_short", "sum"),
        budget_exceeded=("budget_exceeded", "sum"),
        budget_detail=("budget_detail", _first_text),
    ).reset_index()
    out["measured"] = out["episodes"] - out["horizon_short"]
    return out[EXCLUDED_COLUMNS]


def _joined(values: pd.Series) -> str | None:
    texts = sorted({str(v) for v in values if isinstance(v, str)})
    return ", ".join(texts) if texts else None


def harness(episodes: pd.DataFrame) -> pd.DataFrame:
    """The memory-mode comparison: one row per (env, model, memory) of the agents with a
    memory mode (the model agents; offline agents have none, and a study without model
    agents gives an empty table).

    Over the *measured* episodes (T >= L*, the ones :func:`grid` counts, budget stops
    and format failures as failures): successes, the success rate ``p`` with its Wilson
    95% interval (NaN when nothing was measured, never 0), ``p_finished`` (the rate
    without the budget stops), the mean of the episodes' mean Jaccard, and the lag
    readouts of :func:`lags` (failed episodes; ``lag_count`` of them with both tau_W
    and tau_A, ``share_world_first`` the share of those with tau_W < tau_A,
    ``mean_lag`` their mean tau_W - tau_A). Over *all* the row's episodes, what the
    harness spent: steps, calls, repairs, fallbacks, input and output tokens, and
    ``calls_per_step`` = calls / steps (calls of a step a budget stop cut short count
    too; NaN with no step); ``format_failures`` counts the episodes ended for writing
    no usable action.

    Read ``p`` next to ``budget_exceeded`` and ``p_finished``: a mode that hits limits
    on the hardest worlds loses those episodes, and ``p_finished`` says what it won of
    the rest.
    """
    if "memory" not in episodes.columns:
        return _empty(HARNESS_COLUMNS)
    models = episodes[episodes["memory"].notna()]
    if models.empty:
        return _empty(HARNESS_COLUMNS)
    rows = []
    for (env, model, memory), part in models.groupby(["env", "model", "memory"], sort=True):
        short, budget = left_out(part)
        measured = eligible(part)
        n = len(measured)
        k = int(measured["success"].astype(bool).sum())
        low, high = phase.wilson_interval(k, n)
        finished = n - int(budget.sum())
        fmt = int(part["outcome"].eq(FORMAT_FAILURE).sum()) if "outcome" in part else 0
        lag = trajectory.lag_distribution(measured)
        steps = int(part["steps"].sum())
        calls = int(part["calls"].sum())
        rows.append(
            {
                "env": str(env),
                "model": str(model),
                "memory": str(memory),
                "prompt_version": _joined(part["prompt_version"]) if "prompt_version" in part else None,
                "episodes": len(part),
                "measured": n,
                "horizon_short": int(short.sum()),
                "budget_exceeded": int(budget.sum()),
                "format_failures": fmt,
                "successes": k,
                "p": k / n if n else math.nan,
                "wilson_low": float(low),
                "wilson_high": float(high),
                "p_finished": k / finished if finished else math.nan,
                "steps": steps,
                "calls": calls,
                "calls_per_step": calls / steps if steps else math.nan,
                "repairs": int(part["repairs"].sum()),
                "fallbacks": int(part["fallbacks"].sum()),
                "input_tokens": int(part["input_tokens"].sum()),
                "output_tokens": int(part["output_tokens"].sum()),
                "mean_jaccard": float(measured["mean_jaccard"].mean()) if n else math.nan,
                "n_failed": lag["n_failed"],
                "lag_count": lag["count"],
                "share_world_first": lag["share_world_first"],
                "mean_lag": lag["mean"],
            }
        )
    return pd.DataFrame(rows, columns=HARNESS_COLUMNS)


def world_tables(
    episodes: pd.DataFrame,
    bootstrap: int = 200,
    seed: int = 0,
    delta0: float = phase.CLIFF_MARGIN,
    horizon: str = "",
    g1b_pair: tuple[int, int, int] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table above, by file name (``<run>/analysis/worlds_<name>.parquet``);
    ``horizon`` (``WorldsSpec.horizon_label``) goes into every table (:func:`with_horizon`).
    The grid-level tables read the backdrop's episodes only: a paired ablation's level
    (``worlds.ablations``) never enters a cell; Table 5 reads them all."""
    everything = episodes
    episodes = world_effects.backdrop_only(episodes)
    cells = grid(episodes, horizon)
    tables = {
        "grid": cells,
        "critical_points": critical_points(episodes, bootstrap, seed, horizon),
        "cliffs": cliff_table(cells, delta0),
        "band_widths": band_widths(cells),
        "contrasts": contrasts(episodes),
        "lags": lags(episodes),
        "step_metrics": step_metrics(episodes),
        "excluded": excluded(episodes),
        "harness": harness(episodes),
    }
    # the paper's Tables 1, 5, 10, G1b and the W_trans patterns (analysis/world_shapes.py)
    unwinnable = everything[left_out(everything)[0]] if len(everything) else None
    tables.update(
        world_shapes.paper_tables(eligible(everything), cells, tables["cliffs"], unwinnable, g1b_pair)
    )
    # which worlds fit in T, and a T scan laid out as Table 7 (analysis/world_horizons.py)
    tables.update(world_horizons.horizon_tables(episodes, horizon))
    # every table names how T was set, so no reading of it travels without its horizon
    return {name: with_horizon(df, horizon) for name, df in tables.items()}


def with_horizon(table: pd.DataFrame, horizon: str) -> pd.DataFrame:
    """``table`` with a last ``horizon`` column (``WorldsSpec.horizon_label``) unless it
    has one: a rate at the paper's fixed T and one at T = ceil(1.5 L*) are different
    readings, and a table copied out of the run folder must still say which it is."""
    return table if "horizon" in table.columns else table.assign(horizon=horizon)
