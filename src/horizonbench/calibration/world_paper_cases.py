"""The world-model paper's tables: Cohen's h between agents (Table 10), Cliff's delta of an
ablation (Table 5), G1b, Table 1's selection rule and the W_trans patterns.

Studies simulate the cell table or the episodes table and read them through the functions
the pipeline calls (``analysis/world_effects.py``, ``analysis/world_shapes.py``): a planted
effect must be found (or its interval must cover it) and the matching null must not be.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from horizonbench.analysis import effect_sizes, phase, world_effects, world_shapes
from horizonbench.calibration.base import FALSE_POSITIVE_5, Case, Target, Trial, register

#: episodes per cell of a simulated study at scale 1
CELL_N = 100
#: power a detection arm must reach
DETECTION_80 = Target(0.80, 1.0)


def cells_frame(
    rates: dict[tuple[str, str, int, int], float], n: int, rng: np.random.Generator
) -> pd.DataFrame:
    """A cell table (``analysis.worlds.grid``'s columns) with ``n`` Bernoulli episodes per
    (env, model, sc, dd) cell drawn at the given true rates."""
    rows = []
    for (env, model, sc, dd), p in rates.items():
        k = int(rng.binomial(n, p))
        low, high = phase.wilson_interval(k, n)
        rows.append(
            {
                "env": env,
                "model": model,
                "sc": sc,
                "dd": dd,
                "n": n,
                "successes": k,
                "p": k / n,
                "wilson_low": low,
                "wilson_high": high,
            }
        )
    return pd.DataFrame(rows)


# --- Table 10: Cohen's h between two agents on a shared cell --------------------------

#: true rates of the two agents on one cell (planted: h = 0.93, "large"; null: equal)
H_PLANTED = (0.9, 0.5)
H_NULL = (0.6, 0.6)


def _interval_study(truth: float, null: bool, read):
    """A study of one interval: ``read(rng, n)`` simulates a table of ``n`` episodes a
    group and returns (estimate, low, high). Planted: does the interval cover
    ``truth``? Null (no effect): does it exclude 0, claiming one?"""

    def study(rng: np.random.Generator, scale: float) -> Trial:
        estimate, low, high = read(rng, max(10, round(CELL_N * scale)))
        values = {"estimate": estimate, "bias": estimate - truth}
        if null:
            return Trial(bool(low > 0 or high < 0), values)
        return Trial(bool(low <= truth <= high), values)

    return study


def _h_study(rates: tuple[float, float], null: bool):
    def read(rng: np.random.Generator, n: int) -> tuple[float, float, float]:
        cells = cells_frame({("sim", "a", 10, 1): rates[0], ("sim", "b", 10, 1): rates[1]}, n, rng)
        row = world_effects.model_pairs(cells).iloc[0]
        return float(row["cohens_h"]), float(row["h_low"]), float(row["h_high"])

    return _interval_study(effect_sizes.cohens_h(*rates), null, read)


def _coverage_case(name: str, statistic: str, planted: str, null: str, study) -> Case:
    """An interval's case: ``study(null)`` builds an arm's study; coverage of the planted
    effect in 0.90-0.98, an interval excluding 0 under no effect at most 0.05."""
    arms = {"planted_study": study(False), "null_study": study(True)}
    return register(Case(name, statistic, planted, null, "coverage", **arms))


H_CASE = _coverage_case(
    "Cohen's h between agents (Table 10)",
    "analysis/world_effects.py model_pairs: h and its arcsine-scale Wald interval",
    f"two agents at {H_PLANTED[0]} and {H_PLANTED[1]} on one cell, {CELL_N} episodes each",
    f"both at {H_NULL[0]}: an interval excluding 0 claims a difference",
    lambda null: _h_study(H_NULL if null else H_PLANTED, null),
)


# --- Table 5: Cliff's delta of an ablated level against its backdrop ------------------

#: true success of the backdrop and of the ablated level (Table 4's observation axis)
DELTA_PLANTED = (0.40, 0.10)


def _ablation_episodes(p_base: float, p_level: float, n: int, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for i in range(n):
        base = {"env": "sim", "model": "sim", "sc": 10, "dd": 6, "regime": "III", "horizon": 40}
        base.update(branching=4, observation="clean", mutation="static")
        rows.append({**base, "episode_id": f"sim:sim:{i:016x}", "success": bool(rng.random() < p_base)})
        rows.append(
            {
                **base,
                "episode_id": f"sim:sim:{i:016x}:observation=partial",
                "observation": "partial",
                "success": bool(rng.random() < p_level),
            }
        )
    return pd.DataFrame(rows)


def _delta_study(rates: tuple[float, float], null: bool):
    def read(rng: np.random.Generator, n: int) -> tuple[float, float, float]:
        row = world_effects.ablation_deltas(_ablation_episodes(rates[0], rates[1], n, rng)).iloc[0]
        return float(row["cliffs_delta"]), float(row["delta_low"]), float(row["delta_high"])

    return _interval_study(rates[1] - rates[0], null, read)


DELTA_CASE = _coverage_case(
    "Cliff's delta of an ablation (Table 5)",
    "analysis/world_effects.py ablation_deltas: delta and its Newcombe interval",
    f"backdrop {DELTA_PLANTED[0]}, ablated level {DELTA_PLANTED[1]}, {CELL_N} episodes each",
    f"both at {DELTA_PLANTED[0]}: an interval excluding 0 claims an effect",
    lambda null: _delta_study((DELTA_PLANTED[0], DELTA_PLANTED[0]) if null else DELTA_PLANTED, null),
)


# --- G1b: three metrics, Holm, Hodges-Lehmann >= 0.20 ----------------------------------

#: per-episode metric before the cliff ~ U(0.55, 0.95); after it shifted down by this
G1B_PLANTED_SHIFT = 0.30
#: a real but small shift: the Hodges-Lehmann rule must keep it from passing
G1B_NULL_SHIFT = 0.10
#: episodes per cell of a G1b study at scale 1
G1B_N = 40


def _g1b_episodes(shift: float, n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = []
    for sc, down in ((10, 0.0), (20, shift)):
        for _ in range(n):
            steps = 40
            valid = float(np.clip(rng.uniform(0.55, 0.95) - down, 0, 1))
            rows.append(
                {
                    "env": "sim",
                    "model": "sim",
                    "sc": sc,
                    "dd": 1,
                    "steps": steps,
                    "invalid_actions": int(round((1.0 - valid) * steps)),
                    "mean_jaccard": float(rng.uniform(0.55, 0.95) - down),
                    "self_check_accuracy": float(rng.uniform(0.55, 0.95) - down),
                }
            )
    cliffs = pd.DataFrame([{"env": "sim", "model": "sim", "dd": 1, "sc_from": 10, "sc_to": 20, "drop": 0.5}])
    return pd.DataFrame(rows), cliffs


#: draws (episodes, cliff table) for a G1b study: (shift, episodes a cell, rng)
G1bDraw = Callable[[float, int, np.random.Generator], tuple[pd.DataFrame, pd.DataFrame]]


def _g1b_study(shift: float, draw: G1bDraw | None = None):
    """A G1b study on ``draw``'s episodes and cliff table (one pair by default); no
    locked pair, so with several pairs G1b picks the largest drop from the data."""

    def study(rng: np.random.Generator, scale: float) -> Trial:
        episodes, cliffs = (draw or _g1b_episodes)(shift, max(8, round(G1B_N * scale)), rng)
        table = world_effects.g1b(episodes, cliffs)
        values = {"mean_hl": float(table["hodges_lehmann"].mean())}
        return Trial(bool(table["g1b_passes"].iloc[0]), values)

    return study


G1B_CASE = register(
    Case(
        name="G1b (3 metrics, Holm, HL >= 0.20)",
        statistic="analysis/world_effects.py g1b: one-sided Mann-Whitney per metric, Holm at 0.01, "
        "Hodges-Lehmann shift >= 0.20",
        planted=f"all three metrics {G1B_PLANTED_SHIFT} lower after the cliff, {G1B_N} episodes a cell",
        null=f"all three metrics {G1B_NULL_SHIFT} lower: significant at times, but below the "
        "0.20 shift G1b demands, so a pass is a false positive",
        measure="detection",
        planted_study=_g1b_study(G1B_PLANTED_SHIFT),
        planted_target=DETECTION_80,
        null_study=_g1b_study(G1B_NULL_SHIFT),
        null_target=FALSE_POSITIVE_5,
    )
)


#: the multi-pair grid of the selected-pair case: 4 sc x 3 dd, so 9 adjacent pairs to pick from
G1B_GRID_SC = (10, 20, 30, 40)
G1B_GRID_DD = (1, 2, 3)
#: where the planted arm's cliff sits: every cell past sc 20 at dd 2 is shifted down
G1B_GRID_CLIFF = (20, 2)


def g1b_grid_episodes(shift: float, n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Episodes on the 4 x 3 grid (three metrics ~ U(0.55, 0.95), each down by ``shift``
    past :data:`G1B_GRID_CLIFF`; 0 = no shift anywhere) and the cliff table the
    pipeline would pick from: success is world-state accuracy >= 0.75, so the largest
    success drop is where the metrics fell most by chance, the selection under test."""
    cliff_sc, cliff_dd = G1B_GRID_CLIFF
    rows = []
    for dd in G1B_GRID_DD:
        for sc in G1B_GRID_SC:
            down = shift if (dd == cliff_dd and sc > cliff_sc) else 0.0
            for _ in range(n):
                jaccard = float(rng.uniform(0.55, 0.95) - down)
                valid = float(np.clip(rng.uniform(0.55, 0.95) - down, 0, 1))
                rows.append(
                    {
                        "env": "sim",
                        "model": "sim",
                        "sc": sc,
                        "dd": dd,
                        "steps": 40,
                        "invalid_actions": int(round((1.0 - valid) * 40)),
                        "mean_jaccard": jaccard,
                        "self_check_accuracy": float(rng.uniform(0.55, 0.95) - down),
                        "success": jaccard >= 0.75,
                    }
                )
    episodes = pd.DataFrame(rows)
    rate = episodes.groupby(["dd", "sc"])["success"].mean()
    cliffs = pd.DataFrame(
        [
            {"env": "sim", "model": "sim", "dd": dd, "sc_from": a, "sc_to": b}
            | {"drop": rate[dd, a] - rate[dd, b]}
            for dd in G1B_GRID_DD
            for a, b in zip(G1B_GRID_SC, G1B_GRID_SC[1:], strict=False)
        ]
    )
    return episodes, cliffs


G1B_SELECTED_CASE = register(
    Case(
        name="G1b at the data-selected pair (4 x 3 grid)",
        statistic="analysis/world_effects.py g1b without worlds.g1b_pair: the pair is each agent's "
        "largest adjacent success drop of 9, then Mann-Whitney, Holm at 0.01, HL >= 0.20",
        planted=f"all three metrics {G1B_PLANTED_SHIFT} lower past sc {G1B_GRID_CLIFF[0]} at dd "
        f"{G1B_GRID_CLIFF[1]}, {G1B_N} episodes a cell",
        null="no shift anywhere: a pass at the pair picked from the data is a false positive "
        "of the selection",
        measure="detection",
        planted_study=_g1b_study(G1B_PLANTED_SHIFT, g1b_grid_episodes),
        planted_target=DETECTION_80,
        null_study=_g1b_study(0.0, g1b_grid_episodes),
        null_target=FALSE_POSITIVE_5,
    )
)


# --- Table 1: the selection rule -------------------------------------------------------

#: true dd sweeps: a selectable environment (both agents fall 40-45 points, monotone) and
#: one that falls monotonically by only 10 points (fails criterion (c))
SELECT_PLANTED = {"a": (0.9, 0.8, 0.6, 0.5), "b": (0.8, 0.65, 0.5, 0.35)}
SELECT_NULL = {"a": (0.6, 0.57, 0.53, 0.5), "b": (0.5, 0.47, 0.43, 0.4)}
DD = (1, 2, 4, 6)


def _selection_study(curves: dict[str, tuple[float, ...]]):
    def study(rng: np.random.Generator, scale: float) -> Trial:
        n = max(20, round(4 * CELL_N * scale))
        rates = {("sim", m, 10, d): p for m, curve in curves.items() for d, p in zip(DD, curve, strict=True)}
        table = world_shapes.environment_selection(cells_frame(rates, n, rng))
        return Trial(bool(table["selected"].iloc[0]), {"min_max_drop": float(table["min_max_drop"].iloc[0])})

    return study


SELECTION_CASE = register(
    Case(
        name="environment selection (Table 1)",
        statistic="analysis/world_shapes.py environment_selection: "
        "monotone, same shape, min max drop >= 20 pp",
        planted=f"two agents whose dd sweeps fall monotonically by 40 and 45 points, "
        f"{4 * CELL_N} episodes a level",
        null="sweeps that fall by 10 points only: a selection is a false positive",
        measure="detection",
        planted_study=_selection_study(SELECT_PLANTED),
        planted_target=DETECTION_80,
        null_study=_selection_study(SELECT_NULL),
        null_target=FALSE_POSITIVE_5,
    )
)


# --- Appendix J: the W_trans patterns --------------------------------------------------

#: true rates per dd along sc = 5, 10, 20, 40: the band narrows 2 -> 1 (Pattern A);
#: the null keeps one band cell at every dd (Pattern B)
SC = (5, 10, 20, 40)
PATTERN_A = {1: (0.98, 0.5, 0.5, 0.02), 2: (0.98, 0.5, 0.02, 0.02), 4: (0.98, 0.5, 0.02, 0.02)}
PATTERN_B = {1: (0.98, 0.5, 0.02, 0.02), 2: (0.98, 0.5, 0.02, 0.02), 4: (0.98, 0.5, 0.02, 0.02)}


def _pattern_study(truth: dict[int, tuple[float, ...]], expected: str, null: bool):
    def study(rng: np.random.Generator, scale: float) -> Trial:
        n = max(20, round(CELL_N * scale))
        rates = {("sim", "m", sc, dd): p for dd, row in truth.items() for sc, p in zip(SC, row, strict=True)}
        found = world_shapes.band_patterns(cells_frame(rates, n, rng)).iloc[0]["pattern"]
        if null:  # the constant band read as sharpening or broadening
            return Trial(found in ("A", "C"))
        return Trial(found == expected)

    return study


PATTERN_CASE = register(
    Case(
        name="W_trans pattern (Appendix J)",
        statistic="analysis/world_shapes.py band_patterns: Pattern A / B / C of W_trans(d)",
        planted=f"W_trans 2, 1, 1 over dd 1, 2, 4 (Pattern A), {CELL_N} episodes a cell",
        null="W_trans 1 at every dd (Pattern B): reading A or C is a false positive",
        measure="recovery",
        planted_study=_pattern_study(PATTERN_A, "A", null=False),
        planted_target=DETECTION_80,
        null_study=_pattern_study(PATTERN_B, "B", null=True),
        null_target=FALSE_POSITIVE_5,
    )
)

__all__ = [
    "DELTA_CASE",
    "G1B_CASE",
    "G1B_SELECTED_CASE",
    "H_CASE",
    "PATTERN_CASE",
    "SELECTION_CASE",
    "cells_frame",
    "g1b_grid_episodes",
]
