"""Adaptive designs: does an interval still cover when the data chose where to look?

Why a case of its own: the adaptive L0 design (``analysis/adaptive.py``) picks each wave's
depths from the previous waves' fit and stops as soon as the interval is narrow enough;
the adaptive sc* scan (``analysis/sc_scan.py``) picks each cell from the cells before it.
The likelihood is unchanged by either, but stopping on the interval's own width is a
data-dependent stopping rule, and a bracket found by bisection is read from few cells, so
the nominal 95% is a claim to measure, not to assume. Both cases run the pure simulators
the benchmark uses (``benchmarks/adaptive.py``), with the pipeline's own fits.
"""

from __future__ import annotations

import math

import numpy as np

from horizonbench.analysis.adaptive import AdaptiveSettings, DesignTrace, Estimate, simulate
from horizonbench.analysis.decay import fit_binomial_mle
from horizonbench.analysis.phase import critical_point
from horizonbench.analysis.sc_scan import BRACKETED, simulate_scan
from horizonbench.calibration.base import COVERAGE_95, FALSE_POSITIVE_5, Case, Trial, register

#: seqBench's Figure 1 bins: one bin per depth, L = 10..119
LENGTHS = np.arange(10, 120)
A_TRUE = 0.95
L0_TRUE = 20.0
SAMPLES = 5
BOOTSTRAP = 200
#: the pipeline's default target half-width (AdaptiveSettings.target)
TARGET = 0.05
#: calls at scale 1 after which a study stops: about 5 times the median the planted arm
#: needs (so it rarely binds there), and what ends the null arm, whose L0 is infinite and
#: whose interval never narrows
MAX_CALLS = 40_000
MAX_WAVES = 40
#: success of the null arm's model at every depth (no decay)
NULL_SUCCESS = 0.8

#: the sc* scan: the world studies' range, episodes per cell, the planted logistic's width;
#: its centre is drawn per study so the crossing falls anywhere between two cells
SC_LO, SC_HI = 6, 30
SC_EPISODES = 50
SC_WIDTH = 1.0
SC_CENTRES = (10.0, 26.0)


def settings_at(scale: float) -> AdaptiveSettings:
    """The study's stopping rule at ``scale``: a wider target and fewer calls when small,
    so the calls needed fall about as ``scale`` (they grow as 1 / target**2)."""
    return AdaptiveSettings(
        target=TARGET / math.sqrt(scale), max_calls=max(2_000, round(MAX_CALLS * scale)), max_waves=MAX_WAVES
    )


def run_design(
    rng: np.random.Generator,
    p_of_L: np.ndarray,
    settings: AdaptiveSettings,
    uniform: bool = False,
    samples: int = SAMPLES,
    bootstrap: int = BOOTSTRAP,
) -> DesignTrace:
    """Waves against a model with success ``p_of_L`` at each depth of :data:`LENGTHS`
    (independent attempts), fitted by the pipeline's binomial MLE after every wave."""
    p = np.asarray(p_of_L, dtype=float)
    seed = int(rng.integers(2**31))

    def observe(new: np.ndarray) -> np.ndarray:
        chance = np.repeat(p, new)
        return rng.random((chance.size, samples)) < chance[:, None]

    def fit(L: np.ndarray, success: np.ndarray, instance: np.ndarray) -> Estimate:
        f = fit_binomial_mle(L, success, instance, bootstrap=bootstrap, seed=seed)
        return Estimate("L0", f.L0, f.L0_low, f.L0_high, f.A, float(np.mean(success)))

    capacity = np.full(LENGTHS.size, 10**6)
    return simulate(LENGTHS, capacity, samples, settings, observe, fit, uniform=uniform)


def covers(estimate: Estimate, truth: float) -> bool | None:
    """Whether the final interval holds the truth; None when there is no interval."""
    if estimate.low is None or estimate.high is None:
        return None
    return bool(estimate.low <= truth <= estimate.high)


def l0_adaptive_study(rng: np.random.Generator, scale: float) -> Trial:
    """The adaptive design run to its stop on ``0.95 exp(-L/20)``: does the final
    interval cover 20?"""
    settings = settings_at(scale)
    trace = run_design(rng, A_TRUE * np.exp(-LENGTHS / L0_TRUE), settings)
    est = trace.estimates[-1]
    values = {
        "calls": float(trace.calls[-1]),
        "waves": float(len(trace.calls)),
        "reached_target": float(trace.stop == "target"),
        "rel_bias": est.value / L0_TRUE - 1.0,
    }
    return Trial(covers(est, L0_TRUE), values)


