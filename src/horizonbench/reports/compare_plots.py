"""The comparison page's figure: L0 of each model over a series of runs, as inline SVG.

Drawn with the report's figure helpers (reproducible SVG, ids prefixed per figure), with
mathtext off so a ``$`` in a model name or run label is text, never TeX.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib
import numpy as np
import pandas as pd

from horizonbench.reports.plots import _colours, _figure, _placeholder, _to_svg

#: mark of a run whose L0 moved (compare's two-sample test against the previous run)
_MOVED_COLOUR = "#c62828"


#: how far above the largest finite L0 (or lower end) the axis reaches for upper ends
_HIGH_REACH = 3.0


def _top(rows: pd.DataFrame) -> float:
    """The y axis's top: the finite L0s and lower ends, and the finite upper ends up to
    ``_HIGH_REACH`` times those. An upper end beyond (a nearly flat success curve gives
    one of thousands) runs to the edge like an unbounded one, instead of squeezing every
    L0 into the bottom of an axis that reaches it."""
    core = rows[["L0", "L0_low"]].to_numpy(dtype=float).ravel()
    core = core[np.isfinite(core)]
    high = rows["L0_high"].to_numpy(dtype=float)
    high = high[np.isfinite(high)]
    if core.size and core.max() > 0:
        high = high[high <= _HIGH_REACH * core.max()]
    finite = np.concatenate([core, high])
    return 1.15 * float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def l0_trend_svg(rows: pd.DataFrame, runs: Sequence[str], name: str) -> str:
    """L0 with its interval per model (one colour each) over ``runs`` (the x axis, in
    series order), from the comparison table's rows of one setting and method. An
    infinite L0 or interval end is drawn at the top edge (a triangle), as is an upper
    end far beyond every L0 (``_top``); a run whose L0 moved (the comparison's
    ``moved`` flag) is ringed in red."""
    if rows.empty or not runs:
        return _placeholder(name, "no L0 to draw")
    models = sorted(str(m) for m in rows["model"].unique())
    colours = _colours(models)
    x_of = {run: i for i, run in enumerate(runs)}
    top = _top(rows)
    width = min(12.0, max(6.0, 0.7 * len(runs) + 3.0))
    with matplotlib.rc_context({"text.parse_math": False}), _figure(name, figsize=(width, 3.8)) as fig:
        ax = fig.add_subplot()
        step = 0.5 / max(len(models), 1)
        for i, model in enumerate(models):
            g = rows[rows["model"] == model].sort_values("run_index", kind="mergesort")
            g = g[g["run"].isin(x_of)]
            x = np.array([x_of[r] for r in g["run"]], dtype=float) + (i - (len(models) - 1) / 2) * step
            l0 = g["L0"].to_numpy(dtype=float)
            low = g["L0_low"].to_numpy(dtype=float)
            high = g["L0_high"].to_numpy(dtype=float)
            shown = ~np.isnan(l0)
            y = np.where(np.isinf(l0), top, l0)
            colour = colours[model]
            ax.plot(x[shown], y[shown], "-", lw=1.0, color=colour, alpha=0.6)
            for xi, yi, lo, hi, is_inf in zip(
                x[shown], y[shown], low[shown], high[shown], np.isinf(l0[shown]), strict=True
            ):
                if not (math.isnan(lo) or math.isnan(hi)):
                    ax.plot([xi, xi], [lo, min(hi, top)], "-", lw=1.6, color=colour)
                ax.plot([xi], [yi], "^" if is_inf else "o", ms=5, color=colour)
            moved = g["moved"].isin(["up", "down"]).to_numpy() & shown
            ax.plot(x[moved], y[moved], "o", ms=11, mfc="none", mew=1.6, color=_MOVED_COLOUR)
            ax.plot([], [], "-o", ms=4, color=colour, label=model)
        ax.plot(
            [],
            [],
            "o",
            ms=9,
            mfc="none",
            mew=1.6,
            color=_MOVED_COLOUR,
            label="moved (two-sample test against the previous run)",
        )
        ax.set_xlim(-0.6, len(runs) - 0.4)
        ax.set_ylim(0.0, top * 1.04)
        ax.set_xticks(range(len(runs)), list(runs), rotation=30, ha="right")
        ax.set_ylabel("L0 (binomial MLE, 95% interval)")
        ax.set_xlabel("run (ordered by start time)")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        return _to_svg(fig, name)
