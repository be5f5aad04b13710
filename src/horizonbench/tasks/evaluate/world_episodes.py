"""World-model study, offline agents: run the episodes on Dask in shards and stage the
episodes and steps tables (validated and promoted by the flow; the phase-diagram
analysis is ``tasks/analyse/worlds.py``).

Shards are fixed slices of the study's episode list (``worlds.shard_size``) and their
results are concatenated in shard order, so the tables are the same bytes whatever the
number of workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.datasets.worlds.study import AgentSpec, run_shard
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import EPISODES_SCHEMA, STEPS_SCHEMA
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.cluster.client import dask_client
from horizonbench.tasks.run_folder.layout import EPISODES_REL, STEPS_REL
from horizonbench.tasks.run_folder.storage import rows_to_table, staged, write_table


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
