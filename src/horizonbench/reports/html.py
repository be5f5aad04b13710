"""Render the analysis tables into one self-contained HTML page.

The page must open offline and years later, so it carries its CSS and figures inline
and loads nothing. Model responses are untrusted text: they go through Jinja2's
autoescaping (never ``|safe``) and are truncated, so a hostile answer can neither
inject markup nor bloat the report. Only our own SVG is marked safe.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
import pandas as pd
import yaml
from markupsafe import Markup

from horizonbench.analysis.decay import DEFAULT_SUCCESS_DEFINITION, SUCCESS_DEFINITIONS
from horizonbench.datasets.maze.categories import category_of
from horizonbench.reports import (
    ablation_parts,
    horizon_parts,
    plots,
    seqbench_figures,
    seqmodel_parts,
    world_parts,
)
from horizonbench.reports import seqbench_parts as parts
from horizonbench.reports import world_paper_parts as papers

#: longest excerpt of a model answer shown in the report
MAX_RESPONSE_CHARS = parts.MAX_ANSWER_CHARS

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("horizonbench.reports", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)

#: (column, header, kind) for each table; kind picks the number format
_OVERALL = [
    ("family", "family", "text"),
    ("model", "model", "text"),
    ("attempts", "attempts", "int"),
    ("instances", "instances", "int"),
    ("success_rate", "success", "pct"),
    ("exact_match_rate", "exact match", "pct"),
    ("valid_rate", "valid plan", "pct"),
    ("progress_ratio_mean", "progress", "num"),
    ("precision_mean", "precision (multiset)", "num"),
    ("precision_positional_mean", "precision (positional)", "num"),
    ("recall_mean", "recall", "num"),
    ("invalid_output_share", "invalid output", "pct"),
]
_FITS = [
    ("model", "model", "text"),
    ("method", "method", "text"),
    ("success_definition", "success counted", "text"),
    ("L0", "L0", "num"),
    ("L0_low", "CI low", "num"),
    ("L0_high", "CI high", "num"),
    ("A", "A", "num"),
    ("n_bins_used", "bins used", "int"),
    ("n_bins_dropped", "bins dropped", "int"),
    ("n_attempts", "attempts", "int"),
    ("converged", "converged", "text"),
    ("note", "note", "text"),
]
_BY_LENGTH = [
    ("model", "model", "text"),
    ("L", "L", "int"),
    ("attempts", "attempts", "int"),
    ("instances", "instances", "int"),
    ("successes", "successes", "int"),
    ("success_rate", "success", "pct"),
    ("exact_match_rate", "exact", "pct"),
    ("valid_rate", "valid", "pct"),
    ("progress_ratio_mean", "progress", "num"),
    ("progress_ratio_sem", "± sem", "num"),
    ("precision_mean", "precision (multiset)", "num"),
    ("precision_positional_mean", "precision (positional)", "num"),
    ("recall_mean", "recall", "num"),
]
_VIOLATIONS = [
    ("model", "model", "text"),
    ("violation", "violation", "text"),
    ("category", "seqBench category", "text"),
    ("count", "count", "int"),
    ("share", "share", "pct"),
]
_EPS = [
    ("family", "family", "text"),
    ("mode", "mode", "text"),
    ("model", "model", "text"),
    ("eps", "eps", "num"),
    ("eps_ci", "95% interval", "num-range"),
    ("n_attempts", "attempts", "int"),
    ("successes", "successes", "int"),
    ("note", "note", "text"),
]
_BY_N = [
    ("family", "family", "text"),
    ("mode", "mode", "text"),
    ("model", "model", "text"),
    ("n", "n", "int"),
    ("L_mean", "mean L", "num"),
    ("attempts", "attempts", "int"),
    ("success_rate", "observed success", "pct"),
    ("predicted", "predicted success", "pct"),
    ("predicted_ci", "95% of observed shares", "pct-range"),
    ("move_legality_mean", "move legality", "pct"),
    ("optimality_gap_mean", "optimality gap (solved)", "pct"),
    ("progress_mean", "distance closed", "pct"),
    ("best_progress_mean", "closest reached", "pct"),
]
_PUZZLE_VIOLATIONS = [
    ("family", "family", "text"),
    ("mode", "mode", "text"),
    ("model", "model", "text"),
    ("violation", "violation", "text"),
    ("count", "count", "int"),
    ("share", "share", "pct"),
]

#: world-model study tables (``analysis/worlds.py``)
_W_GRID = [
    ("model", "model", "text"),
    ("sc", "sc", "int"),
    ("dd", "dd", "int"),
    ("n", "episodes", "int"),
    ("p", "success", "pct"),
    ("wilson_ci", "Wilson 95%", "pct-range"),
    ("budget_exceeded", "budget stops (failures)", "int"),
    ("p_finished", "success without them", "pct"),
    ("n_unwinnable", "T < L* (left out)", "int"),
    ("horizon", "horizon", "text"),
]
_W_CRITICAL = [
    ("model", "model", "text"),
    ("dd", "dd", "int"),
    ("sc_star", "sc*", "num"),
    ("sc_star_ci", "bootstrap 95%", "num-range"),
    ("bracket", "between cells", "num-range"),
    ("reason", "not bracketed", "text"),
    ("horizon", "horizon", "text"),
]
_W_CLIFFS = [
    ("model", "model", "text"),
    ("dd", "dd", "int"),
    ("sc_from", "sc from", "int"),
    ("sc_to", "sc to", "int"),
    ("drop", "drop", "pct"),
    ("mn_z", "MN z", "num"),
    ("mn_p", "MN p (H0: drop ≤ δ0)", "num"),
    ("abrupt", "Definition 1", "text"),
]
_W_BAND = [
    ("model", "model", "text"),
    ("dd", "dd", "int"),
    ("w_trans", "W_trans", "int"),
    ("sc_in_band", "sc in band", "text"),
]
_W_CONTRASTS = [
    ("model", "model", "text"),
    ("dd", "dd", "int"),
    ("sc_from", "sc from", "int"),
    ("sc_to", "sc to", "int"),
    ("cohens_h", "Cohen's h", "num"),
    ("cohens_h_label", "", "text"),
    ("mw_p", "Mann-Whitney p (Jaccard)", "num"),
    ("mw_p_holm", "Holm", "num"),
    ("mw_p_bh", "BH", "num"),
    ("hodges_lehmann", "HL shift", "num"),
    ("cliffs_delta", "Cliff's δ", "num"),
    ("cliffs_delta_label", "", "text"),
]
_W_LAGS = [
    ("model", "model", "text"),
    ("n_episodes", "episodes", "int"),
    ("n_failed", "failed", "int"),
    ("count", "with τ_W and τ_A", "int"),
    ("median", "median τ_W − τ_A", "num"),
    ("share_world_first", "world state first", "pct"),
    ("share_simultaneous", "same step", "pct"),
    ("share_action_first", "action first", "pct"),
    ("onset_mean", "mean onset lag", "num"),
    ("onset_mean_low", "low", "num"),
    ("onset_mean_high", "high", "num"),
]
_W_STEPS = [
    ("model", "model", "text"),
    ("sc", "sc", "int"),
    ("dd", "dd", "int"),
    ("episodes", "episodes", "int"),
    ("mean_jaccard", "Jaccard", "num"),
    ("consistency_rate", "consistent", "pct"),
    ("dependency_accuracy", "dependency correct", "pct"),
    ("self_check_accuracy", "self-check correct", "pct"),
    ("invalid_per_episode", "invalid / episode", "num"),
    ("world_state_collapses", "world-state collapses", "int"),
    ("action_validity_collapses", "action collapses", "int"),
    ("compound_collapses", "compound", "int"),
    ("format_collapses", "format (unusable answers)", "int"),
]
_W_EXCLUDED = [
    ("model", "model", "text"),
    ("sc", "sc", "int"),
    ("dd", "dd", "int"),
    ("episodes", "episodes", "int"),
    ("horizon_short", "T < L* (left out)", "int"),
]
#: the model agents (``analysis.worlds.harness``): memory modes compared
_W_HARNESS = [
    ("model", "model", "text"),
    ("memory", "memory", "text"),
    ("prompt_version", "prompt", "text"),
    ("episodes", "episodes", "int"),
    ("budget_exceeded", "budget stops (failures)", "int"),
    ("format_failures", "format failures", "int"),
    ("measured", "measured", "int"),
    ("successes", "won", "int"),
    ("p", "success", "pct"),
    ("wilson_ci", "Wilson 95%", "pct-range"),
    ("p_finished", "success without budget stops", "pct"),
    ("mean_jaccard", "Jaccard", "num"),
    ("share_world_first", "τ_W before τ_A", "pct"),
    ("lag_count", "of failed with both", "int"),
    ("mean_lag", "mean τ_W − τ_A", "num"),
]
_W_HARNESS_CALLS = [
    ("model", "model", "text"),
    ("memory", "memory", "text"),
    ("steps", "steps", "int"),
    ("calls", "calls", "int"),
    ("calls_per_step", "calls / step", "num"),
    ("repairs", "repairs", "int"),
    ("fallbacks", "fallbacks", "int"),
    ("input_tokens", "input tokens", "int"),
    ("output_tokens", "output tokens", "int"),
]
_W_BUDGET = [
    ("model", "model", "text"),
    ("sc", "sc", "int"),
    ("dd", "dd", "int"),
    ("episodes", "episodes", "int"),
    ("budget_exceeded", "budget stops (counted as failures)", "int"),
    ("measured", "measured (in the rate)", "int"),
    ("budget_detail", "limit reached (an example)", "text"),
]


def _harness_part(harness: pd.DataFrame, budget: pd.DataFrame) -> dict[str, Any] | None:
    """The tables of one environment's harness part, or None without model agents."""
    if harness.empty:
        return None
    modes = _with_range(harness, "wilson_ci", "wilson_low", "wilson_high")
    return {
        "modes": _table(modes, _W_HARNESS),
        "budget": _table(budget, _W_BUDGET),
        "calls": _table(harness, _W_HARNESS_CALLS),
    }


