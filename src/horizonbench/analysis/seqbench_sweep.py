"""A sweep's settings curve by curve: the tables behind seqBench's Figures 11, 12 and 15
and the progress and output-token panels of Figures 3, 4 and 14.

``analysis/sweep.py`` gives one number per (setting, model): L0, success, mean progress.
The paper also draws, per setting, success against L (Figures 12 and 15), where the
failed plans stop (Figure 11) and mean progress and output tokens with their spread
against the swept variable (Figures 3, 4, 14). These tables give those, one row per
point drawn, each with its 95% interval, so the report draws numbers from a table and
never recomputes them.

Every function takes the answered scores with a ``family`` label column (``maze``,
``maze@noise-0.5``, ...) and the sweep's settings table (``sweep.settings_table``),
whose ``family``/``base_family``/``setting``/``varied``/``axes`` say what each label
changes; labels outside the settings table (families without a sweep) are left out.
Pure: no files, plain dtypes, deterministic row order, empty frames keep their columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.analysis.phase import wilson_interval
from horizonbench.analysis.seqbench import PROGRESS_EDGES

#: normal quantile of the 95% intervals on means
Z95 = 1.959963984540054
#: what identifies a setting in every table here (copied from the settings table)
SETTING_KEYS = ["family", "base_family", "setting", "varied", "axes"]
#: one row per (setting, model, L bin) with at least one attempt (Figures 12 and 15)
SWEEP_BY_LENGTH_COLUMNS = SETTING_KEYS + ["model", "L", "L_high", "L_centre", "attempts", "successes"]
SWEEP_BY_LENGTH_COLUMNS += ["success_rate", "success_low", "success_high"]
#: one row per (setting, model, progress bin) of the FAILED attempts (Figure 11)
SWEEP_FAILED_PROGRESS_COLUMNS = SETTING_KEYS + [
    "model",
    "bin_low",
    "bin_high",
    "bin_centre",
    "count",
    "failures",
]
SWEEP_FAILED_PROGRESS_COLUMNS += ["share", "share_low", "share_high", "progress_mean", "progress_median"]
#: one row per ``sweep_axes`` row (axis, held, model, setting) (Figures 3, 4 and 14):
#: its keys, then the measures
AXIS_KEYS = ["base_family", "axis", "held", "model", "family", "setting", "x", "x_label"]
SWEEP_PANEL_COLUMNS = AXIS_KEYS + ["attempts", "progress_ratio_mean", "progress_low", "progress_high"]
SWEEP_PANEL_COLUMNS += ["token_attempts", "output_tokens_mean", "output_tokens_low", "output_tokens_high"]
_TEXT = {"family", "base_family", "setting", "varied", "axes", "model", "axis", "held", "x_label"}
_INTS = {"L", "L_high", "attempts", "successes", "count", "failures", "token_attempts"}


def _typed(out: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``columns`` of ``out`` in plain dtypes (object text, int64 counts, float64 the
    rest); an empty frame keeps them all."""
    frame = out.reindex(columns=columns)

    def typed(c: str) -> pd.Series:
        if c in _TEXT:
            return frame[c].astype(str).astype(object)
        return frame[c].astype("int64") if c in _INTS else pd.to_numeric(frame[c]).astype("float64")

    return pd.DataFrame({c: typed(c) for c in columns}).reset_index(drop=True)


def _settings(settings: pd.DataFrame) -> pd.DataFrame:
    """One row per family label: what the setting is (the settings table repeats it per
    model), in the settings table's order."""
    return settings[SETTING_KEYS].drop_duplicates("family").astype(str).reset_index(drop=True)


