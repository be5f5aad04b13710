"""Tables the report and the analysis flow need, computed from the scores table.

Inputs follow ``SCORES_SCHEMA``; outputs use plain ``float64``/``int64``/``bool``
numeric columns (never pandas' nullable dtypes), so the caller can write them to
Parquet with an explicit Arrow schema without surprises from type inference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from horizonbench.analysis.decay import (
    DEFAULT_SUCCESS_DEFINITION,
    SUCCESS_DEFINITIONS,
    DecayFit,
    fit_binomial_mle,
    fit_wls_origin,
    fit_wls_prefactor,
)
from horizonbench.core.registry import violation_categories

#: violation label used for successful attempts (their ``violation`` is null)
NO_VIOLATION = "none"
#: violation labels that mean the model's text could not be read as a plan
INVALID_OUTPUT_LABELS = frozenset({"invalid_output", "parse_error", "unparseable"})

BY_LENGTH_COLUMNS = [
    "model",
    "L",
    "attempts",
    "instances",
    "successes",
    "success_rate",
    "exact_match_rate",
    "valid_rate",
    "progress_ratio_mean",
    "progress_ratio_sem",
    "precision_mean",
    "precision_positional_mean",
    "recall_mean",
]
FIT_COLUMNS = ["model", *(f.name for f in dataclasses.fields(DecayFit))]
VIOLATION_COLUMNS = ["model", "violation", "category", "count", "share"]
CATEGORY_COLUMNS = ["model", "category", "count", "share"]
FIRST_VIOLATION_COLUMNS = [
    "model",
    "L",
    "violation",
    "first_violation_step",
    "solution_length",
    "relative_position",
]
OVERALL_COLUMNS = [
    "model",
    "attempts",
    "instances",
    "success_rate",
    "exact_match_rate",
    "valid_rate",
    "progress_ratio_mean",
    "precision_mean",
    "precision_positional_mean",
    "recall_mean",
    "invalid_output_share",
]
#: text columns of the output tables (every other column is a number)
_TEXT_COLUMNS = ("model", "violation", "category", "method", "note", "converged", "success_definition")


# ---------------------------------------------------------------------------
# input normalisation
# ---------------------------------------------------------------------------


def _float(s: pd.Series) -> pd.Series:
    """float64 with NaN for missing, whatever nullable dtype the input used."""
    return pd.to_numeric(s, errors="coerce").astype("float64")


def _label(s: pd.Series) -> pd.Series:
    """Plain string labels; missing values stay missing."""
    return s.astype("string").astype(object).where(s.notna(), None)


def _prepare(scores: pd.DataFrame, bin_width: int = 1) -> pd.DataFrame:
    """The columns every summary uses, in predictable dtypes, plus the L bin."""
    if bin_width < 1:
        raise ValueError(f"bin_width must be >= 1, got {bin_width}")
    df = pd.DataFrame(
        {
            "model": _label(scores["model"]),
            # instance ids are only unique within a family
            "instance": scores["family"].astype(str) + "/" + scores["instance_id"].astype(str),
            "solution_length": _float(scores["solution_length"]),
            "success": _float(scores["success"]),
            "valid": _float(scores["valid"]),
            "exact_match": _float(scores["exact_match"]),
            "progress_ratio": _float(scores["progress_ratio"]),
            # maze: multiset precision; puzzles: the share of legal moves
            "precision": _float(scores["precision"]),
            # maze: seqBench's precision read by position; NaN for other families and
            # for scores written before the column existed
            "precision_positional": (
                _float(scores["precision_positional"])
                if "precision_positional" in scores
                else pd.Series(np.nan, index=scores.index, dtype="float64")
            ),
            "recall": _float(scores["recall"]),
            "violation": _label(scores["violation"]),
            "first_violation_step": _float(scores["first_violation_step"]),
            "parse_error": _label(scores["parse_error"]),
        },
        index=pd.RangeIndex(len(scores)),
    )
    df = df[df["solution_length"].notna()].copy()
    df["L"] = (df["solution_length"] // bin_width * bin_width).astype("int64")
    return df


def _empty(columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=dtypes.get(c, "float64")) for c in columns})


def _sem(s: pd.Series) -> float:
    n = int(s.notna().sum())
    return float(s.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")


#: the counts, rates and means reported both per L bin and per model (``DataFrame.agg``
#: specs; ``_finish`` puts the columns in their table's order)
_RATES: dict[str, tuple[str, str]] = {
    "attempts": ("success", "size"),
    "instances": ("instance", "nunique"),
    "success_rate": ("success", "mean"),
    "exact_match_rate": ("exact_match", "mean"),
    "valid_rate": ("valid", "mean"),
    "progress_ratio_mean": ("progress_ratio", "mean"),
    "precision_mean": ("precision", "mean"),
    "precision_positional_mean": ("precision_positional", "mean"),
    "recall_mean": ("recall", "mean"),
}


# ---------------------------------------------------------------------------
# public tables
# ---------------------------------------------------------------------------


def success_by_length(scores: pd.DataFrame, bin_width: int = 1) -> pd.DataFrame:
    """Per model and L bin (lower edge ``solution_length // w * w``): rates and means."""
    df = _prepare(scores, bin_width)
    if df.empty:
        return _empty(
            BY_LENGTH_COLUMNS,
            {
                "model": "object",
                "L": "int64",
                "attempts": "int64",
                "instances": "int64",
                "successes": "int64",
            },
        )
    out = (
        df.groupby(["model", "L"], sort=True)
        .agg(**_RATES, successes=("success", "sum"), progress_ratio_sem=("progress_ratio", _sem))
        .reset_index()
    )
    return _finish(out, BY_LENGTH_COLUMNS, ints=("L", "attempts", "instances", "successes"))


def _finish(out: pd.DataFrame, columns: list[str], ints: tuple[str, ...]) -> pd.DataFrame:
    """Column order and plain dtypes: int64 for counts, float64 for everything numeric."""
    out = out[columns].copy()
    for col in columns:
        if col in ints:
            out[col] = out[col].astype("int64")
        elif col not in _TEXT_COLUMNS:
            out[col] = out[col].astype("float64")
    out["model"] = out["model"].astype(object)
    return out.reset_index(drop=True)


def _wls_bins(df: pd.DataFrame, min_attempts: int) -> tuple[pd.DataFrame, int]:
    """Per-bin rates for the WLS fits (both forms), and how many bins were too small to use.

    The regressor is the mean solution length of the bin's attempts, not the lower
    edge, so wide bins do not bias A.
    """
    bins = df.groupby("L").agg(x=("solution_length", "mean"), rate=("success", "mean"), n=("success", "size"))
    small = bins["n"] < min_attempts
    return bins[~small], int(small.sum())


def _with_small_bins(fit: DecayFit, small: int, min_attempts: int) -> DecayFit:
    if not small:
        return fit
    extra = f"left out {small} bin(s) with fewer than {min_attempts} attempts"
    note = f"{fit.note}; {extra}" if fit.note else extra
    return dataclasses.replace(fit, n_bins_dropped=fit.n_bins_dropped + small, note=note)


def _fit_model(df: pd.DataFrame, bootstrap: int, seed: int, min_attempts: int) -> list[DecayFit]:
    bins, small = _wls_bins(df, min_attempts)
    x, rate, n = bins["x"].to_numpy(), bins["rate"].to_numpy(), bins["n"].to_numpy()
    wls = [
        _with_small_bins(fit(x, rate, n), small, min_attempts) for fit in (fit_wls_prefactor, fit_wls_origin)
    ]
    mle = fit_binomial_mle(
        df["solution_length"].to_numpy(),
        df["success"].to_numpy(),
        cluster=pd.factorize(df["instance"])[0],
        bootstrap=bootstrap,
        seed=seed,
    )
    return [*wls, mle]


def fit_all(
    scores: pd.DataFrame,
    bootstrap: int,
    seed: int,
    min_attempts_per_bin: int = 1,
    bin_width: int = 1,
    success_definition: str = DEFAULT_SUCCESS_DEFINITION,
) -> pd.DataFrame:
    """One row per (model, method): the paper's WLS in both forms (``wls_prefactor``:
    log p = log A - L/L0; ``wls_origin``: log p = -L/L0, the curve the paper's text
    names) and the binomial MLE.

    ``success_definition`` (a key of ``decay.SUCCESS_DEFINITIONS``) picks what counts
    as a success: ``"simulation"`` (the scores' ``success``, the default) or
    ``"exact_match"`` (seqBench's Pass@1). Each row records it in its
    ``success_definition`` column, so a reader never has to guess.

    Every model uses the same ``seed``, so adding a model never changes another
    model's bootstrap interval.
    """
    if success_definition not in SUCCESS_DEFINITIONS:
        raise ValueError(
            f"unknown success definition {success_definition!r}; one of {sorted(SUCCESS_DEFINITIONS)}"
        )
    column = SUCCESS_DEFINITIONS[success_definition][0]
    df = _prepare(scores, bin_width)
    df = df.assign(success=df[column])
    df = df[df["success"].notna()]
    rows = []
    for model, part in df.groupby("model", sort=True):
        for fit in _fit_model(part, bootstrap, seed, min_attempts_per_bin):
            fit = dataclasses.replace(fit, success_definition=success_definition)
            rows.append({"model": model, **dataclasses.asdict(fit)})
    if not rows:
        return _empty(
            FIT_COLUMNS,
            {
                "model": "object",
                "method": "object",
                "success_definition": "object",
                "note": "object",
                "converged": "bool",
                "n_bins_used": "int64",
                "n_bins_dropped": "int64",
                "n_attempts": "int64",
            },
        )
    out = pd.DataFrame(rows)
    out["converged"] = out["converged"].astype(bool)
    out["note"] = out["note"].astype(object)
    out["method"] = out["method"].astype(object)
    out["success_definition"] = out["success_definition"].astype(object)
    return _finish(out, FIT_COLUMNS, ints=("n_bins_used", "n_bins_dropped", "n_attempts"))


def _categorizer() -> Callable[[str | None], str | None]:
    """violation -> the failure category a family declares for it (seqBench's, for the
    maze: ``datasets/maze/categories.py``), read once from the family registry; 'none'
    for a success, None for a violation no family places."""
    _, of = violation_categories()
    return lambda violation: NO_VIOLATION if violation == NO_VIOLATION else of.get(violation or "")


def violation_counts(scores: pd.DataFrame) -> pd.DataFrame:
    """How often each violation type occurs per model, with the seqBench failure
    category it belongs to (maze violations only); successes count as 'none'."""
    df = _prepare(scores)
    if df.empty:
        return _empty(
            VIOLATION_COLUMNS,
            {"model": "object", "violation": "object", "category": "object", "count": "int64"},
        )
    df["violation"] = df["violation"].fillna(NO_VIOLATION)
    out = df.groupby(["model", "violation"]).size().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby("model")["count"].transform("sum")
    out = out.sort_values(["model", "count", "violation"], ascending=[True, False, True])
    out["violation"] = out["violation"].astype(object)
    out["category"] = out["violation"].map(_categorizer()).astype(object)
    return _finish(out, VIOLATION_COLUMNS, ints=("count",))


def violation_category_counts(scores: pd.DataFrame) -> pd.DataFrame:
    """Attempts per model in each of seqBench's failure categories (each attempt in the
    category of its first violation; 'none' for successes), in the order of
    ``categories.CATEGORIES`` (as the families declare them:
    ``core.registry.violation_categories``). Attempts whose violation no family places
    are left out, so shares are of the categorised attempts."""
    df = _prepare(scores)
    df["category"] = df["violation"].fillna(NO_VIOLATION).map(_categorizer())
    df = df[df["category"].notna()]
    if df.empty:
        return _empty(CATEGORY_COLUMNS, {"model": "object", "category": "object", "count": "int64"})
    out = df.groupby(["model", "category"]).size().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby("model")["count"].transform("sum")
    rank = {c: i for i, c in enumerate((*violation_categories()[0], NO_VIOLATION))}
    out = out.assign(_order=out["category"].map(rank)).sort_values(["model", "_order"], kind="mergesort")
    out["category"] = out["category"].astype(object)
    return _finish(out, CATEGORY_COLUMNS, ints=("count",))


def first_violation_hist(scores: pd.DataFrame, bin_width: int = 1) -> pd.DataFrame:
    """One row per failed attempt with a located violation: where in the plan it broke.

    ``relative_position`` is ``first_violation_step / solution_length``; it can exceed
    1 when a plan runs past the optimal length before going wrong. The rows are kept
    unbinned so the plot (and any later reader) chooses its own histogram bins.
    """
    df = _prepare(scores, bin_width)
    df = df[df["first_violation_step"].notna() & (df["solution_length"] > 0)].copy()
    if df.empty:
        return _empty(
            FIRST_VIOLATION_COLUMNS,
            {
                "model": "object",
                "L": "int64",
                "violation": "object",
                "first_violation_step": "int64",
                "solution_length": "int64",
            },
        )
    df["relative_position"] = df["first_violation_step"] / df["solution_length"]
    df["violation"] = df["violation"].fillna(NO_VIOLATION).astype(object)
    df = df.sort_values(["model", "L", "relative_position"], kind="mergesort")
    return _finish(df, FIRST_VIOLATION_COLUMNS, ints=("L", "first_violation_step", "solution_length"))


def overall(scores: pd.DataFrame) -> pd.DataFrame:
    """Headline numbers per model.

    An attempt counts as invalid output when it has a parse error or its violation
    says the text was not a plan at all, which separates formatting failures from
    reasoning failures.
    """
    df = _prepare(scores)
    if df.empty:
        return _empty(OVERALL_COLUMNS, {"model": "object", "attempts": "int64", "instances": "int64"})
    df["invalid_output"] = (df["parse_error"].notna() | df["violation"].isin(INVALID_OUTPUT_LABELS)).astype(
        "float64"
    )
    out = (
        df.groupby("model", sort=True)
        .agg(**_RATES, invalid_output_share=("invalid_output", "mean"))
        .reset_index()
    )
    return _finish(out, OVERALL_COLUMNS, ints=("attempts", "instances"))
