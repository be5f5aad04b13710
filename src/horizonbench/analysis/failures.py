"""Which failing answers the report shows: a bounded, stratified, deterministic choice.

A million attempts can hold hundreds of thousands of failures; a page cannot. Per model
the report keeps at most ``per_model`` failures, taken round-robin over strata of
(family label, violation, L bin), shortest problems first within a stratum: every
violation type (per family label) gets one example before any gets a second depth, and
every stratum one before any gets a second. The violation maps draw a few of them: per
model and family label, the most common reasoning violations (formatting failures have
no path to draw).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.analysis.summary import INVALID_OUTPUT_LABELS, NO_VIOLATION
from horizonbench.core.registry import family_of

#: what identifies the attempt row holding a failing answer
ATTEMPT_KEY = ["model", "family", "instance_id", "sample", "mode", "turn"]
#: the columns of a chosen failure
FAILURE_COLUMNS = [
    *ATTEMPT_KEY,
    "solution_length",
    "L_bin",
    "violation",
    "first_violation_step",
]
#: how many L bins a model's failures are spread over when stratifying
L_BINS = 8


def _modes(df: pd.DataFrame) -> pd.Series:
    if "mode" not in df.columns:
        return pd.Series("plan", index=df.index, dtype=object)
    return df["mode"].astype(object).where(df["mode"].notna(), "plan")


def failed_attempts(scores: pd.DataFrame) -> pd.DataFrame:
    """Answered, unsuccessful attempts with the key of the attempt row that holds the
    answer worth reading: a whole plan's one row (turn 0), or for a rollout the step
    that ended the episode (its ``first_violation_step``; -1, matching no row, if a
    rollout failure ever does not name its step)."""
    failed = scores[scores["answered"].astype(bool) & ~scores["success"].astype(bool)]
    mode = _modes(failed)
    step = pd.to_numeric(failed["first_violation_step"], errors="coerce")
    turn = step.where(mode == "rollout", 0).fillna(-1).astype("int64")
    out = pd.DataFrame(
        {
            "model": failed["model"].astype(str).to_numpy(),
            "family": failed["family"].astype(str).to_numpy(),
            "instance_id": failed["instance_id"].astype(str).to_numpy(),
            "sample": failed["sample"].astype("int64").to_numpy(),
            "mode": mode.astype(str).to_numpy(),
            "turn": turn.to_numpy(),
            "solution_length": pd.to_numeric(failed["solution_length"]).astype("int64").to_numpy(),
            "violation": failed["violation"].astype(object).where(failed["violation"].notna(), NO_VIOLATION),
            "first_violation_step": step.to_numpy(dtype="float64"),
        }
    )
    out["violation"] = out["violation"].astype(str)
    return out


def _l_bins(lengths: pd.Series, bins: int) -> pd.Series:
    lo, hi = int(lengths.min()), int(lengths.max())
    width = max(1, -(-(hi - lo + 1) // bins))
    return lo + (lengths - lo) // width * width


def choose_failures(scores: pd.DataFrame, per_model: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """At most ``per_model`` failures per model, stratified (see the module docstring),
    in a stable order (family, L, instance, sample); and each model's total count of
    failures, so the page can say how many it leaves out."""
    failed = failed_attempts(scores)
    totals = {str(m): int(n) for m, n in failed.groupby("model", sort=True).size().items()}
    if failed.empty:
        return failed.assign(L_bin=pd.Series([], dtype="int64"))[FAILURE_COLUMNS], totals
    failed["L_bin"] = failed.groupby("model")["solution_length"].transform(lambda s: _l_bins(s, L_BINS))
    order = ["model", "family", "violation", "L_bin", "solution_length", "instance_id", "sample", "turn"]
    failed = failed.sort_values(order, kind="mergesort").reset_index(drop=True)
    # the first of every stratum before the second of any; and among the firsts, every
    # (family, violation)'s first L bin before any one's second, so a violation type is
    # never crowded out by another's many depths
    failed["_rank"] = failed.groupby(["model", "family", "violation", "L_bin"]).cumcount()
    failed["_bin"] = failed.groupby(["model", "family", "violation"])["L_bin"].rank(method="dense")
    failed = failed.sort_values(["model", "_rank", "_bin", *order[1:]], kind="mergesort")
    chosen = failed.groupby("model", sort=True).head(per_model)
    chosen = chosen.sort_values(
        ["model", "family", "solution_length", "instance_id", "sample", "turn"], kind="mergesort"
    )
    return chosen[FAILURE_COLUMNS].reset_index(drop=True), totals


def choose_maps(failures: pd.DataFrame, per_model: int = 3) -> pd.DataFrame:
    """Failures to draw as violation maps: maze whole-plan answers with a located
    violation that is a reasoning error (not unreadable output), per model and family
    label the ``per_model`` most common violations, each by the failure whose L is
    closest to that violation's median L."""
    if failures.empty:
        return failures
    maze = failures[
        (failures["family"].map(family_of) == "maze")
        & (failures["mode"] == "plan")
        & failures["first_violation_step"].notna()
        & ~failures["violation"].isin(INVALID_OUTPUT_LABELS)
    ]
    picked = []
    for (_model, _family), part in maze.groupby(["model", "family"], sort=True):
        counts = part["violation"].value_counts()
        top = sorted(counts.index, key=lambda v: (-counts[v], v))[:per_model]
        for v in top:
            rows = part[part["violation"] == v]
            median = float(np.median(rows["solution_length"]))
            distance = (rows["solution_length"] - median).abs()
            picked.append(rows.assign(_d=distance).sort_values("_d", kind="mergesort").head(1))
    if not picked:
        return maze.head(0)
    return pd.concat(picked, ignore_index=True).drop(columns="_d")
