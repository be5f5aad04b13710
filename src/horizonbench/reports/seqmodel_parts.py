"""The report's section on trained sequence models (RecurrReason): Table 2 (best model
per puzzle), Tables 5-8 (every model per puzzle), Figure 1 (accuracy per size), Figure 2
and Table 9 (failure modes of failed rollouts) and the fitted per-step error rate, each
beside the paper's numbers where the paper has one.

Pure: analysis tables in (``analysis/seqmodels.parquet`` as ``tables["seqmodels"]``, the
``compounding`` table), DataFrames with their column specs, text and SVG out. The page
builder (``reports/html.py``) formats the tables and escapes every cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from markupsafe import Markup

from horizonbench.analysis.seqmodels import (
    best_per_puzzle,
    paper_failure_shares,
    paper_results,
    split_gaps,
)
from horizonbench.reports.seqmodel_plots import accuracy_by_n_svg, failure_shares_svg

__all__ = ["PUZZLE_ORDER", "TABLE_KEYS", "seqmodel_part"]

#: the paper's order of the per-puzzle tables (Tables 5, 6, 7, 8); other puzzles follow by name
PUZZLE_ORDER = ("checkers", "hanoi", "river_crossing", "blocks_world")
#: the keys of :func:`seqmodel_part` that hold (frame, column spec) pairs
TABLE_KEYS = ("best", "failures", "eps")

BEST_COLUMNS = [
    ("puzzle", "puzzle", "text"),
    ("model", "best model", "text"),
    ("condition", "condition", "text"),
    ("val_accuracy", "Val", "pct"),
    ("val_ci", "Val Wilson 95%", "pct-range"),
    ("ood_accuracy", "OOD", "pct"),
    ("ood_ci", "OOD Wilson 95%", "pct-range"),
    ("paper_model", "paper: best model", "text"),
    ("paper_val", "paper: Val", "text"),
    ("paper_ood", "paper: OOD", "text"),
]
PER_PUZZLE_COLUMNS = [
    ("model", "model", "text"),
    ("architecture", "architecture", "text"),
    ("condition", "condition", "text"),
    ("val_episodes", "Val episodes", "int"),
    ("val_accuracy", "Val", "pct"),
    ("val_ci", "Val Wilson 95%", "pct-range"),
    ("ood_episodes", "OOD episodes", "int"),
    ("ood_accuracy", "OOD", "pct"),
    ("ood_ci", "OOD Wilson 95%", "pct-range"),
    ("gap", "Val − OOD", "pct"),
    ("gap_ci", "Newcombe 95%", "pct-range"),
    ("paper_val", "paper: Val", "text"),
    ("paper_ood", "paper: OOD", "text"),
]
FAILURE_COLUMNS = [
    ("puzzle", "puzzle", "text"),
    ("model", "model", "text"),
    ("split", "split", "text"),
    ("failed", "failed", "int"),
    ("share_invalid_move", "inv. move", "pct"),
    ("share_invalid_output", "inv. output", "pct"),
    ("share_loop", "loop", "pct"),
    ("share_premature_stop", "prem. stop", "pct"),
    ("share_horizon_exceeded", "horizon", "pct"),
    ("share_budget_exceeded", "budget", "pct"),
    ("share_other", "other", "pct"),
    ("paper", "paper: move / output / loop / stop", "text"),
]
EPS_COLUMNS = [
    ("puzzle", "puzzle", "text"),
    ("model", "model", "text"),
    ("eps", "ε", "num"),
    ("eps_ci", "95% interval", "num-range"),
    ("n_attempts", "episodes", "int"),
    ("successes", "solved", "int"),
    ("note", "note", "text"),
]
_SPLIT_LABELS = {"train": "train (T)", "validation": "validation (V)", "ood": "OOD (O)"}


def _puzzles(table: pd.DataFrame) -> list[str]:
    present = set(table["puzzle"].astype(str))
    return [p for p in PUZZLE_ORDER if p in present] + sorted(present - set(PUZZLE_ORDER))


def _pct_text(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else f"{float(value):.2f}%"


def _range(df: pd.DataFrame, name: str, low: str, high: str) -> pd.DataFrame:
    return df.assign(**{name: list(zip(df[low], df[high], strict=True))})


def _wide(table: pd.DataFrame) -> pd.DataFrame:
    """Per model and puzzle: validation and OOD accuracy with their intervals, and the
    Val − OOD gap with Newcombe's interval."""
    pooled = table[table["n"].isna()]
    keys = ["model", "puzzle", "architecture", "condition"]
    stats = ["episodes", "accuracy", "accuracy_low", "accuracy_high"]
    base = pooled[keys].drop_duplicates()
    for split, prefix in (("validation", "val"), ("ood", "ood")):
        part = pooled[pooled["split"] == split][["model", "puzzle", *stats]]
        names = ("episodes", "accuracy", "low", "high")
        part = part.rename(columns={s: f"{prefix}_{n}" for s, n in zip(stats, names, strict=True)})
        base = base.merge(part, on=["model", "puzzle"], how="left")
    base = base.merge(split_gaps(table), on=["model", "puzzle"], how="left")
    base = _range(base, "val_ci", "val_low", "val_high")
    base = _range(base, "ood_ci", "ood_low", "ood_high")
    return _range(base, "gap_ci", "gap_low", "gap_high")


