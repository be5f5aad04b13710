"""seqBench-style report figures as inline SVG strings, drawn from the tables of
``analysis/seqbench.py``.

They use ``plots.py``'s helpers, so they look like the other figures and render
byte-identically (fixed hash salt, no dates, text as text, ids prefixed per figure).
Two additions: mathtext is off, so a ``$`` in a model name is text, never TeX; and
``xlink:href`` is written as SVG 2's plain ``href`` (every browser reads it), because
``plots._to_svg`` drops the xlink namespace declaration, which leaves a standalone
figure with markers or images unparseable as XML.

Every figure is drawn from aggregates, never one element per attempt: scatter points
beyond a few hundred are rasterised into one embedded image, and beyond
``SCATTER_LIMIT`` points the pair panels show 2D histograms instead; L bins beyond
30 are merged in the violation figure. An SVG stays within a few hundred kilobytes
however large the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter
from matplotlib.transforms import offset_copy

from horizonbench.analysis.seqbench import pair_matrix
from horizonbench.datasets.maze.categories import CATEGORIES
from horizonbench.reports.plots import _colours, _figure, _models, _placeholder, _to_svg, bin_centres

#: most panels of one model each (progress distribution)
MAX_MODEL_PANELS = 12
#: most panels of the per-model violation figure and of the model-pair figure
MAX_PANELS = 6
#: points (all panels together) beyond which the pair panels are 2D histograms
SCATTER_LIMIT = 20_000
#: points (all panels together) beyond which scatters are rasterised (one image rather
#: than one SVG mark each)
_RASTER_FROM = 600
#: most L bins the violation figure draws (more are merged into wider ones)
_MAX_BINS = 30
#: points of a line beyond which it is drawn without markers
_MARKER_LIMIT = 40
_SMALL = 7

#: stacking order (bottom up) and colours of the violation categories
_SUCCESS = "none"
_OTHER = "other"
_CATEGORY_LABEL = {
    _SUCCESS: "success (no violation)",
    "adjacency": "adjacency",
    "locked_door": "locked door",
    "key_usage": "key usage",
    "path_inefficiency": "path inefficiency",
    "missed_critical_action": "missed critical action",
    "plan_protocol": "plan protocol",
    "invalid_output": "invalid output",
    _OTHER: "other (not a maze violation)",
}
_CATEGORY_ORDER = (_SUCCESS, *CATEGORIES, _OTHER)
_CATEGORY_COLOUR = {
    _SUCCESS: "#d9d9d9",
    "adjacency": "#1f77b4",
    "locked_door": "#d62728",
    "key_usage": "#ff7f0e",
    "path_inefficiency": "#2ca02c",
    "missed_critical_action": "#9467bd",
    "plan_protocol": "#8c564b",
    "invalid_output": "#e377c2",
    _OTHER: "#7f7f7f",
}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


@contextmanager
def _drawing(name: str, figsize: tuple[float, float], raster_dpi: float | None = None) -> Iterator[Figure]:
    """``plots._figure`` with mathtext off (model names are shown as written), and the
    resolution of any rasterised artist (the SVG must be written inside the block)."""
    rc: dict[str, object] = {"text.parse_math": False}
    if raster_dpi is not None:
        rc["savefig.dpi"] = raster_dpi
    with matplotlib.rc_context(rc), _figure(name, figsize=figsize) as fig:
        yield fig


def _svg(fig: Figure, name: str) -> str:
    return _to_svg(fig, name).replace(' xlink:href="', ' href="')


def _empty(name: str, message: str) -> str:
    return _placeholder(name, message).replace(' xlink:href="', ' href="')


def _left_out(kind: str, shown: Sequence[str], everything: Sequence[str]) -> str | None:
    """A note naming what a capped figure leaves out, or None when nothing is."""
    rest = [m for m in everything if m not in set(shown)]
    if not rest:
        return None
    names = ", ".join(rest[:4]) + (f" and {len(rest) - 4} more" if len(rest) > 4 else "")
    return f"{len(shown)} of {len(everything)} {kind} shown; not shown: {names}"


def _grid(fig: Figure, n: int, **kw: object) -> tuple[np.ndarray, int]:
    """Axes for ``n`` panels, at most three a row (spare ones switched off)."""
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw).ravel()
    for ax in axes[n:]:
        ax.axis("off")
    return axes, ncols


def _style_key(ax: Axes, grey: str, solid: tuple[str, float], dashed: tuple[str, float]) -> None:
    """The legend of a figure whose colours are the models (named at the line ends): a
    key, in ``grey``, to its two line styles, each ``(label, line width)``."""
    ax.legend(
        handles=[
            Line2D([], [], color=grey, lw=solid[1], label=solid[0]),
            Line2D([], [], color=grey, lw=dashed[1], linestyle="--", label=dashed[0]),
        ],
        fontsize=_SMALL,
        loc="upper left",
    )


def _end_labels(ax: Axes, ends: list[tuple[str, float, float, str]]) -> None:
    """Name each line just right of its last point, nudged apart so names never
    overlap (call after the y limits are final)."""
    if not ends:
        return
    low, high = ax.get_ylim()
    gap = 0.055 * (high - low)
    ends = sorted(ends, key=lambda e: (e[2], e[0]))
    ys: list[float] = []
    for _, _, y, _ in ends:
        ys.append(y if not ys else max(y, ys[-1] + gap))
    over = ys[-1] - high
    if over > 0:
        ys = [y - over for y in ys]
    shift = offset_copy(ax.transData, fig=ax.figure, x=5, y=0, units="points")
    for (label, x, _, colour), y in zip(ends, ys, strict=True):
        ax.text(x, y, label, transform=shift, color=colour, fontsize=_SMALL, va="center", ha="left")


def _line_style(n: int) -> dict[str, object]:
    return {"marker": "o", "ms": 3} if n <= _MARKER_LIMIT else {}


# ---------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------


def progress_distribution_svg(df: pd.DataFrame) -> str:
    """Per model (one panel each, up to ``MAX_MODEL_PANELS``), the share of attempts
    in each progress-ratio bin, from :func:`analysis.seqbench.progress_distribution`.
    The complete plans (a ratio of exactly 1) stand apart at the right, labelled
    "=1", with their share written above."""
    name = "seqbench-progress"
    if df.empty:
        return _empty(name, "no scored attempts")
    models = _models(df)
    colours = _colours(models)
    shown = models[:MAX_MODEL_PANELS]
    note = _left_out("models", shown, models)
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    top = max(0.05, float(df["share"].max())) * 1.18
    with _drawing(name, (3.0 * ncols + 0.6, 0.9 + 2.3 * nrows)) as fig:
        fig.set_layout_engine("constrained")
        axes, ncols = _grid(fig, len(shown), sharex=True, sharey=True)
        for i, (ax, model) in enumerate(zip(axes, shown, strict=False)):
            g = df[df["model"] == model].sort_values("bin_low", kind="mergesort")
            low = g["bin_low"].to_numpy(dtype=float)
            high = g["bin_high"].to_numpy(dtype=float)
            share = g["share"].to_numpy(dtype=float)
            partial = high > low
            colour = colours[model]
            width = (high - low)[partial]
            ax.bar(low[partial], share[partial], width=width, align="edge", color=colour, ec="white", lw=0.5)
            done = float(share[~partial].sum())
            ax.bar([1.05], [done], width=0.1, align="edge", color=colour, edgecolor="black", lw=0.8)
            ax.text(1.1, done, f"{done:.0%}", ha="center", va="bottom", fontsize=_SMALL)
            ax.set_title(f"{model} (n={int(g['count'].sum())})", fontsize=8)
            ax.set_xlim(-0.02, 1.17)
            ax.set_ylim(0.0, top)
            ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.1], ["0", ".2", ".4", ".6", ".8", "1", "=1"])
            if i % ncols == 0:
                ax.set_ylabel("share of attempts")
            if i >= len(shown) - ncols:
                ax.set_xlabel("progress ratio (bins of 0.1; =1: complete)")
        if note:
            fig.suptitle(note, fontsize=_SMALL)
        return _svg(fig, name)


def first_violation_by_length_svg(df: pd.DataFrame) -> str:
    """seqBench Figure 10 on the paper's axis: per model, the median ABSOLUTE step of the
    first violation, with its 25th-75th percentile band, against the L range (at its
    midpoint), beside what a constant per-step error predicts for the same attempts
    (dashed: the median of the geometric truncated at each L, at the model's fitted
    constant rate), from :func:`analysis.seqbench.first_violation_by_length`.

    The relative position is not drawn: it falls with L under a constant rate too, so it
    showed its own null (issue 22). A model whose hazard test found a per-step error
    rising along the plan (``hazard_slope_low > 0``) is marked "rising" in its label."""
    name = "seqbench-first-violation-by-length"
    if df.empty:
        return _empty(name, "no failed attempts with a located violation")
    if "expected_step_median" not in df.columns:  # an analysis written before issue 22
        return _empty(name, "this analysis has no absolute steps: run the analyse stage again")
    models = _models(df)
    colours = _colours(models)
    ranges = df[["L_low", "L_high"]].drop_duplicates().sort_values(["L_low", "L_high"], kind="mergesort")
    tops = df[["first_violation_step_q75", "expected_step_q75"]].to_numpy(dtype=float)
    top = max(1.0, float(np.nanmax(tops)) if np.isfinite(tops).any() else 1.0) * 1.08
    with _drawing(name, (7.0, 4.2)) as fig:
        ax = fig.add_subplot()
        ends = []
        for model in models:
            g = df[df["model"] == model].sort_values("L_low", kind="mergesort")
            x = (g["L_low"].to_numpy(dtype=float) + g["L_high"].to_numpy(dtype=float)) / 2
            median = g["first_violation_step_median"].to_numpy(dtype=float)
            q25 = g["first_violation_step_q25"].to_numpy(dtype=float)
            q75 = g["first_violation_step_q75"].to_numpy(dtype=float)
            expected = g["expected_step_median"].to_numpy(dtype=float)
            colour = colours[model]
            ax.fill_between(x, q25, q75, color=colour, alpha=0.15, lw=0)
            ax.vlines(x, q25, q75, color=colour, alpha=0.5, lw=1.0)
            ax.plot(x, median, "-", lw=1.4, color=colour, **_line_style(x.size))
            ax.plot(x, expected, "--", lw=1.0, color=colour, alpha=0.8)
            low = g["hazard_slope_low"].to_numpy(dtype=float)
            label = f"{model} (rising)" if low.size and np.isfinite(low[0]) and low[0] > 0 else model
            ends.append((label, float(x[-1]), float(median[-1]), colour))
        ax.set_ylim(0.0, top)
        if len(ranges) <= 10:
            mids = (ranges["L_low"].to_numpy(dtype=float) + ranges["L_high"].to_numpy(dtype=float)) / 2
            labels = [f"{lo}–{hi}" if lo != hi else f"{lo}" for lo, hi in ranges.itertuples(index=False)]
            ax.set_xticks(mids, labels)
        ax.set_xlabel("logical depth L (solution length), by range")
        ax.set_ylabel("first violation step\n(median; band: 25th–75th percentile)")
        _style_key(ax, "0.3", ("observed median", 1.4), ("constant-rate expectation", 1.0))
        _end_labels(ax, ends)
        return _svg(fig, name)


def _category_shares(df: pd.DataFrame, bin_width: int = 1) -> tuple[pd.DataFrame, int]:
    """Counts per (model, L, category), successes as ``"none"`` and violations with no
    maze category as ``"other"``, with the share of the bin's attempts.

    ``bin_width`` is the width of the table's bins (``L`` their lower edges). With more
    than ``_MAX_BINS`` distinct L bins, neighbouring bins are merged into ``_MAX_BINS``
    (or fewer) wider ones first (``L`` is then the merged bin's lower edge); also returns
    the width of the bins drawn, in L (``bin_width`` when nothing was merged).
    """
    category = df["category"].where(df["category"].notna(), _OTHER).astype(object)
    df = df.assign(category=category)
    levels = np.unique(df["L"].to_numpy(dtype=np.int64))
    width = bin_width
    if levels.size > _MAX_BINS:
        low = int(levels[0])
        width = bin_width * math.ceil(((int(levels[-1]) - low) // bin_width + 1) / _MAX_BINS)
        df = df.assign(L=(df["L"] - low) // width * width + low)
    # every attempt of a bin is on one of its rows (successes as "none"), so the counts
    # of a (merged) bin add up to its attempts
    counts = df.groupby(["model", "L", "category"], sort=True)["count"].sum().rename("count").reset_index()
    totals = counts.groupby(["model", "L"])["count"].transform("sum")
    counts["share"] = counts["count"] / totals
    return counts, width


#: where the successes are in the violation-types figure, as its caption says it: the
#: first layer of the stack (``_CATEGORY_ORDER``) is drawn from 0 up
SUCCESS_BAND = "the light grey band at the bottom of each bar"


def violation_types_by_length_svg(df: pd.DataFrame, bin_width: int = 1) -> str:
    """Per model (one panel each, up to ``MAX_PANELS``; a title line names any left
    out), the share of attempts in each of seqBench's failure categories against the L
    bin, from :func:`analysis.seqbench.violations_by_length` (``bin_width``: its bins'
    width): one stacked bar per bin, spanning the bin and centred on its centre
    (``plots.bin_centres``), successes at the bottom in light grey (:data:`SUCCESS_BAND`),
    then the categories in ``_CATEGORY_ORDER``. Beyond ``_MAX_BINS`` L bins, neighbouring
    bins are merged (the x label says how wide). A bin with no attempts stays blank.
    Each bar carries the SVG id ``<figure>-bar-<panel>-<layer>-<bin>``."""
    name = "seqbench-violation-types"
    if df.empty:
        return _empty(name, "no scored attempts")
    models = _models(df)
    shown = models[:MAX_PANELS]
    note = _left_out("models", shown, models)
    shares, width = _category_shares(df[df["model"].isin(shown)], bin_width)
    present = set(shares["category"])
    layers = [c for c in _CATEGORY_ORDER if c in present]
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    with _drawing(name, (3.2 * ncols + 2.0, 0.9 + 2.5 * nrows)) as fig:
        fig.set_layout_engine("constrained")
        axes, ncols = _grid(fig, len(shown), sharey=True)
        for i, (ax, model) in enumerate(zip(axes, shown, strict=False)):
            table = shares[shares["model"] == model].pivot(index="L", columns="category", values="share")
            table = table.reindex(columns=layers).fillna(0.0).sort_index()
            x = bin_centres(table.index.to_numpy(), width)
            values = table.to_numpy(dtype=float)
            bottoms = np.cumsum(values, axis=1) - values
            for k, layer in enumerate(layers):
                drawn = np.flatnonzero(values[:, k] > 0)  # an empty layer adds no bar to the SVG
                bars = ax.bar(
                    x[drawn],
                    values[drawn, k],
                    width=width,
                    bottom=bottoms[drawn, k],
                    color=_CATEGORY_COLOUR[layer],
                    lw=0,
                )
                for j, bar in zip(drawn, bars, strict=True):
                    bar.set_gid(f"bar-{i}-{k}-{j}")
            ax.set_xlim(x[0] - width / 2, x[-1] + width / 2)
            ax.set_ylim(0.0, 1.0)
            ax.set_title(model, fontsize=8)
            if i % ncols == 0:
                ax.set_ylabel("share of attempts")
            if i >= len(shown) - ncols:
                ax.set_xlabel(
                    "logical depth L" + (f" (bins of {width}, at their centres)" if width > 1 else "")
                )
        handles = [Patch(color=_CATEGORY_COLOUR[c], label=_CATEGORY_LABEL[c]) for c in reversed(layers)]
        fig.legend(
            handles=handles,
            loc="outside right upper",
            fontsize=_SMALL,
            title="first violation",
            title_fontsize=_SMALL,
            frameon=False,
        )
        if note:
            fig.suptitle(note, fontsize=_SMALL)
        return _svg(fig, name)


def _pick_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """The pairs to draw: those sharing an instance, most inversions first."""
    rows = pairs[pairs["instances"] > 0]
    return rows.sort_values(
        ["inversions", "inversion_share", "model_a", "model_b"],
        ascending=[False, False, True, True],
        kind="mergesort",
    )


def _inversion_zone(ax: Axes, weaker_is_a: bool) -> None:
    """Shade where the weaker model leads by at least 0.5 (an inversion)."""
    zone = [(0.5, 0.0), (1.0, 0.0), (1.0, 0.5)] if weaker_is_a else [(0.0, 0.5), (0.0, 1.0), (0.5, 1.0)]
    xs, ys = zip(*zone, strict=True)
    ax.fill(xs, ys, color="#c62828", alpha=0.08, lw=0)
    edge = ([0.5, 1.0], [0.0, 0.5]) if weaker_is_a else ([0.0, 0.5], [0.5, 1.0])
    ax.plot(*edge, ":", color="#c62828", lw=0.8)
    x0, y0 = (0.83, 0.08) if weaker_is_a else (0.08, 0.9)
    ax.text(x0, y0, "inversions", color="#c62828", fontsize=6.5, ha="center", va="center")


def _pair_points(instance_progress: pd.DataFrame, shown: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per pair, the per-instance mean progress of ``model_a`` and of ``model_b`` on the
    instances where both have one."""
    progress, present, models = pair_matrix(instance_progress, ("progress_ratio_mean",))
    column = {m: i for i, m in enumerate(models)}
    points = []
    for a, b in zip(shown["model_a"], shown["model_b"], strict=True):
        i, j = column.get(str(a)), column.get(str(b))
        if i is None or j is None:
            points.append((np.empty(0), np.empty(0)))
            continue
        both = present[:, i] & present[:, j] & ~np.isnan(progress[:, i]) & ~np.isnan(progress[:, j])
        points.append((progress[both, i], progress[both, j]))
    return points


def model_pair_scatter_svg(instance_progress: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """Per-instance mean progress of two models against each other (seqBench Figure
    13), for up to ``MAX_PANELS`` pairs: those with the most inversions (a title line
    says how many of how many are shown). Each panel puts ``model_a`` on x and
    ``model_b`` on y, with the diagonal (equal progress) and the shaded zone where the
    weaker model leads by at least 0.5 (an inversion, see
    :func:`analysis.seqbench.model_pairs`); its title gives the pair's inversions.

    With more than ``SCATTER_LIMIT`` points in all panels together, every panel is a 2D
    histogram (40 x 40 cells, darker: more instances) rather than a scatter: the
    budget is shared so six panels of noisy points cannot add up to a large SVG.
    """
    name = "seqbench-model-pairs"
    chosen = _pick_pairs(pairs) if not pairs.empty else pairs
    if instance_progress.empty or chosen.empty:
        return _empty(name, "no two models share an instance")
    shown = chosen.head(MAX_PANELS)
    points = _pair_points(instance_progress, shown)
    total = sum(x.size for x, _ in points)
    n = len(shown)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    # the rasterised points at 60 dpi: sharp enough, and a third of the bytes of 100
    with _drawing(name, (3.3 * ncols + 0.4, 0.8 + 3.3 * nrows), raster_dpi=60) as fig:
        fig.set_layout_engine("constrained")
        axes, ncols = _grid(fig, n)
        for ax, pair, (x, y) in zip(axes, shown.itertuples(index=False), points, strict=False):
            a, b = str(pair.model_a), str(pair.model_b)
            if pair.weaker is not None and not pd.isna(pair.weaker):
                _inversion_zone(ax, str(pair.weaker) == a)
            ax.plot([0, 1], [0, 1], "--", color="0.45", lw=0.8)
            if total > SCATTER_LIMIT and x.size:
                counts, _, _ = np.histogram2d(x, y, bins=40, range=[[0.0, 1.0], [0.0, 1.0]])
                image = ax.imshow(
                    np.ma.masked_equal(counts.T, 0),
                    origin="lower",
                    extent=(0.0, 1.0, 0.0, 1.0),
                    cmap="Blues",
                    norm=LogNorm(vmin=1, vmax=max(1.0, float(counts.max()))),
                    interpolation="nearest",
                    aspect="auto",
                )
                bar = fig.colorbar(image, ax=ax, shrink=0.75, fraction=0.05, pad=0.02)
                bar.set_label("instances per cell", fontsize=_SMALL)
                # plain numbers: the default log labels are mathtext, shown raw with it off
                bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                bar.ax.yaxis.set_minor_formatter(NullFormatter())
                bar.ax.tick_params(labelsize=_SMALL)
            elif x.size:
                raster = total > _RASTER_FROM
                ax.plot(x, y, "o", ms=2.2, mew=0, alpha=0.35, color="#1f77b4", rasterized=raster)
            share = f" ({pair.inversion_share:.1%})" if pair.instances else ""
            ax.set_title(f"{a} vs {b}\n{pair.inversions} inversions of {pair.instances}{share}", fontsize=8)
            ax.set_xlim(-0.03, 1.03)
            ax.set_ylim(-0.03, 1.03)
            ax.set_xlabel(f"{a}: mean progress ratio")
            ax.set_ylabel(f"{b}: mean progress ratio")
        if len(chosen) > n:
            fig.suptitle(f"{n} of {len(chosen)} model pairs shown (most inversions first)", fontsize=_SMALL)
        return _svg(fig, name)


def tokens_by_length_svg(df: pd.DataFrame, bin_width: int = 1) -> str:
    """Output tokens per whole-plan answer against L: per model the mean (solid line,
    named at its end) and the 90th percentile (dashed), from
    :func:`analysis.seqbench.tokens_by_length`, each bin at its centre
    (``plots.bin_centres`` with the table's ``bin_width``)."""
    name = "seqbench-tokens"
    if df.empty:
        return _empty(name, "no whole-plan attempts with token counts")
    models = _models(df)
    colours = _colours(models)
    top = float(np.nanmax(df[["output_tokens_mean", "output_tokens_q90"]].to_numpy(dtype=float)))
    with _drawing(name, (7.0, 4.2)) as fig:
        ax = fig.add_subplot()
        ends = []
        for model in models:
            g = df[df["model"] == model].sort_values("L", kind="mergesort")
            x = bin_centres(g["L"].to_numpy(), bin_width)
            mean = g["output_tokens_mean"].to_numpy(dtype=float)
            colour = colours[model]
            ax.plot(x, mean, "-", lw=1.4, color=colour, **_line_style(x.size))
            ax.plot(x, g["output_tokens_q90"].to_numpy(dtype=float), "--", lw=0.9, color=colour, alpha=0.8)
            ends.append((model, float(x[-1]), float(mean[-1]), colour))
        ax.set_ylim(0.0, max(1.0, top) * 1.05)
        ax.set_xlabel(
            "logical depth L (solution length"
            + (f", bins of {bin_width} at their centres)" if bin_width > 1 else ")")
        )
        ax.set_ylabel("output tokens per attempt")
        _style_key(ax, "0.35", ("mean", 1.4), ("90th percentile", 0.9))
        _end_labels(ax, ends)
        return _svg(fig, name)
