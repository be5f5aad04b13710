"""seqBench's sweep figures curve by curve, and its example prompt (Figures 6/7, 11, 12,
15, and the progress and output-token panels of 3, 4 and 14), drawn from the tables of
``analysis/seqbench_sweep.py`` and ``analysis/prompt_example.py``.

Every point is drawn where its table puts it (an L bin at its centre, a progress bin at
its middle) with its 95% interval as an error bar, and each ``draw_*`` function returns
what it drew, so a test can hold the figure against its table. The ``*_svg`` functions
wrap them in ``seqbench_plots``' reproducible SVG drawing (mathtext off: a ``$`` in a
model name is text).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from markupsafe import Markup
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from horizonbench.reports.plots import _colours
from horizonbench.reports.seqbench_plots import _drawing, _empty, _grid, _left_out, _svg
from horizonbench.reports.sweep_plots import axis_title, swept_axes

#: most model panels a figure draws (a title line names any left out)
MAX_PANELS = 6
#: seqBench Figure 12's axes: the settings that change only noise and shuffle
NOISE_SHUFFLE = ("noise_ratio", "shuffle_ratio")
#: seqBench Figure 15's axes: the maze's prompt settings
PROMPT_AXES = ("shots", "guidance", "self_assessment")
#: short names of the axes in a curve's label
_SHORT = {
    "noise_ratio": "noise",
    "shuffle_ratio": "shuffle",
    "shots": "shots",
    "guidance": "guided",
    "self_assessment": "self-assessment",
    "num_keys": "B",
}
_SMALL = 7
_BASE = "base"


@dataclass(frozen=True)
class Curve:
    """One line of a figure as drawn: its panel (a model), label, points and interval;
    ``colour`` and ``style`` name what its colour and line style stand for (lines with
    the same key look the same in every panel)."""

    panel: str
    label: str
    x: np.ndarray
    y: np.ndarray
    low: np.ndarray
    high: np.ndarray
    colour: str = ""
    style: str = ""


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return f"{v:g}"
    return str(v)


def _settings_on(df: pd.DataFrame, base_family: str, axes: Sequence[str]) -> pd.DataFrame:
    """Rows of ``base_family``'s settings that change nothing but ``axes`` from the base
    (the base included), so every curve differs from the others only where the figure
    says; ``_axes`` holds each row's parsed axis values."""
    part = df[df["base_family"].astype(str) == base_family]
    allowed = set(axes)

    def only(varied: str) -> bool:
        return varied == _BASE or set(varied.split(",")) <= allowed

    part = part[part["varied"].astype(str).map(only)]
    return part.assign(_axes=part["axes"].map(json.loads))


def _curve(
    g: pd.DataFrame, panel: str, label: str, colour: str, columns: Sequence[str], style: str = ""
) -> Curve:
    """The curve of a table's rows ``g``: ``columns`` name its x, y, low and high."""
    x, y, low, high = (g[c].to_numpy(dtype=float) for c in columns)
    return Curve(panel, label, x, y, low, high, colour, style)


def _label(axes: Mapping[str, Any], shown: Sequence[str]) -> str:
    return ", ".join(f"{_SHORT.get(a, a)} {_value(axes.get(a))}" for a in shown)


def _errorbars(ax: Any, curve: Curve, colour: str, style: str = "-") -> None:
    y = np.asarray(curve.y, dtype=float)
    err = np.vstack([np.clip(y - curve.low, 0, None), np.clip(curve.high - y, 0, None)])
    ax.errorbar(
        curve.x,
        y,
        yerr=np.where(np.isfinite(err), err, 0.0),
        color=colour,
        linestyle=style,
        marker="o",
        markersize=3,
        capsize=2,
        linewidth=1.2,
        elinewidth=0.8,
        label=curve.label,
    )


_STYLES = ("-", "--", ":", "-.")


def coinciding(curves: Sequence[Curve]) -> str | None:
    """A sentence naming, per panel (model), the settings whose points are identical
    (same x and y), so the caption can say one line hides the others; None when none
    coincide. Offline baselines ignore the facts, so noise 0 and noise 2 draw the same
    line for them: computed here, not assumed."""
    parts = []
    for panel in dict.fromkeys(c.panel for c in curves):
        groups: list[list[Curve]] = []
        for c in (c for c in curves if c.panel == panel):
            for group in groups:
                ref = group[0]
                if np.array_equal(ref.x, c.x, equal_nan=True) and np.array_equal(ref.y, c.y, equal_nan=True):
                    group.append(c)
                    break
            else:
                groups.append([c])
        for group in groups:
            if len(group) > 1:
                names = " and ".join(c.label for c in group)
                parts.append(f"{panel}: {names}" if panel else names)
    if not parts:
        return None
    return "Identical points, so one line hides the other: " + "; ".join(parts) + "."


