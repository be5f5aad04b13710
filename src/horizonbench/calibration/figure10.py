"""Figure 10: does the first violation come where a constant per-step error puts it?

Studies are simulated at the scores-table level ``tasks/analyse/scores.py`` hands to
``seqbench.first_violation_by_length``: per attempt an optimal length L and the first
violation drawn from a per-step hazard (the first step i, counted from 0, whose uniform
draw falls below ``hazard(i)``), or a success when no step fails. The analysis function
runs as in a pipeline run.

Two cases:

- ``figure10_rising_hazard``: the report's statistic, the hazard's trend along the plan
  (``hazard_slope_low > 0``). Planted: a per-step error rising linearly with the step
  (``eps * (1 + rate * i)``, the ``linear`` shape of the simulated models); null: a
  constant one (the ``noisy`` baseline). It must find the first and, at most 5% of the
  time, the second.
- ``figure10_relative_shift``: the statistic the report used to show, the median relative
  position ``first_violation_step / L`` falling from the shortest to the longest L range.
  Its null arm is reported, not passed: under a constant rate it "finds" a shift almost
  always (issue 22), which is why the figure moved to the absolute step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from horizonbench.analysis.seqbench import first_violation_by_length
from horizonbench.calibration.base import FALSE_POSITIVE_5, REPORT, Case, Target, Trial, register
from horizonbench.core.hazard import PlantedTruth

#: optimal lengths of the simulated attempts (the small Figure 1 design's span)
LENGTHS = np.arange(5, 61)
#: attempts of one model in a study at scale 1
ATTEMPTS = 400
#: the planted rising error: eps * (1 + RATE * i) at step i (from 0), capped at CAP
EPS_RISING, RATE, CAP = 0.02, 0.05, 0.9
#: the null's constant error (about the rising one's average over the plans it ends)
EPS_CONSTANT = 0.04
#: L ranges of the figure
GROUPS = 4


def simulate(rng: np.random.Generator, hazards: np.ndarray, attempts: int) -> pd.DataFrame:
    """Attempts with L uniform over :data:`LENGTHS`; ``hazards[i]`` is step i's error.

    The first violation is the first step whose draw falls below its hazard; steps at or
    past L are not taken, so such an attempt succeeds."""
    L = rng.choice(LENGTHS, size=attempts)
    fail = rng.random((attempts, int(LENGTHS.max()))) < hazards[None, : int(LENGTHS.max())]
    fail &= np.arange(fail.shape[1])[None, :] < L[:, None]
    failed = fail.any(axis=1)
    first = np.where(failed, fail.argmax(axis=1), -1)
    return pd.DataFrame(
        {
            "model": "sim",
            "solution_length": L.astype("int64"),
            "success": ~failed,
            "first_violation_step": np.where(failed, first, np.nan),
        }
    )


#: the simulated models' own truths (core/hazard.py): the ``rising`` kind's linear shape
#: and the ``noisy`` kind's constant rate; ``hazards(n)[i]`` is the error of step i + 1
RISING_TRUTH = PlantedTruth(eps=EPS_RISING, shape="linear", rate=RATE, cap=CAP)
CONSTANT_TRUTH = PlantedTruth(eps=EPS_CONSTANT)


def rising_hazards(n: int = int(LENGTHS.max())) -> np.ndarray:
    return RISING_TRUTH.hazards(n)


def constant_hazards(n: int = int(LENGTHS.max())) -> np.ndarray:
    return CONSTANT_TRUTH.hazards(n)


def _attempts(scale: float) -> int:
    return max(40, round(ATTEMPTS * scale))


def _trend_trial(scores: pd.DataFrame) -> Trial:
    out = first_violation_by_length(scores, groups=GROUPS)
    if out.empty or not np.isfinite(out["hazard_slope_low"].iloc[0]):
        return Trial(None)
    row = out.iloc[0]
    return Trial(bool(row["hazard_slope_low"] > 0.0), {"slope": float(row["hazard_slope"])})


def _shift_trial(scores: pd.DataFrame) -> Trial:
    out = first_violation_by_length(scores, groups=GROUPS)
    if len(out) < 2:
        return Trial(None)
    median = out["relative_position_median"].to_numpy(dtype=float)
    return Trial(bool(median[-1] < median[0]), {"first_minus_last": float(median[0] - median[-1])})


def figure10_case(
    name: str,
    statistic: str,
    trial: Callable[[pd.DataFrame], Trial],
    planted_target: Target,
    null_target: Target,
    planted_note: str = "",
    null_note: str = "",
) -> Case:
    """Register one reading (``trial``) of the module's two simulations: the planted arm's
    rising per-step error and the null arm's constant one (the notes end their texts)."""

    def planted(rng: np.random.Generator, scale: float) -> Trial:
        return trial(simulate(rng, rising_hazards(), _attempts(scale)))

    def null(rng: np.random.Generator, scale: float) -> Trial:
        return trial(simulate(rng, constant_hazards(), _attempts(scale)))

    return register(
        Case(
            name=name,
            statistic=statistic,
            planted=f"per-step error {EPS_RISING} * (1 + {RATE} i){planted_note}",
            null=f"constant per-step error {EPS_CONSTANT}{null_note}",
            measure="detection",
            planted_study=planted,
            planted_target=planted_target,
            null_study=null,
            null_target=null_target,
        )
    )


RISING_HAZARD = figure10_case(
    "figure10_rising_hazard",
    "first_violation_by_length: hazard_slope_low > 0 (Figure 10's test)",
    _trend_trial,
    Target(0.80, 1.0),
    FALSE_POSITIVE_5,
    planted_note=f", L 5-60, {ATTEMPTS} attempts",
)
RELATIVE_SHIFT = figure10_case(
    "figure10_relative_shift",
    "median first_violation_step / L lower in the longest L range than the shortest",
    _shift_trial,
    REPORT,
    REPORT,
    null_note=" (reported: the shift is there anyway)",
)

__all__ = ["RELATIVE_SHIFT", "RISING_HAZARD", "constant_hazards", "rising_hazards", "simulate"]
