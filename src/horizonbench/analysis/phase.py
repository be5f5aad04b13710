"""Phase-diagram statistics of "World-Model Collapse as a Phase Transition".

The paper reads long-horizon agent failure as a finite-grid phase transition: over the
(state cardinality ``sc``, dependency density ``dd``) plane the success rate shows a
solved plateau, a narrow transition band and a collapse floor, and per-step traces show
the world-state fidelity failing before action validity. This module holds the
statistics behind those claims and nothing else: arrays and DataFrames in, numbers and
DataFrames out, no file or network I/O, so the flows decide where results go and the
tests can check the maths against the paper's own tables.

Grid level (Section 3, Definition 1; Appendices A, H, I, J):

* :func:`wilson_interval`, :func:`phase_grid` -- per-cell success rates with intervals;
* :func:`critical_point`, :func:`critical_point_bootstrap` -- the operational crossing
  ``s* = inf{s : p(s) <= 1/2}`` interpolated on the grid, with a percentile bootstrap
  that draws each cell's rate from its Jeffreys posterior;
* :func:`cliffs`, :func:`abrupt_transition` -- adjacent-cell drops and Definition 1;
* :func:`w_trans` -- the transition-band width of Appendix J;
* :func:`miettinen_nurminen_test` -- the one-sided cliff test of Appendix H (G1a).

Effect sizes and multiplicity (Tables 5 and 10, Appendices H and I):
:func:`mann_whitney`, :func:`hodges_lehmann`, :func:`cliffs_delta`, :func:`cohens_h`
(with :func:`cliffs_delta_label`, :func:`cohens_h_label`), :func:`bonferroni`,
:func:`holm`, :func:`benjamini_hochberg`.

Trajectory level (Section 3, Appendix G): :func:`tau_w`, :func:`tau_w_onset`, :func:`tau_a`, :func:`lag`,
:func:`bad_steps`, :func:`dependency_correct`, :func:`collapse_onset`,
:func:`collapse_type`, :func:`lag_distribution`.

Where the paper's reference code went wrong we do not follow it: ``tau_w`` and
``tau_a`` are positions in the *same* per-step arrays (0-based), and dependency
correctness compares the declared *required* preconditions with the gold *required*
set (not with the missing ones).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import optimize, special

#: cliff margin of Definition 1 and the null of the G1a test (Appendix H: H0 dp <= 0.30)
CLIFF_MARGIN = 0.30
#: transition band of Appendix H/J (``0.30 <= p <= 0.70``); the paper never gives
#: numbers for Definition 1's floor/plateau thresholds alpha < beta, so we take the
#: band edges: a cell at or below 0.30 is floor, at or above 0.70 is plateau
BAND_LOW = 0.30
BAND_HIGH = 0.70
#: trajectory defaults of Section 3 / Appendix G: fidelity window h = 5 below 1/2;
#: collapse onset is the first 3-of-next-5 bad window
TAU_W_WINDOW = 5
TAU_W_THRESHOLD = 0.5
ONSET_K = 3
ONSET_WINDOW = 5
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
COLLAPSE_TYPES = ("world_state", "action_validity", "self_check", "compound")


# ---------------------------------------------------------------------------
# small validators
# ---------------------------------------------------------------------------


def _bool_series(values: Iterable, name: str) -> np.ndarray:
    """A 1-D boolean array from bools or 0/1 numbers; anything else is an error.

    A missing value is refused rather than read as a failure: whether an unscored
    episode or step counts as bad is the caller's decision, not a silent default.
    """
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if arr.dtype == bool:
        return arr
    if arr.size == 0:
        return arr.astype(bool)
    try:
        num = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must hold booleans or 0/1 values") from exc
    if np.isnan(num).any() or not np.isin(num, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold booleans or 0/1 values (no missing values)")
    return num.astype(bool)


def _float_series(values: Iterable, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return arr


def _pvalues(pvalues: Iterable[float]) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError("p-values must be one-dimensional")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must lie in [0, 1] (no NaN)")
    return p


def _require_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}")


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
    _require_columns(episodes, ["model", "sc", "dd", "success"], "episodes")
    keys = episodes[["model", "sc", "dd"]]
    if keys.isna().any().any():
        raise ValueError("model, sc and dd must not be missing")
    success = _bool_series(episodes["success"].to_numpy(), "success")
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
    s = _float_series(sc_values, "sc_values")
    p = _float_series(p_values, "p_values")
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
    _require_columns(episodes, ["sc", "success"], "episodes")
    for col in ("model", "dd"):
        if col in episodes.columns and episodes[col].nunique(dropna=False) > 1:
            raise ValueError(f"episodes mix several values of {col!r}; pass one curve")
    if n_boot < 1:
        raise ValueError("n_boot must be positive")
    if not 0.0 < conf < 1.0:
        raise ValueError("conf must lie strictly between 0 and 1")
    s_all = _float_series(episodes["sc"].to_numpy(), "sc")
    y_all = _bool_series(episodes["success"].to_numpy(), "success")
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
    _require_columns(grid, ["model", "sc", "dd", "p"], "grid")
    has_counts = "successes" in grid.columns and "n" in grid.columns
    rows = []
    for model, by_model in grid.groupby("model", sort=True):
        plateau = bool((by_model["p"] >= beta - _TOL).any())
        floor = bool((by_model["p"] <= alpha + _TOL).any())
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
    _require_columns(grid, ["model", "sc", "dd", "p"], "grid")
    pairs = cliffs(grid, delta, alpha, beta)
    rows = []
    for model, by_model in grid.groupby("model", sort=True):
        sub = pairs[pairs["model"] == model]
        rows.append(
            {
                "model": model,
                "max_drop": float(sub["drop"].max()) if len(sub) else math.nan,
                "n_cliffs": int(sub["meets_margin"].sum()) if len(sub) else 0,
                "plateau_exists": bool((by_model["p"] >= beta - _TOL).any()),
                "floor_exists": bool((by_model["p"] <= alpha + _TOL).any()),
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
    _require_columns(grid, ["model", "sc", "dd", "p"], "grid")
    if low > high:
        raise ValueError("low must not exceed high")
    rows = []
    for (model, dd), cell in grid.groupby(["model", "dd"], sort=True):
        p = cell["p"].to_numpy(dtype=float)
        inside = (p >= low - _TOL) & (p <= high + _TOL)
        members = tuple(sorted(cell["sc"].to_numpy()[inside].tolist()))
        rows.append({"model": model, "dd": dd, "w_trans": len(members), "sc_in_band": members})
    return pd.DataFrame(rows, columns=W_TRANS_COLUMNS)


# ---------------------------------------------------------------------------
# Miettinen-Nurminen score test for a risk difference
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MNTest:
    """One-sided Miettinen-Nurminen test of ``H0: p1 - p2 <= delta0``."""

    z: float
    p_value: float
    diff: float
    p1_restricted: float
    p2_restricted: float


def _restricted_mle(x1: int, n1: int, x2: int, n2: int, delta0: float) -> tuple[float, float]:
    """Maximum-likelihood ``(p1, p2)`` subject to ``p1 - p2 = delta0``.

    The score equation is a cubic in ``p1`` with a unique root in the feasible range
    (the constrained log-likelihood is concave); Farrington and Manning (1990) give it
    in trigonometric closed form, used here. If rounding pushes that root outside the
    feasible interval (it can at the edges), a bounded 1-D maximisation takes over.
    """
    ph1, ph2 = x1 / n1, x2 / n2
    if delta0 == 0.0:
        # the pooled rate, exactly; the cubic has a double root at 0 or 1 when all
        # outcomes agree, where the trigonometric form loses half its digits
        pooled = (x1 + x2) / (n1 + n2)
        return pooled, pooled
    lo1, hi1 = max(0.0, delta0), min(1.0, 1.0 + delta0)
    theta = n2 / n1
    a = 1.0 + theta
    b = -(1.0 + theta + ph1 + theta * ph2 + delta0 * (theta + 2.0))
    c = delta0 * delta0 + delta0 * (2.0 * ph1 + theta + 1.0) + ph1 + theta * ph2
    d = -ph1 * delta0 * (1.0 + delta0)
    v = b**3 / (3.0 * a) ** 3 - b * c / (6.0 * a * a) + d / (2.0 * a)
    radicand = b * b / (3.0 * a) ** 2 - c / (3.0 * a)
    p1 = math.nan
    if radicand > 0.0:
        u = math.copysign(math.sqrt(radicand), v if v != 0.0 else 1.0)
        ratio = min(1.0, max(-1.0, v / u**3))
        w = (math.pi + math.acos(ratio)) / 3.0
        p1 = 2.0 * u * math.cos(w) - b / (3.0 * a)
    if math.isfinite(p1) and lo1 - 1e-9 <= p1 <= hi1 + 1e-9:
        p1 = min(hi1, max(lo1, p1))
        # a few Newton steps on the cubic recover the digits acos loses near a
        # (nearly) repeated root; a step is kept only if it shrinks the residual
        for _ in range(4):
            f = ((a * p1 + b) * p1 + c) * p1 + d
            df = (3.0 * a * p1 + 2.0 * b) * p1 + c
            if f == 0.0 or df == 0.0:
                break
            q = min(hi1, max(lo1, p1 - f / df))
            if abs(((a * q + b) * q + c) * q + d) >= abs(f):
                break
            p1 = q
        return p1, p1 - delta0
    return _restricted_mle_numeric(x1, n1, x2, n2, delta0)


def _restricted_mle_numeric(x1: int, n1: int, x2: int, n2: int, delta0: float) -> tuple[float, float]:
    """The same restricted MLE by bounded 1-D maximisation; the closed form's safety net.

    Brent's bounded search never evaluates the end points, where the maximum lies when
    a group is all successes or all failures, so those are compared as well.
    """
    lo1, hi1 = max(0.0, delta0), min(1.0, 1.0 + delta0)

    def negloglik(q1: float) -> float:
        total = 0.0
        for x, n, q in ((x1, n1, q1), (x2, n2, q1 - delta0)):
            q = min(1.0 - 1e-15, max(1e-15, q))
            total += x * math.log(q) + (n - x) * math.log1p(-q)
        return -total

    res = optimize.minimize_scalar(negloglik, bounds=(lo1, hi1), method="bounded", options={"xatol": 1e-12})
    p1 = float(min((float(res.x), lo1, hi1), key=negloglik))
    return p1, p1 - delta0


def miettinen_nurminen_test(x1: int, n1: int, x2: int, n2: int, delta0: float = CLIFF_MARGIN) -> MNTest:
    """One-sided score test of ``H0: p1 - p2 <= delta0`` against ``p1 - p2 > delta0``.

    This is the paper's G1a statistic (Appendix H, formula in Appendix I): group 1 is
    the low-stress cell, group 2 the high-stress one, and rejecting H0 says the drop
    is larger than the margin ``delta0 = 0.30``, not merely non-zero. The statistic::

        z = (p1_hat - p2_hat - delta0) / sqrt(V),
        V = [p1~(1 - p1~)/n1 + p2~(1 - p2~)/n2] * N / (N - 1),   N = n1 + n2

    uses the restricted MLE ``(p1~, p2~)`` under ``p1 - p2 = delta0`` (the boundary of
    H0) rather than the observed rates. Why: at the grid's edge cells (100/100 vs
    0/100) the observed-rate (Wald) variance is zero and the z would be infinite; the
    restricted variance is not. ``N/(N-1)`` is Miettinen and Nurminen's (1985)
    correction that makes V unbiased; the paper's Appendix I formula omits it.

    The p-value is ``1 - Phi(z)``. With ``delta0 = 0`` and all outcomes identical the
    restricted variance is zero and the statistic undefined: z and p_value are NaN.
    """
    for name, val in (("x1", x1), ("n1", n1), ("x2", x2), ("n2", n2)):
        if int(val) != val:
            raise ValueError(f"{name} must be an integer")
    x1, n1, x2, n2 = int(x1), int(n1), int(x2), int(n2)
    if n1 < 1 or n2 < 1 or not (0 <= x1 <= n1 and 0 <= x2 <= n2):
        raise ValueError("need n >= 1 and 0 <= x <= n in both groups")
    if not -1.0 < delta0 < 1.0:
        raise ValueError("delta0 must lie strictly between -1 and 1")
    p1t, p2t = _restricted_mle(x1, n1, x2, n2, float(delta0))
    total = n1 + n2
    var = (p1t * (1.0 - p1t) / n1 + p2t * (1.0 - p2t) / n2) * total / (total - 1.0)
    diff = x1 / n1 - x2 / n2
    if var <= 0.0:
        return MNTest(math.nan, math.nan, diff, p1t, p2t)
    z = (diff - delta0) / math.sqrt(var)
    return MNTest(float(z), float(special.ndtr(-z)), diff, p1t, p2t)


# ---------------------------------------------------------------------------
# rank tests, effect sizes, multiplicity
# ---------------------------------------------------------------------------


class MannWhitney(NamedTuple):
    u: float
    p_value: float


def mann_whitney(a, b, alternative: str = "two-sided") -> MannWhitney:
    """Mann-Whitney U of sample ``a`` against ``b`` (scipy), default two-sided.

    ``u`` is the statistic of ``a``: the number of pairs with ``a_i > b_j`` plus half
    the ties. The paper's G1b used one-sided tests per metric (Appendix H); pass
    ``alternative="greater"`` or ``"less"`` for those. A thin wrapper so the module's
    callers get one return shape and input checks (no NaN, no empty sample).
    """
    x = _float_series(a, "a")
    y = _float_series(b, "b")
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples must be non-empty")
    from scipy import stats  # 0.3 s of imports that only the rank tests need

    res = stats.mannwhitneyu(x, y, alternative=alternative)
    return MannWhitney(float(res.statistic), float(res.pvalue))


def hodges_lehmann(a, b) -> float:
    """Hodges-Lehmann shift estimate: the median of all pairwise differences ``a_i - b_j``.

    The location estimate that goes with the Mann-Whitney test (the paper's G1b
    demands it be at least 0.20 per metric): robust to outliers, and equal to the true
    shift when ``a`` is ``b`` moved by a constant.
    """
    x = _float_series(a, "a")
    y = _float_series(b, "b")
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples must be non-empty")
    return float(np.median(np.subtract.outer(x, y)))


def cliffs_delta(a, b) -> float:
    """Cliff's delta ``P(a > b) - P(a < b)`` over all pairs, in [-1, 1].

    The paper's effect size for the ablations (Table 5). For 0/1 outcomes it equals
    the difference of success rates, which is why Table 5 can be read off Table 4.
    Computed by sorting ``b`` and counting with binary search, O((n + m) log m).
    """
    x = _float_series(a, "a")
    y = np.sort(_float_series(b, "b"))
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples must be non-empty")
    smaller = np.searchsorted(y, x, side="left")  # b_j < a_i
    larger = y.size - np.searchsorted(y, x, side="right")  # b_j > a_i
    return float((smaller.sum() - larger.sum()) / (x.size * y.size))


def cliffs_delta_label(delta: float) -> str:
    """Magnitude of Cliff's delta by Romano et al. (2006): 0.147 / 0.33 / 0.474.

    These cut-offs reproduce every code of the paper's Table 5.
    """
    d = abs(float(delta))
    if d < 0.147:
        return "negligible"
    if d < 0.33:
        return "small"
    if d < 0.474:
        return "medium"
    return "large"


def cohens_h(p1, p2):
    """Cohen's h ``2 asin(sqrt p1) - 2 asin(sqrt p2)``; vectorised.

    Why not a plain difference: the arcsine transform stabilises the binomial variance,
    so a 0.10 gap near 0 or 1 counts for more than the same gap near 0.5 -- the paper
    uses it to compare models cell by cell (Table 10).
    """
    a = np.asarray(p1, dtype=float)
    b = np.asarray(p2, dtype=float)
    if np.isnan(a).any() or np.isnan(b).any() or ((a < 0) | (a > 1) | (b < 0) | (b > 1)).any():
        raise ValueError("proportions must lie in [0, 1]")
    h = 2.0 * np.arcsin(np.sqrt(a)) - 2.0 * np.arcsin(np.sqrt(b))
    return float(h) if h.ndim == 0 else h


def cohens_h_label(h: float) -> str:
    """Magnitude of Cohen's h by Cohen (1988): 0.2 / 0.5 / 0.8 (the codes of Table 10)."""
    v = abs(float(h))
    if v < 0.2:
        return "negligible"
    if v < 0.5:
        return "small"
    if v < 0.8:
        return "medium"
    return "large"


