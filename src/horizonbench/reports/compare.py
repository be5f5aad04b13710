"""The comparison of runs as one self-contained HTML page.

Like the run report, the page carries its CSS and figures inline and loads nothing.
Every text from the runs (folder names, model names, notes, settings) goes through
Jinja2's autoescaping; only the SVG drawn here from numbers is marked safe.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from markupsafe import Markup

from horizonbench.analysis.compare import FLAG_METHOD, latest_moves, settings
from horizonbench.reports.compare_plots import l0_trend_svg
from horizonbench.reports.horizon_parts import METRIC_LABEL, interval_text, value_text
from horizonbench.reports.html import _ENV as REPORT_ENV

# the report's own environment: the same loader, autoescaping and strictness
_ENV = REPORT_ENV
#: the mark shown beside a run's L0 when it moved, by direction
_MARKS = {"up": "▲", "down": "▼"}


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _num(value: Any) -> str:
    if _missing(value):
        return "—"
    v = float(value)
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return f"{v:.1f}"


def _interval(low: Any, high: Any) -> str:
    if _missing(low) and _missing(high):
        return ""
    return f"{_num(low)} – {_num(high)}"


def _text(value: Any) -> str:
    return "—" if _missing(value) else str(value)


def _cell(r: Any) -> dict[str, Any]:
    """One run's L0 of one model: value, interval, and its move against the previous run."""
    moved = None if _missing(r.moved) else str(r.moved)
    why = ""
    if moved is not None and not _missing(r.previous_run):
        prev = _interval(r.previous_L0_low, r.previous_L0_high)
        where = {"up": "above", "down": "below", "within": "inside"}[moved]
        why = f"{where} the interval {prev} of {r.previous_run}"
        if not _missing(r.intervals_disjoint) and bool(r.intervals_disjoint):
            why += "; the intervals are disjoint"
    return {
        "L0": _num(r.L0),
        "interval": _interval(r.L0_low, r.L0_high),
        "moved": moved if moved in _MARKS else None,
        "mark": _MARKS.get(moved or "", ""),
        "why": why,
        "n": "" if _missing(r.n_attempts) else f"{int(r.n_attempts):,} attempts",
        "note": "" if _missing(r.note) else str(r.note),
    }


def _grid(rows: pd.DataFrame, runs: list[str]) -> list[dict[str, Any]]:
    """One row per model, one cell per run of the setting (None where the model has no fit)."""
    out = []
    for model in sorted(str(m) for m in rows["model"].unique()):
        g = rows[rows["model"] == model]
        by_run = {str(r.run): _cell(r) for r in g.itertuples()}
        specs = [s for s in dict.fromkeys(g["model_spec"].astype(str)) if s]
        out.append({"model": model, "specs": specs, "cells": [by_run.get(run) for run in runs]})
    return out


def _move_row(r: Any) -> dict[str, Any]:
    spec_change = ""
    if not _missing(r.previous_model_spec) and str(r.previous_model_spec) != str(r.model_spec):
        spec_change = f"{r.previous_model_spec} → {r.model_spec}"
    return {
        "model": str(r.model),
        "runs": int(r.runs),
        "run": str(r.run),
        "L0": _num(r.L0),
        "interval": _interval(r.L0_low, r.L0_high),
        "previous_run": _text(r.previous_run),
        "previous_L0": _num(r.previous_L0),
        "previous_interval": _interval(r.previous_L0_low, r.previous_L0_high),
        "moved": "—" if _missing(r.moved) else str(r.moved),
        "flag": str(r.moved) if str(r.moved) in _MARKS else None,
        "mark": _MARKS.get(str(r.moved), ""),
        "disjoint": "—" if _missing(r.intervals_disjoint) else ("yes" if r.intervals_disjoint else "no"),
        "spec_change": spec_change,
    }


