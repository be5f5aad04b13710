"""The report's world-study parts that depend on the horizon: the summary a world-only
run opens with, the sentence that names the horizon and what the other setting would
change, the figure of a cell grid or a fine scan, and the T scan laid out as the paper's
Table 7. Pure: analysis tables in, DataFrames, text and SVG out (``reports/html.py``
turns the DataFrames into HTML tables).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from markupsafe import Markup

from horizonbench.reports import plots
from horizonbench.reports.world_plots import is_fine_scan, scan_curve_svg

__all__ = [
    "SUMMARY_COLUMNS",
    "T_FINE_COLUMNS",
    "horizon_note",
    "summary_rows",
    "t_fine_figure",
    "t_fine_rows",
    "world_figure",
]

#: (column, header, format) of the world summary and of the Table 7 layout
SUMMARY_COLUMNS = [
    ("env", "environment", "text"),
    ("model", "agent", "text"),
    ("cells", "cells", "int"),
    ("unwinnable", "unwinnable (every L* > T)", "int"),
    ("episodes", "episodes measured", "int"),
    ("p", "success (pooled)", "pct"),
    ("sc_star", "sc* per dd", "text"),
    ("horizon", "horizon", "text"),
]
T_FINE_COLUMNS = [
    ("t_label", "T", "text"),
    ("model", "agent", "text"),
    ("successes", "succ", "int"),
    ("n", "n", "int"),
    ("p", "p̂", "num"),
    ("wilson_ci", "Wilson 95%", "pct-range"),
    ("n_unwinnable", "T < L* (left out)", "int"),
    ("p_all", "p̂ with them as failures", "num"),
]


def _rows(df: pd.DataFrame | None, env: str | None = None) -> pd.DataFrame:
    if df is None or df.empty:
        return pd.DataFrame()
    return df[df["env"] == env] if env is not None else df


def _label(tables: Mapping[str, pd.DataFrame]) -> str:
    grid = tables.get("grid")
    if grid is None or grid.empty or "horizon" not in grid.columns:
        return ""
    return ", ".join(sorted({str(h) for h in grid["horizon"] if isinstance(h, str) and h}))


def horizon_caption(tables: Mapping[str, pd.DataFrame]) -> str:
    """How T was set, for a table's caption: a rate read at the paper's fixed T and one
    at T = ceil(1.5 L*) differ, so no paper-table caption goes without it."""
    return _label(tables) or "not recorded (a run from before the horizon setting)"


def _sc_star_text(crit: pd.DataFrame) -> str:
    parts = []
    for c in crit.sort_values("dd").itertuples():
        if math.isnan(c.sc_star):
            parts.append(
                f"dd {int(c.dd)}: none ({c.reason})" if isinstance(c.reason, str) else f"dd {int(c.dd)}: none"
            )
        else:
            ci = "" if math.isnan(c.sc_star_low) else f" [{c.sc_star_low:.1f}, {c.sc_star_high:.1f}]"
            parts.append(f"dd {int(c.dd)}: {c.sc_star:.2f}{ci}")
    return "; ".join(parts) or "-"


def summary_rows(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (environment, agent): its cells, those no agent could win at the
    run's T, the episodes measured, the pooled success rate, sc* per dd with its
    interval, and the horizon. What a world-only report opens with."""
    grid = tables.get("grid")
    if grid is None or grid.empty:
        return pd.DataFrame(columns=[c for c, _, _ in SUMMARY_COLUMNS])
    crit = tables.get("critical_points", pd.DataFrame())
    rows = []
    for (env, model), part in grid.groupby(["env", "model"], sort=True):
        n = int(part["n"].sum())
        c = crit[(crit["env"] == env) & (crit["model"] == model)] if len(crit) else crit
        rows.append(
            {
                "env": env,
                "model": model,
                "cells": len(part),
                "unwinnable": int((part["n"] == 0).sum()),
                "episodes": n,
                "p": float(part["successes"].sum()) / n if n else math.nan,
                "sc_star": _sc_star_text(c) if len(c) else "-",
                "horizon": _label(tables),
            }
        )
    return pd.DataFrame(rows)


