"""The report page: one self-contained HTML page from the analysis tables (plain code;
``stage.py`` is the Prefect task around it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horizonbench.analysis.failures import ATTEMPT_KEY, choose_failures, choose_maps
from horizonbench.reports.html import render_report
from horizonbench.reports.maze_map import violation_map_for_answer
from horizonbench.schemas.horizons import HORIZONS_SCHEMA, WAVES_SCHEMA
from horizonbench.schemas.seqmodels import SEQMODELS_SCHEMA
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, SCORES_SCHEMA
from horizonbench.tasks.analyse.seqmodels import SEQMODELS_REL
from horizonbench.tasks.analyse.worlds import read_world_analysis
from horizonbench.tasks.run_folder.layout import (
    ATTEMPTS_REL,
    HORIZONS_REL,
    SCORES_REL,
    WAVES_REL,
    instances_rel,
)
from horizonbench.tasks.run_folder.storage import write_text
from horizonbench.tasks.run_folder.table_parts import part_files

REPORT_REL = "report/index.html"
#: failing answers the report shows per model (stratified; analysis/failures.py)
FAILURES_PER_MODEL = 200
#: violation maps drawn per model and maze family label
MAPS_PER_MODEL = 3
_SCORE_COLUMNS = [
    "model",
    "family",
    "instance_id",
    "sample",
    "mode",
    "answered",
    "success",
    "solution_length",
    "violation",
    "first_violation_step",
]


def failure_examples(
    scores: pd.DataFrame, attempts: pd.DataFrame | Path, per_model: int = FAILURES_PER_MODEL
) -> list[dict[str, Any]]:
    """The failing answers the report shows, each with its answer text: at most
    ``per_model`` per model, chosen by ``analysis.failures.choose_failures``.

    ``attempts`` is the attempts table or the path of its Parquet file; from a file
    only the chosen rows' answers are read (a scan filtered on their instance ids), so
    a run of a million attempts never holds every answer in memory.
    """
    chosen, _ = choose_failures(scores, per_model)
    return _with_responses(chosen, attempts)


def _with_responses(chosen: pd.DataFrame, attempts: pd.DataFrame | Path) -> list[dict[str, Any]]:
    if chosen.empty:
        return []
    columns = [*ATTEMPT_KEY, "response"]
    if isinstance(attempts, Path):
        answers = _rows_of(attempts, set(chosen["instance_id"]), columns).to_pandas()
    else:
        answers = attempts
    answers = answers.assign(
        mode=_modes(answers),
        turn=answers["turn"].astype("int64") if "turn" in answers.columns else 0,
        sample=answers["sample"].astype("int64"),
    )[columns]
    answers = answers.astype({"model": str, "family": str, "instance_id": str, "mode": str})
    merged = chosen.merge(answers, on=ATTEMPT_KEY, how="inner", sort=False)
    return [
        {
            "model": r.model,
            "family": r.family,
            "mode": r.mode,
            "turn": int(r.turn),
            "sample": int(r.sample),
            "instance_id": r.instance_id,
            "solution_length": int(r.solution_length),
            "L_bin": int(r.L_bin),
            "violation": r.violation,
            "first_violation_step": None if pd.isna(r.first_violation_step) else int(r.first_violation_step),
            "response": r.response or "",
        }
        for r in merged.itertuples()
    ]


#: attempt rows decoded at a time when looking for the chosen answers
_BATCH_ROWS = 16_384


def _rows_of(path: Path, instance_ids: set[str], columns: list[str] | None = None) -> pa.Table:
    """The rows of ``instance_ids`` in a run table, streamed in batches: the tables are
    written as one row group, and a filtered read would decode the whole of it at once
    (1.4 GB of answers at a million attempts)."""
    file = pq.ParquetFile(path)
    present = [c for c in (columns or file.schema_arrow.names) if c in file.schema_arrow.names]
    wanted = pa.array(sorted(instance_ids), type=pa.string())
    kept = [
        batch.filter(pc.is_in(batch.column("instance_id"), value_set=wanted))
        for batch in file.iter_batches(batch_size=_BATCH_ROWS, columns=present)
    ]
    schema = pa.schema([file.schema_arrow.field(c) for c in present])
    return pa.Table.from_batches([b for b in kept if b.num_rows], schema=schema)


def _modes(df: pd.DataFrame) -> pd.Series:
    """Each row's mode; tables from before rollouts (no ``mode``) hold whole plans."""
    if "mode" not in df.columns:
        return pd.Series("plan", index=df.index, dtype=object)
    return df["mode"].astype(object).where(df["mode"].notna(), "plan")


