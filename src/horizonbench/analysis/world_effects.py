"""The world-model paper's effect-size tables: Table 5, Table 10 and the G1b summary.

Each takes the episodes any agent could win (``analysis.worlds.eligible``: T >= L*, budget
stops as failures) or the cell table built from them (``analysis.worlds.grid``), and returns
one row per entry of the paper's table, with the interval the paper leaves out:

- :func:`ablation_deltas` (Table 5): Cliff's delta of each one-axis level against its
  backdrop on success, with the Newcombe interval (for 0/1 outcomes delta *is* the rate
  difference, so a rate-difference interval is delta's interval);
- :func:`model_pairs` (Table 10): Cohen's h between every two agents on each cell both
  played, with the arcsine-scale Wald interval;
- :func:`g1b` (Appendix H): at the trigger pair of cells, per metric (world-state
  accuracy, action validity, self-check accuracy) a one-sided Mann-Whitney U test
  Holm-adjusted over the three metrics, the Hodges-Lehmann shift with its Moses interval,
  and the verdict: a metric passes when its Holm p <= alpha and its shift >= 0.20; G1b
  passes when all three do.

Pure statistics over DataFrames; the pipeline writes them as
``<run>/analysis/worlds_<name>.parquet`` (``tasks/analyse/worlds.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from horizonbench.analysis import effect_sizes, phase
from horizonbench.schemas.worlds import MUTATION_LEVELS, OBSERVATION_MODES, REGIMES

#: the one-axis ablation columns of the episodes table, in Table 5's order
AXES = ("horizon", "branching", "observation", "mutation")
#: Table 5 / Table 10's magnitude codes
CODES = {"negligible": "n", "small": "S", "medium": "M", "large": "L"}
#: G1b's family-wise level and minimum Hodges-Lehmann shift (Appendix H)
G1B_ALPHA = 0.01
G1B_MIN_SHIFT = 0.20
#: G1b's metrics: the paper's name -> how an episode's value is read
G1B_METRICS = ("world_state_accuracy", "action_validity", "self_check_accuracy")

#: the key of an ablation row (Tables 4 and 5)
ABLATION_KEYS = ["env", "model", "sc", "dd", "axis", "level"]
ABLATION_COLUMNS = [
    *ABLATION_KEYS,
    "backdrop",
    "n_level",
    "n_backdrop",
    "p_level",
    "p_backdrop",
    "cliffs_delta",
    "delta_low",
    "delta_high",
    "magnitude",
    "n_unwinnable",
    "delta_all",
]
PAIR_COLUMNS = [
    "env",
    "model_a",
    "model_b",
    "sc",
    "dd",
    "n_a",
    "n_b",
    "p_a",
    "p_b",
    "cohens_h",
    "h_low",
    "h_high",
    "magnitude",
]
G1B_COLUMNS = [
    "env",
    "model",
    "dd",
    "sc_from",
    "sc_to",
    "metric",
    "n_from",
    "n_to",
    "mw_u",
    "mw_p",
    "p_holm",
    "hodges_lehmann",
    "hl_low",
    "hl_high",
    "significant",
    "shift_met",
    "metric_passes",
    "g1b_passes",
    "pair_chosen",
]


def _z(conf: float) -> float:
    return float(special.ndtri(0.5 + conf / 2.0))


def newcombe_interval(x1: int, n1: int, x2: int, n2: int, conf: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval of ``x1/n1 - x2/n2`` (his method 10).

    Built from the two Wilson intervals, so like them it stays inside [-1, 1] and keeps a
    width at 0/n and n/n, where the ablation cells of Table 4 sit (0/25 at T = 10).
    """
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = phase.wilson_interval(x1, n1, conf)
    l2, u2 = phase.wilson_interval(x2, n2, conf)
    d = p1 - p2
    return d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2)


