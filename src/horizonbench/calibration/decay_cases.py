"""L0 and eps: interval coverage of the decay fits and the compounding fit.

Studies are simulated at the scores-table level ``tasks/analyse/scores.py`` hands to
``summary.fit_all`` (maze decay) and ``compounding_tables`` (puzzles), so the fits run
exactly as in a pipeline run, bootstrap included.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horizonbench.analysis.compounding import compounding_tables
from horizonbench.analysis.summary import fit_all
from horizonbench.calibration.base import COVERAGE_95, REPORT, Case, Trial, register

#: the planted per-step error of the L0 case: L0 = -1 / ln(1 - eps) = 49.5
L0_EPS = 0.02
#: the Figure 1 design, smaller: L = 10, 14, ..., 118, instances per bin, samples each
L0_LENGTHS = np.arange(10, 120, 4)
L0_INSTANCES = 8
L0_SAMPLES = 5
#: the bootstrap the configs use by default (schemas/config.py: analysis.bootstrap)
BOOTSTRAP = 200
#: lengths of the puzzle rows of tests/test_puzzle_family.py (hanoi, blocks_world,
#: river_crossing at their SMALL params): the design behind the README's "within 15%"
PUZZLE_LENGTHS = np.array(
    [1] * 6 + [3] * 6 + [7] * 6
    + [1, 1, 1, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 6, 7, 7]
    + [1] * 24 + [3] * 8 + [5] * 10 + [11] * 2
)  # fmt: skip
PUZZLE_EPS = 0.05
EPS_TOLERANCE = 0.15


def true_l0(eps: float) -> float:
    """Constant per-step error eps gives p(L) = (1 - eps)^L = exp(-L / L0)."""
    return -1.0 / math.log1p(-eps)


def scores_frame(
    lengths: np.ndarray,
    success: np.ndarray,
    instance: np.ndarray,
    family: str = "maze",
    n: np.ndarray | None = None,
) -> pd.DataFrame:
    """A scores table with the columns the analysis reads (schemas/tables.py SCORES_SCHEMA)."""
    size = len(lengths)
    nan = np.full(size, np.nan)
    frame = pd.DataFrame(
        {
            "model": "sim",
            "family": family,
            "instance_id": [f"i{int(i)}" for i in instance],
            "solution_length": lengths.astype("int64"),
            "success": success.astype(bool),
            "valid": True,
            "exact_match": success.astype(bool),
            "progress_ratio": nan,
            "precision": nan,
            "recall": nan,
            "violation": [None if s else "wall" for s in success],
            "first_violation_step": nan,
            "parse_error": None,
            "move_legality_rate": nan,
            "optimality_gap": nan,
        }
    )
    if n is not None:
        frame["n"] = n.astype("int64")
    return frame


def simulate_decay(
    rng: np.random.Generator, eps: float, scale: float, prefactor: float = 1.0
) -> pd.DataFrame:
    """Attempts of a constant-rate model over the L bins: success with A (1 - eps)^L, A
    the ``prefactor`` (1: the pure exp(-L/L0); below 1: a first-step error on top)."""
    per_bin = max(2, round(L0_INSTANCES * scale))
    L = np.repeat(L0_LENGTHS, per_bin * L0_SAMPLES)
    instance = np.repeat(np.arange(L0_LENGTHS.size * per_bin), L0_SAMPLES)
    success = rng.random(L.size) < prefactor * (1.0 - eps) ** L
    return scores_frame(L, success, instance)


def _fits(frame: pd.DataFrame, rng: np.random.Generator, bootstrap: int = BOOTSTRAP) -> dict[str, dict]:
    fits = fit_all(frame, bootstrap=bootstrap, seed=int(rng.integers(2**31)))
    return {row["method"]: row for row in fits.to_dict("records")}


def l0_study(rng: np.random.Generator, scale: float) -> Trial:
    """Does the binomial MLE's 95% bootstrap interval cover the true L0? (and both WLS
    forms' bias)"""
    truth = true_l0(L0_EPS)
    fits = _fits(simulate_decay(rng, L0_EPS, scale), rng)
    mle = fits["binomial_mle"]
    low, high = mle["L0_low"], mle["L0_high"]
    values = {
        f"{m}_rel_bias": fits[m]["L0"] / truth - 1.0 for m in ("binomial_mle", "wls_prefactor", "wls_origin")
    }
    if low is None or high is None or not (np.isfinite(low) or np.isfinite(high)):
        return Trial(None, values)
    return Trial(bool(low <= truth <= high), values)


def l0_null_study(rng: np.random.Generator, scale: float) -> Trial:
    """No decay (success 0.8 at every L): a finite upper end of L0's interval claims decay."""
    per_bin = max(2, round(L0_INSTANCES * scale))
    L = np.repeat(L0_LENGTHS, per_bin * L0_SAMPLES)
    instance = np.repeat(np.arange(L0_LENGTHS.size * per_bin), L0_SAMPLES)
    success = rng.random(L.size) < 0.8
    mle = _fits(scores_frame(L, success, instance), rng)["binomial_mle"]
    high = mle["L0_high"]
    return Trial(bool(high is not None and np.isfinite(high)))