def violation_maps(
    run_dir: Path, examples: list[dict[str, Any]], per_model: int = MAPS_PER_MODEL
) -> list[dict]:
    """SVG maps of a few maze failures (``analysis.failures.choose_maps``) drawn from
    their instance rows and answers; the instance tables are read filtered on the
    chosen ids."""
    if not examples:
        return []
    frame = pd.DataFrame(examples)
    picked = choose_maps(frame, per_model)
    out = []
    for family, part in picked.groupby("family", sort=True):
        files = part_files(run_dir / instances_rel(str(family)))
        if not files:
            continue
        ids = set(part["instance_id"])
        rows = {r["instance_id"]: r for f in files for r in _rows_of(f, ids).to_pylist()}
        for r in part.itertuples():
            row = rows.get(r.instance_id)
            if row is None:
                continue
            step = None if pd.isna(r.first_violation_step) else int(r.first_violation_step)
            title = f"{r.model} on {r.family} {r.instance_id} (L = {r.solution_length}): {r.violation}"
            out.append(
                {
                    "model": r.model,
                    "family": r.family,
                    "instance_id": r.instance_id,
                    "sample": int(r.sample),
                    "solution_length": int(r.solution_length),
                    "violation": r.violation,
                    "step": step,
                    "svg": violation_map_for_answer(
                        row, r.response, step, title=title, violation=r.violation
                    ),
                }
            )
    return sorted(out, key=lambda m: (m["model"], m["family"], m["solution_length"], m["instance_id"]))


def _read(path: Path, schema: pa.Schema, columns: list[str] | None = None) -> pd.DataFrame:
    """A table of the run (only ``columns`` when given), or an empty one of the same
    columns when the run has none (a world study alone has no attempts or family
    analysis)."""
    if not path.exists():
        empty = schema.empty_table().to_pandas()
        return empty[columns] if columns else empty
    if columns:
        present = set(pq.read_schema(path).names)
        return pq.read_table(path, columns=[c for c in columns if c in present]).to_pandas()
    return pq.read_table(path, schema=schema).to_pandas()


def write_report(run_dir: Path, title: str, run_info: dict[str, Any], counts: dict[str, Any]) -> Path:
    """The run's report page (``report/index.html``) from its analysis tables, a sample of
    its failing answers with their violation maps, and the world analysis if any."""
    tables = {
        name: _read(run_dir / "analysis" / f"{name}.parquet", schema)
        for name, schema in ANALYSIS_SCHEMAS.items()
    }
    # a training study's table (analysis/seqmodels.parquet); empty, and no section, without one
    tables["seqmodels"] = _read(run_dir / SEQMODELS_REL, SEQMODELS_SCHEMA)
    # the horizon card opens the report; an adaptive study's waves say how it was pinned
    tables["horizons"] = _read(run_dir / HORIZONS_REL, HORIZONS_SCHEMA)
    tables["adaptive_waves"] = _read(run_dir / WAVES_REL, WAVES_SCHEMA)
    scores = _read(run_dir / SCORES_REL, SCORES_SCHEMA, _SCORE_COLUMNS)
    chosen, totals = choose_failures(scores, FAILURES_PER_MODEL) if len(scores) else (pd.DataFrame(), {})
    attempts_path = run_dir / ATTEMPTS_REL
    examples = _with_responses(chosen, attempts_path) if len(chosen) and attempts_path.exists() else []
    html = render_report(
        title=title,
        run_info=run_info,
        tables=tables,
        examples=examples,
        failures_total=totals,
        maps=violation_maps(run_dir, examples),
        failures_per_model=FAILURES_PER_MODEL,
        counts=counts,
        worlds=read_world_analysis(run_dir),
    )
    dest = run_dir / REPORT_REL
    write_text(html, dest)
    return dest