def _attempts(scores: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """The swept labels' attempts as plain columns: family, model, L (solution length),
    success (0/1), progress (the scores' ``progress_ratio``: the share of the optimal
    plan done before the first violation); rows without a solution length are left out,
    as in ``summary``."""
    if scores.empty or settings.empty:
        return pd.DataFrame(columns=["family", "model", "length", "success", "progress"])
    family = scores["family"].astype(str)
    keep = family.isin(set(settings["family"].astype(str))).to_numpy()
    part = scores[keep]
    df = pd.DataFrame(
        {
            "family": part["family"].astype(str).to_numpy(),
            "model": part["model"].astype(str).to_numpy(),
            "length": pd.to_numeric(part["solution_length"], errors="coerce").to_numpy(dtype="float64"),
            "success": (pd.to_numeric(part["success"], errors="coerce") == 1).to_numpy(dtype="float64"),
            "progress": pd.to_numeric(part["progress_ratio"], errors="coerce").to_numpy(dtype="float64"),
        }
    )
    return df[~np.isnan(df["length"].to_numpy())].reset_index(drop=True)


def _order(out: pd.DataFrame, settings: pd.DataFrame, then: list[str]) -> pd.DataFrame:
    """Rows in the settings table's label order, then by model and ``then``."""
    rank = {label: i for i, label in enumerate(_settings(settings)["family"])}
    out = out.assign(_rank=out["family"].map(rank))
    return out.sort_values(["_rank", "model", *then], kind="mergesort")


def sweep_by_length(scores: pd.DataFrame, settings: pd.DataFrame, bin_width: int = 1) -> pd.DataFrame:
    """Success against L per setting and model, with 95% Wilson intervals (seqBench
    Figures 12 and 15).

    ``L`` is the bin's lower edge (``solution_length // bin_width * bin_width``, as in
    ``by_length``), ``L_high`` its last integer (``L + bin_width - 1``) and ``L_centre``
    the middle of the integers it holds, ``(L + L_high) / 2``: where the point is drawn.
    Rows: settings in the settings table's order, models by name, L ascending.
    """
    if bin_width < 1:
        raise ValueError(f"bin_width must be >= 1, got {bin_width}")
    df = _attempts(scores, settings)
    if df.empty:
        return _typed(pd.DataFrame(), SWEEP_BY_LENGTH_COLUMNS)
    df["L"] = (df["length"] // bin_width * bin_width).astype("int64")
    g = df.groupby(["family", "model", "L"], sort=True)["success"].agg(["size", "sum"]).reset_index()
    g = g.rename(columns={"size": "attempts", "sum": "successes"})
    low, high = wilson_interval(g["successes"].to_numpy(), g["attempts"].to_numpy())
    g["success_rate"] = g["successes"] / g["attempts"]
    g["success_low"], g["success_high"] = np.asarray(low, float), np.asarray(high, float)
    g["L_high"] = g["L"] + bin_width - 1
    g["L_centre"] = (g["L"] + g["L_high"]) / 2
    g = g.merge(_settings(settings), on="family", how="left")
    return _typed(_order(g, settings, ["L"]), SWEEP_BY_LENGTH_COLUMNS)


def failed_progress(scores: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """Where the failed plans stop, per setting and model (seqBench Figure 11 reads the
    failure step's distribution per noise level; progress is that step as a share of
    the optimal plan, so settings of different L compare).

    The attempts are the failed ones (``success`` not 1) with a progress ratio. Ten bins
    ``[k/10, (k+1)/10)``, the last one closed at 1 (a failed plan can follow an optimal
    path to its end and then break a rule); every (setting, model) with a failure gets
    all ten rows. ``share`` is ``count / failures`` with its 95% Wilson interval;
    ``progress_mean``/``progress_median`` (over the failures, repeated on each row) are
    the distribution's centre. Rows: settings in the settings table's order, models by
    name, bins ascending.
    """
    df = _attempts(scores, settings)
    df = df[(df["success"] != 1.0) & df["progress"].notna()]
    if df.empty:
        return _typed(pd.DataFrame(), SWEEP_FAILED_PROGRESS_COLUMNS)
    n_bins = len(PROGRESS_EDGES) - 1
    progress = np.clip(df["progress"].to_numpy(), 0.0, 1.0)
    df = df.assign(bin=np.minimum(np.searchsorted(PROGRESS_EDGES, progress, side="right") - 1, n_bins - 1))
    rows = []
    for (family, model), part in df.groupby(["family", "model"], sort=True):
        counts = np.bincount(part["bin"].to_numpy(), minlength=n_bins)
        values = part["progress"].to_numpy()
        low, high = wilson_interval(counts, np.full(n_bins, values.size))
        for k in range(n_bins):
            rows.append(
                {
                    "family": family,
                    "model": model,
                    "bin_low": PROGRESS_EDGES[k],
                    "bin_high": PROGRESS_EDGES[k + 1],
                    "bin_centre": (PROGRESS_EDGES[k] + PROGRESS_EDGES[k + 1]) / 2,
                    "count": int(counts[k]),
                    "failures": int(values.size),
                    "share": counts[k] / values.size,
                    "share_low": float(low[k]),
                    "share_high": float(high[k]),
                    "progress_mean": float(values.mean()),
                    "progress_median": float(np.median(values)),
                }
            )
    out = pd.DataFrame(rows).merge(_settings(settings), on="family", how="left")
    return _typed(_order(out, settings, ["bin_low"]), SWEEP_FAILED_PROGRESS_COLUMNS)


def _mean_ci(
    values: pd.Series, lower: float | None = None, upper: float | None = None
) -> tuple[int, float, float, float]:
    """n, mean and a normal 95% interval (mean +- 1.96 sd / sqrt(n)), clipped to the
    measure's range; one value gives an interval of zero width."""
    x = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    if x.size == 0:
        return 0, float("nan"), float("nan"), float("nan")
    mean = float(x.mean())
    half = Z95 * float(x.std(ddof=1)) / np.sqrt(x.size) if x.size > 1 else 0.0
    low, high = mean - half, mean + half
    if lower is not None:
        low = max(low, lower)
    if upper is not None:
        high = min(high, upper)
    return int(x.size), mean, low, high


def sweep_panels(
    axes_rows: pd.DataFrame, scores: pd.DataFrame, settings: pd.DataFrame, tokens: pd.DataFrame | None
) -> pd.DataFrame:
    """Mean progress and mean output tokens against each swept axis (the progress and
    token panels of seqBench Figures 3, 4 and 14), one row per ``sweep_axes`` row.

    ``progress_ratio_mean`` is over all the setting's attempts of the model (successes
    count 1), with a normal 95% interval clipped to [0, 1]; ``output_tokens_mean`` over
    its whole-plan answers with token counts (``tokens``: ``family``, ``model``,
    ``output_tokens`` per attempt, None without an attempts table), with a normal 95%
    interval (``token_attempts`` of them; NaN when none). Row order: ``sweep_axes``'s.
    """
    if axes_rows.empty:
        return _typed(pd.DataFrame(), SWEEP_PANEL_COLUMNS)
    df = _attempts(scores, settings)
    progress = {key: _mean_ci(part["progress"], 0.0, 1.0) for key, part in df.groupby(["family", "model"])}
    spent: dict[tuple[str, str], tuple[int, float, float, float]] = {}
    if tokens is not None and len(tokens):
        t = tokens.assign(family=tokens["family"].astype(str), model=tokens["model"].astype(str))
        spent = {key: _mean_ci(part["output_tokens"], 0.0) for key, part in t.groupby(["family", "model"])}
    none = (0, float("nan"), float("nan"), float("nan"))
    rows = []
    for r in axes_rows.itertuples(index=False):
        key = (str(r.family), str(r.model))
        n, mean, low, high = progress.get(key, none)
        tn, tmean, tlow, thigh = spent.get(key, none)
        rows.append(
            {
                "base_family": r.base_family,
                "axis": r.axis,
                "held": r.held,
                "model": r.model,
                "family": r.family,
                "setting": r.setting,
                "x": r.x,
                "x_label": r.x_label,
                "attempts": n,
                "progress_ratio_mean": mean,
                "progress_low": low,
                "progress_high": high,
                "token_attempts": tn,
                "output_tokens_mean": tmean,
                "output_tokens_low": tlow,
                "output_tokens_high": thigh,
            }
        )
    return _typed(pd.DataFrame(rows), SWEEP_PANEL_COLUMNS)
