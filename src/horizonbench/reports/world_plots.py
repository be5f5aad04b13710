"""World-study figures drawn as curves: a fine scan (one dd, many sc: the paper's SC-Fine,
Figure 7a) and a horizon scan (one cell, many T: T-Fine, Figure 7b), success against
the scanned value with Wilson intervals, one line per agent.

Why curves: a fine scan drawn as a one-row heatmap put eleven "p / n=50" labels side by
side until they overlapped ("n=50n=50..."), and a heatmap cannot show how wide each
cell's interval is, which is what says whether the crossing is resolved. Points are
placed at their true values (sc 10..20, T 22..80), not as categories, so sc* sits
where it was interpolated. A point with no measured episode (every world longer than T)
is drawn as a hollow X on the axis, keyed once in the legend "T < L*": unwinnable, not a
rate of 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from horizonbench.reports.plots import _colours, _figure, _placeholder, _to_svg

__all__ = ["is_fine_scan", "scan_curve_svg"]

#: a grid with one dd and at least this many sc values is a fine scan, drawn as curves
FINE_SCAN_MIN_SC = 3


def is_fine_scan(grid: pd.DataFrame, env: str) -> bool:
    """Whether ``env``'s part of a world grid table is a fine scan: one dd, many sc."""
    rows = grid[grid["env"] == env]
    return rows["dd"].nunique() == 1 and rows["sc"].nunique() >= FINE_SCAN_MIN_SC


def scan_curve_svg(
    rows: pd.DataFrame,
    name: str,
    x: str,
    xlabel: str,
    title: str,
    marks: dict[str, float] | None = None,
) -> str:
    """Success against ``x`` per agent (``model``), with Wilson 95% bars.

    ``rows`` has ``model``, ``x``, ``n``, ``p``, ``wilson_low``, ``wilson_high`` and
    optionally ``n_unwinnable``; ``marks`` maps an agent to its crossing (sc*), drawn
    as a dashed vertical line in the agent's colour and named in the legend; ``title``
    names the environment, the fixed coordinates and the horizon.
    """
    if rows.empty:
        return _placeholder(name, f"{title}: no cells")
    marks = marks or {}
    models = sorted(set(rows["model"]))
    colours = _colours(models)
    step = 0.12 * float(np.min(np.diff(np.unique(rows[x].to_numpy(float))))) if rows[x].nunique() > 1 else 0.0
    with _figure(name, figsize=(6.4, 3.6)) as fig:
        fig.set_layout_engine("constrained")
        ax = fig.add_subplot()
        for i, model in enumerate(models):
            part = rows[rows["model"] == model].sort_values(x)
            # agents side by side by a fraction of the spacing, so equal points stay visible
            shift = (i - (len(models) - 1) / 2) * step / max(1, len(models) - 1) if len(models) > 1 else 0.0
            xs = part[x].to_numpy(float) + shift
            n = part["n"].to_numpy(float)
            ok = n > 0
            p = part["p"].to_numpy(float)
            low = np.clip(p - part["wilson_low"].to_numpy(float), 0, None)
            high = np.clip(part["wilson_high"].to_numpy(float) - p, 0, None)
            colour = colours[model]
            ax.errorbar(
                xs[ok],
                p[ok],
                yerr=np.vstack([low[ok], high[ok]]),
                color=colour,
                marker="o",
                ms=3.5,
                lw=1.2,
                capsize=2.5,
                label=model,
            )
            if (~ok).any():
                ax.plot(
                    xs[~ok],
                    np.zeros(int((~ok).sum())),
                    ls="none",
                    marker="X",
                    ms=6,
                    mfc="white",
                    color=colour,
                )
            star = marks.get(model, math.nan)
            if not math.isnan(star):
                ax.axvline(star, color=colour, ls="--", lw=0.9, label=f"{model} sc* = {star:.2f}")
        ax.axhline(0.5, color="0.5", lw=0.7, ls=":")
        ax.set_ylim(-0.04, 1.04)
        ticks = sorted(set(rows[x].astype(int)))
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7 if len(ticks) > 10 else 9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("success rate (Wilson 95%)")
        ax.set_title(title, fontsize=8.5)
        handles, labels = ax.get_legend_handles_labels()
        if (rows["n"] == 0).any():  # one key for every hollow X, not a label per point
            handles.append(Line2D([], [], ls="none", marker="X", ms=6, mfc="white", color="0.3"))
            labels.append("T < L*: no world fits (unwinnable)")
        fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=7)
        return _to_svg(fig, name)
