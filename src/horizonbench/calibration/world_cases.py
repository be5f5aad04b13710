"""The trajectory statistics: the tau_W - tau_A lag and the collapse-type shares.

Studies simulate per-step traces (the steps table's ``jaccard``, ``action_valid``,
``consistent``, ``dependency_correct``), reduce them to episode rows exactly as the
episode writer does (``trajectory.tau_w``, ``trajectory.tau_a``, ``trajectory.bad_steps``,
``trajectory.collapse_onset``, ``trajectory.collapse_type``) and read the study's tables through
``analysis/worlds.py`` (``lags``, ``step_metrics``), the functions the pipeline calls.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from horizonbench.analysis import phase, trajectory, worlds
from horizonbench.calibration.base import COVERAGE_95, FALSE_POSITIVE_5, REPORT, Case, Trial, register

#: steps per episode and failed episodes per study
HORIZON = 40
EPISODES = 60
#: fidelity before and after the world state fails (uniform ranges, per step)
R_HEALTHY = (0.85, 1.0)
R_FAILED = (0.0, 0.3)
#: the planted lag: the world state fails this many steps before the first invalid action
#: on average; each episode's own lead is that plus a uniform jitter in -JITTER..JITTER
#: (episodes differ, so the interval of the mean has a width to earn its coverage)
PLANTED_LAG = 4
JITTER = 2


def episode_row(R: np.ndarray, valid: np.ndarray, consistent: np.ndarray, success: bool) -> dict:
    """An episodes-table row from per-step series, as ``datasets/worlds/episode.py`` builds it."""
    dep = np.ones(R.size, dtype=bool)
    tw, ta = trajectory.tau_w(R), trajectory.tau_a(valid)
    onset_w = trajectory.tau_w_onset(R)
    onset = trajectory.collapse_onset(trajectory.bad_steps(valid, consistent, dep))
    world_bad = ~consistent | (R < trajectory.TAU_W_THRESHOLD)
    ctype = (
        trajectory.collapse_type(world_bad, ~valid | ~dep, None, onset=onset) if onset is not None else None
    )
    return {
        "env": "sim",
        "model": "sim",
        "sc": 20,
        "dd": 1,
        "success": success,
        "horizon_short": False,
        "outcome": "success" if success else "failure",
        "steps": int(R.size),
        "invalid_actions": int((~valid).sum()),
        "mean_jaccard": float(R.mean()),
        "consistency_rate": float(consistent.mean()),
        "dependency_accuracy": 1.0,
        "self_check_accuracy": math.nan,
        "tau_w": math.nan if tw is None else float(tw),
        "tau_a": math.nan if ta is None else float(ta),
        # the start of the drop tau_w detects (episode.py writes it beside tau_w)
        "tau_w_onset": math.nan if onset_w is None else float(onset_w),
        "collapse_type": ctype,
    }


def trace(
    rng: np.random.Generator, world_fails: int | None, action_fails: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fidelity, validity and consistency of one episode whose world state fails at step
    ``world_fails`` and whose actions are invalid from ``action_fails`` on (None: never)."""
    t = np.arange(HORIZON)
    R = rng.uniform(*R_HEALTHY, size=HORIZON)
    consistent = np.ones(HORIZON, dtype=bool)
    if world_fails is not None:
        broken = t >= world_fails
        R[broken] = rng.uniform(*R_FAILED, size=int(broken.sum()))
        consistent[broken] = False
    valid = np.ones(HORIZON, dtype=bool)
    if action_fails is not None:
        valid[t >= action_fails] = rng.random(int((t >= action_fails).sum())) < 0.2
        valid[action_fails] = False
    return R, valid, consistent


def _lags_row(rows: list[dict]) -> dict:
    table = worlds.lags(pd.DataFrame(rows))
    return table.iloc[0].to_dict()


def _episode_lags(rows: list[dict], world: str = "tau_w") -> np.ndarray:
    frame = pd.DataFrame(rows)
    paired = ~frame["success"] & frame[world].notna() & frame["tau_a"].notna()
    return (frame.loc[paired, world] - frame.loc[paired, "tau_a"]).to_numpy(float)


