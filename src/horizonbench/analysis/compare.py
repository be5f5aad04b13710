"""Comparing finished runs: L0 per model and setting, side by side, and its trend.

Pure frames in, frames out; reading run folders and writing the comparison is
``tasks/report/compare.py``'s job.

Definitions (the README and the comparison page state the same):

* **Setting**: what must be equal for two runs' L0 to be comparable. It is the family
  label of the analysis tables (``maze``, ``hanoi/rollout``, ...) plus the family's
  ``params`` and ``prompt`` from the run's recorded config. Sampling (how many
  instances, which L-bins) is left out: L0 is a property of the decay, not of the range
  sampled, and a nightly run may grow its sample. ``setting_id`` is a short hash of
  those, ``setting`` a readable summary.
* **Series**: the runs that hold a fit of one (setting, model, method, success
  definition: what the fit counted as a success), ordered by the
  manifest's ``started_at`` (ties: ``finished_at``, then the order given).
* **Moved**: a two-sample test of a run's L0 against the *previous* run of its series,
  on log L0: ``up`` / ``down`` when ``|log L0 - log L0_prev|`` exceeds the root sum of
  squares of the two 95% intervals' half-widths on the sides that face each other
  (this run's lower half-width and the previous run's upper one for a rise, and the
  other two for a fall), ``within`` otherwise. Each half-width is 1.96 standard errors
  of its log L0, so this is the z test of the difference at 5%, with each side's own
  (asymmetric) spread. When an L0 or a facing interval end is infinite (no decay) the
  log difference is undefined and the rule falls back to disjoint intervals. It is
  null when there is no previous run, either run has no interval, or an L0 is ``nan``
  (not identifiable). Why not the point against the previous interval: that ignores
  this run's own noise and flagged about 1 pair of nights in 6 with no change (the
  calibration suite: ``python benchmarks/calibration.py``, case "compare moved"); the
  stricter ``intervals_disjoint`` (kept as a column: the two intervals do not overlap
  at all, null unless both have one) is the same test with the half-widths added
  instead of squared, far below 5% and with less power. Only the binomial MLE has
  intervals (cluster bootstrap over instances), so only its rows can move; WLS rows are
  listed for reference.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

#: the fit whose interval defines a move (the WLS fits, both forms, have no interval)
FLAG_METHOD = "binomial_mle"

#: one row per run
RUN_COLUMNS = [
    "run",
    "run_path",
    "position",
    "started_at",
    "finished_at",
    "run_name",
    "seed",
    "git_sha",
    "horizonbench",
]
#: the fits of every run, labelled (the input of :func:`compare_fits`)
FIT_INPUT_COLUMNS = [
    "run",
    "family",
    "setting_id",
    "setting",
    "model",
    "model_spec",
    "method",
    "success_definition",
    "L0",
    "L0_low",
    "L0_high",
    "n_attempts",
    "converged",
    "note",
]
#: the comparison table (``compare.parquet``)
COMPARE_COLUMNS = [
    "run",
    "run_index",
    "started_at",
    "run_name",
    *FIT_INPUT_COLUMNS[1:],
    "previous_run",
    "previous_model_spec",
    "previous_L0",
    "previous_L0_low",
    "previous_L0_high",
    "moved",
    "intervals_disjoint",
]
_SERIES = ["family", "setting_id", "model", "method", "success_definition"]
#: what fits counted as a success before they said so: the scores' ``success``, by simulation
LEGACY_SUCCESS_DEFINITION = "simulation"


# ---------------------------------------------------------------------------
# identities
# ---------------------------------------------------------------------------


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return "[" + ",".join(_short(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_short(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)


def _pairs(section: Any) -> str:
    if not isinstance(section, Mapping):
        return ""
    return ", ".join(f"{k}={_short(v)}" for k, v in sorted(section.items()) if v is not None)


def setting_of(config: Mapping[str, Any], family: str) -> tuple[str, str]:
    """``(setting_id, setting)`` of an analysis family label in a run of ``config``.

    ``family`` is the label of the analysis tables: the family's name, with
    ``/rollout`` for rollouts (a different setting from whole plans).
    """
    base = str(family).partition("/")[0]
    spec = (config.get("families") or {}).get(base) or {}
    identity = {"family": str(family), "params": spec.get("params"), "prompt": spec.get("prompt")}
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    setting_id = hashlib.sha256(blob.encode()).hexdigest()[:10]
    params, prompt = _pairs(spec.get("params")), _pairs(spec.get("prompt"))
    parts = [*([params] if params else []), *([f"prompt {prompt}"] if prompt else [])]
    return setting_id, f"{family}: {'; '.join(parts)}" if parts else str(family)


def model_spec(config: Mapping[str, Any], model: str) -> str:
    """What a model name stood for in a run: ``offline noisy eps=0.1``,
    ``openai gpt-4o-mini``, ... (empty when the config does not name it)."""
    for m in (config.get("evaluation") or {}).get("models") or []:
        if m.get("name") != model:
            continue
        if m.get("provider") == "offline":
            eps = m.get("eps")
            return f"offline {m.get('kind')}" + (f" eps={_short(eps)}" if eps is not None else "")
        return f"{m.get('provider')} {m.get('model') or ''}".strip()
    return ""


# ---------------------------------------------------------------------------
# ordering and comparison
# ---------------------------------------------------------------------------


def order_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs sorted into a series (``started_at``, ``finished_at``, then the order
    given in ``position``), with ``run_index`` 0, 1, ...; missing times sort first."""
    key = runs.assign(
        _start=runs["started_at"].fillna("").astype(str),
        _finish=runs["finished_at"].fillna("").astype(str),
    )
    key = key.sort_values(["_start", "_finish", "position"], kind="mergesort")
    out = key.drop(columns=["_start", "_finish"]).reset_index(drop=True)
    return out.assign(run_index=np.arange(len(out), dtype="int64"))


