"""A sweep's settings side by side: L0, success and progress per setting and model, and
the same numbers laid out along each swept axis (seqBench figures 3, 4, 12, 14, 15).

A sweep expands into family labels (``maze``, ``maze@noise-0.5``, ...; see
``schemas/config.expand_sweeps``). Each label's *axes* are its generation and prompt
settings with the family's defaults filled in, so two labels are compared on what
actually differs, whatever the config spelled out. Along an axis, a *line* joins the
settings that differ only in that axis; every other axis is held at one value, named in
the line's ``held`` column, so "L0 against shuffle at noise 0.5" and "L0 against noise"
never share a line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from horizonbench.analysis.phase import wilson_interval
from horizonbench.core.registry import SETTING_SEPARATOR, family_of

#: the setting name of a family's own section (its base)
BASE = "base"
#: axes merged into one for display: a maze's size is "rows x cols"
_GRID = ("grid_rows", "grid_cols")

SETTINGS_COLUMNS = [
    "family",
    "base_family",
    "setting",
    "varied",
    "axes",
    "model",
    "attempts",
    "instances",
    "L_min",
    "L_max",
    "success_rate",
    "success_low",
    "success_high",
    "progress_ratio_mean",
    "progress_low",
    "progress_high",
    "output_tokens_mean",
    "L0",
    "L0_low",
    "L0_high",
    "L0_wls_prefactor",
    "L0_wls_origin",
]
AXIS_COLUMNS = [
    "base_family",
    "axis",
    "held",
    "model",
    "family",
    "setting",
    "x",
    "x_label",
    "L0",
    "L0_low",
    "L0_high",
    "success_rate",
    "success_low",
    "success_high",
    "progress_ratio_mean",
    "output_tokens_mean",
]
_TEXT = ("family", "base_family", "setting", "varied", "axes", "model", "axis", "held", "x_label")
_INTS = ("attempts", "instances", "L_min", "L_max")


def setting_axes(families: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """label -> {axis: value} for every family label of a config (``cfg.families``):
    the validated params and prompt settings, defaults included, with a maze's grid
    size as one ``grid`` axis. Only families that have a sweep are listed."""
    from horizonbench.core.registry import get_family

    swept = {family_of(label) for label in families if SETTING_SEPARATOR in label}
    out: dict[str, dict[str, Any]] = {}
    for label, spec in families.items():
        if family_of(label) not in swept:
            continue
        family = get_family(label)
        values = {
            **family.params_model.model_validate(spec.params).model_dump(mode="json"),
            **family.prompt_model.model_validate(spec.prompt).model_dump(mode="json"),
        }
        if all(k in values for k in _GRID):
            values["grid"] = f"{values.pop('grid_rows')}x{values.pop('grid_cols')}"
        out[label] = values
    return out


def _setting(label: str) -> str:
    _, sep, name = label.partition(SETTING_SEPARATOR)
    return name if sep else BASE


def _varied(axes: Mapping[str, Any], base: Mapping[str, Any] | None) -> list[str]:
    if base is None:
        return []
    return sorted(k for k in axes.keys() | base.keys() if axes.get(k) != base.get(k))


def _per_model(scores: pd.DataFrame, tokens: pd.DataFrame | None) -> pd.DataFrame:
    """Per (family label, model): counts, success and progress, mean output tokens."""
    df = pd.DataFrame(
        {
            "family": scores["family"].astype(str).to_numpy(),
            "model": scores["model"].astype(str).to_numpy(),
            "instance": scores["instance_id"].astype(str).to_numpy(),
            "L": pd.to_numeric(scores["solution_length"]).to_numpy(dtype="float64"),
            "success": scores["success"].astype(bool).to_numpy(dtype="float64"),
            "progress": pd.to_numeric(scores["progress_ratio"]).to_numpy(dtype="float64"),
        }
    )
    g = df.groupby(["family", "model"], sort=True)
    out = g.agg(
        attempts=("success", "size"),
        instances=("instance", "nunique"),
        L_min=("L", "min"),
        L_max=("L", "max"),
        successes=("success", "sum"),
        progress_ratio_mean=("progress", "mean"),
        progress_sd=("progress", "std"),
    ).reset_index()
    low, high = wilson_interval(out["successes"].to_numpy(), out["attempts"].to_numpy())
    out["success_rate"] = out["successes"] / out["attempts"]
    out["success_low"] = np.asarray(low, dtype=float)
    out["success_high"] = np.asarray(high, dtype=float)
    half = 1.96 * out["progress_sd"].fillna(0.0) / np.sqrt(out["attempts"])
    out["progress_low"] = (out["progress_ratio_mean"] - half).clip(lower=0.0)
    out["progress_high"] = (out["progress_ratio_mean"] + half).clip(upper=1.0)
    if tokens is not None and len(tokens):
        t = (
            tokens.groupby(["family", "model"], sort=True)["output_tokens"]
            .mean()
            .rename("output_tokens_mean")
        )
        out = out.merge(t.reset_index(), on=["family", "model"], how="left")
    else:
        out["output_tokens_mean"] = np.nan
    return out


def settings_table(
    scores: pd.DataFrame,
    fits: pd.DataFrame,
    axes: Mapping[str, Mapping[str, Any]],
    tokens: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (family label, model) of a swept family: what the setting changes
    from its base (``varied``, and every axis value as JSON in ``axes``), success with
    its 95% Wilson interval, mean progress with a normal 95% interval, mean output
    tokens, and L0 from the binomial MLE with its bootstrap interval, beside the paper's
    WLS in both forms (``L0_wls_prefactor``: log p = log A - L/L0; ``L0_wls_origin``:
    log p = -L/L0, the curve the paper's text names).

    ``scores`` are the answered attempts with a ``family`` label column; ``fits`` the
    analysis fits table (with ``family``); ``tokens`` per attempt ``family``, ``model``,
    ``output_tokens`` (whole-plan answers), or None.
    """
    labels = [label for label in axes if label in set(scores["family"].astype(str))] if len(scores) else []
    if not labels:
        return _empty(SETTINGS_COLUMNS)
    part = scores[scores["family"].astype(str).isin(labels)]
    out = _per_model(part, tokens)
    out["base_family"] = out["family"].map(family_of)
    out["setting"] = out["family"].map(_setting)
    out["varied"] = [
        ",".join(_varied(axes[label], axes.get(family_of(label)))) or BASE for label in out["family"]
    ]
    out["axes"] = [json.dumps(axes[label], sort_keys=True) for label in out["family"]]
    out = out.merge(
        _l0(fits, "binomial_mle", "L0", low="L0_low", high="L0_high"), on=["family", "model"], how="left"
    )
    for method in ("wls_prefactor", "wls_origin"):
        out = out.merge(_l0(fits, method, f"L0_{method}"), on=["family", "model"], how="left")
    order = {label: i for i, label in enumerate(axes)}
    out = out.assign(_order=out["family"].map(order)).sort_values(["_order", "model"], kind="mergesort")
    return _finish(out, SETTINGS_COLUMNS)