def bonferroni(pvalues) -> np.ndarray:
    """Bonferroni-adjusted p-values ``min(1, m p)`` in the input order.

    Controls the family-wise error rate under any dependence; the paper applies it at
    alpha = 0.01 to the secondary-axis family (Appendix I).
    """
    p = _pvalues(pvalues)
    return np.minimum(1.0, p * p.size)


def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values in the input order.

    With the sorted p-values ``p_(1) <= ... <= p_(m)`` the adjusted value of ``p_(i)``
    is ``max_{j <= i} min(1, (m - j + 1) p_(j))``. Same family-wise guarantee as
    Bonferroni but uniformly more powerful; the paper's G1b uses it (Appendix H).
    """
    p = _pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values) in the input order.

    The adjusted value of ``p_(i)`` is ``min_{j >= i} min(1, m p_(j) / j)``; rejecting
    where it is at most q controls the false-discovery rate at q for independent or
    positively dependent tests (the paper uses q = 0.05, Appendix I).
    """
    p = _pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * m / np.arange(1, m + 1))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return adjusted


# ---------------------------------------------------------------------------
# trajectory metrics
# ---------------------------------------------------------------------------


def tau_w(R, h: int = TAU_W_WINDOW, threshold: float = TAU_W_THRESHOLD) -> int | None:
    """First step at which the trailing fidelity mean drops below ``threshold``.

    ``R[t]`` is the gold-scored fidelity (Appendix G: Jaccard of agent and gold world
    state) of the state the agent held when it chose action ``t``, so ``R`` and the
    validity series of :func:`tau_a` index the same steps. Section 3 defines
    ``tau_W = inf{t : mean(R_{t-h+1..t}) < 1/2}`` with ``h = 5``; we return that ``t``
    as a 0-based position in ``R``, or None if the mean never drops below.

    For ``t < h - 1`` the window would reach before the episode; we use the mean of the
    steps available (``R_0..R_t``) instead of padding or skipping. Why: skipping would
    make a world state that is wrong from the very first step look healthy for four
    steps, and padding would invent fidelity values; the available-window mean detects
    an early collapse as soon as the data show it.

    Fidelity values must be finite: a step whose state could not be read must be
    scored by the caller (e.g. as 0), not left missing -- the reference code turned a
    malformed update into an empty state silently.
    """
    r = _float_series(R, "R")
    if h < 1:
        raise ValueError("h must be at least 1")
    if r.size == 0:
        return None
    # window sums computed window by window, not as differences of a running sum: the
    # latter loses low-order bits over a long episode and can move a mean that equals
    # the threshold to just below it
    head = min(h - 1, r.size)
    means = [float(r[: t + 1].sum()) / (t + 1) for t in range(head)]
    if r.size >= h:
        means.extend(np.lib.stride_tricks.sliding_window_view(r, h).sum(axis=1) / h)
    hits = np.flatnonzero(np.asarray(means) < threshold)
    return int(hits[0]) if hits.size else None