def l0_adaptive_null_study(rng: np.random.Generator, scale: float) -> Trial:
    """No decay (success 0.8 at every L): after the waves run out, a finite upper end of
    L0's interval claims decay."""
    trace = run_design(rng, np.full(LENGTHS.size, NULL_SUCCESS), settings_at(scale))
    high = trace.estimates[-1].high
    values = {"calls": float(trace.calls[-1]), "waves": float(len(trace.calls))}
    return Trial(bool(high is not None and math.isfinite(high)), values)


def logistic(sc: float, centre: float, width: float) -> float:
    return 1.0 / (1.0 + math.exp((sc - centre) / width))


def grid_crossing(centre: float, width: float, lo: int = SC_LO, hi: int = SC_HI) -> float:
    """The estimand on the integer cells: the operational crossing of the true rates
    (equal to ``centre`` up to the interpolation between the two bracketing cells)."""
    cells = np.arange(lo, hi + 1)
    return critical_point(cells, [logistic(float(c), centre, width) for c in cells]).value


def sc_adaptive_study(rng: np.random.Generator, scale: float) -> Trial:
    """Bisection over [6, 30] on a logistic with a random centre: does the bootstrap
    interval of the tested cells cover the grid's true crossing?"""
    centre = float(rng.uniform(*SC_CENTRES))
    truth = grid_crossing(centre, SC_WIDTH)
    n = max(10, round(SC_EPISODES * scale))
    scan = simulate_scan(lambda c: logistic(c, centre, SC_WIDTH), SC_LO, SC_HI, n, rng)
    values = {
        "episodes": float(scan.episodes),
        "cells": float(len(scan.cells)),
        "error": scan.value - truth,
        "width": scan.high - scan.low,
    }
    if scan.stop.reason != BRACKETED or not (math.isfinite(scan.low) and math.isfinite(scan.high)):
        return Trial(None, values)
    return Trial(bool(scan.low <= truth <= scan.high), values)


def sc_adaptive_null_study(rng: np.random.Generator, scale: float) -> Trial:
    """A flat curve (p = 0.8 in every cell): any reported crossing is false."""
    n = max(10, round(SC_EPISODES * scale))
    scan = simulate_scan(lambda c: NULL_SUCCESS, SC_LO, SC_HI, n, rng)
    return Trial(bool(math.isfinite(scan.value)), {"episodes": float(scan.episodes)})


L0_ADAPTIVE = register(
    Case(
        name="L0 coverage (adaptive design)",
        statistic="analysis/adaptive.py simulate + decay.fit_binomial_mle (cluster bootstrap, 200), "
        "stopped at a 5% relative half-width",
        planted=f"success {A_TRUE} exp(-L/{L0_TRUE:g}), L 10..119, {SAMPLES} samples per instance, "
        f"waves until the target (at most {MAX_CALLS:,} calls, {MAX_WAVES} waves)",
        null=f"success {NULL_SUCCESS} at every L (no decay), waves until the call cap: "
        "a finite upper end of L0's interval claims decay",
        measure="coverage",
        planted_study=l0_adaptive_study,
        planted_target=COVERAGE_95,
        null_study=l0_adaptive_null_study,
        null_target=FALSE_POSITIVE_5,
    )
)

SC_ADAPTIVE = register(
    Case(
        name="sc* coverage (adaptive scan)",
        statistic="analysis/sc_scan.py bisection + phase.critical_point_bootstrap over the tested cells",
        planted=f"logistic p(sc), width {SC_WIDTH:g}, centre uniform in {SC_CENTRES}; sc {SC_LO}..{SC_HI}, "
        f"{SC_EPISODES} episodes per tested cell, bisection to a 1-unit bracket",
        null=f"p = {NULL_SUCCESS} in every cell: a reported crossing is false",
        measure="coverage",
        planted_study=sc_adaptive_study,
        planted_target=COVERAGE_95,
        null_study=sc_adaptive_null_study,
        null_target=FALSE_POSITIVE_5,
    )
)

__all__ = ["L0_ADAPTIVE", "SC_ADAPTIVE", "grid_crossing", "logistic", "run_design", "settings_at"]