def _l0(fits: pd.DataFrame, method: str, name: str, *, low: str = "", high: str = "") -> pd.DataFrame:
    cols = ["family", "model", name] + [c for c in (low, high) if c]
    if fits.empty:
        return pd.DataFrame(
            {c: pd.Series([], dtype=object if c in ("family", "model") else float) for c in cols}
        )
    f = fits[fits["method"].astype(str) == method]
    out = pd.DataFrame(
        {
            "family": f["family"].astype(str).to_numpy(),
            "model": f["model"].astype(str).to_numpy(),
            name: pd.to_numeric(f["L0"]).to_numpy(dtype="float64"),
        }
    )
    if low:
        out[low] = pd.to_numeric(f["L0_low"]).to_numpy(dtype="float64")
        out[high] = pd.to_numeric(f["L0_high"]).to_numpy(dtype="float64")
    return out


def _number(value: Any) -> float:
    """An axis value as a number for the x axis: booleans as 0/1, "20x20" as its side
    (rows), NaN when it has none."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and "x" in value:
        head = value.split("x", 1)[0]
        if head.isdigit():
            return float(head)
    return float("nan")


def _held(axes: Mapping[str, Any], axis: str, base: Mapping[str, Any]) -> str:
    """What a line holds fixed, said as the axes that differ from the base ("" when
    every other axis is at the base's value)."""
    return ", ".join(f"{k}={axes[k]}" for k in sorted(axes) if k != axis and axes[k] != base.get(k))


def axis_table(settings: pd.DataFrame) -> pd.DataFrame:
    """The settings laid out along each swept axis: for every axis and every group of
    settings that agree on all other axes, one row per (setting, model) when the group
    holds at least two values of the axis. ``held`` names the other axes where they
    differ from the base (empty: everything else at the base), so each (axis, held,
    model) is one line of a figure."""
    if settings.empty:
        return _empty(AXIS_COLUMNS)
    rows = []
    for base_family, part in settings.groupby("base_family", sort=False):
        labels = list(dict.fromkeys(part["family"]))
        axes = {label: json.loads(part.loc[part["family"] == label, "axes"].iloc[0]) for label in labels}
        base = axes.get(str(base_family))
        if base is None:
            continue
        swept = sorted({a for label in labels for a in _varied(axes[label], base)})
        for axis in swept:
            groups: dict[str, list[str]] = {}
            for label in labels:
                others = json.dumps({k: v for k, v in axes[label].items() if k != axis}, sort_keys=True)
                groups.setdefault(others, []).append(label)
            for members in groups.values():
                if len({json.dumps(axes[m].get(axis)) for m in members}) < 2:
                    continue
                held = _held(axes[members[0]], axis, base)
                for label in members:
                    value = axes[label].get(axis)
                    for r in part[part["family"] == label].itertuples():
                        rows.append(
                            {
                                "base_family": str(base_family),
                                "axis": axis,
                                "held": held,
                                "model": r.model,
                                "family": label,
                                "setting": r.setting,
                                "x": _number(value),
                                "x_label": str(value),
                                "L0": r.L0,
                                "L0_low": r.L0_low,
                                "L0_high": r.L0_high,
                                "success_rate": r.success_rate,
                                "success_low": r.success_low,
                                "success_high": r.success_high,
                                "progress_ratio_mean": r.progress_ratio_mean,
                                "output_tokens_mean": r.output_tokens_mean,
                            }
                        )
    if not rows:
        return _empty(AXIS_COLUMNS)
    out = pd.DataFrame(rows)
    out = out.sort_values(["base_family", "axis", "held", "model", "x", "x_label"], kind="mergesort")
    return _finish(out, AXIS_COLUMNS)


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            c: pd.Series([], dtype=object if c in _TEXT else ("int64" if c in _INTS else "float64"))
            for c in columns
        }
    )


def _finish(out: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    out = out[columns].copy()
    for c in columns:
        if c in _TEXT:
            out[c] = out[c].astype(str).astype(object)
        elif c in _INTS:
            out[c] = out[c].astype("int64")
        else:
            out[c] = pd.to_numeric(out[c]).astype("float64")
    return out.reset_index(drop=True)
