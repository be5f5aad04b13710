"""Atomic writes and the run folder layout.

Every file is written to a temporary name beside its destination and renamed into
place, so a crash never leaves a half-written table under a real name. Tables are
first written to ``<run>/.staging/`` and only promoted after validation passes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench.schemas.tables import with_version

STAGING = ".staging"


def umask_bits() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(dest: Path) -> Iterator[Path]:
    """A temporary path that becomes ``dest`` only if the block finishes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~umask_bits())  # mkstemp makes 0600; results are for sharing
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_table(table: pa.Table, dest: Path, name: str) -> Path:
    """Write Parquet with ``schema_version`` metadata; deterministic bytes for equal tables."""
    table = table.replace_schema_metadata(with_version(table.schema, name).metadata)
    with atomic_path(dest) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=True)
    return dest


def rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def write_text(text: str, dest: Path) -> Path:
    with atomic_path(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return dest


def write_json(data: Any, dest: Path) -> Path:
    return write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", dest)


def staged(run: Path, rel: str) -> Path:
    return run / STAGING / rel


def promote(run: Path, rel: str) -> Path:
    """Move a validated file or folder from staging to its real place in the run.

    When the run folder already holds the same bytes (a rerun whose inputs did not
    change), the staged copy is dropped and the file left as it was: a rerun changes
    nothing but what is downstream of what changed, modification times included, so a
    reader watching the folder sees no change where there is none."""
    src = staged(run, rel)
    dest = run / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    if _same_content(src, dest):
        if src.is_dir():
            shutil.rmtree(src)
        else:
            src.unlink()
        return dest
    if dest.is_dir():
        shutil.rmtree(dest)
    elif dest.exists():
        dest.unlink()
    os.replace(src, dest)
    return dest


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _same_content(src: Path, dest: Path) -> bool:
    """Same file, or same folder tree of files, byte for byte."""
    if src.is_file() and dest.is_file():
        return _same_bytes(src, dest)
    if not (src.is_dir() and dest.is_dir()):
        return False
    a = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    b = sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file())
    return a == b and all(_same_bytes(src / r, dest / r) for r in a)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
