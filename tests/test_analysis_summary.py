"""Summary tables on a small hand-made scores table built with the real schema."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from horizonbench.analysis import summary
from horizonbench.schemas.tables import SCORES_SCHEMA


def _row(
    model: str,
    instance: str,
    sample: int,
    L: int,
    ok: bool,
    *,
    violation=None,
    step=None,
    parse_error=None,
    progress=None,
) -> dict:
    return {
        "model": model,
        "instance_id": instance,
        "family": "maze",
        "sample": sample,
        "solution_length": L,
        "num_keys": 1,
        "noise_ratio": 0.0,
        "shuffle_ratio": None,
        "success": ok,
        "valid": ok or violation == "suboptimal",
        "exact_match": ok,
        "progress_ratio": 1.0 if ok else progress,
        "precision": 1.0 if ok else 0.5,
        "recall": 1.0 if ok else 0.25,
        "plan_length": L,
        "violation": violation,
        "first_violation_step": step,
        "parse_error": parse_error,
    }


@pytest.fixture
def scores() -> pd.DataFrame:
    rows = [
        _row("alpha", "i1", 0, 10, True),
        _row("alpha", "i1", 1, 10, False, violation="locked_door", step=4, progress=0.4),
        _row("alpha", "i2", 0, 11, False, violation="invalid_output", parse_error="no plan", progress=0.0),
        _row("alpha", "i3", 0, 20, True),
        _row("alpha", "i4", 0, 25, False, violation="non_adjacent_move", step=20, progress=0.8),
        _row("beta", "i1", 0, 10, False, violation="non_adjacent_move", step=2, progress=0.2),
    ]
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()


def _assert_plain_dtypes(df: pd.DataFrame) -> None:
    for col, dtype in df.dtypes.items():
        assert dtype in (np.dtype("float64"), np.dtype("int64"), np.dtype(bool), np.dtype(object)), (
            f"{col} has {dtype}"
        )


def test_success_by_length_unit_bins(scores: pd.DataFrame) -> None:
    out = summary.success_by_length(scores)
    assert list(out.columns) == summary.BY_LENGTH_COLUMNS
    _assert_plain_dtypes(out)
    assert out[["model", "L"]].values.tolist() == [
        ["alpha", 10],
        ["alpha", 11],
        ["alpha", 20],
        ["alpha", 25],
        ["beta", 10],
    ]
    first = out.iloc[0]
    assert (first.attempts, first.instances, first.successes) == (2, 1, 1)
    assert first.success_rate == 0.5 and first.valid_rate == 0.5
    assert first.progress_ratio_mean == pytest.approx(0.7)
    assert first.progress_ratio_sem == pytest.approx(np.std([1.0, 0.4], ddof=1) / math.sqrt(2))
    assert math.isnan(out.iloc[1].progress_ratio_sem)  # one attempt: no spread


def test_success_by_length_wide_bins(scores: pd.DataFrame) -> None:
    out = summary.success_by_length(scores, bin_width=10)
    alpha = out[out.model == "alpha"].set_index("L")
    assert alpha.loc[10, "attempts"] == 3 and alpha.loc[10, "instances"] == 2
    assert alpha.loc[20, "attempts"] == 2 and alpha.loc[20, "success_rate"] == 0.5


def test_violation_counts(scores: pd.DataFrame) -> None:
    out = summary.violation_counts(scores)
    assert list(out.columns) == summary.VIOLATION_COLUMNS
    _assert_plain_dtypes(out)
    alpha = out[out.model == "alpha"]
    assert alpha.iloc[0].violation == "none" and alpha.iloc[0]["count"] == 2
    assert alpha["share"].sum() == pytest.approx(1.0)
    assert out[out.model == "beta"].violation.tolist() == ["non_adjacent_move"]


def test_first_violation_hist(scores: pd.DataFrame) -> None:
    out = summary.first_violation_hist(scores)
    assert list(out.columns) == summary.FIRST_VIOLATION_COLUMNS
    _assert_plain_dtypes(out)
    assert len(out) == 3  # attempts without a located violation are left out
    assert sorted(out.relative_position) == pytest.approx([0.2, 0.4, 0.8])


def test_overall(scores: pd.DataFrame) -> None:
    out = summary.overall(scores).set_index("model")
    assert list(out.reset_index().columns) == summary.OVERALL_COLUMNS
    assert out.loc["alpha", "attempts"] == 5 and out.loc["alpha", "instances"] == 4
    assert out.loc["alpha", "success_rate"] == pytest.approx(0.4)
    assert out.loc["alpha", "invalid_output_share"] == pytest.approx(0.2)
    assert out.loc["beta", "success_rate"] == 0.0


def test_fit_all_one_row_per_model_and_method(scores: pd.DataFrame) -> None:
    out = summary.fit_all(scores, bootstrap=5, seed=0, min_attempts_per_bin=2)
    assert list(out.columns) == summary.FIT_COLUMNS
    _assert_plain_dtypes(out)
    assert out[["model", "method"]].values.tolist() == [
        ["alpha", "wls_log"],
        ["alpha", "binomial_mle"],
        ["beta", "wls_log"],
        ["beta", "binomial_mle"],
    ]
    wls_alpha = out.iloc[0]
    assert wls_alpha.n_bins_dropped == 3  # three single-attempt bins left out
    assert "fewer than 2 attempts" in wls_alpha.note
    assert out.iloc[1].n_attempts == 5
    assert math.isnan(out.iloc[3].L0)  # beta never succeeds
    # writable with an explicit schema
    pa.Table.from_pandas(out, preserve_index=False)


def test_empty_scores_give_empty_tables_with_columns(scores: pd.DataFrame) -> None:
    empty = scores.iloc[:0]
    for fn, cols in [
        (summary.success_by_length, summary.BY_LENGTH_COLUMNS),
        (summary.violation_counts, summary.VIOLATION_COLUMNS),
        (summary.first_violation_hist, summary.FIRST_VIOLATION_COLUMNS),
        (summary.overall, summary.OVERALL_COLUMNS),
    ]:
        out = fn(empty)
        assert out.empty and list(out.columns) == cols
        _assert_plain_dtypes(out)
    fits = summary.fit_all(empty, bootstrap=5, seed=0)
    assert fits.empty and list(fits.columns) == summary.FIT_COLUMNS