def eps_study_for(reps: int):
    """eps coverage of the compounding fit over the test's puzzle rows, ``reps`` times each."""

    def study(rng: np.random.Generator, scale: float) -> Trial:
        times = max(1, round(reps * scale))
        L = np.tile(PUZZLE_LENGTHS, times)
        success = rng.random(L.size) < (1.0 - PUZZLE_EPS) ** L
        frame = scores_frame(L, success, np.arange(L.size), family="hanoi", n=np.ones(L.size))
        fit = compounding_tables(frame)[0].iloc[0]
        rel = fit["eps"] / PUZZLE_EPS - 1.0
        values = {"rel_error": rel, "within_15pct": float(abs(rel) < EPS_TOLERANCE)}
        return Trial(bool(fit["eps_low"] <= PUZZLE_EPS <= fit["eps_high"]), values)

    return study


def eps_tolerance_study_for(reps: int):
    """The README's tolerance: the fitted eps within 15% of the truth (a rate to report)."""
    inner = eps_study_for(reps)

    def study(rng: np.random.Generator, scale: float) -> Trial:
        trial = inner(rng, scale)
        return Trial(bool(trial.values["within_15pct"]), trial.values)

    return study


L0_COVERAGE = register(
    Case(
        name="L0 coverage",
        statistic="analysis/decay.py fit_binomial_mle via summary.fit_all (cluster bootstrap, 200)",
        planted=f"constant per-step error {L0_EPS}: L0 = {true_l0(L0_EPS):.1f}; L 10..118 step 4, "
        f"{L0_INSTANCES} instances x {L0_SAMPLES} samples per L",
        null="success 0.8 at every L (no decay): a finite upper end of L0's interval claims decay",
        measure="coverage",
        planted_study=l0_study,
        planted_target=COVERAGE_95,
        null_study=l0_null_study,
    )
)

#: two readings of the same simulated fits (the interval, the README's tolerance), each
#: registered for both test designs: (name, statistic, null, measure, study_for, target)
_EPS_READINGS = (
    (
        "eps coverage",
        "analysis/compounding.py fit_eps via compounding_tables (likelihood-ratio 95%)",
        "(coverage: no null)",
        "coverage",
        eps_study_for,
        COVERAGE_95,
    ),
    (
        "eps within 15%",
        "README: the noisy baseline's fitted eps within 15% of its true eps",
        "(a tolerance: no null)",
        "share within 15%",
        eps_tolerance_study_for,
        REPORT,
    ),
)
for _mode, _reps in (("plan", 8), ("rollout", 4)):
    for _reading, _statistic, _null, _measure, _study_for, _target in _EPS_READINGS:
        register(
            Case(
                name=f"{_reading} ({_mode} test design)",
                statistic=_statistic,
                planted=f"eps {PUZZLE_EPS} per move over the 86 puzzle rows of test_puzzle_family x {_reps}",
                null=_null,
                measure=_measure,
                planted_study=_study_for(_reps),
                planted_target=_target,
            )
        )

#: the WLS forms' cases: (name suffix, per-step error, prefactor A). A = 1 at eps 0.02:
#: both forms unbiased; A = 0.7: the origin form (which assumes A = 1) is biased low;
#: eps 0.1, A = 1: the bins at large L have zero successes and are dropped, and the
#: survivors (lucky bins) flatten the prefactor form's slope far more than the origin's
WLS_FORM_DESIGNS = (
    ("exp(-L/L0), eps 0.02", L0_EPS, 1.0),
    ("prefactor 0.7, eps 0.02", L0_EPS, 0.7),
    ("exp(-L/L0), eps 0.1", 0.1, 1.0),
)


def wls_forms_study_for(eps: float, prefactor: float):
    """Both WLS forms and the MLE (point only) on ``A (1 - eps)^L``: their relative bias,
    and whether ``wls_origin`` lands nearer the truth than ``wls_prefactor``."""
    truth = true_l0(eps)

    def study(rng: np.random.Generator, scale: float) -> Trial:
        fits = _fits(simulate_decay(rng, eps, scale, prefactor), rng, bootstrap=0)
        rel = {m: fits[m]["L0"] / truth - 1.0 for m in ("wls_prefactor", "wls_origin", "binomial_mle")}
        values = {f"{m}_rel_bias": v for m, v in rel.items()}
        if not (np.isfinite(rel["wls_prefactor"]) and np.isfinite(rel["wls_origin"])):
            return Trial(None, values)
        return Trial(bool(abs(rel["wls_origin"]) < abs(rel["wls_prefactor"])), values)

    return study


for _suffix, _eps, _a in WLS_FORM_DESIGNS:
    register(
        Case(
            name=f"WLS forms ({_suffix})",
            statistic="analysis/decay.py fit_wls_prefactor and fit_wls_origin via summary.fit_all",
            planted=f"success {_a} x (1 - {_eps})^L: L0 = {true_l0(_eps):.1f}; L 10..118 step 4, "
            f"{L0_INSTANCES} instances x {L0_SAMPLES} samples per L",
            null="(the two forms compared: no null)",
            measure="share with wls_origin nearer the truth",
            planted_study=wls_forms_study_for(_eps, _a),
            planted_target=REPORT,
        )
    )

__all__ = ["L0_COVERAGE", "scores_frame", "simulate_decay", "true_l0"]
