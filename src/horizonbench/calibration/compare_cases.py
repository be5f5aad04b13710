"""compare's ``moved`` flag: false positives between two nights with no change, power at 2x.

Each study fits two nights with ``summary.fit_all`` (the pipeline's fits, bootstrap
included) and hands them to ``compare.compare_fits`` as two runs of one series, so the
flag is the one a user sees. Beside the rule in force the study records the two other
readings it was chosen among (the older "point outside the previous interval" and the
stricter "intervals disjoint"), so ``benchmarks/calibration.py`` shows all three.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horizonbench.analysis import compare as cmp
from horizonbench.analysis.summary import fit_all
from horizonbench.calibration.base import FALSE_POSITIVE_5, REPORT, Case, Trial, register
from horizonbench.calibration.decay_cases import L0_EPS, simulate_decay, true_l0


def eps_for_l0(l0: float) -> float:
    """The constant per-step error whose L0 is ``l0``."""
    return -math.expm1(-1.0 / l0)


def _runs() -> pd.DataFrame:
    rows = [
        {
            "run": f"night-{i}",
            "run_path": f"/night-{i}",
            "position": i,
            "started_at": f"2026-01-0{i + 1}T00:00:00Z",
            "finished_at": f"2026-01-0{i + 1}T01:00:00Z",
            "run_name": "nightly",
            "seed": i,
            "git_sha": None,
            "horizonbench": "sim",
        }
        for i in range(2)
    ]
    return cmp.order_runs(pd.DataFrame(rows))


def _fit_row(run: str, frame: pd.DataFrame, seed: int) -> dict:
    fits = fit_all(frame, bootstrap=200, seed=seed)
    mle = fits[fits["method"] == cmp.FLAG_METHOD].iloc[0]
    return {
        "run": run,
        "family": "maze",
        "setting_id": "s",
        "setting": "maze: sim",
        "model": "sim",
        "model_spec": "sim",
        "method": cmp.FLAG_METHOD,
        "success_definition": "simulation",
        "L0": mle["L0"],
        "L0_low": mle["L0_low"],
        "L0_high": mle["L0_high"],
        "n_attempts": int(mle["n_attempts"]),
        "converged": bool(mle["converged"]),
        "note": mle["note"],
    }


def two_nights_study_for(factor: float, size: float = 1.0):
    """Night 1 at the L0 case's design and L0; night 2 at ``factor`` times that L0;
    ``size`` shrinks both nights (instances per L) below the L0 case's design."""
    l0 = true_l0(L0_EPS)

    def study(rng: np.random.Generator, scale: float) -> Trial:
        first = simulate_decay(rng, L0_EPS, scale * size)
        second = simulate_decay(rng, eps_for_l0(l0 * factor), scale * size)
        seeds = rng.integers(2**31, size=2)
        fits = pd.DataFrame(
            [_fit_row("night-0", first, int(seeds[0])), _fit_row("night-1", second, int(seeds[1]))]
        )
        row = cmp.compare_fits(_runs(), fits).iloc[-1]
        moved = row["moved"]
        point_outside = not (row["previous_L0_low"] <= row["L0"] <= row["previous_L0_high"])
        values = {
            "rule_point_outside": float(point_outside),
            "rule_disjoint": float(bool(row["intervals_disjoint"])),
        }
        if moved is None:
            return Trial(None, values)
        return Trial(moved != "within", values)

    return study


COMPARE_MOVED = register(
    Case(
        name="compare moved (2x L0)",
        statistic="analysis/compare.py compare_fits: moved (binomial MLE L0 of two nights)",
        planted=f"night 2's L0 twice night 1's ({true_l0(L0_EPS):.1f} -> {2 * true_l0(L0_EPS):.1f}), "
        "each night the L0 case's design",
        null="two nights of the same model (same L0, fresh attempts)",
        measure="power",
        planted_study=two_nights_study_for(2.0),
        planted_target=REPORT,
        null_study=two_nights_study_for(1.0),
        null_target=FALSE_POSITIVE_5,
    )
)

COMPARE_MOVED_SMALL = register(
    Case(
        name="compare moved (2x L0, small nights)",
        statistic="analysis/compare.py compare_fits: moved (binomial MLE L0 of two nights)",
        planted="as 'compare moved (2x L0)' with 2 instances per L (280 attempts a night)",
        null="two nights of the same model, 2 instances per L",
        measure="power",
        planted_study=two_nights_study_for(2.0, size=0.25),
        planted_target=REPORT,
        null_study=two_nights_study_for(1.0, size=0.25),
        null_target=FALSE_POSITIVE_5,
    )
)