def _with_paper(wide: pd.DataFrame) -> pd.DataFrame:
    paper = paper_results()["per_puzzle"][["puzzle", "architecture", "condition", "val_pct", "ood_pct"]]
    out = wide.merge(paper, on=["puzzle", "architecture", "condition"], how="left")
    return out.assign(paper_val=out["val_pct"].map(_pct_text), paper_ood=out["ood_pct"].map(_pct_text))


def _best(table: pd.DataFrame, puzzles: list[str]) -> pd.DataFrame:
    best = best_per_puzzle(table)
    best = best.rename(
        columns={"val_accuracy_low": "val_low", "val_accuracy_high": "val_high"}
        | {"ood_accuracy_low": "ood_low", "ood_accuracy_high": "ood_high"}
    )
    best = _range(_range(best, "val_ci", "val_low", "val_high"), "ood_ci", "ood_low", "ood_high")
    paper = paper_results()["best"].rename(columns={"architecture": "paper_arch", "condition": "paper_cond"})
    out = best.merge(paper, on="puzzle", how="left")
    out = out.assign(
        paper_model=[
            "—" if pd.isna(a) else f"{a} ({c})"
            for a, c in zip(out["paper_arch"], out["paper_cond"], strict=True)
        ],
        paper_val=out["val_pct"].map(_pct_text),
        paper_ood=out["ood_pct"].map(_pct_text),
    )
    rank = {p: i for i, p in enumerate(puzzles)}
    return out.sort_values("puzzle", key=lambda s: s.map(rank), kind="mergesort").reset_index(drop=True)


def _failures(table: pd.DataFrame, puzzles: list[str], models: list[str]) -> pd.DataFrame:
    rows = table[table["n"].isna()].copy()
    paper = paper_failure_shares()
    text = {
        (r.puzzle, r.architecture, r.condition, r.split): (
            f"{r.invalid_move:.1f} / {r.invalid_output:.1f} / {r.loop:.1f} / {r.premature_stop:.1f}"
        )
        for r in paper.itertuples()
    }
    rows["paper"] = [
        text.get((p, a, c, s), "—")
        for p, a, c, s in zip(
            rows["puzzle"], rows["architecture"], rows["condition"], rows["split"], strict=True
        )
    ]
    rank = {p: i for i, p in enumerate(puzzles)}
    mrank = {m: i for i, m in enumerate(models)}
    rows = rows.assign(_p=rows["puzzle"].map(rank), _m=rows["model"].map(mrank))
    rows = rows.sort_values(["_p", "_m"], kind="mergesort").drop(columns=["_p", "_m"])
    return rows.assign(split=rows["split"].map(lambda s: _SPLIT_LABELS.get(str(s), str(s)))).reset_index(
        drop=True
    )


def _eps(compounding: pd.DataFrame | None, puzzles: list[str], models: list[str]) -> pd.DataFrame:
    """The compounding table's rollout rows of the trained models (family
    ``<puzzle>/rollout``), puzzle by puzzle."""
    if compounding is None or compounding.empty:
        return pd.DataFrame(columns=[c for c, _, _ in EPS_COLUMNS])
    labels = {f"{p}/rollout": p for p in puzzles}
    rows = compounding[compounding["family"].astype(str).isin(labels) & compounding["model"].isin(models)]
    rows = rows.assign(puzzle=rows["family"].astype(str).map(labels))
    rank = {p: i for i, p in enumerate(puzzles)}
    mrank = {m: i for i, m in enumerate(models)}
    rows = rows.assign(_p=rows["puzzle"].map(rank), _m=rows["model"].map(mrank))
    rows = rows.sort_values(["_p", "_m"], kind="mergesort").drop(columns=["_p", "_m"])
    return _range(rows, "eps_ci", "eps_low", "eps_high").reset_index(drop=True)


def seqmodel_part(tables: Mapping[str, pd.DataFrame]) -> dict[str, Any] | None:
    """The section's content, or None when the run has no sequence-model table (no
    ``training:`` section) or it is empty. Tables come as (frame, column spec) under
    TABLE_KEYS, and ``per_puzzle`` as a list of {puzzle, table: (frame, spec)}."""
    table = tables.get("seqmodels")
    if table is None or table.empty:
        return None
    puzzles = _puzzles(table)
    models = list(dict.fromkeys(str(m) for m in table["model"]))
    wide = _with_paper(_wide(table))
    mrank = {m: i for i, m in enumerate(models)}
    per_puzzle = [
        {
            "puzzle": p,
            "table": (
                wide[wide["puzzle"] == p].sort_values("model", key=lambda s: s.map(mrank), kind="mergesort"),
                PER_PUZZLE_COLUMNS,
            ),
        }
        for p in puzzles
    ]
    splits = sorted(
        set(table["split"].astype(str)),
        key=lambda s: list(_SPLIT_LABELS).index(s) if s in _SPLIT_LABELS else len(_SPLIT_LABELS),
    )
    return {
        "models": models,
        "splits": [_SPLIT_LABELS.get(s, s) for s in splits],
        "best": (_best(table, puzzles), BEST_COLUMNS),
        "per_puzzle": per_puzzle,
        "failures": (_failures(table, puzzles, models), FAILURE_COLUMNS),
        "eps": (_eps(tables.get("compounding"), puzzles, models), EPS_COLUMNS),
        "figure_by_n": Markup(accuracy_by_n_svg(table, puzzles, models)),
        "figure_failures": Markup(failure_shares_svg(table, puzzles, models)),
        "unanswered": int(table.loc[table["n"].isna(), "unanswered"].sum()),
    }
