"""``horizonbench export``: step tables of the puzzle families for training sequence models.

Reads a run folder's instance tables and writes, per family and split, Parquet and/or
JSONL files that Hugging Face ``datasets`` loads as they are
(``load_dataset("parquet", data_files={"train": ..., "validation": ..., "ood": ...})``).
Every file is written to a temporary name and renamed, and the step table is checked
by its Great Expectations suite (splits disjoint and complete) before anything is
renamed into place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horizonbench.core.errors import ConfigError, ValidationFailed
from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.steps import (
    IN_DISTRIBUTION_MAX_N,
    SPLITS,
    SplitRule,
    assign_splits,
    step_overlap,
    step_rows,
)
from horizonbench.schemas.expectations import export_suite
from horizonbench.schemas.tables import with_version
from horizonbench.tasks.run_folder.layout import instances_rel
from horizonbench.tasks.run_folder.table_parts import read_parts
from horizonbench.tasks.run_folder.verify import check_tables, read_manifest
from horizonbench.tasks.validate.checks import validate_frame

STEP_FIELDS = [
    pa.field("instance_id", pa.string(), nullable=False),
    pa.field("family", pa.string(), nullable=False),
    pa.field("n", pa.int32(), nullable=False),
    pa.field("split", pa.string(), nullable=False),
    pa.field("goal_state", pa.string(), nullable=False),
    pa.field("solution_length", pa.int32(), nullable=False),
]
STEP_TAIL = [
    pa.field("step", pa.int32(), nullable=False),
    pa.field("current_state", pa.string(), nullable=False),
    pa.field("move", pa.string(), nullable=False),
    pa.field("next_state", pa.string(), nullable=False),
    pa.field("is_final", pa.bool_(), nullable=False),
]


def puzzle_families(run: Path) -> list[str]:
    """Families of the run that have step tables (the puzzle families)."""
    found = []
    for d in sorted((run / "instances").glob("*")):
        if d.is_dir() and hasattr(_family(d.name), "rule_fields"):
            found.append(d.name)
    return found


def _family(name: str) -> Any:
    try:
        return get_family(name)
    except KeyError:
        return None


#: where a run's step tables are exported by default (``horizonbench export`` and the
#: train stage, which trains on these files)
EXPORTS_REL = "exports"


def export_run(
    run: Path,
    formats: list[str],
    seed: int,
    dest: Path | None = None,
    split: SplitRule = "per_n",
    in_distribution_max: int = IN_DISTRIBUTION_MAX_N,
) -> dict[str, Any]:
    """Write ``<dest>/<family>/<split>.{parquet,jsonl}``; returns per-family row counts,
    the split rule, and the step overlap (validation and OOD steps that repeat a training
    step, input and target: :func:`~horizonbench.datasets.puzzles.steps.step_overlap`),
    also written to ``<dest>/export.json``."""
    if not (run / "instances").is_dir():
        raise ConfigError(f"--run {run}: no instances/ folder (is it a horizonbench run folder?)")
    manifest = read_manifest(run)
    hashes = (manifest or {}).get("content_sha256") or {}
    recorded = {r.split("/")[1] for r in hashes if r.startswith("instances/")}
    # a family whose folder is gone is damage too, not a family to leave out
    families = sorted(set(puzzle_families(run)) | {f for f in recorded if hasattr(_family(f), "rule_fields")})
    check_tables(run, manifest, [instances_rel(f) for f in families])
    if not families:
        raise ConfigError(
            f"--run {run}: no puzzle family to export (hanoi, checkers, river_crossing, blocks_world)"
        )
    dest = dest or run / EXPORTS_REL
    summary: dict[str, Any] = {}
    for name in families:
        family = get_family(name)
        try:  # a folder without a manifest (an unfinished run) is not checked above
            rows = read_parts(run / instances_rel(name)).to_pylist()
        except (OSError, pa.ArrowException) as err:
            raise ConfigError(f"--run {run}: {instances_rel(name)} cannot be read: {err}") from None
        splits = assign_splits(rows, seed, split, in_distribution_max)
        rule_cols = [f.name for f in family.rule_fields]
        schema = with_version(pa.schema(STEP_FIELDS + list(family.rule_fields) + STEP_TAIL), f"export/{name}")
        steps = [s for r in rows for s in step_rows(r, splits[r["instance_id"]], rule_cols)]
        table = pa.Table.from_pylist(steps, schema=schema)
        result = validate_frame(table.to_pandas(), f"export/{name}", export_suite(in_distribution_max), run)
        if not result["success"]:
            raise ValidationFailed(f"export of {name} failed validation: {'; '.join(result['failures'])}")
        counts: dict[str, Any] = {}
        for part_name in SPLITS:
            part = table.filter(pc.equal(table["split"], part_name))
            counts[part_name] = {"instances": len({*part["instance_id"].to_pylist()}), "rows": part.num_rows}
            if "parquet" in formats:
                _atomic(dest / name / f"{part_name}.parquet", lambda p, t=part: pq.write_table(t, p))
            if "jsonl" in formats:
                _atomic(dest / name / f"{part_name}.jsonl", lambda p, t=part: _write_jsonl(t, p))
        counts["split_rule"] = split
        counts["in_distribution_max"] = in_distribution_max
        counts["overlap"] = step_overlap(steps, rule_cols)
        summary[name] = counts
    _atomic(
        dest / "export.json", lambda p: p.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    )
    return summary


def _write_jsonl(table: pa.Table, path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for rec in table.to_pylist():
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")


def _atomic(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