def _panels(
    fig: Figure,
    curves: list[Curve],
    xlabel: str,
    ylabel: str,
    ylim: tuple[float, float] | None,
    legend_per_panel: bool = False,
) -> None:
    """One panel per model (in the curves' order). A setting has one colour and line
    style in every panel (lines that coincide stay told apart by their style); the key
    is one legend beside the panels, or one per panel when the labels differ."""
    panels = list(dict.fromkeys(c.panel for c in curves))
    keys = list(dict.fromkeys(c.colour for c in curves))
    cmap = matplotlib.colormaps["viridis"]
    colours = {k: cmap(0.85 * i / max(1, len(keys) - 1)) for i, k in enumerate(keys)}
    axes, ncols = _grid(fig, len(panels), sharex=True, sharey=True)
    for i, (ax, panel) in enumerate(zip(axes, panels, strict=False)):
        for c in curves:
            if c.panel == panel:
                _errorbars(ax, c, colours[c.colour], _STYLES[keys.index(c.colour) % len(_STYLES)])
        ax.set_title(panel, fontsize=8)
        if ylim is not None:
            ax.set_ylim(*ylim)
        if i % ncols == 0:
            ax.set_ylabel(ylabel)
        if i >= len(panels) - ncols:
            ax.set_xlabel(xlabel)
        if legend_per_panel:
            ax.legend(fontsize=_SMALL - 1, loc="best")
    if not legend_per_panel:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=_SMALL, frameon=False)


def _shown_models(df: pd.DataFrame) -> tuple[list[str], str | None]:
    models = sorted(set(df["model"].astype(str)))
    shown = models[:MAX_PANELS]
    return shown, _left_out("models", shown, models)


def _multiples_svg(
    name: str,
    df: pd.DataFrame,
    base_family: str,
    curves: list[Curve],
    wanted: str,
    draw: Callable[[Figure], object],
) -> str:
    """A figure of one panel per model drawn by ``draw``, or a line saying that no
    settings of ``base_family`` vary only ``wanted`` when there are no ``curves``; a
    title line names the models a full figure leaves out."""
    if not curves:
        return _empty(name, f"no settings of {base_family} that vary only {wanted}")
    _, note = _shown_models(df[df["base_family"].astype(str) == base_family])
    with _drawing(name, _size(len({c.panel for c in curves}))) as fig:
        fig.set_layout_engine("constrained")
        draw(fig)
        if note:
            fig.suptitle(note, fontsize=_SMALL)
        return _svg(fig, name)


def _size(n: int) -> tuple[float, float]:
    ncols = min(3, n)
    return 3.4 * ncols + 0.6, 1.0 + 2.6 * math.ceil(n / ncols)


# ---------------------------------------------------------------------------
# Figures 12 and 15: success against L per setting
# ---------------------------------------------------------------------------


def success_curves(df: pd.DataFrame, base_family: str, axes: Sequence[str]) -> list[Curve]:
    """Per model and setting of ``base_family`` that changes only ``axes`` (the base
    included): success against L at the bin centres, with 95% Wilson intervals, from
    ``analysis/sweep_by_length``. Nothing when fewer than two such settings exist."""
    part = _settings_on(df, base_family, axes) if not df.empty else df
    if part.empty or part["family"].nunique() < 2:
        return []
    shown_axes = [a for a in axes if part["_axes"].map(lambda d, a=a: json.dumps(d.get(a))).nunique() > 1]
    models, _ = _shown_models(part)
    curves = []
    for model in models:
        for family in dict.fromkeys(part["family"]):
            g = part[(part["model"] == model) & (part["family"] == family)].sort_values("L_centre")
            if g.empty:
                continue
            label = _label(g["_axes"].iloc[0], shown_axes)
            curves.append(
                _curve(g, model, label, label, ("L_centre", "success_rate", "success_low", "success_high"))
            )
    return curves


def draw_success_curves(fig: Figure, df: pd.DataFrame, base_family: str, axes: Sequence[str]) -> list[Curve]:
    curves = success_curves(df, base_family, axes)
    if curves:
        _panels(fig, curves, "logical depth L (bin centre)", "success (95% Wilson)", (-0.02, 1.02))
    return curves


