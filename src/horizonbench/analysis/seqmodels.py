"""RecurrReason's trained sequence models: rollout accuracy per split and size, the
failure modes of the failed rollouts, and the paper's numbers to set beside them.

Pure pandas/numpy over the scores table's rollout rows: one row per episode (an
instance rolled out by one model), with ``success`` and, for a failure, the mode that
ended it in ``violation``. Which split an instance belongs to is not in the scores (it
is a function of the seed and the instance ids: ``datasets/puzzles/steps.assign_splits``),
so the caller passes it, and which architecture and condition a model name stands for
(``schemas/training.TrainingSpec.model_names``).

Accuracy carries a Wilson 95% interval (``analysis/phase.wilson_interval``): the paper's
cells sit at 0% and near 100%, where a Wald interval collapses to a point. A difference
of two accuracies (validation against OOD, or one model against another) carries
Newcombe's hybrid score interval, built from the two Wilson intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from horizonbench.analysis.phase import wilson_interval
from horizonbench.schemas.seqmodels import FAILURE_MODES, SEQMODELS_SCHEMA, SPLITS

__all__ = [
    "FAILURE_MODES",
    "SPLITS",
    "best_per_puzzle",
    "newcombe_difference",
    "paper_failure_shares",
    "paper_results",
    "seqmodel_table",
    "split_gaps",
]

#: the table's columns, in the schema's order
COLUMNS = list(SEQMODELS_SCHEMA.names)
_KEYS = ["model", "puzzle", "architecture", "condition", "split"]
_SHARES = [f"share_{m}" for m in FAILURE_MODES] + ["share_other"]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object) for c in COLUMNS})


def _split_order(split: str) -> int:
    return SPLITS.index(split) if split in SPLITS else len(SPLITS)


def _summarise(
    success: np.ndarray, violation: np.ndarray, gap: np.ndarray, legal: np.ndarray, unanswered: int
) -> dict[str, object]:
    """The counts, rates and failure shares of one group of answered episodes (arrays of
    the group's rows: numpy, not pandas, as the table has a group per size and split)."""
    episodes = len(success)
    solved = int(success.sum())
    failed = episodes - solved
    low, high = wilson_interval(solved, episodes) if episodes else (math.nan, math.nan)
    out: dict[str, object] = {
        "episodes": episodes,
        "solved": solved,
        "accuracy": solved / episodes if episodes else math.nan,
        "accuracy_low": low,
        "accuracy_high": high,
        "failed": failed,
        "unanswered": unanswered,
    }
    modes = violation[~success]
    known = 0
    for mode in FAILURE_MODES:
        k = int((modes == mode).sum())
        known += k
        out[f"share_{mode}"] = k / failed if failed else math.nan
    out["share_other"] = (failed - known) / failed if failed else math.nan
    solved_gap = gap[success]
    solved_gap = solved_gap[~np.isnan(solved_gap)]
    out["mean_optimality_gap"] = float(solved_gap.mean()) if len(solved_gap) else math.nan
    legal = legal[~np.isnan(legal)]
    out["move_legality_rate"] = float(legal.mean()) if len(legal) else math.nan
    return out


def _floats(df: pd.DataFrame, column: str) -> np.ndarray:
    if column not in df:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[column], errors="coerce").astype(float).to_numpy(na_value=np.nan)


