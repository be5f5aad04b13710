"""The report's seqBench parts beyond the first figures: the paper's further figures for
the maze family, a sweep's settings side by side, the violation maps and the browser of
failing answers.

Figures are our own SVG (matplotlib from numbers, or ``maze_map`` with every text
escaped), so they are marked safe; every model answer stays plain text for Jinja's
autoescaping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from markupsafe import Markup

from horizonbench.reports import seqbench_plots, sweep_plots

#: (column, header, kind) of the sweep's settings table; kinds as in html.py
SWEEP_COLUMNS = [
    ("setting", "setting", "text"),
    ("varied", "changes from base", "text"),
    ("model", "model", "text"),
    ("attempts", "attempts", "int"),
    ("L_range", "L range", "int-range"),
    ("success_rate", "success", "pct"),
    ("success_ci", "95% interval", "pct-range"),
    ("progress_ratio_mean", "progress", "num"),
    ("L0", "L0 (MLE)", "num"),
    ("L0_ci", "95% interval", "num-range"),
    ("L0_wls_prefactor", "L0 (WLS, log A - L/L0)", "num"),
    ("L0_wls_origin", "L0 (WLS, -L/L0)", "num"),
    ("output_tokens_mean", "output tokens", "num"),
]
PAIR_COLUMNS = [
    ("model_a", "model a", "text"),
    ("model_b", "model b", "text"),
    ("instances", "shared instances", "int"),
    ("progress_mean_a", "progress a", "num"),
    ("progress_mean_b", "progress b", "num"),
    ("progress_corr", "correlation", "num"),
    ("a_only_solved", "only a solved", "int"),
    ("b_only_solved", "only b solved", "int"),
    ("weaker", "weaker overall", "text"),
    ("inversions", "inversions", "int"),
    ("inversion_share", "inversion share", "pct"),
]
#: longest excerpt of a failing answer shown in the browser
MAX_ANSWER_CHARS = 2000


def _of(df: pd.DataFrame, label: str) -> pd.DataFrame:
    if df.empty or "family" not in df.columns:
        return df
    return df[df["family"].astype(str) == label].reset_index(drop=True)


def seqbench_figures(
    tables: Mapping[str, pd.DataFrame], label: str = "maze", bin_width: int = 1
) -> dict[str, Markup]:
    """seqBench's figures 10, 11, 13 and 3's token panel for one family label (the base
    maze by default: a sweep's settings have their rows in the same tables); binned
    figures draw each bin at its centre (``bin_width``: the analysis' L-bin width)."""
    t = {name: _of(tables.get(name, pd.DataFrame()), label) for name in SEQBENCH_TABLES}
    return {
        "progress_distribution": Markup(seqbench_plots.progress_distribution_svg(t["progress_distribution"])),
        "first_violation_by_length": Markup(
            seqbench_plots.first_violation_by_length_svg(t["first_violation_by_length"])
        ),
        "violation_types_by_length": Markup(
            seqbench_plots.violation_types_by_length_svg(t["violations_by_length"], bin_width)
        ),
        "model_pairs": Markup(
            seqbench_plots.model_pair_scatter_svg(t["instance_progress"], t["model_pairs"])
        ),
        "tokens_by_length": Markup(seqbench_plots.tokens_by_length_svg(t["tokens_by_length"], bin_width)),
    }


SEQBENCH_TABLES = (
    "progress_distribution",
    "first_violation_by_length",
    "violations_by_length",
    "instance_progress",
    "model_pairs",
    "tokens_by_length",
)


def model_pairs(tables: Mapping[str, pd.DataFrame], label: str = "maze") -> pd.DataFrame:
    return _of(tables.get("model_pairs", pd.DataFrame()), label)


def sweep_part(tables: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Per swept family: its settings table and a figure of L0 and one of success
    against every swept axis."""
    settings = tables.get("sweep", pd.DataFrame())
    axes = tables.get("sweep_axes", pd.DataFrame())
    if settings.empty:
        return []
    out = []
    for base, part in settings.groupby("base_family", sort=True):
        rows = axes[axes["base_family"] == base] if not axes.empty else axes
        part = part.assign(
            L_range=list(zip(part["L_min"], part["L_max"], strict=True)),
            success_ci=list(zip(part["success_low"], part["success_high"], strict=True)),
            L0_ci=list(zip(part["L0_low"], part["L0_high"], strict=True)),
        )
        out.append(
            {
                "family": str(base),
                "settings": part,
                "axes": [
                    {
                        "axis": axis,
                        "title": sweep_plots.axis_title(axis),
                        "l0": Markup(sweep_plots.sweep_axis_svg(rows, axis, "L0")),
                        "success": Markup(sweep_plots.sweep_axis_svg(rows, axis, "success_rate")),
                    }
                    for axis in sweep_plots.swept_axes(rows)
                ],
            }
        )
    return out


def _cut(text: Any) -> tuple[str, int]:
    s = "" if text is None else str(text)
    if len(s) <= MAX_ANSWER_CHARS:
        return s, 0
    return s[:MAX_ANSWER_CHARS], len(s) - MAX_ANSWER_CHARS


def failure_browser(examples: Sequence[Mapping[str, Any]], totals: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per model: its shown failing answers (text cut at MAX_ANSWER_CHARS), the
    violations, family labels and L range to filter on, and how many it has in all."""
    by_model: dict[str, list[dict[str, Any]]] = {}
    for ex in examples:
        response, cut = _cut(ex.get("response"))
        rollout = ex.get("mode") == "rollout"
        turn = ex.get("turn")
        step = ex.get("first_violation_step")
        by_model.setdefault(str(ex.get("model")), []).append(
            {
                "family": str(ex.get("family") or ""),
                "instance_id": str(ex.get("instance_id")),
                "sample": ex.get("sample"),
                "L": int(ex.get("solution_length") or 0),
                "violation": str(ex.get("violation") or "none"),
                # the scores' first_violation_step, as the violation maps number it
                "step": None if step is None else int(step),
                # turns count from 0; the reader counts rollout steps from 1
                "rollout_step": int(turn) + 1 if rollout and turn is not None else None,
                "response": response,
                "cut": cut,
            }
        )
    out = []
    for model in sorted(set(by_model) | set(totals)):
        rows = by_model.get(model, [])
        out.append(
            {
                "model": model,
                "rows": rows,
                "total": int(totals.get(model, len(rows))),
                "violations": sorted({r["violation"] for r in rows}),
                "families": sorted({r["family"] for r in rows}),
                "L_min": min((r["L"] for r in rows), default=0),
                "L_max": max((r["L"] for r in rows), default=0),
            }
        )
    return out


def violation_maps(maps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The maps with their SVG marked safe: ``maze_map`` escapes every text it draws."""
    return [{**m, "svg": Markup(m["svg"])} for m in maps]
