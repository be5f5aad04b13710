"""The world study's analysis tables in the run folder: written from the episodes table
through :mod:`horizonbench.analysis.worlds` (the phase diagrams, critical points, the
harness table), and read back for the report and ``compare``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench.analysis.ablations import ablation_table
from horizonbench.analysis.world_horizons import t_fine
from horizonbench.analysis.worlds import world_tables
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import EPISODES_SCHEMA, WORLD_ANALYSIS_SCHEMAS
from horizonbench.tasks.run_folder.layout import EPISODES_REL, WORLD_ANALYSIS_PREFIX
from horizonbench.tasks.run_folder.storage import write_table


def frame_table(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """A DataFrame as a table of ``schema`` through Python objects (no pandas dtypes
    leak into the file; NaN in a float column stays NaN, missing text becomes null)."""
    records = df[schema.names].astype(object).to_dict("records")
    for rec in records:
        for field in schema:
            value = rec[field.name]
            if not pa.types.is_floating(field.type) and value is not None and value != value:
                rec[field.name] = None
    return pa.Table.from_pylist(records, schema=schema)


def write_world_analysis(cfg: Config, run_dir: Path) -> tuple[dict[str, str], dict[str, pd.DataFrame]]:
    """The phase-diagram tables of :mod:`horizonbench.analysis.worlds` (and the model
    agents' ``harness`` table, empty without them), written to
    ``<run>/analysis/worlds_<name>.parquet``; returns their paths and the tables."""
    assert cfg.worlds is not None
    episodes = pq.read_table(run_dir / EPISODES_REL, schema=EPISODES_SCHEMA).to_pandas()
    locked = cfg.worlds.g1b_pair  # G1b's pair locked before data collection, if given
    pair = None if locked is None else (locked.sc_from, locked.sc_to, locked.dd)
    tables = world_tables(
        episodes, cfg.analysis.bootstrap, cfg.run.seed, cfg.worlds.delta0, cfg.worlds.horizon_label(), pair
    )
    # Table 4 (analysis/ablations.py): every level against the backdrop, paired on the world
    tables["ablations"] = ablation_table(episodes, cfg.worlds.horizon_label())
    # Table 7 (analysis/world_horizons.py): its horizon rows, T starred as the paper does
    tables["t_fine"] = t_fine(tables["ablations"])
    paths = {}
    for name, df in tables.items():
        dest = run_dir / f"{WORLD_ANALYSIS_PREFIX}{name}.parquet"
        write_table(frame_table(df, WORLD_ANALYSIS_SCHEMAS[name]), dest, f"analysis/worlds_{name}")
        paths[name] = str(dest)
    return paths, tables


def read_world_analysis(run_dir: Path) -> dict[str, pd.DataFrame] | None:
    """The world analysis tables of a run, or None when it has none.

    Runs from before the harness are read too: their missing ``harness`` table is
    empty, and their ``excluded`` table (no budget columns) gets ``budget_exceeded`` 0
    and ``measured`` = episodes - horizon_short, which is what those runs measured."""
    if not (run_dir / f"{WORLD_ANALYSIS_PREFIX}grid.parquet").exists():
        return None
    tables = {}
    for name, schema in WORLD_ANALYSIS_SCHEMAS.items():
        path = run_dir / f"{WORLD_ANALYSIS_PREFIX}{name}.parquet"
        if path.exists():
            tables[name] = pq.read_table(path, schema=schema).to_pandas()
        else:
            tables[name] = schema.empty_table().to_pandas()
    ex = tables["excluded"]
    if len(ex) and ex["budget_exceeded"].isna().all():
        tables["excluded"] = ex.assign(
            budget_exceeded=0, measured=(ex["episodes"] - ex["horizon_short"]).astype("int64")
        )
    return tables