def _cells_text(cells: pd.DataFrame) -> str:
    """``sc 40 at dd 1, 2, 4, 6; sc 20 at dd 4, 6``: cells grouped by sc, largest first."""
    parts = []
    for sc, part in cells.groupby("sc", sort=True):
        parts.append(f"sc {int(sc)} at dd {', '.join(str(int(d)) for d in sorted(part['dd']))}")
    return "; ".join(reversed(parts))


def horizon_note(tables: Mapping[str, pd.DataFrame], env: str) -> str:
    """One paragraph: the horizon this run used and what the other setting would change,
    from the ``horizons`` table (every world's L* against the run's T and the regime's)."""
    label = horizon_caption(tables)
    check = _rows(tables.get("horizons"), env)
    if check.empty:
        return f"Horizon: {label}."
    regime_t = int(check["regime_t"].max())
    worlds = int(check["worlds"].sum())
    at_paper = int(check["unwinnable_at_regime_t"].sum())
    dead = check[check["unwinnable_at_regime_t"] == check["worlds"]]
    lost = f"{at_paper} of {worlds} worlds ({at_paper / worlds:.0%})" if worlds else "no world"
    if label.startswith("relative"):
        text = (
            f"Horizon: {label}, so every world fits in its T and every cell has a rate. "
            f"At the paper's T = {regime_t} (horizon: paper), {lost} would be unwinnable (L* > {regime_t})"
        )
        text += f", and no agent could win {_cells_text(dead)} at all." if len(dead) else "."
        return text + " The easy cells get less slack here than at the paper's T (T is 1.5 L*, not 40)."
    short = int(check["unwinnable"].sum())
    text = (
        f"Horizon: {label}. {short} of {worlds} worlds are longer than T (L* > T) and left out of every rate"
    )
    text += f"; no agent can win {_cells_text(dead)} (hatched, n 0)." if len(dead) else "."
    if short:
        text += " The grid's p_all counts them as failures, as the paper's Table 2 does."
    return text + " A relative horizon (horizon: relative, T = ceil(1.5 L*)) would measure every world."


def world_figure(tables: Mapping[str, pd.DataFrame], env: str, excluded: pd.DataFrame) -> Markup:
    """The figure of one environment: a success curve against sc per agent for a fine
    scan (one dd, many sc), else the (sc, dd) phase diagram."""
    grid = tables["grid"]
    if len(grid) and is_fine_scan(grid, env):
        rows = grid[grid["env"] == env]
        crit = _rows(tables.get("critical_points"), env)
        marks = {str(c.model): float(c.sc_star) for c in crit.itertuples()} if len(crit) else {}
        dd = int(rows["dd"].iloc[0])
        title = f"{env}, dd = {dd}, horizon {_label(tables) or '?'}"
        title += " (X: unwinnable, every L* > T)" if (rows["n"] == 0).any() else ""
        svg = scan_curve_svg(rows, f"scan-{env}", "sc", "state cardinality sc", title, marks)
        return Markup(svg)
    return Markup(plots.phase_diagram_svg(grid, env, tables["critical_points"], excluded))


def t_fine_rows(tables: Mapping[str, pd.DataFrame], env: str) -> pd.DataFrame:
    """The T scan of ``env`` as Table 7: one row per (T, agent), Table 4's levels
    starred, in T order."""
    t = _rows(tables.get("t_fine"), env)
    if t.empty:
        return t
    t = t.sort_values(["t", "model"]).reset_index(drop=True)
    return t.assign(
        t_label=[
            f"{int(v)}*" if ref else str(int(v)) for v, ref in zip(t["t"], t["coarse_reference"], strict=True)
        ]
    )


def t_fine_figure(tables: Mapping[str, pd.DataFrame], env: str) -> Markup | None:
    """Success against T per agent with Wilson bars (Figure 7b), or None without a scan."""
    t = _rows(tables.get("t_fine"), env)
    if t.empty:
        return None
    sc, dd = int(t["sc"].iloc[0]), int(t["dd"].iloc[0])
    title = f"{env}, T scan at sc = {sc}, dd = {dd} ({_label(tables) or '?'} backdrop)"
    return Markup(scan_curve_svg(t, f"tfine-{env}", "t", "horizon T", title))