def tau_w_onset(R, h: int = TAU_W_WINDOW, threshold: float = TAU_W_THRESHOLD) -> int | None:
    """The step at which the fidelity drop that :func:`tau_w` detects began.

    ``tau_w`` fires when the *trailing mean* of ``h`` steps falls below ``threshold``, so it
    lags the drop itself: a fall from about 0.9 to about 0.15 needs three low steps in the
    window, and ``tau_w`` lands two steps after the first of them (the calibration suite's
    lag case: a world state failing 4 steps before the first invalid action reads as a
    lag of -1.9, and a simultaneous failure as +2.1, i.e. "action first"). This is the
    first step of the window ending at ``tau_w`` from which every fidelity value through
    ``tau_w`` is below ``threshold``; ``tau_w`` itself when its own value is not below
    (the mean fell without a sustained run). None when ``tau_w`` is None.
    """
    r = _float_series(R, "R")
    tw = tau_w(r, h, threshold)
    if tw is None:
        return None
    start = tw
    while start > max(0, tw - h + 1) and r[start - 1] < threshold and r[start] < threshold:
        start -= 1
    return int(start)


def tau_a(valid) -> int | None:
    """First step index (0-based, same index as :func:`tau_w`) with an invalid action.

    ``valid[t]`` says whether action ``t`` had all its gold preconditions in the gold
    state (Appendix G). The paper writes ``inf{t >= 1 : A_t = 0}`` with 1-based steps
    and its reference code counted ``tau_W`` and ``tau_A`` on different step indices,
    which shifts every lag; here both are positions in per-step arrays of one episode.
    None when every action was valid.
    """
    v = _bool_series(valid, "valid")
    bad = np.flatnonzero(~v)
    return int(bad[0]) if bad.size else None