def mean_interval(lags: np.ndarray, rng: np.random.Generator, reps: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean lag over episodes (the lag table has
    the mean and median but no interval; this is the interval the suite checks)."""
    if lags.size < 2:
        return math.nan, math.nan
    means = lags[rng.integers(0, lags.size, size=(reps, lags.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def lag_study_for(lag: int):
    """Failed episodes whose world state fails ``lag`` steps before the first invalid action.

    The check is the lags table's own interval: ``onset_mean_low``..``onset_mean_high``
    (the t interval of the mean of tau_w_onset - tau_a) must cover the planted lag. The
    paper's tau_w lag and a bootstrap interval of it ride along as side figures: it reads
    about two steps late (``detection_delay``), so its interval does not cover."""

    def study(rng: np.random.Generator, scale: float) -> Trial:
        rows = []
        for _ in range(max(5, round(EPISODES * scale))):
            ta = int(rng.integers(12, HORIZON - 8))
            lead = lag + int(rng.integers(-JITTER, JITTER + 1))
            R, valid, consistent = trace(rng, ta - lead, ta)
            rows.append(episode_row(R, valid, consistent, success=False))
        table = _lags_row(rows)
        truth = -float(lag)
        low, high = mean_interval(_episode_lags(rows), rng)
        values = {
            "onset_mean_lag": float(table["onset_mean"]),
            "mean_lag": float(table["mean"]),
            "median_lag": float(table["median"]),
            "share_world_first": float(table["share_world_first"]),
            "onset_share_world_first": float(table["onset_share_world_first"]),
            "detection_delay": float(table["mean"]) - truth,
            "tau_w_covered": float(low <= truth <= high) if math.isfinite(low) else math.nan,
        }
        o_low, o_high = float(table["onset_mean_low"]), float(table["onset_mean_high"])
        if not math.isfinite(o_low):
            return Trial(None, values)
        return Trial(bool(o_low <= truth <= o_high), values)

    return study


def lag_null_study(rng: np.random.Generator, scale: float) -> Trial:
    """World state and actions fail at the same step on average (lag 0, each episode
    jittered as in the planted arm): a 'world first' claim (the
    onset lag's interval entirely below 0) is a false positive."""
    rows = []
    for _ in range(max(5, round(EPISODES * scale))):
        ta = int(rng.integers(12, HORIZON - 8))
        lead = int(rng.integers(-JITTER, JITTER + 1))
        R, valid, consistent = trace(rng, ta - lead, ta)
        rows.append(episode_row(R, valid, consistent, success=False))
    table = _lags_row(rows)
    values = {
        "mean_lag": float(table["mean"]),
        "onset_mean_lag": float(table["onset_mean"]),
    }
    high = float(table["onset_mean_high"])
    return Trial(bool(math.isfinite(high) and high < 0), values)


#: planted collapse types: world state alone, actions alone, both at one step
SHARES = {"world_state": 0.5, "action_validity": 0.3, "compound": 0.2}


def collapse_study(rng: np.random.Generator, scale: float) -> Trial:
    """Episodes drawn from the planted types in SHARES' proportions: do the Wilson 95%
    intervals of all three measured shares (from step_metrics' counts) cover the planted
    proportions? (Three intervals at once: about 0.86-0.9 if every episode is read right.)"""
    n = max(10, round(EPISODES * 2 * scale))
    kinds = rng.choice(list(SHARES), size=n, p=list(SHARES.values()))
    rows = []
    for kind in kinds:
        start = int(rng.integers(8, HORIZON - 10))
        world = start if kind in ("world_state", "compound") else None
        action = start if kind in ("action_validity", "compound") else None
        R, valid, consistent = trace(rng, world, action)
        rows.append(episode_row(R, valid, consistent, success=False))
    metrics = worlds.step_metrics(pd.DataFrame(rows)).iloc[0]
    values, covered = {}, []
    for kind, share in SHARES.items():
        count = int(metrics[f"{kind}_collapses"])
        low, high = phase.wilson_interval(count, n)
        values[f"share_{kind}"] = count / n
        values[f"misread_{kind}"] = abs(count - int(np.sum(kinds == kind))) / n
        covered.append(bool(low <= share <= high))
    return Trial(all(covered), values)


def collapse_null_study(rng: np.random.Generator, scale: float) -> Trial:
    """Isolated slips (two bad steps in a row, recovered at once) are no collapse: any
    collapse type reported is a false positive."""
    rows = []
    for _ in range(max(10, round(EPISODES * 2 * scale))):
        R, valid, consistent = trace(rng, None, None)
        slip = int(rng.integers(5, HORIZON - 5))
        if rng.random() < 0.5:
            R[slip : slip + 2] = 0.1
            consistent[slip : slip + 2] = False
        else:
            valid[slip : slip + 2] = False
        rows.append(episode_row(R, valid, consistent, success=True))
    metrics = worlds.step_metrics(pd.DataFrame(rows)).iloc[0]
    found = sum(int(metrics[f"{t}_collapses"]) for t in trajectory.COLLAPSE_TYPES)
    return Trial(found > 0)


LAG = register(
    Case(
        name=f"lag tau_W - tau_A (world {PLANTED_LAG} steps first)",
        statistic="analysis/worlds.py lags: onset_mean and its t interval "
        "(trajectory.tau_w_onset - trajectory.tau_a); "
        "side figures: the paper's tau_w lag, which reads about 2 steps late",
        planted=f"{EPISODES} failed episodes a study: fidelity falls from U{R_HEALTHY} to U{R_FAILED} "
        f"{PLANTED_LAG} +- {JITTER} steps (uniform) before the first invalid action: "
        f"true mean lag -{PLANTED_LAG}",
        null="fidelity and actions fail at the same step (lag 0): an interval below 0 claims world first",
        measure="coverage",
        planted_study=lag_study_for(PLANTED_LAG),
        planted_target=COVERAGE_95,
        null_study=lag_null_study,
        null_target=FALSE_POSITIVE_5,
    )
)

COLLAPSE = register(
    Case(
        name="collapse-type shares",
        statistic="analysis/worlds.py step_metrics (trajectory.collapse_onset, trajectory.collapse_type)",
        planted="120 failed episodes a study: world state alone 50%, actions alone 30%, both 20%",
        null="isolated two-step slips in successful episodes: no collapse",
        measure="all 3 shares covered",
        planted_study=collapse_study,
        planted_target=REPORT,
        null_study=collapse_null_study,
        null_target=FALSE_POSITIVE_5,
    )
)