def seqmodel_table(
    scores: pd.DataFrame, splits: Mapping[str, str], labels: Mapping[str, tuple[str, str]]
) -> pd.DataFrame:
    """One row per (model, puzzle, split, n) and one per (model, puzzle, split) with n
    null (every size pooled), over the rollout rows of the models in ``labels``.

    ``scores`` needs model, instance_id, family, mode, success, n and, where present,
    answered, violation, optimality_gap, move_legality_rate. Unanswered episodes (no
    answer: a provider failure) are counted in ``unanswered`` and left out of every rate.
    Instances ``splits`` does not name (a family the models were not trained on) are left
    out: they have no split to report under. Rows come in the order model (as in
    ``labels``), puzzle, split (train, validation, ood), pooled row first, then n.
    """
    if scores.empty or not labels:
        return _empty()
    df = scores[(scores["mode"].astype(str) == "rollout") & scores["model"].astype(str).isin(labels)]
    split = df["instance_id"].astype(str).map(lambda i: splits.get(i))
    df = df.assign(split=split, puzzle=df["family"].astype(str), model=df["model"].astype(str))
    df = df[df["split"].notna()].reset_index(drop=True)
    if df.empty:
        return _empty()
    answered = df["answered"].astype(bool).to_numpy() if "answered" in df else np.ones(len(df), dtype=bool)
    success = df["success"].astype(bool).to_numpy()
    violation = (
        df["violation"].astype(object).where(df["violation"].notna(), None).to_numpy()
        if "violation" in df
        else np.full(len(df), None, dtype=object)
    )
    gap, legal = _floats(df, "optimality_gap"), _floats(df, "move_legality_rate")
    sizes = pd.to_numeric(df["n"]).astype(int).to_numpy()

    def summary(rows: np.ndarray) -> dict[str, object]:
        ok = rows[answered[rows]]
        return _summarise(success[ok], violation[ok], gap[ok], legal[ok], int((~answered[rows]).sum()))

    out_rows: list[dict[str, object]] = []
    for (model, puzzle, sp), rows in df.groupby(["model", "puzzle", "split"], sort=False).indices.items():
        architecture, condition = labels[str(model)]
        key = {"model": model, "puzzle": puzzle, "architecture": architecture, "condition": condition}
        key["split"] = sp
        out_rows.append({**key, "n": pd.NA, **summary(rows)})
        for n in np.unique(sizes[rows]):
            out_rows.append({**key, "n": int(n), **summary(rows[sizes[rows] == n])})
    order = {m: i for i, m in enumerate(labels)}
    out = pd.DataFrame(out_rows)
    out = out.assign(
        _m=out["model"].map(order),
        _s=out["split"].map(_split_order),
        _pooled=out["n"].notna().astype(int),
        _n=out["n"].fillna(-1).astype(int),
    )
    out = out.sort_values(["_m", "puzzle", "_s", "_pooled", "_n"], kind="mergesort")
    out = out.drop(columns=["_m", "_s", "_pooled", "_n"]).reset_index(drop=True)
    out["n"] = out["n"].astype("Int64")
    return out[COLUMNS]


def _pooled(table: pd.DataFrame, split: str) -> pd.DataFrame:
    t = table[table["n"].isna() & (table["split"] == split)]
    return t.set_index(["model", "puzzle"])