def lag(R, valid, h: int = TAU_W_WINDOW, threshold: float = TAU_W_THRESHOLD) -> int | None:
    """``tau_w - tau_a`` for one episode; negative means the world state failed first.

    Both series must have one entry per step (same length), which is the guarantee
    that the two times are on the same index. None when either time is undefined.
    """
    r = _float_series(R, "R")
    v = _bool_series(valid, "valid")
    if r.size != v.size:
        raise ValueError("R and valid must have one entry per step (same length)")
    tw, ta = tau_w(r, h, threshold), tau_a(v)
    if tw is None or ta is None:
        return None
    return tw - ta


def dependency_correct(declared_required: Iterable, gold_required: Iterable) -> bool:
    """Whether the Planner's declared required preconditions equal the gold required set.

    Appendix G's "dependency correctness". The reference code compared the declared
    *required* set with the gold *missing* preconditions, which marks a perfect
    declaration wrong whenever nothing is missing; here like is compared with like.
    Order and repetition do not matter.
    """
    return set(declared_required) == set(gold_required)


def bad_steps(action_valid, world_consistent, dependency_ok) -> np.ndarray:
    """Appendix H's ``bad(t) = not valid or not consistent or not dependency-correct``."""
    a = _bool_series(action_valid, "action_valid")
    w = _bool_series(world_consistent, "world_consistent")
    d = _bool_series(dependency_ok, "dependency_ok")
    if not a.size == w.size == d.size:
        raise ValueError("per-step series must have the same length")
    return ~a | ~w | ~d


