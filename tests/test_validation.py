"""Great Expectations suites: real GX runs on good and broken tables; a failed suite
stops the flow with a clear message and leaves no table that pretends to be complete."""

from __future__ import annotations

from typing import Any, ClassVar

import pyarrow as pa
import pytest

from horizonbench.core.errors import ValidationFailed
from horizonbench.core.registry import get_family, register_family
from horizonbench.core.types import Candidate
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.schemas.expectations import maze_suite, scores_suite
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.validate.checks import validate_frame


def _instances(n: int = 6) -> pa.Table:
    fam = MazeFamily()
    params = MazeParams(grid_rows=6, grid_cols=6, num_keys=1, noise_ratio=0.3)
    rows = [fam.generate_candidate(params, seed, seed).row for seed in range(n)]
    return pa.Table.from_pylist(rows, schema=fam.instance_schema)


def test_good_instances_pass(tmp_path):
    summary = validate_frame(_instances().to_pandas(), "instances/maze", maze_suite(), tmp_path)
    assert summary["success"], summary["failures"]
    assert (tmp_path / "validation" / "instances__maze.json").exists()


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("solution_length", 99, "_solution_actions"),
        ("instance_id", "maze-dup", "instance_id"),
        ("shuffle_ratio", 1.5, "shuffle_ratio"),
        ("optimal_plan_count", 0, "optimal_plan_count"),
    ],
)
def test_broken_instances_fail_naming_the_column(tmp_path, column, value, expected):
    df = _instances().to_pandas()
    df.loc[0, column] = value
    if column == "instance_id":
        df.loc[1, column] = value
    summary = validate_frame(df, "instances/maze", maze_suite(), tmp_path)
    assert not summary["success"]
    assert any(expected in f for f in summary["failures"]), summary["failures"]
    assert "FAILED" in (tmp_path / "validation" / "instances__maze.md").read_text()


def _scores(**override: Any) -> pa.Table:
    row = {
        "model": "m",
        "instance_id": "maze-1",
        "family": "maze",
        "sample": 0,
        "answered": True,
        "error_class": None,
        "solution_length": 9,
        "num_keys": 1,
        "noise_ratio": 0.0,
        "shuffle_ratio": 1.0,
        "success": True,
        "valid": True,
        "exact_match": True,
        "progress_ratio": 1.0,
        "precision": 1.0,
        "recall": 1.0,
        "plan_length": 9,
        "violation": None,
        "first_violation_step": None,
        "parse_error": None,
    }
    second = row | {
        "sample": 1,
        "success": False,
        "valid": False,
        "violation": "locked_door",
        "progress_ratio": 0.5,
        "first_violation_step": 4,
    }
    return pa.Table.from_pylist([row | override, second], schema=SCORES_SCHEMA)


def test_scores_suite(tmp_path):
    suite = scores_suite(MazeFamily.violations)
    assert validate_frame(_scores().to_pandas(), "scores", suite, tmp_path)["success"]
    bad = validate_frame(_scores(progress_ratio=0.5).to_pandas(), "scores", suite, tmp_path)
    assert not bad["success"]
    assert any("_success_inconsistent" in f for f in bad["failures"])
    bad = validate_frame(_scores(violation="made_up", success=False).to_pandas(), "scores", suite, tmp_path)
    assert any("violation" in f for f in bad["failures"])


class _LyingMaze(MazeFamily):
    """A real maze family whose rows claim one action fewer than their solution has."""

    name: ClassVar[str] = "lying_maze"

    def generate_candidate(self, params, seed, index) -> Candidate:
        cand = super().generate_candidate(params, seed, index)
        if cand.row is not None:
            cand.row["family"] = "maze"
            cand.row["solution_length"] -= 1
        return cand


@pytest.mark.flow
def test_failed_suite_stops_the_flow_and_promotes_nothing(prefect_server, tmp_path):
    from horizonbench.flows.pipeline import pipeline
    from horizonbench.schemas.config import parse_config

    register_family("lying_maze", _LyingMaze)
    assert get_family("lying_maze").name == "lying_maze"
    cfg = parse_config(
        {
            "families": {
                "lying_maze": {
                    "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                    "sampling": {"count": 5, "shard_size": 5},
                }
            },
            "evaluation": {"models": [{"name": "oracle", "provider": "offline", "kind": "oracle"}]},
            # threads, so the workers see the family registered above
            "dask": {"n_workers": 1, "processes": False},
        }
    )
    with pytest.raises(ValidationFailed, match=r"instances/lying_maze failed validation.*solution_length"):
        pipeline(cfg, str(tmp_path))
    assert not (tmp_path / "instances" / "lying_maze").exists()
    assert not (tmp_path / "manifest.json").exists()
    assert not (tmp_path / "attempts").exists()
    assert (
        (tmp_path / "validation" / "instances__lying_maze.md")
        .read_text()
        .startswith("# instances/lying_maze: FAILED")
    )


def _parts(folder, table: pa.Table, part_rows: int = 4) -> None:
    from horizonbench.tasks.run_folder.table_parts import PartWriter

    with PartWriter(folder, table.schema, "instances/maze", part_rows=part_rows, row_group_rows=2) as w:
        w.write(table)


def test_a_partitioned_table_is_validated_part_by_part(tmp_path):
    from horizonbench.tasks.validate.checks import validate_parts

    _parts(tmp_path / "t", _instances(10))
    summary = validate_parts(tmp_path / "t", "instances/maze", maze_suite(), tmp_path)
    assert summary["success"], summary["failures"]
    assert summary["parts"] == 3
    names = sorted(p.name for p in (tmp_path / "validation").glob("*.json"))
    assert names == [
        "instances__maze__part-00000.json",
        "instances__maze__part-00001.json",
        "instances__maze__part-00002.json",
        "keys__instances__maze.json",
    ]


def test_a_duplicate_in_two_parts_fails_the_table(tmp_path):
    from horizonbench.tasks.validate.checks import validate_parts

    table = _instances(6)
    ids = table.column("instance_id").to_pylist()
    ids[5] = ids[0]  # part 0 and part 1 each hold one copy
    table = table.set_column(0, table.schema.field(0), pa.array(ids, pa.string()))
    _parts(tmp_path / "t", table)
    summary = validate_parts(tmp_path / "t", "instances/maze", maze_suite(), tmp_path)
    assert not summary["success"]
    assert any(f.startswith("keys/instances/maze: ") and "instance_id" in f for f in summary["failures"])


def test_a_part_with_a_bad_nested_value_fails_in_the_slim_frame(tmp_path):
    """Nested columns become their lengths for the suite: a solution that does not end
    in rescue, or a facts list that is too short, still fails."""
    from horizonbench.tasks.validate.checks import slim_part, validate_parts

    table = _instances(6)
    rows = table.to_pylist()
    rows[4]["solution"] = rows[4]["solution"][:-1]
    rows[4]["solution_length"] -= 1
    _parts(tmp_path / "t", pa.Table.from_pylist(rows, schema=table.schema))
    frame = slim_part(tmp_path / "t" / "part-00001.parquet", "instances/maze")
    assert frame["facts"].dtype == "Int64" and frame["solution"].dtype == "Int64"
    assert frame["_last_action"].tolist() == ["move_to", "rescue"]
    summary = validate_parts(tmp_path / "t", "instances/maze", maze_suite(), tmp_path)
    assert not summary["success"]
    assert any("instances/maze/part-00001" in f and "_last_action" in f for f in summary["failures"])
