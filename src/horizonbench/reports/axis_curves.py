"""One-axis success curves: success against the levels of one axis, one line per agent,
Wilson 95% intervals as error bars, one panel per axis or per fixed coordinate.

Two figures of the world-model paper are drawn with it:

- the one-axis ablations around the backdrop (Table 4, drawn in the paper's Figure 6):
  a panel per ablated axis (horizon, branching, observation, mutation), the backdrop's
  level marked;
- the cross-sections of the (sc, dd) grid (Figure 4): success against sc at each dd,
  and against dd at each sc.

Levels are placed as categories, evenly spaced in their order (observation modes and
mutation levels have no distance between them; T = 10, 20, 40, 80 are the paper's
doubling steps). A level with no measured episode (every world longer than T) is a
hollow X on the axis labelled "T < L*": unwinnable, never a rate of 0 and never blank.
Pure: DataFrames in, an SVG string out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from horizonbench.reports.plots import _colours, _figure, _placeholder, _to_svg

__all__ = ["Panel", "axis_curves_svg"]


@dataclass(frozen=True)
class Panel:
    """One panel: ``rows`` (``model``, ``level``, ``n``, ``p``, ``wilson_low``,
    ``wilson_high``), its levels in drawing order, the x-axis label, a title and the
    level to mark as the backdrop (None: none)."""

    rows: pd.DataFrame
    levels: Sequence[str]
    xlabel: str
    title: str
    backdrop: str | None = None


def _draw(ax, panel: Panel, colours: dict[str, str], models: list[str]) -> None:
    pos = {level: i for i, level in enumerate(panel.levels)}
    width = 0.18 if len(models) > 1 else 0.0
    for k, model in enumerate(models):
        part = panel.rows[panel.rows["model"] == model]
        if part.empty:
            continue
        part = part.assign(_x=[pos[str(v)] for v in part["level"]]).sort_values("_x")
        # agents side by side within a level, so equal rates stay visible
        xs = part["_x"].to_numpy(float) + (k - (len(models) - 1) / 2) * width / max(1, len(models) - 1)
        p = part["p"].to_numpy(float)
        seen = part["n"].to_numpy(float) > 0
        below = np.clip(p - part["wilson_low"].to_numpy(float), 0, None)
        above = np.clip(part["wilson_high"].to_numpy(float) - p, 0, None)
        ax.errorbar(
            xs[seen], p[seen], yerr=np.vstack([below[seen], above[seen]]),
            color=colours[model], marker="o", ms=3.5, lw=1.2, capsize=2.5, label=model,
        )  # fmt: skip
        if (~seen).any():
            ax.plot(xs[~seen], np.zeros(int((~seen).sum())), ls="none", marker="X", ms=6, mfc="white",
                    color=colours[model])  # fmt: skip
    empty = panel.rows[panel.rows["n"] == 0]
    for level in sorted({str(v) for v in empty["level"]}, key=pos.__getitem__):
        ax.annotate(
            "T < L*", (pos[level], 0.0), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=6.5
        )
    if panel.backdrop is not None and panel.backdrop in pos:
        ax.axvspan(pos[panel.backdrop] - 0.35, pos[panel.backdrop] + 0.35, color="0.85", zorder=0, lw=0)
    ax.set_xticks(range(len(panel.levels)))
    ax.set_xticklabels(
        [f"{v}\n(backdrop)" if v == panel.backdrop else str(v) for v in panel.levels], fontsize=7
    )
    ax.set_xlim(-0.5, len(panel.levels) - 0.5)
    ax.set_ylim(-0.04, 1.04)
    ax.set_xlabel(panel.xlabel, fontsize=8)
    ax.set_title(panel.title, fontsize=8)


def axis_curves_svg(panels: Sequence[Sequence[Panel]], name: str, title: str) -> str:
    """The panels, one row of the figure per inner sequence, one colour per agent across
    all of them, the legend once; a panel without rows is left blank, and the figure is
    a placeholder naming ``title`` when no panel has a row."""
    grid = [list(row) for row in panels if row]
    drawn = [p for row in grid for p in row if not p.rows.empty]
    if not drawn:
        return _placeholder(name, f"{title}: no rows")
    models = sorted({str(m) for p in drawn for m in p.rows["model"]})
    colours = _colours(models)
    cols = max(len(row) for row in grid)
    with _figure(name, figsize=(2.6 * cols + 0.6, 2.5 * len(grid) + 0.6)) as fig:
        fig.set_layout_engine("constrained")
        axes = fig.subplots(len(grid), cols, squeeze=False, sharey=True)
        handles, labels = [], []
        for r, row in enumerate(grid):
            axes[r][0].set_ylabel("success (Wilson 95%)", fontsize=8)
            for c in range(cols):
                ax = axes[r][c]
                if c >= len(row) or row[c].rows.empty:
                    ax.axis("off")
                    continue
                _draw(ax, row[c], colours, models)
                for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                    if lab not in labels:
                        handles.append(h)
                        labels.append(lab)
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6), fontsize=7)
        fig.suptitle(title, fontsize=9)
        return _to_svg(fig, name)
