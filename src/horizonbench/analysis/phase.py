"""Phase-diagram statistics of "World-Model Collapse as a Phase Transition".

The paper reads long-horizon agent failure as a finite-grid phase transition: over the
(state cardinality ``sc``, dependency density ``dd``) plane the success rate shows a
solved plateau, a narrow transition band and a collapse floor, and per-step traces show
the world-state fidelity failing before action validity. This module holds the
grid-level statistics behind those claims: arrays and DataFrames in, numbers and
DataFrames out, no file or network I/O, so the flows decide where results go and the
tests can check the maths against the paper's own tables.

Grid level (Section 3, Definition 1; Appendices A, H, I, J):

* :func:`wilson_interval`, :func:`phase_grid` -- per-cell success rates with intervals;
* :func:`critical_point`, :func:`critical_point_bootstrap` -- the operational crossing
  ``s* = inf{s : p(s) <= 1/2}`` interpolated on the grid, with a percentile bootstrap
  that draws each cell's rate from its Jeffreys posterior;
* :func:`cliffs`, :func:`abrupt_transition` -- adjacent-cell drops and Definition 1;
* :func:`w_trans` -- the transition-band width of Appendix J.

The rest of the paper's statistics live beside this module:
:mod:`horizonbench.analysis.risk_difference` (the one-sided Miettinen-Nurminen cliff
test of Appendix H, G1a), :mod:`horizonbench.analysis.effect_sizes` (rank tests, effect
sizes and multiplicity corrections of Tables 5 and 10) and
:mod:`horizonbench.analysis.trajectory` (the per-step collapse times of Section 3 and
Appendix G).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import special

from horizonbench.analysis.inputs import bool_series, float_series, require_columns
from horizonbench.analysis.risk_difference import CLIFF_MARGIN, miettinen_nurminen_test

#: transition band of Appendix H/J (``0.30 <= p <= 0.70``); the paper never gives
#: numbers for Definition 1's floor/plateau thresholds alpha < beta, so we take the
#: band edges: a cell at or below 0.30 is floor, at or above 0.70 is plateau
BAND_LOW = 0.30
BAND_HIGH = 0.70
#: p-values computed on a grid are compared with this slack, so 30/100 counts as 0.30
_TOL = 1e-9

GRID_COLUMNS = ["model", "sc", "dd", "n", "successes", "p", "wilson_low", "wilson_high"]
CLIFF_COLUMNS = [
    "model",
    "dd",
    "sc_from",
    "sc_to",
    "p_from",
    "p_to",
    "drop",
    "meets_margin",
    "mn_z",
    "mn_p",
    "plateau_exists",
    "floor_exists",
    "abrupt",
]
ABRUPT_COLUMNS = ["model", "max_drop", "n_cliffs", "plateau_exists", "floor_exists", "abrupt"]
W_TRANS_COLUMNS = ["model", "dd", "w_trans", "sc_in_band"]


# ---------------------------------------------------------------------------
# per-cell rates
# ---------------------------------------------------------------------------


def wilson_interval(successes, n, conf: float = 0.95):
    """Wilson score interval for a binomial proportion; vectorised over arrays.

    Why Wilson: the grid cells sit at the edges (plateau cells at 100/100, floor cells
    at 0/100), where the Wald interval collapses to a zero-width point. Wilson's
    interval inverts the score test, so it stays inside [0, 1], has a non-zero width at
    0 and n successes and keeps close to nominal coverage for n around 50-100, the
    cell sizes of the paper.

    Returns ``(low, high)``: floats for scalar input, arrays otherwise. A cell with
    ``n == 0`` has no information and gets ``(nan, nan)``.
    """
    if not 0.0 < conf < 1.0:
        raise ValueError("conf must lie strictly between 0 and 1")
    x = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    if np.isnan(x).any() or np.isnan(m).any():
        raise ValueError("successes and n must not be NaN")
    if (m < 0).any() or (x < 0).any() or (x > m).any():
        raise ValueError("need 0 <= successes <= n")
    z = special.ndtri(0.5 + conf / 2.0)  # the normal quantile, as scipy.stats.norm.ppf
    z2 = z * z
    with np.errstate(divide="ignore", invalid="ignore"):
        phat = x / m
        denom = 1.0 + z2 / m
        centre = (phat + z2 / (2.0 * m)) / denom
        half = z / denom * np.sqrt(phat * (1.0 - phat) / m + z2 / (4.0 * m * m))
        low = np.clip(centre - half, 0.0, 1.0)
        high = np.clip(centre + half, 0.0, 1.0)
    # the exact endpoints at the edges are 0 and 1; make rounding not move them
    low = np.where(x == 0, 0.0, low)
    high = np.where(x == m, 1.0, high)
    empty = m == 0
    low = np.where(empty, np.nan, low)
    high = np.where(empty, np.nan, high)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def phase_grid(episodes: pd.DataFrame, conf: float = 0.95) -> pd.DataFrame:
    """Success rate per (model, sc, dd) cell with its Wilson interval.

    ``episodes`` has one row per episode with columns ``model``, ``sc``, ``dd`` and
    ``success`` (bool or 0/1). This is the order parameter ``p(s, d)`` of Section 3
    estimated cell by cell; the interval is kept next to the point estimate because
    every later readout (cliffs, band membership, the crossing) uses point estimates
    and the interval shows how far a 50-episode cell can move.

    Missing ``success`` values are refused: an episode that was not scored must be
    dropped or scored by the caller, not silently counted as a failure.
    """
    require_columns(episodes, ["model", "sc", "dd", "success"], "episodes")
    keys = episodes[["model", "sc", "dd"]]
    if keys.isna().any().any():
        raise ValueError("model, sc and dd must not be missing")
    success = bool_series(episodes["success"].to_numpy(), "success")
    frame = keys.copy()
    frame["success"] = success.astype(np.int64)
    if frame.empty:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in GRID_COLUMNS})
    out = (
        frame.groupby(["model", "sc", "dd"], sort=True)["success"]
        .agg(n="size", successes="sum")
        .reset_index()
    )
    out["n"] = out["n"].astype(np.int64)
    out["successes"] = out["successes"].astype(np.int64)
    out["p"] = out["successes"] / out["n"]
    low, high = wilson_interval(out["successes"].to_numpy(), out["n"].to_numpy(), conf)
    out["wilson_low"] = np.asarray(low, dtype=float)
    out["wilson_high"] = np.asarray(high, dtype=float)
    return out[GRID_COLUMNS]


# ---------------------------------------------------------------------------
# the crossing s*
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CriticalPoint:
    """The interpolated crossing and how it was obtained.

    ``value`` is NaN when the crossing is not bracketed by the scanned cells, and
    ``reason`` then says which side it lies on. ``bracket`` is the pair of cells the
    interpolation used. ``note`` flags a curve that rises above 1/2 again after the
    first crossing (the readout is then the *first* crossing, as defined).
    """

    value: float
    bracket: tuple[float, float] | None
    reason: str | None = None
    note: str | None = None

    def __float__(self) -> float:
        return self.value


def _crossing(s: np.ndarray, p: np.ndarray) -> tuple[float, int]:
    """Core of :func:`critical_point` on sorted arrays.

    Returns ``(value, code)`` with code 0 bracketed, -1 starts at or below 1/2
    (value ``-inf``), +1 never reaches 1/2 (value ``+inf``), 2 no cells (NaN).
    """
    if s.size == 0:
        return math.nan, 2
    below = np.flatnonzero(p <= 0.5)
    if below.size == 0:
        return math.inf, 1
    j = int(below[0])
    if j == 0:
        return -math.inf, -1
    i = j - 1
    # p[i] > 1/2 >= p[j], so the denominator is positive
    frac = (p[i] - 0.5) / (p[i] - p[j])
    return float(s[i] + frac * (s[j] - s[i])), 0


def _sorted_curve(sc_values, p_values) -> tuple[np.ndarray, np.ndarray]:
    s = float_series(sc_values, "sc_values")
    p = float_series(p_values, "p_values")
    if s.shape != p.shape:
        raise ValueError("sc_values and p_values must have the same length")
    if ((p < 0) | (p > 1)).any():
        raise ValueError("p_values must lie in [0, 1]")
    order = np.argsort(s, kind="stable")
    s, p = s[order], p[order]
    if s.size > 1 and (np.diff(s) == 0).any():
        raise ValueError("sc_values must be distinct (aggregate repeated cells first)")
    return s, p


def critical_point(sc_values, p_values) -> CriticalPoint:
    """The operational crossing ``s* = inf{s : p(s) <= 1/2}`` of Section 3, interpolated.

    The cells are sorted by sc; ``s_j`` is the first cell with ``p <= 1/2`` and
    ``s_i = s_{j-1}`` the cell before it (so ``p(s_i) > 1/2``). Appendix A shows that,
    if ``p`` is non-increasing on ``[s_i, s_j]``, the true crossing lies in that
    bracket; inside it we interpolate linearly::

        s* = s_i + (p_i - 1/2) / (p_i - p_j) * (s_j - s_i)

    which is ``s_j`` itself when ``p_j == 1/2``. Only the *first* crossing counts: a
    later cell that climbs back above 1/2 does not move it (``note`` says so).

    Why a NaN sometimes: if the first scanned cell already has ``p <= 1/2`` the
    crossing lies at or below the scan (the paper's "Llama-3 70B: < 10"), and if no cell
    reaches 1/2 it lies above the scan; neither is a number we can report, so
    ``value`` is NaN and ``reason`` says which case it is.

    Table 6 of the paper (SC-Fine, dd = 1): ``p(14) = 26/50 = 0.52 > 1/2`` and
    ``p(15) = 1/78 = 0.013``, so the definition brackets the crossing by 14 and 15 and
    gives ``14 + 0.02 / 0.507 = 14.04``, the value printed in Table 9. The text's
    "sc* ~ 13.5" (and the Table 6 caption's "bracketed by sc = 13 and sc = 14") would
    need ``p(14) <= 1/2``: interpolating from ``p(13) = 0.78`` lands on 13.5 only if
    ``p(14) = 0.22``. 13.5 is the midpoint of the two intermediate cells 13 and 14, not
    the operational crossing of the table's own numbers. (26/50 is also statistically
    indistinguishable from 1/2: Wilson 95% is [0.39, 0.65]; see
    :func:`critical_point_bootstrap` for the uncertainty of the readout.)
    """
    s, p = _sorted_curve(sc_values, p_values)
    value, code = _crossing(s, p)
    if code == 2:
        return CriticalPoint(math.nan, None, "no cells")
    if code == -1:
        return CriticalPoint(
            math.nan,
            None,
            f"starts below: p({s[0]:g}) = {p[0]:.3f} <= 0.5, the crossing is at or below the scanned range",
        )
    if code == 1:
        return CriticalPoint(
            math.nan,
            None,
            f"never crosses: every cell has p > 0.5, the crossing lies above sc = {s[-1]:g}",
        )
    j = int(np.flatnonzero(p <= 0.5)[0])
    note = None
    again = np.flatnonzero(p[j + 1 :] > 0.5)
    if again.size:
        note = f"non-monotone: p rises above 0.5 again at sc = {s[j + 1 + int(again[0])]:g}"
    return CriticalPoint(value, (float(s[j - 1]), float(s[j])), None, note)


class BootstrapCrossing(NamedTuple):
    """Point estimate and percentile interval of the crossing."""

    sc_star: float
    low: float
    high: float


def critical_point_bootstrap(
    episodes: pd.DataFrame, n_boot: int = 2000, seed: int = 0, conf: float = 0.95
) -> BootstrapCrossing:
    """Crossing of one model at one dd with a percentile (parametric) bootstrap interval.

    ``episodes`` has columns ``sc`` and ``success`` (plus optional ``model`` / ``dd``,
    which must then be constant: a crossing mixes no models or dd columns). Each
    replicate draws every sc cell's success rate from its Jeffreys posterior
    ``Beta(x + 1/2, n - x + 1/2)`` (x successes of n episodes), cell by cell, because
    the cells are the design: they were run with fixed n, so mixing episodes across
    cells would change the design rather than the data.

    Why not resample the episodes within each cell: a cell that is all 0 or all 1
    never varies under resampling, so a crossing bracketed by two such cells got a
    zero-width interval (issue 22: the calibration suite's "sc* coverage (step)" case,
    p(14) = 0.98 and p(15) = 0.01 at 50 episodes per cell, covered the true crossing in
    0.665 of 200 studies, 18.5% of them with zero width). The Jeffreys draws give such a
    cell the spread its n allows; the suite measured coverage 0.965-0.98 on sharp,
    smooth and step-like curves (``python benchmarks/calibration.py``).

    A replicate whose curve is not bracketed is not dropped (dropping would narrow the
    interval exactly when the data are least informative): one that starts at or below
    1/2 counts as ``-inf`` and one that never reaches 1/2 as ``+inf``. The interval
    uses order statistics (no interpolation between replicates), so an infinite bound
    means "beyond the scanned range". The generator is ``numpy.random.default_rng(seed)``
    and cells are visited in sc order, so the result is a function of the inputs.
    """
    require_columns(episodes, ["sc", "success"], "episodes")
    for col in ("model", "dd"):
        if col in episodes.columns and episodes[col].nunique(dropna=False) > 1:
            raise ValueError(f"episodes mix several values of {col!r}; pass one curve")
    if n_boot < 1:
        raise ValueError("n_boot must be positive")
    if not 0.0 < conf < 1.0:
        raise ValueError("conf must lie strictly between 0 and 1")
    s_all = float_series(episodes["sc"].to_numpy(), "sc")
    y_all = bool_series(episodes["success"].to_numpy(), "success")
    cells = np.unique(s_all)
    rng = np.random.default_rng(seed)
    p_obs = np.empty(cells.size)
    p_boot = np.empty((n_boot, cells.size))
    for c, sc in enumerate(cells):
        y = y_all[s_all == sc]
        x, n = float(y.sum()), float(y.size)
        p_obs[c] = x / n
        p_boot[:, c] = rng.beta(x + 0.5, n - x + 0.5, size=n_boot)
    point = critical_point(cells, p_obs).value
    reps = np.array([_crossing(cells, row)[0] for row in p_boot])
    alpha = 1.0 - conf
    low, high = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0], method="inverted_cdf")
    return BootstrapCrossing(float(point), float(low), float(high))


# ---------------------------------------------------------------------------
# cliffs, Definition 1 and the transition band
# ---------------------------------------------------------------------------


def cliffs(
    grid: pd.DataFrame,
    delta: float = CLIFF_MARGIN,
    alpha: float = BAND_LOW,
    beta: float = BAND_HIGH,
) -> pd.DataFrame:
    """Adjacent-cell drops along sc for every (model, dd), with Definition 1.

    ``grid`` has columns ``model``, ``sc``, ``dd``, ``p`` (e.g. from
    :func:`phase_grid`). For consecutive scanned sc values ``s_i < s_{i+1}`` at one dd
    the row holds ``drop = p(s_i) - p(s_{i+1})`` and ``meets_margin = drop >= delta``.
    "Adjacent" means adjacent among the cells present: a missing cell is skipped, not
    invented.

    Definition 1 (Section 3) calls the surface abruptly transitioning if some adjacent
    pair drops by at least ``delta`` *and* the same grid (one model, all dd) has
    non-empty plateau (``p >= beta``) and floor (``p <= alpha``) regimes; the last
    three columns carry that check per model, and ``abrupt`` marks the pairs that
    certify it. Defaults: ``delta = 0.30`` is the paper's margin (Appendix H); the
    paper gives no numbers for ``alpha < beta``, so they default to the edges of its
    transition band (0.30, 0.70; Appendices H and J).

    Why a test beside the point estimate: a 0.30 drop between two 50-episode cells
    can be noise. When the grid carries ``successes`` and ``n``, ``mn_z`` / ``mn_p``
    hold the one-sided Miettinen-Nurminen test of ``H0: drop <= delta`` (the paper's
    G1a statistic, Appendix H); otherwise they are NaN.
    """
    require_columns(grid, ["model", "sc", "dd", "p"], "grid")
    has_counts = "successes" in grid.columns and "n" in grid.columns
    rows = []
    for model, by_model in grid.groupby("model", sort=True):
        plateau, floor = _regimes(by_model["p"], alpha, beta)
        for dd, cell in by_model.groupby("dd", sort=True):
            cell = cell.sort_values("sc", kind="stable")
            if cell["sc"].duplicated().any():
                raise ValueError(f"repeated sc cells for model={model!r}, dd={dd!r}")
            recs = cell.to_dict("records")
            for a, b in zip(recs[:-1], recs[1:], strict=True):
                drop = float(a["p"] - b["p"])
                meets = drop >= delta - _TOL
                if has_counts:
                    mn = miettinen_nurminen_test(
                        int(a["successes"]), int(a["n"]), int(b["successes"]), int(b["n"]), delta
                    )
                    mn_z, mn_p = mn.z, mn.p_value
                else:
                    mn_z = mn_p = math.nan
                rows.append(
                    {
                        "model": model,
                        "dd": dd,
                        "sc_from": a["sc"],
                        "sc_to": b["sc"],
                        "p_from": float(a["p"]),
                        "p_to": float(b["p"]),
                        "drop": drop,
                        "meets_margin": bool(meets),
                        "mn_z": mn_z,
                        "mn_p": mn_p,
                        "plateau_exists": plateau,
                        "floor_exists": floor,
                        "abrupt": bool(meets and plateau and floor),
                    }
                )
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in CLIFF_COLUMNS})
    return pd.DataFrame(rows, columns=CLIFF_COLUMNS)


def _regimes(p: pd.Series, alpha: float, beta: float) -> tuple[bool, bool]:
    """Whether one model's grid has a plateau cell (``p >= beta``) and a floor cell
    (``p <= alpha``), the two regimes Definition 1 asks for beside the cliff."""
    return bool((p >= beta - _TOL).any()), bool((p <= alpha + _TOL).any())


def abrupt_transition(
    grid: pd.DataFrame,
    delta: float = CLIFF_MARGIN,
    alpha: float = BAND_LOW,
    beta: float = BAND_HIGH,
) -> pd.DataFrame:
    """Definition 1 verdict per model: the largest drop, how many pairs meet ``delta``.

    A one-row-per-model summary of :func:`cliffs`, for a report that needs the verdict
    rather than every pair. A model with a single sc value has no pair, so
    ``max_drop`` is NaN and the verdict is False.
    """
    require_columns(grid, ["model", "sc", "dd", "p"], "grid")
    pairs = cliffs(grid, delta, alpha, beta)
    rows = []
    for model, by_model in grid.groupby("model", sort=True):
        sub = pairs[pairs["model"] == model]
        plateau, floor = _regimes(by_model["p"], alpha, beta)
        rows.append(
            {
                "model": model,
                "max_drop": float(sub["drop"].max()) if len(sub) else math.nan,
                "n_cliffs": int(sub["meets_margin"].sum()) if len(sub) else 0,
                "plateau_exists": plateau,
                "floor_exists": floor,
                "abrupt": bool(sub["abrupt"].any()) if len(sub) else False,
            }
        )
    return pd.DataFrame(rows, columns=ABRUPT_COLUMNS)


def w_trans(grid: pd.DataFrame, low: float = BAND_LOW, high: float = BAND_HIGH) -> pd.DataFrame:
    """Transition-band width ``W_trans(d) = |{N : low <= p(N, d) <= high}|`` (Appendix J).

    Per (model, dd): ``w_trans`` is the count and ``sc_in_band`` the sorted tuple of sc
    values whose point estimate lies in the closed band. Why it matters: the paper
    reads a band that shrinks with d as sharpening (Pattern A) and one that grows as a
    finite-size crossover (Pattern C), so the count is the diagnostic and the set shows
    which cells carry it. Both ends are inclusive, with a 1e-9 slack so that e.g.
    30/100 counts as 0.30.
    """
    require_columns(grid, ["model", "sc", "dd", "p"], "grid")
    if low > high:
        raise ValueError("low must not exceed high")
    rows = []
    for (model, dd), cell in grid.groupby(["model", "dd"], sort=True):
        p = cell["p"].to_numpy(dtype=float)
        inside = (p >= low - _TOL) & (p <= high + _TOL)
        members = tuple(sorted(cell["sc"].to_numpy()[inside].tolist()))
        rows.append({"model": model, "dd": dd, "w_trans": len(members), "sc_in_band": members})
    return pd.DataFrame(rows, columns=W_TRANS_COLUMNS)