def success_curves_svg(df: pd.DataFrame, base_family: str, axes: Sequence[str], name: str) -> str:
    """:func:`success_curves` as small multiples, one panel per model."""
    curves = success_curves(df, base_family, axes)
    wanted = " or ".join(axis_title(a) for a in axes)
    return _multiples_svg(
        name, df, base_family, curves, wanted, lambda fig: draw_success_curves(fig, df, base_family, axes)
    )


# ---------------------------------------------------------------------------
# Figure 11: where failed plans stop, per noise level
# ---------------------------------------------------------------------------


def failed_progress_curves(df: pd.DataFrame, base_family: str, axis: str = "noise_ratio") -> list[Curve]:
    """Per model and level of ``axis`` (settings changing only it, the base included):
    the share of failed attempts in each progress bin, at the bin's middle, with 95%
    Wilson intervals, from ``analysis/sweep_failed_progress``."""
    part = _settings_on(df, base_family, (axis,)) if not df.empty else df
    if part.empty or part["family"].nunique() < 2:
        return []
    part = part.assign(_level=part["_axes"].map(lambda d: d.get(axis)))
    levels = sorted(dict.fromkeys(part["family"]), key=lambda f: _sort_key(part, f))
    models, _ = _shown_models(part)
    curves = []
    for model in models:
        for family in levels:
            g = part[(part["model"] == model) & (part["family"] == family)].sort_values("bin_low")
            if g.empty:
                continue
            level = f"{_SHORT.get(axis, axis)} {_value(g['_level'].iloc[0])}"
            label = f"{level} (n={int(g['failures'].iloc[0])})"
            curves.append(_curve(g, model, label, level, ("bin_centre", "share", "share_low", "share_high")))
    return curves


def _sort_key(part: pd.DataFrame, family: str) -> tuple[float, str]:
    level = part.loc[part["family"] == family, "_level"].iloc[0]
    number = float(level) if isinstance(level, int | float) else math.inf
    return number, str(level)


def draw_failed_progress(
    fig: Figure, df: pd.DataFrame, base_family: str, axis: str = "noise_ratio"
) -> list[Curve]:
    curves = failed_progress_curves(df, base_family, axis)
    if curves:
        _panels(
            fig,
            curves,
            "progress ratio of the failed plan (bins of 0.1)",
            "share of failed attempts",
            None,
            legend_per_panel=True,
        )
        for ax in fig.axes:
            ax.set_xlim(0.0, 1.0)
            ax.set_ylim(bottom=0.0)
    return curves


def failed_progress_svg(df: pd.DataFrame, base_family: str, axis: str = "noise_ratio") -> str:
    """:func:`failed_progress_curves` as small multiples, one panel per model."""
    name = f"seqbench-failed-progress-{base_family}-{axis}"
    curves = failed_progress_curves(df, base_family, axis)
    return _multiples_svg(
        name,
        df,
        base_family,
        curves,
        axis_title(axis),
        lambda fig: draw_failed_progress(fig, df, base_family, axis),
    )


# ---------------------------------------------------------------------------
# Figures 3, 4 and 14: mean progress and output tokens against a swept axis
# ---------------------------------------------------------------------------

#: measure -> (mean, low, high, y label)
PANEL_MEASURES = {
    "progress": (
        "progress_ratio_mean",
        "progress_low",
        "progress_high",
        "mean progress ratio (95% interval)",
    ),
    "tokens": (
        "output_tokens_mean",
        "output_tokens_low",
        "output_tokens_high",
        "mean output tokens (95% interval)",
    ),
}


def panel_curves(rows: pd.DataFrame, axis: str, measure: str) -> list[Curve]:
    """Per (model, held setting): ``measure`` against ``axis`` with its 95% interval,
    from ``analysis/sweep_panels`` rows of one base family. A text axis is laid out at
    0, 1, ... in its values' order."""
    mean, low, high, _ = PANEL_MEASURES[measure]
    part = rows[(rows["axis"] == axis) & rows[mean].notna()]
    if part.empty:
        return []
    if part["x"].isna().any():
        labels = sorted(set(part["x_label"]))
        part = part.assign(x=part["x_label"].map(labels.index).astype(float))
    curves = []
    for (model, held), g in part.groupby(["model", "held"], sort=True):
        g = g.sort_values("x", kind="mergesort")
        label = str(model) + (f" ({held})" if held else "")
        curves.append(_curve(g, "", label, str(model), ("x", mean, low, high), style=str(held)))
    return curves