def cohens_h_interval(p1: float, n1: int, p2: float, n2: int, conf: float = 0.95) -> tuple[float, float]:
    """The Wald interval of Cohen's h on the arcsine scale: ``h +- z sqrt(1/n1 + 1/n2)``.

    The arcsine transform makes a proportion's variance ``1/(4n)`` whatever its value,
    so h has standard error ``sqrt(1/n1 + 1/n2)`` -- the reason the paper's h is
    comparable across plateau, band and floor cells."""
    h = effect_sizes.cohens_h(p1, p2)
    half = _z(conf) * math.sqrt(1.0 / n1 + 1.0 / n2)
    return h - half, h + half


def moses_interval(a, b, conf: float = 0.95) -> tuple[float, float]:
    """The distribution-free interval of the Hodges-Lehmann shift (Moses 1965): order
    statistics of the ``n m`` pairwise differences at the Mann-Whitney critical count
    (normal approximation). NaN with fewer than 2 pairs each side of the rank."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    diffs = np.sort(np.subtract.outer(x, y).ravel())
    n, m = x.size, y.size
    k = int(math.floor(n * m / 2.0 - _z(conf) * math.sqrt(n * m * (n + m + 1) / 12.0)))
    if k < 1:
        return math.nan, math.nan
    return float(diffs[k - 1]), float(diffs[diffs.size - k])


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def _backdrop(regime: str) -> dict[str, object]:
    r = REGIMES[regime]
    return {
        "horizon": r.horizon,
        "branching": r.branching,
        "observation": r.observation,
        "mutation": r.mutation,
    }


def ablation_labels(episodes: pd.DataFrame) -> pd.Series:
    """Each episode's ablation, ``"<axis>=<level>"``, or "" for the backdrop's.

    A paired ablation (``Study.ablations``) plays the backdrop's world and its episode id
    ends with ``:<axis>=<level>`` (``datasets/worlds/episode.episode_id``); an id without
    that suffix is the backdrop's."""
    ids = (
        episodes["episode_id"].astype(str)
        if "episode_id" in episodes
        else pd.Series("", index=episodes.index)
    )
    last = ids.str.rsplit(":", n=1).str[-1]
    return last.where(ids.str.count(":") >= 3, "").where(last.str.contains("=", regex=False), "")


def backdrop_only(episodes: pd.DataFrame) -> pd.DataFrame:
    """The episodes of the backdrop (no ablation): what the grid-level readouts (G1b)
    compare, so an ablated level never enters a cell of the stress grid."""
    if episodes.empty:
        return episodes
    return episodes[ablation_labels(episodes) == ""].reset_index(drop=True)


def _levels(part: pd.DataFrame, back: dict[str, object]):
    """(axis, level, episodes) of each ablated level in one cell, and the backdrop's
    episodes: by the episodes' ablation labels when the run has any (paired design,
    whatever its horizon rule), else by their axis columns (a level is a value of one
    axis with the other three at the regime's)."""
    labels = ablation_labels(part)
    if (labels != "").any():
        base = part[labels == ""]
        found = []
        for label, sub in part[labels != ""].groupby(labels[labels != ""], sort=True):
            axis, level = str(label).split("=", 1)
            found.append((axis, level, sub))
        return base, found
    same = {axis: part[axis].astype(object) == back[axis] for axis in AXES}
    base = part[np.logical_and.reduce([same[a] for a in AXES])]
    found = []
    for axis in AXES:
        others = np.logical_and.reduce([same[a] for a in AXES if a != axis])
        for level, sub in part[others & ~same[axis]].groupby(axis, sort=True):
            found.append((axis, str(level), sub))
    return base, found


def _shown(base: pd.DataFrame, axis: str, back: dict[str, object]) -> str:
    """The backdrop's value of ``axis`` as its episodes had it ("per world" when they
    differ, as under a relative horizon)."""
    if axis not in base:
        return str(back.get(axis, ""))
    values = base[axis].astype(str).unique()
    return str(values[0]) if len(values) == 1 else "per world"


