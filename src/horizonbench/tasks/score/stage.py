"""Score stage: parse every answer and replay it in its family's simulator, in shards on
the Dask cluster (see tasks/score/lanes.py, cutting.py and shards.py), streaming the scores table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NONE

from horizonbench.schemas.config import Config
from horizonbench.tasks.cluster.client import dask_client, is_inline, lost_cluster
from horizonbench.tasks.run_folder.layout import ATTEMPTS_REL, SCORES_REL, instances_rel
from horizonbench.tasks.run_folder.storage import staged
from horizonbench.tasks.score.cutting import ShardSizer
from horizonbench.tasks.score.lanes import score_table
from horizonbench.tasks.score.shards import score_rows

__all__ = ["SCORES_REL", "score_attempts", "score_rows", "score_run"]

#: up to this many attempts are scored in-process: one shard's worth, less than a
#: cluster takes to start
IN_PROCESS_MAX = ShardSizer.MAX


def score_run(
    cfg: Config, run: Path, dest: Path, *, client: Any = None, shard_rows: int | None = None
) -> int:
    """Score the run's attempts into ``dest`` (on ``client`` if given, else in-process)."""
    folders = {label: run / instances_rel(label) for label in cfg.families}
    return score_table(run / ATTEMPTS_REL, folders, dest, client, shard_rows=shard_rows)


@task(name="score", cache_policy=NONE, retries=2, retry_delay_seconds=5, retry_condition_fn=lost_cluster)
def score_attempts(cfg: Config, run: str) -> str:
    """Write the scores table to staging (it is promoted after validation). A run with
    more attempts than one shard holds is scored on the cluster (``cfg.dask``: a
    LocalCluster, or an existing scheduler); a smaller one here, to the same bytes."""
    run_dir = Path(run)
    path = staged(run_dir, SCORES_REL)
    if pq.ParquetFile(run_dir / ATTEMPTS_REL).metadata.num_rows <= IN_PROCESS_MAX:
        score_run(cfg, run_dir, path)
    else:
        with dask_client(cfg.dask) as client:
            # a small run has no cluster: its attempts are scored here, in shards
            score_run(cfg, run_dir, path, client=None if is_inline(client) else client)
    return str(path)