def collapse_onset(
    bad, k: int = ONSET_K, window: int = ONSET_WINDOW, require_bad_start: bool = True
) -> int | None:
    """First step ``t`` such that at least ``k`` of steps ``t .. t + window - 1`` are bad.

    Appendix G's collapse onset ``tau_o``: "first step of a 3-of-next-5 bad window".
    Why a k-of-window rule and not the first bad step: an isolated slip that the agent
    recovers from is not a collapse.

    ``require_bad_start`` (default) also asks step ``t`` itself to be bad. Without it
    the window, which looks *forward*, can start on good steps: for
    ``bad = 0 0 0 0 0 0 1 1 1`` the bare rule dates the collapse at step 4, two steps
    before the first error. Any qualifying window still qualifies when moved forward
    to its first bad step (it loses only good steps), so the anchored onset is the
    first bad step that opens a k-of-window run, and it differs from the bare rule
    only by those leading good steps. ``require_bad_start=False`` gives the bare rule.

    Near the end of an episode the window is whatever steps remain, and it still needs
    ``k`` bad steps: an episode that ends in a burst of errors has collapsed even if it
    stopped before five more steps. None if no window qualifies.
    """
    b = _bool_series(bad, "bad")
    if not 1 <= k <= window:
        raise ValueError("need 1 <= k <= window")
    if b.size == 0:
        return None
    csum = np.concatenate(([0], np.cumsum(b.astype(np.int64))))
    t = np.arange(b.size)
    end = np.minimum(b.size, t + window)
    ok = csum[end] - csum[t] >= k
    if require_bad_start:
        ok &= b
    hits = np.flatnonzero(ok)
    return int(hits[0]) if hits.size else None


