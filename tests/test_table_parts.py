"""Partitioned tables: the bytes depend on the rows only, never on how they arrived."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.tasks.run_folder.table_parts import (
    PartWriter,
    iter_batches,
    part_files,
    read_parts,
    total_rows,
)

SCHEMA = pa.schema([pa.field("i", pa.int64(), nullable=False), pa.field("facts", pa.list_(pa.string()))])


def rows(n: int) -> pa.Table:
    return pa.table(
        {"i": list(range(n)), "facts": [[f"fact {j}" for j in range(i % 7)] for i in range(n)]}, schema=SCHEMA
    )


def write(folder: Path, table: pa.Table, cuts: list[int]) -> bytes:
    with PartWriter(folder, SCHEMA, "t", part_rows=12, row_group_rows=4) as w:
        edges = [0, *sorted(c % (table.num_rows + 1) for c in cuts), table.num_rows]
        for a, b in zip(edges, edges[1:], strict=False):
            w.write(table.slice(a, b - a))
    return b"".join(f.name.encode() + f.read_bytes() for f in part_files(folder))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 40), cuts=st.lists(st.integers(0, 60), max_size=8))
def test_bytes_do_not_depend_on_batching(tmp_path: Path, n: int, cuts: list[int]) -> None:
    table = rows(n)
    one = write(tmp_path / "one", table, [])
    many = write(tmp_path / "many", table, cuts)
    assert one == many
    files = part_files(tmp_path / "many")
    assert len(files) == max(1, -(-n // 12))
    assert read_parts(tmp_path / "many").to_pylist() == table.to_pylist()
    assert total_rows(tmp_path / "many") == n
    for f in files[:-1]:  # full parts: 12 rows in row groups of 4
        md = pq.ParquetFile(f).metadata
        assert md.num_rows == 12 and md.num_row_groups == 3
    assert pq.read_schema(files[0]).metadata[b"horizonbench_table"] == b"t"
    assert [b.num_rows for b in iter_batches(tmp_path / "many", batch_rows=4)] == [
        4 for _ in range(n // 4)
    ] + ([n % 4] if n % 4 else [])


def test_an_empty_table_is_one_empty_part(tmp_path: Path) -> None:
    with PartWriter(tmp_path, SCHEMA, "t") as w:
        w.write(rows(0))
    (only,) = part_files(tmp_path)
    assert only.name == "part-00000.parquet" and pq.read_table(only).num_rows == 0


def test_a_crash_leaves_whole_parts_only(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), PartWriter(tmp_path, SCHEMA, "t", part_rows=8, row_group_rows=4) as w:
        w.write(rows(10))  # one whole part, two rows pending
        raise RuntimeError("interrupted")
    assert [f.name for f in tmp_path.iterdir()] == ["part-00000.parquet"]
    assert pq.read_table(tmp_path / "part-00000.parquet").num_rows == 8


def test_a_rewrite_drops_the_old_parts(tmp_path: Path) -> None:
    with PartWriter(tmp_path, SCHEMA, "t", part_rows=4, row_group_rows=4) as w:
        w.write(rows(10))
    assert len(part_files(tmp_path)) == 3
    with PartWriter(tmp_path, SCHEMA, "t", part_rows=4, row_group_rows=4) as w:
        w.write(rows(3))
    assert [f.name for f in part_files(tmp_path)] == ["part-00000.parquet"]


def test_part_rows_must_hold_whole_row_groups(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple"):
        PartWriter(tmp_path, SCHEMA, "t", part_rows=10, row_group_rows=4)