def _level_order(row: dict) -> tuple:
    axis = row["axis"]
    rank = AXES.index(axis) if axis in AXES else len(AXES)
    level = row["level"]
    if level.lstrip("-").isdigit():
        return (rank, float(level), level)
    named = (*OBSERVATION_MODES, *MUTATION_LEVELS)  # Table 5's order: partial, distractor, ...
    return (rank, float(named.index(level)) if level in named else math.inf, level)


def _delta_row(y: np.ndarray, y_base: np.ndarray) -> dict[str, object]:
    """Cliff's delta of two 0/1 samples with its Newcombe interval and code (NaN and no
    code when a side is empty: no measured episode, as at T = 10 where no world fits)."""
    if not (y.size and y_base.size):
        nan = math.nan
        return {"cliffs_delta": nan, "delta_low": nan, "delta_high": nan, "magnitude": None}
    delta = effect_sizes.cliffs_delta(y.astype(float), y_base.astype(float))
    low, high = newcombe_interval(int(y.sum()), y.size, int(y_base.sum()), y_base.size)
    code = CODES[effect_sizes.cliffs_delta_label(delta)]
    return {"cliffs_delta": delta, "delta_low": low, "delta_high": high, "magnitude": code}


def ablation_deltas(episodes: pd.DataFrame, unwinnable: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 5: Cliff's delta on success of each one-axis level against its backdrop.

    Per (env, model, sc, dd): each ablated level's measured episodes (``episodes``:
    ``analysis.worlds.eligible``'s) against the backdrop's (:func:`_levels`), on
    success. Cliff's delta of 0/1 outcomes is the difference of the success rates
    (which is why Table 5 can be read off Table 4); its 95% interval is Newcombe's.
    ``delta_all`` counts the ``unwinnable`` episodes (T < L*) as failures too: the
    paper's T row (-0.12 at T = 10, where no world fits) reads that way, while
    ``cliffs_delta`` has no value there. Rows run in Table 5's order: horizon,
    branching, observation, mutation, levels ascending. A cell with no backdrop
    episodes, or no levels, has no rows.
    """
    if episodes.empty or not {"regime", "success", *AXES} <= set(episodes.columns):
        return _empty(ABLATION_COLUMNS)  # a table without the axes has no ablation
    frames = [episodes.assign(_measured=True)]
    if unwinnable is not None and len(unwinnable):
        frames.append(unwinnable.assign(_measured=False, success=False))
    everything = pd.concat(frames, ignore_index=True)
    rows = []
    for (env, model, sc, dd, regime), part in everything.groupby(
        ["env", "model", "sc", "dd", "regime"], sort=True
    ):
        if str(regime) not in REGIMES:
            continue  # no backdrop to compare with
        back = _backdrop(str(regime))
        base, levels = _levels(part, back)
        if base.empty:
            continue
        all_base = base["success"].astype(bool).to_numpy()
        y_base = all_base[base["_measured"].to_numpy(bool)]
        cell = []
        for axis, level, sub in levels:
            all_y = sub["success"].astype(bool).to_numpy()
            y = all_y[sub["_measured"].to_numpy(bool)]
            row = {
                "env": str(env),
                "model": str(model),
                "sc": int(sc),
                "dd": int(dd),
                "axis": axis,
                "level": level,
                "backdrop": _shown(base, axis, back),
                "n_level": int(y.size),
                "n_backdrop": int(y_base.size),
                "p_level": float(y.mean()) if y.size else math.nan,
                "p_backdrop": float(y_base.mean()) if y_base.size else math.nan,
                **_delta_row(y, y_base),
                "n_unwinnable": int(all_y.size - y.size),
                "delta_all": float(all_y.mean() - all_base.mean()),
            }
            cell.append(row)
        rows.extend(sorted(cell, key=_level_order))
    return pd.DataFrame(rows, columns=ABLATION_COLUMNS) if rows else _empty(ABLATION_COLUMNS)


def model_pairs(cells: pd.DataFrame) -> pd.DataFrame:
    """Table 10: Cohen's h = h(p_a) - h(p_b) for every two agents (a before b in name
    order) on each (env, sc, dd) cell both measured (n > 0), with its 95% interval and
    the magnitude code of Cohen (1988). Cells only one agent played are no entry: the
    paper compares models on *shared* cells only."""
    rows = []
    measured = cells[cells["n"] > 0] if len(cells) else cells
    for (env, sc, dd), part in measured.groupby(["env", "sc", "dd"], sort=True):
        by_model = part.sort_values("model").to_dict("records")
        for i, a in enumerate(by_model):
            for b in by_model[i + 1 :]:
                h = effect_sizes.cohens_h(float(a["p"]), float(b["p"]))
                low, high = cohens_h_interval(float(a["p"]), int(a["n"]), float(b["p"]), int(b["n"]))
                rows.append(
                    {
                        "env": str(env),
                        "model_a": str(a["model"]),
                        "model_b": str(b["model"]),
                        "sc": int(sc),
                        "dd": int(dd),
                        "n_a": int(a["n"]),
                        "n_b": int(b["n"]),
                        "p_a": float(a["p"]),
                        "p_b": float(b["p"]),
                        "cohens_h": h,
                        "h_low": low,
                        "h_high": high,
                        "magnitude": CODES[effect_sizes.cohens_h_label(h)],
                    }
                )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS) if rows else _empty(PAIR_COLUMNS)


def g1b_metrics(episodes: pd.DataFrame) -> pd.DataFrame:
    """The three G1b metrics per episode: world-state accuracy (the episode's mean
    Jaccard), action validity (the share of its steps with a valid action) and
    self-check accuracy (the share of Self-Diag verdicts that matched gold; NaN for an
    agent without Self-Diag)."""

    def column(name: str) -> np.ndarray:  # a missing column reads as no value
        return episodes[name].to_numpy(float) if name in episodes else np.full(len(episodes), np.nan)

    steps = column("steps")
    with np.errstate(divide="ignore", invalid="ignore"):
        valid = np.where(steps > 0, 1.0 - column("invalid_actions") / steps, np.nan)
    return pd.DataFrame(
        {
            "world_state_accuracy": column("mean_jaccard"),
            "action_validity": valid,
            "self_check_accuracy": column("self_check_accuracy"),
        },
        index=episodes.index,
    )


def trigger_pairs(cliffs: pd.DataFrame) -> pd.DataFrame:
    """Per (env, model), the adjacent pair of cells G1b is tested at: the largest drop of
    the cliff table (G1a's pair), ties to the smaller dd and then the smaller sc."""
    if cliffs.empty:
        return cliffs
    ordered = cliffs.sort_values(
        ["env", "model", "drop", "dd", "sc_from"], ascending=[True, True, False, True, True]
    )
    return ordered.groupby(["env", "model"], sort=True).head(1).reset_index(drop=True)


def _one_sided(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if np.ptp(np.concatenate([x, y])) == 0.0:
        return float(x.size * y.size) / 2.0, 1.0  # identical samples: no evidence
    return effect_sizes.mann_whitney(x, y, alternative="greater")


def locked_pairs(episodes: pd.DataFrame, pair: tuple[int, int, int]) -> pd.DataFrame:
    """Per (env, model) of the episodes, the pair locked before data collection
    (``pair`` = (sc_from, sc_to, dd), config ``worlds.g1b_pair``), as the paper's
    Appendix H does: no look at the data, so no selection to correct for."""
    sc_from, sc_to, dd = pair
    keys = episodes[["env", "model"]].drop_duplicates().sort_values(["env", "model"])
    return keys.assign(dd=int(dd), sc_from=int(sc_from), sc_to=int(sc_to)).reset_index(drop=True)


def g1b(
    episodes: pd.DataFrame,
    cliffs: pd.DataFrame,
    alpha: float = G1B_ALPHA,
    min_shift: float = G1B_MIN_SHIFT,
    pair: tuple[int, int, int] | None = None,
) -> pd.DataFrame:
    """The G1b summary (Appendix H): three rows per (env, model), one per metric.

    At the trigger pair (:func:`trigger_pairs`), each metric of the low-stress cell is
    tested against the high-stress cell by a one-sided Mann-Whitney U (H1: it is higher
    before the cliff); the three p-values are Holm-adjusted together; the
    Hodges-Lehmann shift (before minus after) with its Moses 95% interval must be at
    least ``min_shift``. ``metric_passes`` = Holm p <= ``alpha`` and shift >=
    ``min_shift``; ``g1b_passes`` (the same on the three rows) = all three pass. A
    metric without values (self-check of an offline agent) fails with NaN statistics.
    ``pair`` = (sc_from, sc_to, dd) locks the pair (:func:`locked_pairs`, the paper's
    way); unset, each agent's largest drop is tested, a pair picked from the data, which
    the tests do not correct for. ``pair_chosen`` says which (locked / largest_drop).
    """
    chosen = "largest_drop" if pair is None else "locked"
    if episodes.empty or (pair is None and cliffs.empty):
        return _empty(G1B_COLUMNS)
    metrics = g1b_metrics(episodes)
    rows = []
    pairs = trigger_pairs(cliffs) if pair is None else locked_pairs(episodes, pair)
    for trigger in pairs.to_dict("records"):
        key = (
            (episodes["env"] == trigger["env"])
            & (episodes["model"] == trigger["model"])
            & (episodes["dd"] == trigger["dd"])
        )
        before = metrics[key & (episodes["sc"] == trigger["sc_from"])]
        after = metrics[key & (episodes["sc"] == trigger["sc_to"])]
        found = []
        for metric in G1B_METRICS:
            x = before[metric].to_numpy(float)
            y = after[metric].to_numpy(float)
            x, y = x[np.isfinite(x)], y[np.isfinite(y)]
            u = p = hl = lo = hi = math.nan
            if x.size and y.size:
                u, p = _one_sided(x, y)
                hl = effect_sizes.hodges_lehmann(x, y)
                lo, hi = moses_interval(x, y)
            found.append((metric, x.size, y.size, u, p, hl, lo, hi))
        pvalues = np.array([f[4] for f in found])
        holm = np.full(pvalues.size, math.nan)
        tested = np.isfinite(pvalues)
        holm[tested] = effect_sizes.holm(pvalues[tested])
        verdicts = []
        for (metric, n_x, n_y, u, p, hl, lo, hi), ph in zip(found, holm, strict=True):
            significant = bool(np.isfinite(ph) and ph <= alpha)
            shift = bool(np.isfinite(hl) and hl >= min_shift - 1e-12)
            verdicts.append(significant and shift)
            rows.append(
                {
                    "env": str(trigger["env"]),
                    "model": str(trigger["model"]),
                    "dd": int(trigger["dd"]),
                    "sc_from": int(trigger["sc_from"]),
                    "sc_to": int(trigger["sc_to"]),
                    "metric": metric,
                    "n_from": int(n_x),
                    "n_to": int(n_y),
                    "mw_u": float(u),
                    "mw_p": float(p),
                    "p_holm": float(ph),
                    "hodges_lehmann": float(hl),
                    "hl_low": float(lo),
                    "hl_high": float(hi),
                    "significant": significant,
                    "shift_met": shift,
                    "metric_passes": significant and shift,
                    "pair_chosen": chosen,
                }
            )
        for row in rows[-len(G1B_METRICS) :]:
            row["g1b_passes"] = all(verdicts)
    return pd.DataFrame(rows, columns=G1B_COLUMNS) if rows else _empty(G1B_COLUMNS)
