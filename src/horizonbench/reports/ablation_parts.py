"""The report's one-axis parts of a world study: the ablations around the backdrop (the
paper's Table 4, drawn as its Figure 6) and the cross-sections of the (sc, dd) grid
(Figure 4), as curves (``reports/axis_curves.py``) with captions that say only what the
figure draws. Pure: analysis tables in, DataFrames, text and SVG out.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from markupsafe import Markup

from horizonbench.analysis.ablations import level_order
from horizonbench.reports.axis_curves import Panel, axis_curves_svg

__all__ = [
    "ABLATION_COLUMNS",
    "ablation_caption",
    "ablation_figure",
    "ablation_rows",
    "cross_section_caption",
    "cross_section_figure",
]

#: (column, header, format) of the Table 4 layout
ABLATION_COLUMNS = [
    ("axis", "axis", "text"),
    ("level_label", "level", "text"),
    ("model", "agent", "text"),
    ("sc", "sc", "int"),
    ("dd", "dd", "int"),
    ("successes", "succ", "int"),
    ("n", "n", "int"),
    ("p", "p̂", "num"),
    ("wilson_ci", "Wilson 95%", "pct-range"),
    ("n_unwinnable", "T < L* (left out)", "int"),
    ("p_all", "p̂ with T < L* as failures", "num"),
    ("diff", "minus backdrop", "num"),
    ("diff_ci", "95% interval", "num-range"),
    ("pairing", "compared", "text"),
    ("p_holm", "p (Holm)", "num"),
]
#: x-axis labels of the ablated axes
AXIS_LABELS = {
    "horizon": "horizon T",
    "branching": "branching factor",
    "observation": "observation mode",
    "mutation": "mutation level",
}


def _env_rows(tables: Mapping[str, pd.DataFrame], name: str, env: str) -> pd.DataFrame:
    df = tables.get(name)
    if df is None or df.empty:
        return pd.DataFrame()
    return df[df["env"] == env].reset_index(drop=True)


def _pairing(backdrop: bool, paired: bool, pairs: int) -> str:
    if backdrop:
        return "backdrop"
    if not paired:
        return "unpaired"
    return f"paired, {pairs} worlds" if pairs else "paired, no world measured at both"


def ablation_rows(tables: Mapping[str, pd.DataFrame], env: str) -> pd.DataFrame:
    """The ablations of ``env`` as Table 4, with the pairing spelled out and the
    backdrop's level marked ``*``; empty without ablations."""
    t = _env_rows(tables, "ablations", env)
    if t.empty:
        return t
    # Table 4's order: axis, then level, then agent
    rank = {axis: i for i, axis in enumerate(AXIS_LABELS)}
    t = t.assign(
        _a=[rank.get(str(a), len(rank)) for a in t["axis"]],
        _l=[level_order(str(a), str(v)) for a, v in zip(t["axis"], t["level"], strict=True)],
    )
    t = t.sort_values(["_a", "_l", "model"], kind="stable").drop(columns=["_a", "_l"]).reset_index(drop=True)
    backdrop = t["is_backdrop"].astype(bool)
    pairing = [
        _pairing(b, p, int(k))
        for b, p, k in zip(backdrop, t["paired"].astype(bool), t["n_pairs"], strict=True)
    ]
    return t.assign(
        level_label=[f"{v}*" if b else str(v) for v, b in zip(t["level"], backdrop, strict=True)],
        pairing=pairing,
        wilson_ci=list(zip(t["wilson_low"], t["wilson_high"], strict=True)),
        diff_ci=list(zip(t["diff_low"], t["diff_high"], strict=True)),
    )


#: panels side by side in the ablation figure before it wraps to a new row
MAX_PANELS_PER_ROW = 4


def _cell_text(t: pd.DataFrame) -> str:
    """The ablated cells by name, or, beyond three (a whole grid ablated), their count and
    ranges: a title that names ten cells runs off the figure."""
    cells = sorted({(int(s), int(d)) for s, d in zip(t["sc"], t["dd"], strict=True)})
    if len(cells) <= 3:
        return ", ".join(f"sc = {s}, dd = {d}" for s, d in cells)
    scs, dds = sorted({s for s, _ in cells}), sorted({d for _, d in cells})
    return f"{len(cells)} cells (sc {', '.join(map(str, scs))} x dd {', '.join(map(str, dds))})"