def best_per_puzzle(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2: per puzzle the model with the best validation accuracy, ties
    broken by OOD accuracy, then by model name (so the choice never depends on row order).

    A model with no validation episodes on a puzzle cannot be chosen (its accuracy is
    unknown, not 0). Columns: puzzle, model, architecture, condition, then
    val_/ood_ accuracy, low, high and episodes."""
    cols = ["puzzle", "model", "architecture", "condition"]
    stats = ["accuracy", "accuracy_low", "accuracy_high", "episodes"]
    out_cols = cols + [f"{s}_{c}" for s in ("val", "ood") for c in stats]
    if table.empty:
        return pd.DataFrame(columns=out_cols)
    val, ood = _pooled(table, "validation"), _pooled(table, "ood")
    merged = val[["architecture", "condition", *stats]].add_prefix("val_")
    merged = merged.join(ood[stats].add_prefix("ood_"), how="left").reset_index()
    merged = merged.rename(columns={"val_architecture": "architecture", "val_condition": "condition"})
    merged = merged[pd.to_numeric(merged["val_accuracy"], errors="coerce").notna()]
    if merged.empty:
        return pd.DataFrame(columns=out_cols)
    merged = merged.assign(
        _v=pd.to_numeric(merged["val_accuracy"]), _o=pd.to_numeric(merged["ood_accuracy"]).fillna(-1.0)
    )
    merged = merged.sort_values(["puzzle", "_v", "_o", "model"], ascending=[True, False, False, True])
    best = merged.groupby("puzzle", sort=True).head(1)
    return best[out_cols].reset_index(drop=True)


def newcombe_difference(x1: int, n1: int, x2: int, n2: int) -> tuple[float, float, float]:
    """p1 - p2 with Newcombe's hybrid score 95% interval (his method 10): the Wilson
    intervals of the two rates combined. Nan when either group is empty."""
    if n1 == 0 or n2 == 0:
        return math.nan, math.nan, math.nan
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson_interval(x1, n1)
    l2, u2 = wilson_interval(x2, n2)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, max(-1.0, low), min(1.0, high)


def split_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """Per model and puzzle: validation accuracy minus OOD accuracy with Newcombe's 95%
    interval (``gap_low`` > 0: OOD is worse beyond chance at the 5% level)."""
    cols = ["model", "puzzle", "gap", "gap_low", "gap_high"]
    if table.empty:
        return pd.DataFrame(columns=cols)
    val, ood = _pooled(table, "validation"), _pooled(table, "ood")
    rows = []
    for key in val.index.intersection(ood.index):
        v, o = val.loc[key], ood.loc[key]
        d = newcombe_difference(int(v["solved"]), int(v["episodes"]), int(o["solved"]), int(o["episodes"]))
        rows.append({"model": key[0], "puzzle": key[1], "gap": d[0], "gap_low": d[1], "gap_high": d[2]})
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------------------
# the paper's numbers (RecurrReason), typed from its text
# ---------------------------------------------------------------------------

#: (architecture, condition) of the paper's six rows, in its order: T5 (scratch) /
#: Trained, T5 (pre-trained) / Zero-shot, T5 (pre-trained) / Fine-tuned, then GPT-2 alike
_PAPER_ROWS = [(a, c) for a in ("t5", "gpt2") for c in ("scratch", "zero_shot", "fine_tuned")]
#: Val %, OOD % per row of _PAPER_ROWS, per puzzle
_PAPER_TABLES = {
    # Table 5: Checkers Jumping: full results
    "checkers": (5, [(0.00, 0.00), (0.00, 0.00), (1.11, 0.10), (1.11, 0.03), (0.00, 0.00), (1.11, 0.10)]),
    # Table 6: Tower of Hanoi: full results
    "hanoi": (6, [(0.00, 0.00), (0.00, 0.00), (11.11, 0.00), (0.00, 0.00), (0.00, 0.00), (0.00, 0.00)]),
    # Table 7: River Crossing: full results (all entries 0.00%)
    "river_crossing": (7, [(0.00, 0.00)] * 6),
    # Table 8: Block World: full results
    "blocks_world": (
        8,
        [(0.00, 0.00), (0.00, 0.00), (97.27, 81.00), (21.82, 0.00), (0.00, 0.00), (24.55, 0.00)],
    ),
}
# Table 2: cross-puzzle summary, best model result per puzzle (architecture "t5/gpt2":
# the paper names both for Checkers Jumping; River Crossing has none)
_PAPER_BEST = [
    ("blocks_world", "t5", "fine_tuned", 97.27, 81.00),
    ("hanoi", "t5", "fine_tuned", 11.11, 0.00),
    ("checkers", "t5/gpt2", "fine_tuned", 1.11, 0.10),
    ("river_crossing", None, None, 0.00, 0.00),
]
# Table 9 (Appendix L): failure modes of failed rollouts, % (invalid move, invalid output,
# loop, premature stop), pre-trained fine-tuned models; V = validation, O = OOD
_PAPER_FAILURES = [
    ("blocks_world", "t5", "validation", (0.0, 0.0, 66.7, 33.3)),
    ("blocks_world", "t5", "ood", (4.2, 0.0, 58.3, 37.5)),
    ("blocks_world", "gpt2", "validation", (0.0, 12.0, 80.7, 7.2)),
    ("blocks_world", "gpt2", "ood", (91.4, 5.0, 3.6, 0.0)),
    ("hanoi", "t5", "validation", (100.0, 0.0, 0.0, 0.0)),
    ("hanoi", "gpt2", "validation", (33.3, 0.0, 0.0, 66.7)),
    ("checkers", "t5", "validation", (86.5, 0.0, 13.1, 0.4)),
    ("checkers", "gpt2", "validation", (87.3, 3.1, 8.4, 1.2)),
    ("river_crossing", "t5", "validation", (62.7, 0.0, 0.0, 37.3)),
    ("river_crossing", "t5", "ood", (92.4, 0.0, 0.0, 7.6)),
]


def paper_results() -> dict[str, pd.DataFrame]:
    """The paper's Tables 2 and 5-8, in percent as printed.

    ``"per_puzzle"``: table (5-8), puzzle, architecture ("t5", "gpt2": the names of the
    shipped configs), condition (scratch = the paper's "Trained"), val_pct, ood_pct.
    ``"best"`` (Table 2): puzzle, architecture, condition, val_pct, ood_pct."""
    per = [
        {"table": t, "puzzle": p, "architecture": a, "condition": c, "val_pct": v, "ood_pct": o}
        for p, (t, values) in _PAPER_TABLES.items()
        for (a, c), (v, o) in zip(_PAPER_ROWS, values, strict=True)
    ]
    best = pd.DataFrame(_PAPER_BEST, columns=["puzzle", "architecture", "condition", "val_pct", "ood_pct"])
    return {"per_puzzle": pd.DataFrame(per), "best": best}


def paper_failure_shares() -> pd.DataFrame:
    """The paper's Table 9 in percent: puzzle, architecture, condition (fine_tuned),
    split, then one column per mode of the paper's four."""
    modes = ["invalid_move", "invalid_output", "loop", "premature_stop"]
    rows = [
        {
            "puzzle": p,
            "architecture": a,
            "condition": "fine_tuned",
            "split": s,
            **dict(zip(modes, v, strict=True)),
        }
        for p, a, s, v in _PAPER_FAILURES
    ]
    return pd.DataFrame(rows)


def shares_sum(table: pd.DataFrame) -> np.ndarray:
    """The sum of the failure shares of each row (1 where any episode failed, NaN else)."""
    return table[_SHARES].astype(float).sum(axis=1, min_count=len(_SHARES)).to_numpy()
