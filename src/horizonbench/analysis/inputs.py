"""Input checks shared by the statistics modules of :mod:`horizonbench.analysis`.

The phase, risk-difference, effect-size and trajectory statistics all take arrays and
DataFrames from callers they do not control; these checks turn a malformed input into
one ``ValueError`` naming it, instead of a NaN that averages silently into a table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd


def bool_series(values: Iterable, name: str) -> np.ndarray:
    """A 1-D boolean array from bools or 0/1 numbers; anything else is an error.

    A missing value is refused rather than read as a failure: whether an unscored
    episode or step counts as bad is the caller's decision, not a silent default.
    """
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if arr.dtype == bool:
        return arr
    if arr.size == 0:
        return arr.astype(bool)
    try:
        num = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must hold booleans or 0/1 values") from exc
    if np.isnan(num).any() or not np.isin(num, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold booleans or 0/1 values (no missing values)")
    return num.astype(bool)


def float_series(values: Iterable, name: str) -> np.ndarray:
    """A 1-D array of finite floats; NaN or inf is refused so no statistic averages it in."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return arr


def unit_pvalues(pvalues: Iterable[float]) -> np.ndarray:
    """A 1-D array of p-values, each in [0, 1]; a NaN is refused, not passed on."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError("p-values must be one-dimensional")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must lie in [0, 1] (no NaN)")
    return p


def require_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Refuse a table without the named columns, naming the missing ones."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}")
