"""Partitioned tables: a folder of ``part-NNNNN.parquet`` files written as rows stream in.

A table that grows with the study (instances, scores) is never held whole in one
process: rows arrive in their final order and are cut into row groups and parts of
fixed sizes. The cut points depend only on the row count, never on how the rows were
batched on the way in, so the same rows give the same bytes whatever the shard size
or the number of workers that produced them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench.schemas.tables import with_version
from horizonbench.tasks.run_folder.storage import umask_bits

#: rows per row group: a reader filtering or batching a part decodes at most this many
ROW_GROUP_ROWS = 5_000
#: rows per part file: bounds what one validation or one worker reads at once
PART_ROWS = 100_000
PART_GLOB = "part-*.parquet"


def part_name(i: int) -> str:
    return f"part-{i:05d}.parquet"


def part_files(folder: Path) -> list[Path]:
    """The parts of a table, in order (temporary files start with a dot and are skipped)."""
    return sorted(folder.glob(PART_GLOB))


def read_parts(folder: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """The whole table (or some columns of it): for tables known to be small."""
    files = part_files(folder)
    if not files:
        raise FileNotFoundError(f"no {PART_GLOB} in {folder}")
    tables = [pq.read_table(f, columns=list(columns) if columns is not None else None) for f in files]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def iter_batches(
    folder: Path, columns: Sequence[str] | None = None, batch_rows: int = ROW_GROUP_ROWS
) -> Iterator[pa.RecordBatch]:
    """Stream a table part by part, ``batch_rows`` at a time."""
    for f in part_files(folder):
        with pq.ParquetFile(f) as pf:
            yield from pf.iter_batches(batch_size=batch_rows, columns=list(columns) if columns else None)


class _RowGroups:
    """Cut rows into groups of ``n`` whatever batches they arrive in; each group one
    contiguous chunk per column, so its bytes do not depend on how the rows arrived."""

    def __init__(self, schema: pa.Schema, n: int) -> None:
        self.schema = schema
        self.n = n
        self._pending: list[pa.Table] = []
        self.pending_rows = 0

    def add(self, table: pa.Table) -> Iterator[pa.Table]:
        if not table.num_rows:
            return
        if table.schema.equals(self.schema):
            table = table.replace_schema_metadata(self.schema.metadata)
        else:
            table = table.cast(self.schema)
        self._pending.append(table)
        self.pending_rows += table.num_rows
        while self.pending_rows >= self.n:
            yield self._take(self.n)

    def rest(self) -> pa.Table | None:
        return self._take(self.pending_rows) if self.pending_rows else None

    def _take(self, n: int) -> pa.Table:
        whole = pa.concat_tables(self._pending)
        group, rest = whole.slice(0, n), whole.slice(n)
        self._pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows
        return group.combine_chunks()


class _ParquetFile:
    """One Parquet file written a row group at a time to a temporary name beside
    ``dest``, renamed into place by ``close`` (``abort`` leaves nothing)."""

    def __init__(self, dest: Path, schema: pa.Schema) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.dest = dest
        self.tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        self.rows = 0
        self._writer = pq.ParquetWriter(self.tmp, schema, compression="zstd", write_statistics=True)

    def write_group(self, group: pa.Table) -> None:
        self._writer.write_table(group, row_group_size=max(1, group.num_rows))
        self.rows += group.num_rows

    def close(self) -> Path:
        self._writer.close()
        os.chmod(self.tmp, 0o666 & ~umask_bits())
        os.replace(self.tmp, self.dest)
        return self.dest

    def abort(self) -> None:
        self._writer.close()
        self.tmp.unlink(missing_ok=True)


class TableWriter:
    """One table file written as rows stream in, in row groups of ``row_group_rows``
    (tables read whole downstream, such as scores). Renamed into place at ``close``."""

    def __init__(
        self, dest: Path, schema: pa.Schema, table: str, row_group_rows: int = ROW_GROUP_ROWS
    ) -> None:
        schema = with_version(schema, table)
        self._groups = _RowGroups(schema, row_group_rows)
        self._file = _ParquetFile(dest, schema)

    @property
    def rows(self) -> int:
        return self._file.rows

    def write(self, table: pa.Table) -> None:
        for group in self._groups.add(table):
            self._file.write_group(group)

    def close(self) -> Path:
        rest = self._groups.rest()
        if rest is not None:
            self._file.write_group(rest)
        return self._file.close()

    def abort(self) -> None:
        self._file.abort()


class PartWriter:
    """Append rows in their final order; row groups and parts are cut at fixed counts.

    Each part is written to a temporary name and renamed when full (or at ``close``),
    so a crash leaves only whole parts under real names. ``close`` writes an empty
    ``part-00000`` for a table with no rows, so readers always find its schema.
    """

    def __init__(
        self,
        folder: Path,
        schema: pa.Schema,
        table: str,
        part_rows: int = PART_ROWS,
        row_group_rows: int = ROW_GROUP_ROWS,
    ) -> None:
        if part_rows % row_group_rows:
            raise ValueError("part_rows must be a multiple of row_group_rows")
        self.folder = folder
        self.schema = with_version(schema, table)
        self.part_rows = part_rows
        self.rows = 0
        self.parts: list[Path] = []
        self._groups = _RowGroups(self.schema, row_group_rows)
        self._file: _ParquetFile | None = None
        folder.mkdir(parents=True, exist_ok=True)
        for stale in part_files(folder):  # a rerun into staging starts the table afresh
            stale.unlink()

    def write(self, table: pa.Table) -> None:
        for group in self._groups.add(table):
            self._write_group(group)

    def _write_group(self, group: pa.Table) -> None:
        if self._file is None:
            self._file = _ParquetFile(self.folder / part_name(len(self.parts)), self.schema)
        self._file.write_group(group)
        self.rows += group.num_rows
        if self._file.rows >= self.part_rows:
            self.parts.append(self._file.close())
            self._file = None

    def close(self) -> list[Path]:
        rest = self._groups.rest()
        if rest is not None:
            self._write_group(rest)
        if self._file is not None:
            self.parts.append(self._file.close())
            self._file = None
        if not self.parts:
            self.parts.append(_ParquetFile(self.folder / part_name(0), self.schema).close())
        return list(self.parts)

    def abort(self) -> None:
        """Drop the part being written (its temporary file goes); whole parts stay."""
        if self._file is not None:
            self._file.abort()
            self._file = None

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def total_rows(folder: Path) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in part_files(folder))


def same_bytes(a: Path, b: Path) -> bool:
    """Do two table folders hold the same parts, byte for byte? (tests and benchmarks)"""
    fa, fb = part_files(a), part_files(b)
    if [f.name for f in fa] != [f.name for f in fb]:
        return False
    return all(x.read_bytes() == y.read_bytes() for x, y in zip(fa, fb, strict=True))
