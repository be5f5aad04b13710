"""World-model study stages: run the episodes on Dask in shards, validate the episodes
and steps tables, write the phase-diagram analysis.

Shards are fixed slices of the study's episode list (``worlds.shard_size``) and their
results are concatenated in shard order, so the tables are the same bytes whatever the
number of workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.analysis.worlds import world_tables
from horizonbench.datasets.worlds.study import AgentSpec, run_shard
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import EPISODES_SCHEMA, STEPS_SCHEMA, WORLD_ANALYSIS_SCHEMAS
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.cluster.client import dask_client
from horizonbench.tasks.run_folder.storage import rows_to_table, staged, write_table

EPISODES_REL = "episodes/part-0.parquet"
STEPS_REL = "steps/part-0.parquet"
WORLD_ANALYSIS_PREFIX = "analysis/worlds_"


def agent_specs(cfg: Config) -> list[AgentSpec]:
    """The study's offline agents (model agents play in tasks/evaluate/world_models.py). The
    ``unusable`` agent plays through the harness with the study's harness limits."""
    assert cfg.worlds is not None
    h = cfg.worlds.harness
    harness = {
        "episode_output_tokens": h.episode_output_tokens,
        "episode_wall_s": h.episode_wall_s,
        "repairs": h.repairs,
        "chars_per_token": h.chars_per_token,
        "fallback_streak": h.fallback_streak,
    }
    specs = []
    for a in cfg.worlds.agents:
        if a.kind == "model":
            continue
        params: dict[str, Any] = {
            k: v for k, v in (("capacity", a.capacity), ("rate", a.rate), ("lead", a.lead)) if v is not None
        }
        if a.kind == "unusable":
            params["harness"] = harness
        specs.append(AgentSpec(a.name, a.kind, params))
    return specs


@task(name="world-episodes", cache_policy=NONE)
def run_world_episodes(cfg: Config, run: str) -> dict[str, Any]:
    """Run every offline agent on every episode of the study, in shards on Dask.
    Returns the episode and step rows (shard order) and the counts."""
    logger = get_run_logger()
    assert cfg.worlds is not None
    worlds = cfg.worlds
    episodes = worlds.study().episodes(cfg.run.seed)
    agents = agent_specs(cfg)
    size = worlds.shard_size
    shards = [episodes[i : i + size] for i in range(0, len(episodes), size)]
    episode_rows: list[dict[str, Any]] = []
    step_rows: list[dict[str, Any]] = []
    if agents:
        with dask_client(cfg.dask) as client:
            workers = len(client.scheduler_info().get("workers", {})) or cfg.dask.n_workers  # type: ignore[attr-defined]
            window = max(2, 3 * workers * cfg.dask.threads_per_worker)
            inflight: dict[int, Any] = {}
            nxt = 0
            with prog.progress("world episodes", len(episodes) * len(agents)) as bar:
                try:
                    for i in range(len(shards)):
                        while len(inflight) < window and nxt < len(shards):
                            inflight[nxt] = client.submit(  # type: ignore[attr-defined]
                                run_shard, shards[nxt], agents, worlds.horizon_factor, pure=False
                            )
                            nxt += 1
                        eps, steps = inflight.pop(i).result()
                        episode_rows.extend(eps)
                        step_rows.extend(steps)
                        bar.advance(len(eps))
                finally:
                    for fut in inflight.values():
                        fut.cancel()
    short = sum(r["horizon_short"] for r in episode_rows)
    wins = sum(r["success"] for r in episode_rows)
    if agents:
        logger.info(
            "world episodes: %d (%d offline agents x %d worlds), %d won, %d steps, "
            "%d with T < L* (left out of rates)",
            len(episode_rows),
            len(agents),
            len(episodes),
            wins,
            len(step_rows),
            short,
        )
    return {
        "episodes": episode_rows,
        "steps": step_rows,
        "stats": {
            "episodes": len(episode_rows),
            "worlds": len(episodes),
            "agents": [a.name for a in agents],
            "steps": len(step_rows),
            "successes": wins,
            "horizon_short": short,
        },
    }


def write_world_tables(
    run: Path, episode_rows: list[dict[str, Any]], step_rows: list[dict[str, Any]]
) -> None:
    """Stage the episodes and steps tables (validated and promoted by the flow)."""
    write_table(rows_to_table(episode_rows, EPISODES_SCHEMA), staged(run, EPISODES_REL), "episodes")
    write_table(rows_to_table(step_rows, STEPS_SCHEMA), staged(run, STEPS_REL), "steps")


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


@task(name="world-analysis", cache_policy=NONE)
def analyse_worlds(cfg: Config, run: str) -> dict[str, str]:
    """The phase-diagram tables of :mod:`horizonbench.analysis.worlds` (and the model
    agents' ``harness`` table, empty without them), written to
    ``<run>/analysis/worlds_<name>.parquet``."""
    logger = get_run_logger()
    assert cfg.worlds is not None
    run_dir = Path(run)
    episodes = pq.read_table(run_dir / EPISODES_REL, schema=EPISODES_SCHEMA).to_pandas()
    tables = world_tables(episodes, cfg.analysis.bootstrap, cfg.run.seed, cfg.worlds.delta0)
    paths = {}
    for name, df in tables.items():
        dest = run_dir / f"{WORLD_ANALYSIS_PREFIX}{name}.parquet"
        write_table(frame_table(df, WORLD_ANALYSIS_SCHEMAS[name]), dest, f"analysis/worlds_{name}")
        paths[name] = str(dest)
    for r in tables["critical_points"].itertuples():
        ci = "" if pd.isna(r.sc_star_low) else f" (bootstrap {r.sc_star_low:g} to {r.sc_star_high:g})"
        value = f"{r.sc_star:.2f}" if pd.notna(r.sc_star) else f"not bracketed: {r.reason}"
        logger.info("%s/%s dd=%d: sc* = %s%s", r.env, r.model, r.dd, value, ci)
    for r in tables["harness"].itertuples():
        rate = f"{r.p:.1%}" if pd.notna(r.p) else "no episode measured"
        logger.info(
            "%s/%s (%s memory): success %s over %d measured episodes; %d budget_exceeded and "
            "%d format_failure (counted as failures); %d repairs, %d fallbacks in %d calls",
            r.env,
            r.model,
            r.memory,
            rate,
            r.measured,
            r.budget_exceeded,
            r.format_failures,
            r.repairs,
            r.fallbacks,
            r.calls,
        )
    return paths


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
