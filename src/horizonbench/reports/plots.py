"""Report figures as inline SVG strings.

Figures must be byte-identical across renders (so a re-run report can be diffed), and
several SVGs share one HTML page (so their element ids must not collide). Hence a
fixed hash salt per figure, no date metadata, text kept as text, and every id
prefixed with the figure's name.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import matplotlib

# headless everywhere (workers, CI); figures are built with Figure() directly rather
# than through pyplot, so rendering keeps no global state and is safe in threads
matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from horizonbench.analysis.phase import wilson_interval  # noqa: E402

_METHOD_STYLE = {
    "wls_prefactor": ("--", "WLS log A - L/L0"),
    "wls_origin": (":", "WLS -L/L0"),
    "binomial_mle": ("-.", "binomial MLE"),
}
_METRICS = [
    ("progress_ratio_mean", "progress ratio"),
    ("precision_mean", "precision"),
    ("recall_mean", "recall"),
]
#: no attribute of the SVG root points outside the page once these are gone
_SVG_NAMESPACE_ATTRS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_SVG_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


@contextmanager
def _figure(name: str, figsize: tuple[float, float] = (7.0, 4.2)) -> Iterator[Figure]:
    """A figure drawn under settings that make its SVG reproducible."""
    rc = {
        "svg.hashsalt": f"horizonbench-{name}",
        "svg.fonttype": "none",
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
    with matplotlib.rc_context(rc):
        yield Figure(figsize=figsize)


def _to_svg(fig: Figure, name: str) -> str:
    """Serialise to an inline-ready <svg> element with ids unique to this figure."""
    buf = io.StringIO()
    fig.savefig(
        buf,
        format="svg",
        bbox_inches="tight",
        metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
    )
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = _SVG_METADATA.sub("", text)
    text = _SVG_NAMESPACE_ATTRS.sub("", text, count=0)
    return _prefix_ids(text, f"{name}-")


def _prefix_ids(svg: str, prefix: str) -> str:
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if not ids:
        return svg

    def swap(m: re.Match[str]) -> str:
        ref = m.group(2)
        return m.group(1) + (prefix + ref if ref in ids else ref) + m.group(3)

    return re.sub(r'(\bid="|url\(#|href="#)([^")]+)(["\)])', swap, svg)


def _placeholder(name: str, message: str) -> str:
    with _figure(name, figsize=(6.0, 1.2)) as fig:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
        return _to_svg(fig, name)


def _colours(models: list[str]) -> dict[str, str]:
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    return {m: cycle[i % len(cycle)] for i, m in enumerate(models)}


def _models(*frames: pd.DataFrame) -> list[str]:
    names: set[str] = set()
    for df in frames:
        if not df.empty and "model" in df:
            names.update(str(m) for m in df["model"].unique())
    return sorted(names)


def _format_l0(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return "inf" if math.isinf(value) else f"{value:.3g}"


def _fit_curve(L: np.ndarray, L0: float, A: float) -> np.ndarray | None:
    """min(1, A exp(-L/L0)), or None when the fit gave nothing drawable."""
    if not (math.isfinite(A) and A > 0) or math.isnan(L0):
        return None
    decay = np.ones_like(L) if math.isinf(L0) else np.exp(-L / L0)
    return np.minimum(1.0, A * decay)


def bin_centres(L_low: np.ndarray, width: int) -> np.ndarray:
    """Where a bin of the integer depths ``L_low .. L_low + width - 1`` is drawn: its
    centre ``L_low + (width - 1) / 2``, the middle of the span ``[L_low - 0.5,
    L_low + width - 0.5)`` its bar covers (width 1: the depth itself; width 10: the bin
    ``[20, 30)`` at 24.5, spanning 19.5-29.5). Not the mean L of the bin's attempts,
    which the WLS fits use as their regressor (``summary._wls_bins``)."""
    if width < 1:
        raise ValueError(f"bin width must be >= 1, got {width}")
    return np.asarray(L_low, dtype=float) + (width - 1) / 2


def success_vs_length_svg(
    by_length: pd.DataFrame, fits: pd.DataFrame, *, log: bool = False, bin_width: int = 1
) -> str:
    """Observed success rate per L bin, at the bin's centre (:func:`bin_centres` of the
    table's lower edges and ``bin_width``) with its Wilson 95% interval, and every fitted
    decay curve (``_METHOD_STYLE``).

    The log-y version makes exp(-L/L0) a straight line, which is how the paper shows
    it; bins with zero successes cannot appear there and are left off that panel.
    Each model's points carry the SVG id ``<figure>-points-<i>`` and their intervals
    ``<figure>-interval-<i>`` (i: the model's place in name order), so a test can find them.
    """
    name = "success-log" if log else "success-lin"
    if by_length.empty:
        return _placeholder(name, "no scored attempts")
    with _figure(name, figsize=(9.0, 4.2)) as fig:
        draw_success_vs_length(fig, by_length, fits, log=log, bin_width=bin_width)
        return _to_svg(fig, name)


def draw_success_vs_length(
    fig: Figure, by_length: pd.DataFrame, fits: pd.DataFrame, *, log: bool, bin_width: int
) -> Axes:
    """Draw :func:`success_vs_length_svg`'s figure on ``fig`` (apart, so a test can read
    where matplotlib put the legend). The legend sits outside the axes, right of them:
    with two models and three fits each it has ~15 entries, which inside hid the data."""
    models = _models(by_length, fits)
    colours = _colours(models)
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    centres = bin_centres(by_length["L"].to_numpy(), bin_width)
    grid = np.linspace(float(centres.min()), float(centres.max()), 200)
    for i, model in enumerate(models):
        rows = by_length[by_length["model"] == model]
        rate = rows["success_rate"].to_numpy(dtype=float)
        shown = rate > 0 if log else np.isfinite(rate)
        x = bin_centres(rows["L"].to_numpy()[shown], bin_width)
        low, high = wilson_interval(
            rows["successes"].to_numpy(dtype=float)[shown], rows["attempts"].to_numpy(dtype=float)[shown]
        )
        points, _, (bars,) = ax.errorbar(
            x,
            rate[shown],
            yerr=np.vstack([rate[shown] - low, high - rate[shown]]).reshape(2, -1),
            fmt="o",
            ms=3.5,
            elinewidth=0.8,
            color=colours[model],
            label=f"{model} (observed, 95% Wilson)",
        )
        points.set_gid(f"points-{i}")
        bars.set_gid(f"interval-{i}")
        _draw_fits(ax, fits, model, grid, colours[model])
    width = f", bins of {bin_width} at their centres" if bin_width > 1 else ""
    ax.set_xlabel(f"logical depth L (solution length){width}")
    ax.set_ylabel("success rate")
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(-0.03, 1.03)
    fig.legend(fontsize=7, loc="outside right upper")
    return ax


def _draw_fits(ax: Axes, fits: pd.DataFrame, model: str, grid: np.ndarray, colour: str) -> None:
    if fits.empty:
        return
    for _, fit in fits[fits["model"] == model].iterrows():
        style, label = _METHOD_STYLE.get(str(fit["method"]), (":", str(fit["method"])))
        curve = _fit_curve(grid, float(fit["L0"]), float(fit["A"]))
        if curve is None:
            continue
        ax.plot(
            grid,
            curve,
            linestyle=style,
            color=colour,
            lw=1.2,
            label=_fit_label(model, label, float(fit["L0"]), float(fit["A"])),
        )


def _fit_label(model: str, label: str, L0: float, A: float) -> str:
    """Legend text of a fitted curve: a flat L0 = inf fit says "no decay" and the level
    it draws, and a prefactor above 1 (drawn capped at 1) says so."""
    if math.isinf(L0):
        return f"{model} {label}: no decay (L0=inf), level {A:.2g}"
    above = f", A={A:.3g} > 1" if A > 1 else ""
    return f"{model} {label}, L0={_format_l0(L0)}{above}"


def metrics_vs_length_svg(by_length: pd.DataFrame, bin_width: int = 1) -> str:
    """Partial-credit metrics per L bin (at its centre, :func:`bin_centres`): they show
    how far models get before failing."""
    name = "metrics"
    if by_length.empty:
        return _placeholder(name, "no scored attempts")
    models = _models(by_length)
    colours = _colours(models)
    with _figure(name, figsize=(10.0, 3.4)) as fig:
        axes = fig.subplots(1, len(_METRICS), sharex=True, sharey=True)
        for ax, (col, label) in zip(axes, _METRICS, strict=True):
            for model in models:
                rows = by_length[by_length["model"] == model]
                x = bin_centres(rows["L"].to_numpy(), bin_width)
                y = rows[col].to_numpy(dtype=float)
                ax.plot(x, y, "-o", ms=2.5, lw=1, color=colours[model], label=model)
                if col == "progress_ratio_mean":
                    sem = np.nan_to_num(rows["progress_ratio_sem"].to_numpy(dtype=float))
                    ax.fill_between(x, y - sem, y + sem, color=colours[model], alpha=0.15, lw=0)
            ax.set_title(label)
            ax.set_xlabel("L")
            ax.set_ylim(-0.03, 1.03)
        axes[0].legend(fontsize=7, loc="best")
        return _to_svg(fig, name)


def first_violation_svg(first_violations: pd.DataFrame) -> str:
    """Where in the plan the first mistake falls, relative to the optimal length.

    Mass near 0 means failures to start. The shape is NOT a test of a constant per-step
    hazard: under one, the relative position at depth L falls off as (1 - eps)^(x L), flat
    only where eps L is small, so the pooled shape depends on the mix of L (issue 22).
    The constant-rate comparison is the absolute-step figure of
    ``seqbench_plots.first_violation_by_length_svg``.
    """
    name = "first-violation"
    if first_violations.empty:
        return _placeholder(name, "no failed attempts with a located violation")
    models = _models(first_violations)
    colours = _colours(models)
    top = max(1.0, float(first_violations["relative_position"].max()))
    bins = np.linspace(0.0, top, int(math.ceil(top * 20)) + 1)
    with _figure(name) as fig:
        ax = fig.add_subplot()
        for model in models:
            pos = first_violations.loc[first_violations["model"] == model, "relative_position"].to_numpy(
                dtype=float
            )
            ax.hist(
                pos,
                bins=bins,
                histtype="step",
                lw=1.4,
                color=colours[model],
                weights=np.full(pos.size, 1.0 / max(pos.size, 1)),
                label=f"{model} (n={pos.size})",
            )
        ax.set_xlabel("first violation step / solution length")
        ax.set_ylabel("share of failed attempts")
        ax.legend(fontsize=7, loc="best")
        return _to_svg(fig, name)


def violations_svg(violations: pd.DataFrame) -> str:
    """Share of attempts per violation category, side by side per model."""
    name = "violations"
    if violations.empty:
        return _placeholder(name, "no scored attempts")
    models = _models(violations)
    colours = _colours(models)
    categories = sorted(str(v) for v in violations["violation"].unique())
    height = 0.8 / len(models)
    y = np.arange(len(categories), dtype=float)
    with _figure(name, figsize=(7.0, 1.0 + 0.35 * len(categories) * max(1, len(models) / 2))) as fig:
        ax = fig.add_subplot()
        for i, model in enumerate(models):
            rows = violations[violations["model"] == model].set_index("violation")["share"]
            share = [float(rows.get(c, 0.0)) for c in categories]
            ax.barh(
                y + i * height - 0.4 + height / 2, share, height=height, color=colours[model], label=model
            )
        ax.set_yticks(y, categories)
        ax.invert_yaxis()
        ax.set_xlabel("share of attempts")
        ax.set_xlim(0, 1)
        ax.legend(fontsize=7, loc="best")
        return _to_svg(fig, name)


#: (line style, marker, legend text) of each evaluation mode in the puzzle figure
_MODE_STYLE = {
    "plan": ("-", "o", "whole plan (observed)"),
    "rollout": ("--", "s", "rollout (observed)"),
}


def puzzle_success_svg(by_n: pd.DataFrame, families: Sequence[str]) -> str:
    """Success rate against puzzle size n, one panel per family (two panels a row).

    ``by_n`` holds the per-n rows of the puzzle families with the family's own name in
    ``family`` and ``"plan"`` or ``"rollout"`` in ``mode``. Each model keeps one colour
    in every panel: a solid line for whole plans, a dashed one for rollouts, and a thin
    dotted line of the same colour for what (1 - eps)^L predicts from that evaluation's
    fitted eps, so the reader sees where the compounding model holds and where it fails.
    """
    name = "puzzles"
    if by_n.empty or not families:
        return _placeholder(name, "no puzzle attempts")
    models = _models(by_n)
    colours = _colours(models)
    ncols = 2 if len(families) > 1 else 1
    nrows = math.ceil(len(families) / ncols)
    with _figure(name, figsize=(9.0, 1.0 + 2.9 * nrows)) as fig:
        fig.set_layout_engine("constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for i, (ax, family) in enumerate(zip(axes, families, strict=False)):
            rows = by_n[by_n["family"] == family]
            for model in models:
                for mode, (style, marker, _) in _MODE_STYLE.items():
                    g = rows[(rows["model"] == model) & (rows["mode"] == mode)].sort_values(
                        "n", kind="mergesort"
                    )
                    if g.empty:
                        continue
                    x = g["n"].to_numpy(dtype=float)
                    colour = colours[model]
                    ax.plot(
                        x,
                        g["success_rate"].to_numpy(dtype=float),
                        linestyle=style,
                        marker=marker,
                        ms=3,
                        lw=1.2,
                        color=colour,
                    )
                    ax.plot(x, g["predicted"].to_numpy(dtype=float), linestyle=":", lw=0.8, color=colour)
            if rows.empty:
                ax.text(0.5, 0.5, "no attempts", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(family)
            ax.set_ylim(-0.03, 1.03)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if i % ncols == 0:
                ax.set_ylabel("success rate")
            if i >= len(families) - ncols:
                ax.set_xlabel("size n")
        for ax in axes[len(families) :]:
            ax.axis("off")
        handles = [Line2D([], [], color=colours[m], lw=1.5, label=m) for m in models]
        handles += [
            Line2D([], [], color="0.35", linestyle=style, marker=marker, ms=3, lw=1.2, label=label)
            for style, marker, label in _MODE_STYLE.values()
        ]
        handles.append(Line2D([], [], color="0.35", linestyle=":", lw=0.8, label="predicted (1 − ε)^L"))
        fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=7)
        return _to_svg(fig, name)


def _budget_cells(excluded: pd.DataFrame | None, env: str) -> pd.DataFrame:
    """The cells of ``env`` where a model agent hit a harness limit (``budget_exceeded``
    episodes), from the ``excluded`` table; empty for tables without that column."""
    if excluded is None or excluded.empty or "budget_exceeded" not in excluded.columns:
        return pd.DataFrame(columns=["model", "sc", "dd", "budget_exceeded"])
    rows = excluded[(excluded["env"] == env) & (excluded["budget_exceeded"].fillna(0) > 0)]
    return rows[["model", "sc", "dd", "budget_exceeded"]]


def phase_diagram_svg(
    grid: pd.DataFrame, env: str, critical: pd.DataFrame, excluded: pd.DataFrame | None = None
) -> str:
    """The phase diagram of one environment: a heatmap of success over (sc, dd) per
    model (one panel each), every cell annotated with its rate and episode count, and
    the crossing sc* of each dd row marked where it was bracketed.

    Cells are drawn on the scanned values as categories (sc 5, 10, 20, 40 equally
    spaced), because the grid is a design, not a continuum; sc* is placed by linear
    interpolation between the two cells around it, as it was computed.

    With the ``excluded`` table, cells where episodes hit a harness limit say how many
    of their n did ("k at limit"): those count as failures in the rate. A cell with only
    such episodes and no rate (from a table written before they counted) stays blank
    with "harness limit" and its count. A cell none of whose worlds fits in T (n 0,
    ``n_unwinnable`` > 0) is hatched grey with "T < L*" and its count; a cell with some
    such worlds adds "+k T<L*" to its n. The title names the horizon (the grid's
    ``horizon`` column).
    """
    name = f"phase-{env}"
    rows = grid[grid["env"] == env]
    budget = _budget_cells(excluded, env)
    if rows.empty and budget.empty:
        return _placeholder(name, f"{env}: no episodes could be won (T < L* everywhere?)")
    models = sorted(set(rows["model"]) | set(budget["model"]))
    ncols = min(3, len(models))
    nrows = math.ceil(len(models) / ncols)
    with _figure(name, figsize=(3.3 * ncols + 0.8, 0.6 + 2.6 * nrows)) as fig:
        fig.set_layout_engine("constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        image = None
        for ax, model in zip(axes, models, strict=False):
            g = rows[rows["model"] == model]
            b = budget[budget["model"] == model]
            scs = sorted(set(g["sc"]) | set(b["sc"]))
            dds = sorted(set(g["dd"]) | set(b["dd"]))
            mat = np.full((len(dds), len(scs)), np.nan)
            for r in g.itertuples():
                mat[dds.index(r.dd), scs.index(r.sc)] = r.p
            image = ax.imshow(mat, origin="lower", cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            stopped = {(r.sc, r.dd): int(r.budget_exceeded) for r in b.itertuples()}
            for r in g.itertuples():
                y, x = dds.index(r.dd), scs.index(r.sc)
                short = getattr(r, "n_unwinnable", 0)  # null in a grid from before the column
                short = 0 if short is None or short != short else int(short)
                if r.n == 0:  # no world of the cell fits in T: marked, never blank
                    _unwinnable_cell(ax, x, y, short)
                    continue
                colour = "black" if r.p > 0.6 else "white"
                label = f"{r.p:.2f}\nn={r.n}" + (f"\n+{short} T<L*" if short else "")
                if (r.sc, r.dd) in stopped:
                    label += f"\n{stopped.pop((r.sc, r.dd))} at limit"
                ax.text(x, y, label, ha="center", va="center", fontsize=6.5, color=colour)
            for (sc, dd), k in stopped.items():
                ax.text(
                    scs.index(sc),
                    dds.index(dd),
                    f"harness\nlimit\n{k}",
                    ha="center",
                    va="center",
                    fontsize=6.0,
                    color="0.35",
                )
            crit = critical[(critical["env"] == env) & (critical["model"] == model)]
            for c in crit.itertuples():
                if c.dd in dds and not math.isnan(c.sc_star):
                    x = float(np.interp(c.sc_star, scs, range(len(scs))))
                    ax.plot([x], [dds.index(c.dd)], marker="|", ms=14, mew=2, color="red")
            ax.set_xticks(range(len(scs)), [str(int(s)) for s in scs])
            ax.set_yticks(range(len(dds)), [str(int(d)) for d in dds])
            ax.set_xlabel("state cardinality sc")
            ax.set_ylabel("dependency density dd")
            ax.set_title(model)
            ax.grid(False)
        for ax in axes[len(models) :]:
            ax.axis("off")
        if image is not None:
            fig.colorbar(image, ax=list(axes[: len(models)]), shrink=0.8, label="success rate (red: sc*)")
        horizon = _horizon_of(rows)
        if horizon:
            dead = " (hatched: unwinnable, every L* > T)" if (rows["n"] == 0).any() else ""
            fig.suptitle(f"{env}, horizon {horizon}{dead}", fontsize=8)
        return _to_svg(fig, name)


def _horizon_of(grid: pd.DataFrame) -> str:
    """The horizon label of a grid table (``paper T=40``), "" for tables without one."""
    if "horizon" not in grid.columns:
        return ""
    labels = sorted({str(h) for h in grid["horizon"] if isinstance(h, str) and h})
    return ", ".join(labels)


def _unwinnable_cell(ax: Axes, x: int, y: int, short: int) -> None:
    """A cell no agent can win (every world's optimal plan longer than T): hatched grey
    with its count, so it reads as "not measurable", never as a rate of 0."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="0.85", edgecolor="0.55", hatch="///", lw=0))
    ax.text(x, y, f"T < L*\n{short} of {short}", ha="center", va="center", fontsize=6.0, color="0.2")