def _labelled(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows whose ``model`` names the success definition too when the setting's fits
    count success more than one way ("noisy (exact_match)"), so each line is one series."""
    if rows["success_definition"].nunique() < 2:
        return rows
    return rows.assign(
        model=[f"{m} ({d})" for m, d in zip(rows["model"], rows["success_definition"], strict=True)]
    )


def _sections(runs: pd.DataFrame, table: pd.DataFrame) -> list[dict[str, Any]]:
    order = [str(r) for r in runs["run"]]
    latest = latest_moves(table)
    out = []
    for i, s in enumerate(settings(table).itertuples()):
        rows = _labelled(table[table["setting_id"] == s.setting_id])
        mle = rows[rows["method"] == FLAG_METHOD]
        others = rows[rows["method"] != FLAG_METHOD]
        present = set(rows["run"].astype(str))
        setting_runs = [r for r in order if r in present]
        trend = None
        if len(setting_runs) > 1 and not mle.empty:
            trend = Markup(l0_trend_svg(mle, setting_runs, f"trend-{i}"))
        moves = _labelled(latest[latest["setting_id"] == s.setting_id])
        definitions = sorted(set(table.loc[table["setting_id"] == s.setting_id, "success_definition"]))
        out.append(
            {
                "anchor": f"setting-{i}",
                "family": str(s.family),
                "setting_id": str(s.setting_id),
                "setting": str(s.setting),
                "success": ", ".join(str(d) for d in definitions),
                "runs": setting_runs,
                "mle": _grid(mle, setting_runs),
                "others": [
                    {"method": str(method), "rows": _grid(part, setting_runs)}
                    for method, part in others.groupby("method", sort=True)
                ],
                "trend": trend,
                "moves": [_move_row(r) for r in moves.itertuples()],
                "n_moved": int(moves["moved"].isin(list(_MARKS)).sum()),
            }
        )
    return out


def _board_rows(board: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The leaderboard's rows as the page shows them: metric, family, model, latest
    value with its interval, the previous run's, moved, trend and history."""
    if board is None or board.empty:
        return []
    rows = []
    for r in board.to_dict("records"):
        trend = r["trend"]
        rows.append(
            {
                "metric": METRIC_LABEL.get(r["metric"], r["metric"]),
                "family": r["family"],
                "model": r["model"],
                "value": value_text(r["value"]),
                "interval": interval_text(r["low"], r["high"]),
                "n": int(r["n_attempts"]),
                "design": r["design"],
                "runs": int(r["runs"]),
                "latest_run": r["latest_run"],
                "previous": "—"
                if r["previous_run"] is None
                else f"{value_text(r['previous_value'])} ({r['previous_run']})",
                "moved": r["moved"] or "",
                "trend": "—" if trend is None or pd.isna(trend) else f"{trend:+.1%} per run",
                "history": r["history"],
            }
        )
    return rows


def render_compare(
    *, runs: pd.DataFrame, table: pd.DataFrame, title: str | None = None, board: pd.DataFrame | None = None
) -> str:
    """The page comparing ``runs`` (series order, from ``analysis.compare.order_runs``)
    through ``table`` (``analysis.compare.compare_fits``), opened by the leaderboard of
    their horizon cards (``board``: ``analysis.horizons.leaderboard``); identical inputs
    give identical bytes."""
    sections = _sections(runs, table)
    run_rows = [
        {
            "run": str(r.run),
            "started_at": _text(r.started_at),
            "finished_at": _text(r.finished_at),
            "run_name": _text(r.run_name),
            "seed": _text(r.seed),
            "git_sha": _text(r.git_sha),
            "horizonbench": _text(r.horizonbench),
            "path": str(r.run_path),
        }
        for r in runs.itertuples()
    ]
    context = {
        "title": title
        or f"horizonbench: comparison of {len(run_rows)} run{'s' if len(run_rows) != 1 else ''}",
        "runs": run_rows,
        "sections": sections,
        "board": _board_rows(board),
        "n_moved": sum(s["n_moved"] for s in sections),
        "flag_method": FLAG_METHOD,
    }
    return _ENV.get_template("compare.html").render(**context)
