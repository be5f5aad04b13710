"""Figures of the sequence-model section (RecurrReason's Figure 1 and Figure 2) as inline
SVG, drawn under ``reports/plots.py``'s reproducible settings (fixed hash salt, no dates,
ids prefixed per figure), so a re-rendered report is the same bytes.

Model names reach the SVG as text elements; matplotlib's SVG writer XML-escapes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from horizonbench.reports.plots import _colours, _figure, _placeholder, _to_svg
from horizonbench.schemas.seqmodels import FAILURE_MODES

#: split labels of the failure-mode bars, as the paper's Figure 2 writes them
SPLIT_LETTERS = {"train": "T", "validation": "V", "ood": "O"}
#: the failure modes stacked, then failures with no or an unknown mode
_STACK = [*FAILURE_MODES, "other"]
_STACK_COLOURS = ["#d62728", "#9467bd", "#ff7f0e", "#1f77b4", "#8c564b", "#7f7f7f", "#c7c7c7"]


def _grid(count: int) -> tuple[int, int]:
    ncols = 2 if count > 1 else 1
    return math.ceil(count / ncols), ncols


def accuracy_by_n_svg(table: pd.DataFrame, puzzles: Sequence[str], models: Sequence[str]) -> str:
    """Figure 1: rollout accuracy against size n, one panel per puzzle, a line per model
    with Wilson 95% error bars; the OOD sizes are shaded. Train-split rows are left out
    (the models were fitted on them)."""
    name = "seqmodels-by-n"
    rows = table[table["n"].notna() & table["split"].isin(["validation", "ood"])]
    if rows.empty or not puzzles:
        return _placeholder(name, "no rollouts of a trained model")
    colours = _colours(list(models))
    nrows, ncols = _grid(len(puzzles))
    with _figure(name, figsize=(9.0, 1.0 + 2.9 * nrows)) as fig:
        fig.set_layout_engine("constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for i, (ax, puzzle) in enumerate(zip(axes, puzzles, strict=False)):
            part = rows[rows["puzzle"] == puzzle]
            ood = part.loc[part["split"] == "ood", "n"]
            if len(ood):
                ax.axvspan(float(ood.min()) - 0.5, float(ood.max()) + 0.5, color="0.9", zorder=0, lw=0)
            for model in models:
                g = part[part["model"] == model].sort_values("n", kind="mergesort")
                g = g[pd.to_numeric(g["accuracy"], errors="coerce").notna()]
                if g.empty:
                    continue
                x = g["n"].to_numpy(dtype=float)
                y = g["accuracy"].to_numpy(dtype=float)
                err = np.vstack(
                    [y - g["accuracy_low"].to_numpy(float), g["accuracy_high"].to_numpy(float) - y]
                )
                ax.errorbar(
                    x,
                    y,
                    yerr=np.clip(err, 0, None),
                    marker="o",
                    ms=3,
                    lw=1.2,
                    capsize=2,
                    color=colours[model],
                )
            if part.empty:
                ax.text(0.5, 0.5, "no rollouts", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(puzzle)
            ax.set_ylim(-0.03, 1.03)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if i % ncols == 0:
                ax.set_ylabel("rollout accuracy")
            if i >= len(puzzles) - ncols:
                ax.set_xlabel("size n")
        for ax in axes[len(puzzles) :]:
            ax.axis("off")
        handles = [Patch(color=colours[m], label=m) for m in models]
        handles.append(Patch(color="0.9", label="OOD sizes"))
        fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=7)
        return _to_svg(fig, name)


def failure_shares_svg(table: pd.DataFrame, puzzles: Sequence[str], models: Sequence[str]) -> str:
    """Figure 2: the failure modes of failed rollouts as stacked shares, a bar per model
    and split (V, O), one panel per puzzle; a bar with no failed rollout is left empty and
    marked "none failed"."""
    name = "seqmodels-failures"
    rows = table[table["n"].isna() & table["split"].isin(["validation", "ood"])]
    if rows.empty or not puzzles:
        return _placeholder(name, "no rollouts of a trained model")
    nrows, ncols = _grid(len(puzzles))
    with _figure(name, figsize=(9.0, 1.4 + 3.2 * nrows)) as fig:
        fig.set_layout_engine("constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for i, (ax, puzzle) in enumerate(zip(axes, puzzles, strict=False)):
            part = rows[rows["puzzle"] == puzzle]
            bars = [
                (f"{m} {SPLIT_LETTERS[s]}", part[(part["model"] == m) & (part["split"] == s)])
                for m in models
                for s in ("validation", "ood")
            ]
            bars = [(label, g.iloc[0]) for label, g in bars if len(g)]
            x = np.arange(len(bars))
            bottom = np.zeros(len(bars))
            for mode, colour in zip(_STACK, _STACK_COLOURS, strict=True):
                h = np.array([float(r[f"share_{mode}"]) if int(r["failed"]) else 0.0 for _, r in bars])
                ax.bar(x, 100 * h, bottom=100 * bottom, color=colour, width=0.7)
                bottom += h
            for j, (_, r) in enumerate(bars):
                if not int(r["failed"]):
                    ax.text(j, 50, "none failed", rotation=90, ha="center", va="center", fontsize=6)
            ax.set_xticks(x, [label for label, _ in bars], rotation=60, ha="right", fontsize=6)
            ax.set_title(puzzle)
            ax.set_ylim(0, 100)
            if i % ncols == 0:
                ax.set_ylabel("% of failed rollouts")
        for ax in axes[len(puzzles) :]:
            ax.axis("off")
        handles = [Patch(color=c, label=m) for m, c in zip(_STACK, _STACK_COLOURS, strict=True)]
        fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=7)
        return _to_svg(fig, name)