def collapse_type(
    world_bad,
    action_bad,
    self_check_bad=None,
    k: int = ONSET_K,
    window: int = ONSET_WINDOW,
    onset: int | None = None,
) -> str | None:
    """Which per-step signal drives the collapse: one of :data:`COLLAPSE_TYPES` or None.

    Signals (one bool per step, True = bad): ``world_bad`` (world state wrong, e.g.
    fidelity below 1/2 or inconsistent), ``action_bad`` (invalid action),
    ``self_check_bad`` (Self-Diag disagreed with the gold validity verdict; optional).

    Rule. The onset window is ``[onset, onset + window)``; ``onset`` defaults to
    :func:`collapse_onset` of the union of the signals (pass your own, e.g. from
    :func:`bad_steps`, to use the paper's bad-step definition). No onset: None. In the
    window, a signal that is bad on at least ``k`` steps meets the onset criterion on
    its own; exactly one such signal names the type, two or more give "compound". If no
    signal reaches ``k`` alone, the signals present in the window decide: one signal
    present names the type, several give "compound" (the collapse needed them
    together), none gives None. Why this rule: the type should say which failure was
    sufficient for the collapse, not which one happened to appear once in it.
    """
    signals = {
        "world_state": _bool_series(world_bad, "world_bad"),
        "action_validity": _bool_series(action_bad, "action_bad"),
    }
    if self_check_bad is not None:
        signals["self_check"] = _bool_series(self_check_bad, "self_check_bad")
    sizes = {s.size for s in signals.values()}
    if len(sizes) != 1:
        raise ValueError("per-step signals must have the same length")
    if onset is None:
        union = np.zeros(sizes.pop(), dtype=bool)
        for s in signals.values():
            union |= s
        onset = collapse_onset(union, k, window)
        if onset is None:
            return None
    counts = {name: int(s[onset : onset + window].sum()) for name, s in signals.items()}
    dominant = [name for name, c in counts.items() if c >= k]
    if not dominant:
        dominant = [name for name, c in counts.items() if c > 0]
    if not dominant:
        return None
    return dominant[0] if len(dominant) == 1 else "compound"


