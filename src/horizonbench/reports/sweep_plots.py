"""Figures of a sweep: L0 (and success) against each swept axis, one line per model and
held setting, labelled at its end so no legend has to be looked up."""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.reports.plots import _colours, _figure, _placeholder, _to_svg

#: readable names of the maze's axes (others are shown as they are named)
AXIS_NAMES = {
    "num_keys": "backtracks B (locked doors on the path)",
    "noise_ratio": "noise ratio (distracting / supporting facts)",
    "shuffle_ratio": "shuffle ratio",
    "grid": "grid size (rows)",
    "shots": "worked examples in the prompt",
    "guidance": "reasoning guidance (0 = off, 1 = on)",
    "decoy_doors": "decoy doors",
}
_STYLES = ("-", "--", ":", "-.")


def axis_title(axis: str) -> str:
    return AXIS_NAMES.get(axis, axis)


def _positions(part: pd.DataFrame) -> tuple[np.ndarray, list[str], bool]:
    """x positions: the axis values where they are numbers, else evenly spaced labels."""
    if part["x"].notna().all():
        return part["x"].to_numpy(dtype=float), [], True
    labels = sorted(set(part["x_label"]))
    return part["x_label"].map(labels.index).to_numpy(dtype=float), labels, False


def sweep_axis_svg(rows: pd.DataFrame, axis: str, measure: str = "L0") -> str:
    """``measure`` ("L0" or "success_rate") against ``axis`` with its 95% interval as
    error bars, from the ``sweep_axes`` rows of one base family."""
    name = f"sweep-{axis}-{measure}"
    part = rows[rows["axis"] == axis]
    low, high = ("L0_low", "L0_high") if measure == "L0" else ("success_low", "success_high")
    part = part[part[measure].notna()]
    if part.empty:
        return _placeholder(name, f"no {measure} to draw against {axis}")
    models = sorted(set(part["model"]))
    colours = _colours(models)
    helds = sorted(set(part["held"]))
    with _figure(name, figsize=(6.4, 3.6)) as fig:
        ax = fig.add_subplot()
        x_all, labels, numeric = _positions(part)
        part = part.assign(_x=x_all)
        finite = part[measure].replace([np.inf, -np.inf], np.nan).dropna()
        top = float(finite.max()) if len(finite) else 1.0
        for (model, held), line in part.groupby(["model", "held"], sort=True):
            line = line.sort_values("_x")
            y = line[measure].to_numpy(dtype=float)
            y_plot = np.where(np.isfinite(y), y, np.nan)
            lo = line[low].to_numpy(dtype=float)
            hi = line[high].to_numpy(dtype=float)
            hi = np.where(np.isfinite(hi), hi, top * 1.5)
            err = np.vstack([np.clip(y_plot - lo, 0, None), np.clip(hi - y_plot, 0, None)])
            err = np.where(np.isfinite(err), err, 0.0)
            style = _STYLES[helds.index(held) % len(_STYLES)]
            ax.errorbar(
                line["_x"],
                y_plot,
                yerr=err,
                color=colours[str(model)],
                linestyle=style,
                marker="o",
                markersize=4,
                capsize=3,
                linewidth=1.4,
            )
            last = np.flatnonzero(np.isfinite(y_plot))
            if last.size:
                i = int(last[-1])
                text = str(model) + (f" ({held})" if held else "")
                ax.annotate(
                    text,
                    (float(line["_x"].iloc[i]), float(y_plot[i])),
                    xytext=(6, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=8,
                    color=colours[str(model)],
                )
        if not numeric:
            ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel(axis_title(axis))
        ax.set_ylabel("L0 (binomial MLE, 95% bootstrap)" if measure == "L0" else "success (95% Wilson)")
        if measure != "L0":
            ax.set_ylim(0, 1.02)
        else:
            ax.set_ylim(bottom=0)
        ax.margins(x=0.25)
        infinite = int((~np.isfinite(part[measure].to_numpy(dtype=float))).sum())
        if infinite:
            ax.set_title(f"{infinite} point(s) with L0 = inf (no failures) left off", fontsize=8)
        return _to_svg(fig, name)


def swept_axes(rows: pd.DataFrame) -> list[str]:
    """The axes of a base family's sweep, in a fixed, reader-friendly order."""
    order = list(AXIS_NAMES)
    present = set(rows["axis"]) if not rows.empty else set()
    return sorted(present, key=lambda a: (order.index(a) if a in order else len(order), a))
