"""The analysis at scale gives the same numbers as the straightforward code it replaced:
``to_table`` column by column against the Python-object conversion, the cluster
bootstrap on (cluster, L) cells against weights per attempt; and the benchmark's
synthetic run folder (benchmarks/analysis_scale.py) has the pipeline's schemas."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizonbench.analysis import decay
from horizonbench.tasks.analyse.scores import to_table

_SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.float64()), ("c", pa.string()), ("d", pa.bool_())])


def _through_objects(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """The conversion ``to_table`` replaced: every cell a Python object."""
    return pa.Table.from_pylist(df.astype(object).where(df.notna(), None).to_dict("records"), schema=schema)


FRAMES = {
    "plain": pd.DataFrame({"a": [1, 2], "b": [1.5, np.nan], "c": ["x", None], "d": [True, False]}),
    "floats for ints, NaN": pd.DataFrame(
        {"a": [1.0, np.nan], "b": [np.inf, -0.0], "c": ["x", np.nan], "d": [True, None]}
    ),
    "fractional floats for ints": pd.DataFrame(
        {"a": [1.5, 2.7], "b": [1, 2], "c": ["x", "y"], "d": [True, True]}
    ),
    "empty, object columns": pd.DataFrame(columns=["a", "b", "c", "d"]),
    "missing and extra columns": pd.DataFrame({"a": [1], "zz": [3], "c": ["q"]}),
    "nullable dtypes": pd.DataFrame(
        {
            "a": pd.array([1, None], dtype="Int64"),
            "b": pd.array([1.0, None], dtype="Float64"),
            "c": pd.array(["x", None], dtype="string"),
            "d": pd.array([True, None], dtype="boolean"),
        }
    ),
    "pd.NA in objects": pd.DataFrame(
        {"a": [3, 4], "b": [0.1, 0.2], "c": pd.Series(["u", pd.NA], dtype=object), "d": [False, True]}
    ),
    "pandas 3 str dtype": pd.DataFrame(
        {"a": [3, 4], "b": [0.1, 0.2], "c": pd.Series(["x", None], dtype="str"), "d": [False, True]}
    ),
    "categorical text": pd.DataFrame(
        {"a": [1, 2], "b": [1.0, 2.0], "c": pd.Categorical(["x", "y"]), "d": [1, 0]}
    ),
    "objects holding numbers": pd.DataFrame(
        {
            "a": pd.Series([1, None], dtype=object),
            "b": pd.Series([1, 2.5], dtype=object),
            "c": ["a", "b"],
            "d": pd.Series([True, None], dtype=object),
        }
    ),
    "unsigned and float32": pd.DataFrame(
        {
            "a": np.array([1, 2], dtype=np.uint32),
            "b": np.array([1.1, np.nan], dtype=np.float32),
            "c": ["a", "b"],
            "d": [True, False],
        }
    ),
}


@pytest.mark.parametrize("name", list(FRAMES))
def test_to_table_is_the_python_object_conversion(name: str) -> None:
    df = FRAMES[name]
    try:
        expected = _through_objects(df, _SCHEMA)
    except pa.ArrowException as err:
        with pytest.raises(type(err)):
            to_table(df, _SCHEMA)
        return
    got = to_table(df, _SCHEMA)
    assert got.schema == _SCHEMA
    assert got.equals(expected, check_metadata=True)


def test_to_table_refuses_what_the_object_conversion_refuses() -> None:
    df = pd.DataFrame({"a": [True, False], "b": [1.0, 2.0], "c": ["a", "b"], "d": [1, 0]})
    with pytest.raises(pa.ArrowException):
        _through_objects(df, _SCHEMA)
    with pytest.raises(pa.ArrowException):
        to_table(df, _SCHEMA)


def _bootstrap_per_attempt(L_index, L_values, y, codes, n_clusters, reps, seed, scale):
    """The bootstrap the cell version replaced: weights per attempt."""
    rng = np.random.default_rng(seed)
    rates = np.empty(reps)
    for i in range(reps):
        draw = rng.integers(0, n_clusters, size=n_clusters)
        mult = np.bincount(draw, minlength=n_clusters).astype(float)
        counts = decay._aggregate(L_index, L_values, y, mult[codes])
        rates[i] = decay._mle_point(counts, scale)[0]
    return rates


@pytest.mark.parametrize("case", range(6))
def test_bootstrap_on_cells_gives_the_same_rates(case: int) -> None:
    rng = np.random.default_rng(case)
    n = int(rng.integers(50, 1500))
    L = rng.integers(1, 40, n).astype(float)
    y = (rng.random(n) < np.exp(-L / rng.uniform(5, 60))).astype(float)
    # clusters that hold one L (instances) and, for odd cases, several
    clusters = rng.integers(0, max(2, n // 4), n) if case % 2 else np.searchsorted(np.unique(L), L)
    L_values, L_index = np.unique(L, return_inverse=True)
    codes, n_clusters = decay._cluster_members(clusters)
    args = (L_index.ravel(), L_values, y, codes, n_clusters, 25, case, float(L.max()))
    np.testing.assert_array_equal(decay._bootstrap_rates(*args), _bootstrap_per_attempt(*args))


def test_benchmark_builds_a_run_folder_of_the_pipelines_schemas(tmp_path: Path) -> None:
    from horizonbench.schemas.tables import ATTEMPTS_SCHEMA, SCORES_SCHEMA
    from horizonbench.tasks.report.compare import analysis_parts, read_run

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import analysis_scale
    finally:
        sys.path.pop(0)
    built = analysis_scale.build_run(tmp_path / "run", 400)
    assert built["rows"] == 400
    scores = pq.read_table(tmp_path / "run" / "scores" / "scores.parquet")
    attempts = pq.read_table(tmp_path / "run" / "attempts" / "attempts.parquet")
    instances = pq.read_table(tmp_path / "run" / "instances" / "maze" / "part-00000.parquet")
    assert scores.schema.equals(SCORES_SCHEMA) and attempts.schema.equals(ATTEMPTS_SCHEMA)
    assert set(scores["instance_id"].to_pylist()) == set(instances["instance_id"].to_pylist())
    assert analysis_parts(read_run(tmp_path / "run")) == ["scores"]
