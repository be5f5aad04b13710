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
    exact=None,
    family="maze",
) -> dict:
    return {
        "model": model,
        "instance_id": instance,
        "family": family,
        "sample": sample,
        "solution_length": L,
        "num_keys": 1,
        "noise_ratio": 0.0,
        "shuffle_ratio": None,
        "success": ok,
        "valid": ok or violation == "suboptimal",
        "exact_match": ok if exact is None else exact,
        "progress_ratio": 1.0 if ok else progress,
        "precision": 1.0 if ok else 0.5,
        "precision_positional": (1.0 if ok else 0.1) if family == "maze" else None,
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
        ["alpha", "wls_prefactor"],
        ["alpha", "wls_origin"],
        ["alpha", "binomial_mle"],
        ["beta", "wls_prefactor"],
        ["beta", "wls_origin"],
        ["beta", "binomial_mle"],
    ]
    for wls_alpha in (out.iloc[0], out.iloc[1]):
        assert wls_alpha.n_bins_dropped == 3  # three single-attempt bins left out
        assert "fewer than 2 attempts" in wls_alpha.note
    assert out.iloc[2].n_attempts == 5
    assert math.isnan(out.iloc[5].L0)  # beta never succeeds
    # writable with an explicit schema
    pa.Table.from_pandas(out, preserve_index=False)


def test_empty_scores_give_empty_tables_with_columns(scores: pd.DataFrame) -> None:
    empty = scores.iloc[:0]
    for fn, cols in [
        (summary.success_by_length, summary.BY_LENGTH_COLUMNS),
        (summary.violation_counts, summary.VIOLATION_COLUMNS),
        (summary.violation_category_counts, summary.CATEGORY_COLUMNS),
        (summary.first_violation_hist, summary.FIRST_VIOLATION_COLUMNS),
        (summary.overall, summary.OVERALL_COLUMNS),
    ]:
        out = fn(empty)
        assert out.empty and list(out.columns) == cols
        _assert_plain_dtypes(out)
    fits = summary.fit_all(empty, bootstrap=5, seed=0)
    assert fits.empty and list(fits.columns) == summary.FIT_COLUMNS


# --- the two precisions ---------------------------------------------------------------


def test_both_precisions_by_length_and_overall(scores: pd.DataFrame) -> None:
    by_l = summary.success_by_length(scores).set_index(["model", "L"])
    # alpha at L = 10: one success (1.0 and 1.0) and one locked_door (0.5 and 0.1)
    assert by_l.loc[("alpha", 10), "precision_mean"] == pytest.approx(0.75)
    assert by_l.loc[("alpha", 10), "precision_positional_mean"] == pytest.approx(0.55)
    over = summary.overall(scores).set_index("model")
    # alpha: two successes and three failures
    assert over.loc["alpha", "precision_mean"] == pytest.approx((2 * 1.0 + 3 * 0.5) / 5)
    assert over.loc["alpha", "precision_positional_mean"] == pytest.approx((2 * 1.0 + 3 * 0.1) / 5)
    assert over.loc["beta", "precision_positional_mean"] == pytest.approx(0.1)


def test_positional_precision_missing_is_nan(scores: pd.DataFrame) -> None:
    # scores written before the column existed, and families without a gold sequence
    old = scores.drop(columns=["precision_positional"])
    assert summary.overall(old)["precision_positional_mean"].isna().all()
    assert summary.success_by_length(old)["precision_positional_mean"].isna().all()
    hanoi = pa.Table.from_pylist(
        [_row("alpha", "h1", 0, 7, True, family="hanoi")], schema=SCORES_SCHEMA
    ).to_pandas()
    out = summary.overall(hanoi)
    assert math.isnan(out.iloc[0].precision_positional_mean) and out.iloc[0].precision_mean == 1.0


# --- seqBench's failure categories ------------------------------------------------------


def test_violation_counts_carry_the_category(scores: pd.DataFrame) -> None:
    out = summary.violation_counts(scores)
    got = dict(zip(out.violation, out.category, strict=True))
    assert got == {
        "none": "none",
        "locked_door": "locked_door",
        "invalid_output": "invalid_output",
        "non_adjacent_move": "adjacency",
    }


def test_violation_category_counts(scores: pd.DataFrame) -> None:
    extra = pa.Table.from_pylist(
        [
            _row("alpha", "i5", 0, 12, False, violation="key_not_held", step=3, progress=0.2),
            _row("alpha", "i6", 0, 12, False, violation="wrong_key", step=5, progress=0.3),
            _row("alpha", "i7", 0, 12, False, violation="suboptimal", step=6, progress=0.5),
            # another family's violation has no maze category and is left out
            _row("alpha", "h1", 0, 7, False, violation="not_top_disk", step=1, family="hanoi"),
        ],
        schema=SCORES_SCHEMA,
    ).to_pandas()
    out = summary.violation_category_counts(pd.concat([scores, extra], ignore_index=True))
    assert list(out.columns) == summary.CATEGORY_COLUMNS
    _assert_plain_dtypes(out)
    alpha = out[out.model == "alpha"]
    # in the order of categories.CATEGORIES, then the successes
    assert alpha[["category", "count"]].values.tolist() == [
        ["adjacency", 1],
        ["locked_door", 1],
        ["key_usage", 2],
        ["path_inefficiency", 1],
        ["invalid_output", 1],
        ["none", 2],
    ]
    assert alpha["share"].tolist() == pytest.approx([1 / 8, 1 / 8, 2 / 8, 1 / 8, 1 / 8, 2 / 8])
    assert out[out.model == "beta"][["category", "count", "share"]].values.tolist() == [["adjacency", 1, 1.0]]
    empty = summary.violation_category_counts(scores.iloc[:0])
    assert empty.empty and list(empty.columns) == summary.CATEGORY_COLUMNS


# --- which success the fits count -------------------------------------------------------


def test_fits_say_which_success_they_count(scores: pd.DataFrame) -> None:
    out = summary.fit_all(scores, bootstrap=5, seed=0)
    assert out["success_definition"].tolist() == ["simulation"] * 6
    exact = summary.fit_all(scores, bootstrap=5, seed=0, success_definition="exact_match")
    assert exact["success_definition"].tolist() == ["exact_match"] * 6
    # here exact match and success agree, so the fits do too
    pd.testing.assert_frame_equal(
        out.drop(columns="success_definition"), exact.drop(columns="success_definition")
    )
    with pytest.raises(ValueError, match="unknown success definition"):
        summary.fit_all(scores, bootstrap=5, seed=0, success_definition="pass_at_k")


def test_exact_match_fit_reads_exact_match() -> None:
    # every plan succeeds by simulation, none is the gold plan (another optimal plan)
    rows = [_row("alpha", f"i{L}", 0, L, True, exact=False) for L in (5, 10, 15, 20)]
    df = pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()
    sim = summary.fit_all(df, bootstrap=5, seed=0).set_index("method")
    exact = summary.fit_all(df, bootstrap=5, seed=0, success_definition="exact_match").set_index("method")
    assert math.isinf(sim.loc["binomial_mle", "L0"])  # no decay at all
    assert math.isnan(exact.loc["binomial_mle", "L0"]) and "no successes" in exact.loc["binomial_mle", "note"]
    assert (exact["success_definition"] == "exact_match").all()
