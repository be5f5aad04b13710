"""sc* coverage and W_trans: a logistic fine scan with a known crossing, and a null.

Studies are episodes tables (the columns ``analysis/worlds.py`` reads) for one
environment, model and dd; the statistics are ``worlds.critical_points`` (sc* with its
bootstrap interval), ``worlds.grid`` / ``worlds.cliff_table`` / ``worlds.band_widths``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.analysis import phase, worlds
from horizonbench.calibration.base import REPORT, Case, Study, Trial, register

#: the fine scan of wmc-fine (sc 10..20 at dd = 1), 50 episodes per cell as the paper's
FINE_SC = np.arange(10, 21)
CELL_N = 50
#: the planted logistic: p(sc) = 1 / (1 + exp((sc - centre) / width))
CENTRE = 14.3
SHARP_WIDTH = 0.35
SMOOTH_WIDTH = 1.5
#: a near step between two cells: the bracketing cells are often all 1 and all 0
STEP_CENTRE = 14.45
STEP_WIDTH = 0.12
BOOTSTRAP = 200


def logistic(sc: np.ndarray, centre: float, width: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp((sc - centre) / width))


def true_crossing(centre: float, width: float) -> float:
    """The estimand on the grid: the operational crossing of the *true* cell rates."""
    return phase.critical_point(FINE_SC, logistic(FINE_SC.astype(float), centre, width)).value


def episodes_frame(sc: np.ndarray, success: np.ndarray) -> pd.DataFrame:
    """The episodes columns the world analysis reads, for offline-agent episodes."""
    size = len(sc)
    return pd.DataFrame(
        {
            "env": "sim",
            "model": "sim",
            "sc": sc.astype("int64"),
            "dd": np.ones(size, dtype="int64"),
            "success": success.astype(bool),
            "horizon_short": np.zeros(size, dtype=bool),
            "outcome": np.where(success, "success", "failure"),
        }
    )


def simulate_scan(rng: np.random.Generator, p: np.ndarray, scale: float) -> pd.DataFrame:
    n = max(5, round(CELL_N * scale))
    sc = np.repeat(FINE_SC, n)
    success = rng.random(sc.size) < np.repeat(p, n)
    return episodes_frame(sc, success)


def sc_star_study_for(width: float, centre: float = CENTRE):
    truth = true_crossing(centre, width)
    p = logistic(FINE_SC.astype(float), centre, width)

    def study(rng: np.random.Generator, scale: float) -> Trial:
        eps = simulate_scan(rng, p, scale)
        row = worlds.critical_points(eps, bootstrap=BOOTSTRAP, seed=int(rng.integers(2**31))).iloc[0]
        low, high = float(row["sc_star_low"]), float(row["sc_star_high"])
        values = {"width": high - low, "zero_width": float(high == low), "error": row["sc_star"] - truth}
        if np.isnan(low) or np.isnan(high):
            return Trial(None, values)
        return Trial(bool(low <= truth <= high), values)

    return study


def sc_star_null_study(rng: np.random.Generator, scale: float) -> Trial:
    """No crossing (p = 0.8 in every cell): a bounded interval claims a crossing inside."""
    eps = simulate_scan(rng, np.full(FINE_SC.size, 0.8), scale)
    row = worlds.critical_points(eps, bootstrap=BOOTSTRAP, seed=int(rng.integers(2**31))).iloc[0]
    low, high = float(row["sc_star_low"]), float(row["sc_star_high"])
    return Trial(bool(np.isfinite(low) and np.isfinite(high)))


def _abrupt(eps: pd.DataFrame) -> tuple[bool, bool, float]:
    """(Definition 1 on point estimates, Definition 1 with the MN test at 5%, W_trans)."""
    cells = worlds.grid(eps)
    pairs = worlds.cliff_table(cells)
    band = worlds.band_widths(cells)
    point = bool(pairs["abrupt"].any())
    tested = bool((pairs["abrupt"].astype(bool) & (pairs["mn_p"].astype(float) < 0.05)).any())
    return point, tested, float(band["w_trans"].iloc[0])


def transition_study_for(width: float | None):
    """A sharp logistic (width) or, for None, a linear decline 0.95 -> 0.05 (no transition)."""
    if width is None:
        p = np.linspace(0.95, 0.05, FINE_SC.size)
    else:
        p = logistic(FINE_SC.astype(float), CENTRE, width)

    def study(rng: np.random.Generator, scale: float) -> Trial:
        point, tested, w = _abrupt(simulate_scan(rng, p, scale))
        return Trial(tested, {"w_trans": w, "abrupt_point_estimate": float(point)})

    return study


def sc_star_case(
    shape: str,
    centre: float,
    width: float,
    detail: str,
    null: str = "(coverage: see the sharp case's null)",
    null_study: Study | None = None,
) -> Case:
    """Register one sc* coverage case: the same statistic over a logistic p(sc) of this
    centre and width (``detail`` ends the planted text); only the sharp case has a null."""
    return register(
        Case(
            name=f"sc* coverage ({shape})",
            statistic="analysis/worlds.py critical_points: phase.critical_point_bootstrap (200)",
            planted=f"p(sc) logistic, centre {centre}, width {width}{detail}",
            null=null,
            measure="coverage",
            planted_study=sc_star_study_for(width, centre),
            null_study=null_study,
        )
    )


SC_STAR_SHARP = sc_star_case(
    "sharp",
    CENTRE,
    SHARP_WIDTH,
    f"; sc 10..20, {CELL_N} per cell: grid crossing {true_crossing(CENTRE, SHARP_WIDTH):.2f}",
    null="p = 0.8 in every cell: an interval bounded on both sides claims a crossing",
    null_study=sc_star_null_study,
)
SC_STAR_SMOOTH = sc_star_case(
    "smooth", CENTRE, SMOOTH_WIDTH, f": grid crossing {true_crossing(CENTRE, SMOOTH_WIDTH):.2f}"
)
SC_STAR_STEP = sc_star_case(
    "step",
    STEP_CENTRE,
    STEP_WIDTH,
    f": p(14) = 0.98, p(15) = 0.01, grid crossing {true_crossing(STEP_CENTRE, STEP_WIDTH):.3f}; "
    "the bracketing cells are often all 1 and all 0",
)

W_TRANS = register(
    Case(
        name="transition found (Definition 1 + MN test; W_trans)",
        statistic="analysis/worlds.py cliff_table (abrupt and mn_p < 0.05) and band_widths",
        planted=f"sharp logistic (width {SHARP_WIDTH}) over sc 10..20, {CELL_N} per cell",
        null="linear decline 0.95 -> 0.05 over the scan (a crossover, no transition)",
        measure="detection",
        planted_study=transition_study_for(SHARP_WIDTH),
        planted_target=REPORT,
        null_study=transition_study_for(None),
    )
)


#: the issue's scripted agent: true success 0.5, and the episodes that fail run longest,
#: so most of them hit the output budget
BUDGET_TRUE_P = 0.5
BUDGET_STOP_SHARE = 0.8


def budget_study_for(rate: str):
    """Does the cell's Wilson interval of ``rate`` (``p``, budget stops as failures, or
    ``p_finished``, without them) cover the true success 0.5?"""

    def study(rng: np.random.Generator, scale: float) -> Trial:
        n = max(10, round(CELL_N * scale))
        success = rng.random(n) < BUDGET_TRUE_P
        stopped = ~success & (rng.random(n) < BUDGET_STOP_SHARE)
        eps = episodes_frame(np.full(n, 40), success)
        eps["outcome"] = np.where(stopped, worlds.BUDGET_EXCEEDED, eps["outcome"])
        cell = worlds.grid(eps).iloc[0]
        if rate == "p":
            low, high, value = float(cell["wilson_low"]), float(cell["wilson_high"]), float(cell["p"])
        else:
            wins, m = int(round(cell["p_finished"] * cell["n_finished"])), int(cell["n_finished"])
            low, high = phase.wilson_interval(wins, m)
            value = float(cell["p_finished"])
        return Trial(
            bool(low <= BUDGET_TRUE_P <= high), {"rate": value, "stops": float(cell["budget_exceeded"])}
        )

    return study


BUDGET = register(
    Case(
        name="success with budget stops (p vs p_finished)",
        statistic="analysis/worlds.py grid: p (stops count as failures) with its Wilson interval",
        planted=f"true success {BUDGET_TRUE_P}, {CELL_N} episodes a cell, {BUDGET_STOP_SHARE:.0%} of the "
        "failures stopped by the output budget (they run longest)",
        null="the same cells read by p_finished (stops left out), the old primary rate: its "
        "'coverage' is the null arm's rate, reported",
        measure="coverage",
        planted_study=budget_study_for("p"),
        null_study=budget_study_for("p_finished"),
        null_target=REPORT,
        null_measure="coverage of p_finished",
    )
)