def ablation_figure(tables: Mapping[str, pd.DataFrame], env: str) -> Markup | None:
    """A panel per ablated axis: success against its levels per agent, Wilson bars, the
    backdrop's level shaded (the paper's Figure 6); None without ablations."""
    t = _env_rows(tables, "ablations", env)
    if t.empty:
        return None
    panels: list[Panel] = []
    for (axis, sc, dd), part in t.groupby(["axis", "sc", "dd"], sort=False):
        levels = list(dict.fromkeys(str(v) for v in part["level"]))
        base = part.loc[part["is_backdrop"].astype(bool), "level"]
        several = len(t[["sc", "dd"]].drop_duplicates()) > 1
        title = AXIS_LABELS.get(str(axis), str(axis)) + (f" (sc {sc}, dd {dd})" if several else "")
        panels.append(Panel(part, levels, "level", title, str(base.iloc[0]) if len(base) else None))
    horizon = str(t["horizon"].iloc[0]) if "horizon" in t and t["horizon"].notna().any() else ""
    title = f"{env}: one-axis ablations at {_cell_text(t)}" + (f", backdrop {horizon}" if horizon else "")
    # at most MAX_PANELS_PER_ROW panels a row: a whole ablated grid would be one strip
    rows = [panels[i : i + MAX_PANELS_PER_ROW] for i in range(0, len(panels), MAX_PANELS_PER_ROW)]
    return Markup(axis_curves_svg(rows, f"ablations-{env}", title))


def ablation_caption(tables: Mapping[str, pd.DataFrame], env: str) -> str:
    """What the ablation figure draws, and how the table compares each level."""
    t = _env_rows(tables, "ablations", env)
    if t.empty:
        return ""
    axes = ", ".join(dict.fromkeys(AXIS_LABELS.get(str(a), str(a)) for a in t["axis"]))
    paired = t[~t["is_backdrop"].astype(bool) & t["diff"].notna()]
    all_paired = bool(len(paired)) and bool(paired["paired"].astype(bool).all())
    how = (
        "every level played the backdrop's worlds, so each is compared world by world "
        "(Newcombe's paired interval, McNemar's exact test)"
        if all_paired
        else "levels without a backdrop partner for every world are compared as independent groups "
        "(Newcombe's interval, Fisher's exact test)"
    )
    return (
        f"Success against each level of {axes}, one axis changed at a time from the backdrop "
        f"({_cell_text(t)}; its level shaded and named in the figure, starred in the table), "
        "one line per agent, Wilson 95% bars over "
        "the episodes any agent could win; an X on the axis is a level where no world fits in T "
        f"(T < L*), unwinnable rather than a rate of 0. In the table {how}; p (Holm) is adjusted "
        "over the levels of one agent."
    )


def _sections(g: pd.DataFrame, along: str, fixed: str, levels: list[str], xlabel: str) -> list[Panel]:
    """A panel per value of ``fixed``: success against ``along`` at that value."""
    return [
        Panel(part.assign(level=part[along].astype(int).astype(str)), levels, xlabel, f"{fixed} = {value}")
        for value, part in g.groupby(fixed, sort=True)
    ]


def cross_section_figure(tables: Mapping[str, pd.DataFrame], env: str) -> Markup | None:
    """The grid's one-dimensional cross-sections (Figure 4): success against sc at each
    dd and against dd at each sc, per agent; None for a grid with one sc or one dd."""
    g = _env_rows(tables, "grid", env)
    if g.empty or g["sc"].nunique() < 2 or g["dd"].nunique() < 2:
        return None
    g = g.assign(level=g["sc"].astype(int).astype(str))
    sc_levels = [str(v) for v in sorted(g["sc"].astype(int).unique())]
    dd_levels = [str(v) for v in sorted(g["dd"].astype(int).unique())]
    along_sc = _sections(g, "sc", "dd", sc_levels, "state cardinality sc")
    along_dd = _sections(g, "dd", "sc", dd_levels, "dependency density dd")
    horizon = str(g["horizon"].iloc[0]) if "horizon" in g and g["horizon"].notna().any() else ""
    title = f"{env}: cross-sections of the (sc, dd) grid" + (f", {horizon}" if horizon else "")
    return Markup(axis_curves_svg([along_sc, along_dd], f"sections-{env}", title))


def cross_section_caption(tables: Mapping[str, pd.DataFrame], env: str) -> str:
    """What the cross-section figure draws."""
    g = _env_rows(tables, "grid", env)
    if g.empty or g["sc"].nunique() < 2 or g["dd"].nunique() < 2:
        return ""
    return (
        "The cells of the grid above read one axis at a time: the first row of panels is "
        "success against sc at each dd, the second success against dd at each sc; one line per "
        "agent, Wilson 95% bars over the episodes any agent could win, sc and dd placed in "
        "order, evenly spaced (not to scale). An X on the axis is a cell where no world fits in "
        "T (T < L*)."
    )