def _finite_or_inf(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def judge_move(
    l0: float, low: float, high: float, prev_l0: float, prev_low: float, prev_high: float
) -> str | None:
    """The module's **Moved** rule: a z test of the difference of log L0 at 5%, each run's
    standard error read from the half of its 95% interval that faces the other run."""
    values = (l0, low, high, prev_l0, prev_low, prev_high)
    if not all(_finite_or_inf(v) for v in values):
        return None
    if l0 <= 0 or prev_l0 <= 0 or low <= 0 or prev_low <= 0:
        return None
    diff = math.log(l0) - math.log(prev_l0) if math.isfinite(l0) and math.isfinite(prev_l0) else math.nan
    if math.isnan(diff):  # an infinite L0: fall back to disjoint intervals
        disjoint = _disjoint(low, high, prev_low, prev_high)
        if disjoint and low > prev_high:
            return "up"
        return "down" if disjoint else "within"
    if diff > 0:
        spread = math.hypot(math.log(l0) - math.log(low), math.log(prev_high) - math.log(prev_l0))
    else:
        spread = math.hypot(math.log(high) - math.log(l0), math.log(prev_l0) - math.log(prev_low))
    if abs(diff) <= spread:  # an infinite facing end gives an infinite spread: no move
        return "within"
    return "up" if diff > 0 else "down"


def _disjoint(low: float, high: float, prev_low: float, prev_high: float) -> bool | None:
    if not all(_finite_or_inf(v) for v in (low, high, prev_low, prev_high)):
        return None
    return bool(low > prev_high or high < prev_low)


def _objects(s: pd.Series) -> pd.Series:
    """Text as Python objects, missing as None (never pandas' nan)."""
    return pd.Series([None if pd.isna(v) else v for v in s], index=s.index, dtype=object)


def compare_fits(runs: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """The comparison table: every fit of every run (``fits``, columns
    ``FIT_INPUT_COLUMNS``) with its run's place in the series (``runs`` from
    :func:`order_runs`) and, against the previous run of its series, ``moved`` and
    ``intervals_disjoint`` (see the module's definitions). Sorted by family, setting,
    model, method, then run."""
    if fits.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in COMPARE_COLUMNS})
    info = runs[["run", "run_index", "started_at", "run_name"]]
    df = fits[FIT_INPUT_COLUMNS].merge(info, on="run", how="inner", validate="many_to_one")
    df["success_definition"] = pd.Series(
        [LEGACY_SUCCESS_DEFINITION if pd.isna(v) else str(v) for v in df["success_definition"]],
        index=df.index,
        dtype=object,
    )
    for col in ("L0", "L0_low", "L0_high"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    df = df.sort_values([*_SERIES, "run_index"], kind="mergesort").reset_index(drop=True)
    prev = df.groupby(_SERIES, sort=False)[["run", "model_spec", "L0", "L0_low", "L0_high"]].shift(1)
    df["previous_run"] = _objects(prev["run"])
    df["previous_model_spec"] = _objects(prev["model_spec"])
    for col in ("L0", "L0_low", "L0_high"):
        df[f"previous_{col}"] = prev[col].astype("float64")
    judged = [
        (
            judge_move(r.L0, r.L0_low, r.L0_high, r.previous_L0, r.previous_L0_low, r.previous_L0_high),
            _disjoint(r.L0_low, r.L0_high, r.previous_L0_low, r.previous_L0_high),
        )
        if r.previous_run is not None
        else (None, None)
        for r in df.itertuples()
    ]
    df["moved"] = pd.Series([m for m, _ in judged], index=df.index, dtype=object)
    df["intervals_disjoint"] = pd.Series([d for _, d in judged], index=df.index, dtype=object)
    df["run_index"] = df["run_index"].astype("int64")
    return df[COMPARE_COLUMNS]


def latest_moves(table: pd.DataFrame, method: str = FLAG_METHOD) -> pd.DataFrame:
    """Per (family, setting, model, success definition) of ``method``: its latest run
    against the previous one, with ``runs`` (how many runs of the series hold a fit).
    One row per series."""
    rows = table[table["method"] == method]
    if rows.empty:
        return rows.assign(runs=pd.Series([], dtype="int64"))
    keys = ["family", "setting_id", "model", "success_definition"]
    counts = rows.groupby(keys, sort=False)["run"].transform("size").astype("int64")
    rows = rows.assign(runs=counts)
    last = rows.sort_values([*keys, "run_index"], kind="mergesort").groupby(keys, sort=True).tail(1)
    return last.reset_index(drop=True)


def settings(table: pd.DataFrame) -> pd.DataFrame:
    """One row per setting (``family``, ``setting_id``, ``setting``), sorted by family
    then id, with ``runs``: how many runs hold it."""
    if table.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in ("family", "setting_id", "setting")})
    out = (
        table.groupby(["family", "setting_id", "setting"], sort=True)["run"]
        .nunique()
        .rename("runs")
        .reset_index()
    )
    return out.astype({"runs": "int64"})