def draw_panel(fig: Figure, rows: pd.DataFrame, axis: str, measure: str) -> list[Curve]:
    curves = panel_curves(rows, axis, measure)
    if not curves:
        return curves
    ax = fig.add_subplot()
    colours = _colours(sorted({c.colour for c in curves}))
    helds = sorted({c.style for c in curves})
    for c in curves:
        _errorbars(ax, c, colours[c.colour], _STYLES[helds.index(c.style) % len(_STYLES)])
    part = rows[rows["axis"] == axis]
    if part["x"].isna().any():
        labels = sorted(set(part["x_label"]))
        ax.set_xticks(range(len(labels)), labels)
    elif np.all(np.mod(part["x"].to_numpy(dtype=float), 1) == 0):
        # an integer axis (num_keys, B): no fractional ticks such as 0.8 .. 2.2
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(axis_title(axis))
    ax.set_ylabel(PANEL_MEASURES[measure][3])
    if measure == "progress":
        ax.set_ylim(-0.02, 1.02)
    else:
        ax.set_ylim(bottom=0.0)
    ax.margins(x=0.15)
    fig.legend(loc="outside right upper", fontsize=_SMALL, frameon=False)
    return curves


def panel_svg(rows: pd.DataFrame, axis: str, measure: str) -> str:
    base = str(rows["base_family"].iloc[0]) if len(rows) else ""
    name = f"sweep-{base}-{axis}-{measure}"
    if not panel_curves(rows, axis, measure):
        what = "output token counts" if measure == "tokens" else "progress"
        return _empty(name, f"no {what} to draw against {axis_title(axis)}")
    with _drawing(name, (7.4, 3.6)) as fig:
        fig.set_layout_engine("constrained")
        draw_panel(fig, rows, axis, measure)
        return _svg(fig, name)


# ---------------------------------------------------------------------------
# the report's parts
# ---------------------------------------------------------------------------


def sweep_figures(tables: Mapping[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
    """Per swept base family: Figure 11 (``failed_progress``), 12 (``noise_shuffle``),
    15 (``prompt_variants``) and, per swept axis, the progress and token panels
    (``panels[axis]["progress"|"tokens"]``), all marked safe (our own SVG); and per
    figure ``<name>_same``, :func:`coinciding`'s sentence for its caption (plain text)."""
    by_length = tables.get("sweep_by_length", pd.DataFrame())
    failed = tables.get("sweep_failed_progress", pd.DataFrame())
    panels = tables.get("sweep_panels", pd.DataFrame())
    settings = tables.get("sweep", pd.DataFrame())
    if settings.empty:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for base in sorted(set(settings["base_family"].astype(str))):
        rows = panels[panels["base_family"].astype(str) == base] if not panels.empty else panels
        out[base] = {
            "failed_progress_same": coinciding(failed_progress_curves(failed, base)),
            "noise_shuffle_same": coinciding(success_curves(by_length, base, NOISE_SHUFFLE)),
            "prompt_variants_same": coinciding(success_curves(by_length, base, PROMPT_AXES)),
            "failed_progress": Markup(failed_progress_svg(failed, base)),
            "noise_shuffle": Markup(
                success_curves_svg(by_length, base, NOISE_SHUFFLE, f"seqbench-noise-shuffle-{base}")
            ),
            "prompt_variants": Markup(
                success_curves_svg(by_length, base, PROMPT_AXES, f"seqbench-prompt-variants-{base}")
            ),
            "panels": {
                axis: {m: Markup(panel_svg(rows, axis, m)) for m in PANEL_MEASURES}
                for axis in (swept_axes(rows) if not rows.empty else [])
            },
        }
    return out


def example_prompts(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The example prompts (``analysis/example_prompts``) for the page: per family label
    and mode (the base maze first), its instance and messages. Text stays plain: the
    page's autoescaping shows it as written, a ``<script>`` in it included."""
    if df.empty:
        return []
    out = []
    for (family, mode), g in df.groupby(["family", "mode"], sort=True):
        g = g.sort_values("message", kind="mergesort")
        out.append(
            {
                "family": str(family),
                "mode": str(mode),
                "instance_id": str(g["instance_id"].iloc[0]),
                "L": int(g["solution_length"].iloc[0]),
                "sha256": str(g["prompt_sha256"].iloc[0]),
                "messages": [
                    {"role": str(r), "content": str(c)} for r, c in zip(g["role"], g["content"], strict=True)
                ],
            }
        )
    return sorted(out, key=lambda p: (p["family"] != "maze" or p["mode"] != "plan", p["family"], p["mode"]))