def mean_t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of a mean (NaN below two values; the point when they all agree).

    Deterministic, unlike a bootstrap, so a rebuilt analysis gives the same bytes; the
    calibration suite checks its coverage on planted lags."""
    from scipy import stats  # lazily, as for the rank tests: start-up pays for what it uses

    v = np.asarray(values, dtype=float)
    n = int(v.size)
    if n < 2:
        return math.nan, math.nan
    m = float(v.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    return m - half, m + half


def lag_distribution(episodes: pd.DataFrame) -> dict[str, float]:
    """Summary of ``tau_w - tau_a`` over failed episodes with both times defined.

    ``episodes`` has columns ``success`` (bool/0-1), ``tau_w`` and ``tau_a`` (numbers,
    NaN/None when undefined). Section 5.1's mechanism claim is about *failed* episodes
    whose world state and action validity both failed ("paired"), so only those enter.
    Returns counts and, over the paired episodes, the median and mean lag with the
    mean's t interval (``mean_low``/``mean_high``), and the shares with the world state
    first (``tau_w < tau_a``), simultaneous, and action first; the statistics are NaN
    when no episode is paired.

    ``tau_w`` is the paper's (the trailing mean of 5 steps below 1/2): it fires about
    two steps after a sharp drop, so its lag reads late by that much (the calibration
    suite: a world state failing 4 steps first reads -1.9). With a ``tau_w_onset``
    column (:func:`tau_w_onset`, the start of the drop ``tau_w`` detects) the same
    summary of ``tau_w_onset - tau_a`` comes beside it (``onset_*``): that is the lag
    the suite recovers within its interval.
    """
    _require_columns(episodes, ["success", "tau_w", "tau_a"], "episodes")
    success = _bool_series(episodes["success"].to_numpy(), "success")
    tw = pd.to_numeric(episodes["tau_w"], errors="raise").to_numpy(dtype=float)
    ta = pd.to_numeric(episodes["tau_a"], errors="raise").to_numpy(dtype=float)
    failed = ~success
    paired = failed & np.isfinite(tw) & np.isfinite(ta)
    lags = tw[paired] - ta[paired]
    n = int(lags.size)

    def share(mask: np.ndarray) -> float:
        return float(mask.mean()) if n else math.nan

    low, high = mean_t_interval(lags)
    out: dict[str, float] = {
        "n_episodes": int(success.size),
        "n_failed": int(failed.sum()),
        "count": n,
        "median": float(np.median(lags)) if n else math.nan,
        "mean": float(lags.mean()) if n else math.nan,
        "share_world_first": share(lags < 0),
        "share_simultaneous": share(lags == 0),
        "share_action_first": share(lags > 0),
        "mean_low": low,
        "mean_high": high,
    }
    if "tau_w_onset" in episodes.columns:
        on = pd.to_numeric(episodes["tau_w_onset"], errors="raise").to_numpy(dtype=float)
        both = failed & np.isfinite(on) & np.isfinite(ta)
        onset_lags = on[both] - ta[both]
    else:
        onset_lags = np.empty(0)
    k = int(onset_lags.size)
    o_low, o_high = mean_t_interval(onset_lags)
    out.update(
        onset_count=k,
        onset_mean=float(onset_lags.mean()) if k else math.nan,
        onset_mean_low=o_low,
        onset_mean_high=o_high,
        onset_share_world_first=float((onset_lags < 0).mean()) if k else math.nan,
    )
    return out