def _worlds(tables: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """One section per environment: its phase diagram and tables, and the harness part
    when model agents played it."""
    grid = _with_range(tables["grid"], "wilson_ci", "wilson_low", "wilson_high")
    crit = _with_range(tables["critical_points"], "sc_star_ci", "sc_star_low", "sc_star_high")
    crit = _with_range(crit, "bracket", "bracket_low", "bracket_high")
    excluded = tables["excluded"]
    harness = tables.get("harness", _NO_ROWS)
    short = excluded[excluded["horizon_short"] > 0] if len(excluded) else excluded
    if len(excluded) and "budget_exceeded" in excluded.columns:
        budget = excluded[excluded["budget_exceeded"].fillna(0) > 0]
    else:
        budget = excluded.iloc[0:0]
    envs = sorted(
        set(tables["grid"]["env"])
        | set(tables["excluded"]["env"])
        | (set(harness["env"]) if len(harness) else set())
    )
    out = []
    for env in envs:

        def rows(df: pd.DataFrame, env: str = env) -> pd.DataFrame:
            return df[df["env"] == env] if len(df) else df

        out.append(
            {
                "env": env,
                "figure": world_parts.world_figure(tables, env, excluded),
                "horizon_note": world_parts.horizon_note(tables, env),
                "t_fine": _table(
                    _with_range(
                        world_parts.t_fine_rows(tables, env), "wilson_ci", "wilson_low", "wilson_high"
                    ),
                    world_parts.T_FINE_COLUMNS,
                ),
                "t_fine_figure": world_parts.t_fine_figure(tables, env),
                # Figure 4 and Table 4 / Figure 6 (reports/ablation_parts.py)
                "sections_figure": ablation_parts.cross_section_figure(tables, env),
                "sections_caption": ablation_parts.cross_section_caption(tables, env),
                "ablations": _table(
                    ablation_parts.ablation_rows(tables, env), ablation_parts.ABLATION_COLUMNS
                ),
                "ablation_figure": ablation_parts.ablation_figure(tables, env),
                "ablation_caption": ablation_parts.ablation_caption(tables, env),
                "grid": _table(rows(grid), _W_GRID),
                "critical": _table(rows(crit), _W_CRITICAL),
                "cliffs": _table(rows(tables["cliffs"]), _W_CLIFFS),
                "band": _table(rows(tables["band_widths"]), _W_BAND),
                "contrasts": _table(rows(tables["contrasts"]), _W_CONTRASTS),
                "lags": _table(rows(tables["lags"]), _W_LAGS),
                "steps": _table(rows(tables["step_metrics"]), _W_STEPS),
                "excluded": _table(rows(short), _W_EXCLUDED),
                "harness": _harness_part(rows(harness), rows(budget)),
                # Tables 5, 10, G1b, the W_trans patterns (reports/world_paper_parts.py)
                "papers": _paper_tables(tables, env),
            }
        )
    return out


def _paper_tables(tables: Mapping[str, pd.DataFrame], env: str) -> dict[str, Any]:
    """One environment's tables laid out as the paper's Tables 5 and 10, G1b and the
    W_trans patterns."""
    return {
        "table5": _table(papers.table5_rows(tables, env), papers.TABLE5_COLUMNS),
        "table10": _table(*papers.pair_table(tables, env)),
        "g1b": _table(papers.g1b_rows(tables, env), papers.G1B_COLUMNS),
        "patterns": _table(papers.pattern_rows(tables, env), papers.PATTERN_COLUMNS),
        "horizon": world_parts.horizon_caption(tables),
    }


#: seqBench's family: the depth figures, decay fits and per-bin table are about it alone
MAZE = "maze"
#: RecurrReason's puzzle families, in the order their panels and rows are shown
PUZZLE_FAMILIES = ("hanoi", "checkers", "river_crossing", "blocks_world")
#: evaluation modes in the order they are shown
_MODES = ("plan", "rollout")
#: default of the optional tables; never modified (every step here returns a new frame)
_NO_ROWS = pd.DataFrame()


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _format(value: Any, kind: str) -> str:
    """Numbers as a reader wants them; missing values as an em dash, never 'nan'.

    ``"num-range"`` and ``"pct-range"`` take a (low, high) pair and format both ends
    the way ``"num"`` or ``"pct"`` would."""
    if kind.endswith("-range"):
        low, high = value
        if _is_missing(low) and _is_missing(high):
            return "—"
        base = kind.removesuffix("-range")
        return f"{_format(low, base)} – {_format(high, base)}"
    if _is_missing(value):
        return "—"
    if kind == "text":
        return str(value)
    number = float(value)
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    if kind == "int":
        return f"{int(number):,}"
    if kind == "pct":
        return f"{100 * number:.1f}%"
    return f"{number:.4g}"


def _table(df: pd.DataFrame, spec: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """Header and pre-formatted cells; columns the frame lacks are skipped."""
    cols = [c for c in spec if c[0] in df.columns]
    rows = [
        [{"text": _format(rec[col], kind), "numeric": kind != "text"} for col, _, kind in cols]
        for rec in df.to_dict("records")
    ]
    return {"headers": [(head, kind != "text") for _, head, kind in cols], "rows": rows}


def _plain(value: Any) -> str:
    """Run-info values as text; nested structures as sorted JSON so output is stable."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return "—" if _is_missing(value) else str(value)


def _pairs(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), _plain(v)) for k, v in info.items()]


def _config_text(config: Any) -> str | None:
    """The run's config as YAML, for the provenance block (None when not recorded)."""
    if not isinstance(config, Mapping):
        return None
    # sorted: the manifest stores the config with sorted keys, and a report rebuilt from
    # it must be the same bytes
    return yaml.safe_dump(dict(config), sort_keys=True, allow_unicode=True, width=100)


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with a ``family`` column; frames from before the puzzle families (no
    such column) hold seqBench's maze rows only."""
    return df if "family" in df.columns else df.assign(family=MAZE)


def _maze(df: pd.DataFrame) -> pd.DataFrame:
    """seqBench's rows: family exactly "maze" (never pooled with another family)."""
    return df[df["family"].astype(str) == MAZE].reset_index(drop=True)


def _split_label(label: Any) -> tuple[str, str]:
    """(family, mode) of an analysis label: "hanoi" is a whole-plan evaluation,
    "hanoi/rollout" a rollout."""
    family, _, mode = str(label).partition("/")
    return family, mode or "plan"


def _puzzles(df: pd.DataFrame, *keys: str) -> pd.DataFrame:
    """The puzzle families' rows with ``family`` split into the family's name and a
    ``mode`` column, ordered by family (as in PUZZLE_FAMILIES), mode, model, then
    ``keys``; rows keep their order within that (a stable sort)."""
    if df.empty:
        return df.assign(mode=pd.Series([], dtype=object)).reset_index(drop=True)
    # split each distinct label once (first_violations has a row per failed attempt)
    labels = df["family"].astype(str)
    split = {label: _split_label(label) for label in labels.unique()}
    out = df.assign(
        family=labels.map(lambda v: split[v][0]).astype(object),
        mode=labels.map(lambda v: split[v][1]).astype(object),
    )
    out = out[out["family"].isin(PUZZLE_FAMILIES)]
    out = out.assign(
        _family_order=out["family"].map(PUZZLE_FAMILIES.index),
        _mode_order=out["mode"].map(lambda m: _MODES.index(m) if m in _MODES else len(_MODES)),
    )
    by = ["_family_order", "_mode_order", "mode", "model", *keys]
    out = out.sort_values(by, kind="mergesort").drop(columns=["_family_order", "_mode_order"])
    return out.reset_index(drop=True)


def _with_range(df: pd.DataFrame, name: str, low: str, high: str) -> pd.DataFrame:
    """Add ``name`` holding (low, high) pairs, for the "-range" formats."""
    if low not in df.columns or high not in df.columns:
        return df
    return df.assign(**{name: list(zip(df[low], df[high], strict=True))})


def _with_category(violations: pd.DataFrame) -> pd.DataFrame:
    """Maze violation rows with their seqBench failure category
    (``datasets/maze/categories.py``), derived from the violation type where the table
    does not carry it; successes ("none") are their own category."""
    if violations.empty or "violation" not in violations.columns:
        return violations
    derived = [
        "none" if v == "none" else (None if _is_missing(v) else category_of(str(v)))
        for v in violations["violation"]
    ]
    if "category" in violations.columns:
        derived = [d if _is_missing(c) else c for c, d in zip(violations["category"], derived, strict=True)]
    return violations.assign(category=derived)


def _with_success_definition(fits: pd.DataFrame) -> pd.DataFrame:
    """Fits with their success definition filled in: a fits table from before the
    column existed was always fitted on the simulated success."""
    if fits.empty:
        return fits
    if "success_definition" not in fits.columns:
        return fits.assign(success_definition=DEFAULT_SUCCESS_DEFINITION)
    filled = [DEFAULT_SUCCESS_DEFINITION if _is_missing(v) else str(v) for v in fits["success_definition"]]
    return fits.assign(success_definition=filled)


def _success_definitions(fits: pd.DataFrame) -> list[tuple[str, str]]:
    """(name, meaning) of each success definition the fits use, in a fixed order."""
    if fits.empty or "success_definition" not in fits.columns:
        return []
    used = set(fits["success_definition"])
    return [(name, meaning) for name, (_, meaning) in SUCCESS_DEFINITIONS.items() if name in used]


def _bin_width(run_info: Mapping[str, Any]) -> int:
    """The width of the analysis' L bins (``analysis.bin_width``), from the config the
    run info carries (defaults left out: 1), so binned figures draw each bin at its centre."""
    config = run_info.get("config")
    analysis = config.get("analysis") if isinstance(config, Mapping) else None
    width = analysis.get("bin_width", 1) if isinstance(analysis, Mapping) else 1
    return int(width) if isinstance(width, int) and width >= 1 else 1


def _maze_figures(
    by_length: pd.DataFrame,
    fits: pd.DataFrame,
    violations: pd.DataFrame,
    first_violations: pd.DataFrame,
    bin_width: int = 1,
) -> dict[str, Markup]:
    """The seqBench figures, marked safe: this SVG is produced by matplotlib from
    numbers, and labels in it (model names, categories) are XML-escaped by matplotlib's
    writer."""
    return {
        "success_lin": Markup(plots.success_vs_length_svg(by_length, fits, log=False, bin_width=bin_width)),
        "success_log": Markup(plots.success_vs_length_svg(by_length, fits, log=True, bin_width=bin_width)),
        "metrics": Markup(plots.metrics_vs_length_svg(by_length, bin_width)),
        "violations": Markup(plots.violations_svg(violations)),
        "first_violation": Markup(plots.first_violation_svg(first_violations)),
    }


def _puzzle_figure(by_n: pd.DataFrame) -> Markup:
    """Success against n per puzzle family, marked safe for the same reason."""
    present = set(by_n["family"]) if not by_n.empty else set()
    families = [f for f in PUZZLE_FAMILIES if f in present]
    return Markup(plots.puzzle_success_svg(by_n, families))


def _seqmodels(tables: Mapping[str, pd.DataFrame]) -> dict[str, Any] | None:
    """The trained sequence models' section (``reports/seqmodel_parts.py``) with its
    tables formatted; None without ``tables["seqmodels"]``."""
    part = seqmodel_parts.seqmodel_part(tables)
    if part is None:
        return None
    formatted = {key: _table(*part[key]) for key in seqmodel_parts.TABLE_KEYS}
    per_puzzle = [{"puzzle": p["puzzle"], "table": _table(*p["table"])} for p in part["per_puzzle"]]
    return {**part, **formatted, "per_puzzle": per_puzzle}


def render_report(
    *,
    title: str,
    run_info: dict,
    examples: list[dict],
    counts: dict,
    tables: Mapping[str, pd.DataFrame] | None = None,
    overall: pd.DataFrame = _NO_ROWS,
    by_length: pd.DataFrame = _NO_ROWS,
    fits: pd.DataFrame = _NO_ROWS,
    violations: pd.DataFrame = _NO_ROWS,
    first_violations: pd.DataFrame = _NO_ROWS,
    compounding: pd.DataFrame = _NO_ROWS,
    by_n: pd.DataFrame = _NO_ROWS,
    worlds: Mapping[str, pd.DataFrame] | None = None,
    failures_total: Mapping[str, int] | None = None,
    maps: Sequence[Mapping[str, Any]] = (),
    failures_per_model: int = 200,
) -> str:
    """The whole report as one HTML string; identical inputs give identical bytes.

    ``tables`` holds the analysis tables by name (``schemas.tables.ANALYSIS_SCHEMAS``);
    the single-table keywords are for callers with only some of them and are used where
    ``tables`` lacks that name. Every table carries a ``family`` label ("maze",
    "maze@noise-0.5", "hanoi", "hanoi/rollout", ...). The summary shows every label;
    seqBench's figures, fits and per-bin table use the base maze rows ("maze"), the
    sweep part compares every setting of a swept family, and the puzzle section the rows
    of PUZZLE_FAMILIES, in both modes.

    ``examples`` are the failing answers to browse (``tasks/report/page.failure_examples``),
    ``failures_total`` each model's count of failures (so the page says how many it
    leaves out; without it, the count shown), ``failures_per_model`` the cap they were
    chosen under, ``maps`` the violation maps (``tasks/report/page.violation_maps``).
    """
    given = {
        "overall": overall,
        "by_length": by_length,
        "fits": fits,
        "violations": violations,
        "first_violations": first_violations,
        "compounding": compounding,
        "by_n": by_n,
    }
    all_tables = {**given, **dict(tables or {})}
    frames = {name: _labelled(all_tables[name]) for name in given}
    maze = {
        name: _maze(frames[name])
        for name in ("overall", "by_length", "fits", "violations", "first_violations")
    }
    maze["fits"] = _with_success_definition(maze["fits"])
    maze["violations"] = _with_category(maze["violations"])
    puzzle_eps = _with_range(_puzzles(frames["compounding"]), "eps_ci", "eps_low", "eps_high")
    puzzle_by_n = _with_range(
        _puzzles(frames["by_n"], "n"), "predicted_ci", "predicted_low", "predicted_high"
    )
    puzzle_violations = _puzzles(frames["violations"])
    has_data = not frames["overall"].empty
    has_maze = not (maze["overall"].empty and maze["by_length"].empty)
    has_puzzles = any(not _puzzles(df).empty for df in frames.values())
    figures: dict[str, Markup] = {}
    bin_width = _bin_width(run_info)
    if has_maze:
        seqbench = {name: all_tables[name] for name in parts.SEQBENCH_TABLES if name in all_tables}
        figures.update(
            _maze_figures(
                maze["by_length"], maze["fits"], maze["violations"], maze["first_violations"], bin_width
            )
        )
        figures.update(
            {name: Markup(svg) for name, svg in parts.seqbench_figures(seqbench, bin_width=bin_width).items()}
        )
    if has_puzzles:
        figures["puzzles"] = _puzzle_figure(puzzle_by_n)
    world_sections = _worlds(worlds) if worlds is not None else []
    world_summary = _table(world_parts.summary_rows(worlds), world_parts.SUMMARY_COLUMNS) if worlds else None
    curves = seqbench_figures.sweep_figures(all_tables)
    sweeps = [
        {**s, "table": _table(s["settings"], parts.SWEEP_COLUMNS), "curves": curves.get(s["family"], {})}
        for s in parts.sweep_part(all_tables)
    ]
    context = {
        "title": title,
        "has_data": has_data,
        "has_maze": has_maze,
        "has_puzzles": has_puzzles,
        "worlds": world_sections,
        "world_summary": world_summary,
        "world_selection": (
            _table(papers.selection_rows(worlds), papers.selection_columns(worlds)) if worlds else None
        ),
        "world_horizon": world_parts.horizon_caption(worlds) if worlds else None,
        "sweeps": sweeps,
        "seqmodels": _seqmodels(all_tables),
        "horizon_cards": horizon_parts.horizon_cards(
            all_tables.get("horizons", _NO_ROWS), all_tables.get("adaptive_waves")
        ),
        "overall": _table(frames["overall"], _OVERALL),
        "fits": _table(maze["fits"], _FITS),
        "fit_success": _success_definitions(maze["fits"]),
        "by_length": _table(maze["by_length"], _BY_LENGTH),
        "violations": _table(maze["violations"], _VIOLATIONS),
        "pairs": _table(parts.model_pairs(all_tables), parts.PAIR_COLUMNS),
        "eps": _table(puzzle_eps, _EPS),
        "by_n": _table(puzzle_by_n, _BY_N),
        "puzzle_violations": _table(puzzle_violations, _PUZZLE_VIOLATIONS),
        "figures": figures,
        "prompt_examples": seqbench_figures.example_prompts(all_tables.get("example_prompts", _NO_ROWS)),
        "failures": parts.failure_browser(examples, failures_total or {}),
        "failures_per_model": failures_per_model,
        "maps": parts.violation_maps(maps),
        "max_chars": parts.MAX_ANSWER_CHARS,
        "run_info": _pairs({k: v for k, v in run_info.items() if k != "config"}),
        "config": _config_text(run_info.get("config")),
        "counts": _pairs(counts),
    }
    page = _ENV.get_template("report.html").render(**context)
    return page
