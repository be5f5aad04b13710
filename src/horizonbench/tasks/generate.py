"""Generate stage: oversample candidates on Dask, keep them in index order, stage the table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.registry import get_family
from horizonbench.datasets.sampling import Selector
from horizonbench.datasets.shards import generate_shard
from horizonbench.schemas.config import Config, FamilySpec
from horizonbench.tasks import progress as prog
from horizonbench.tasks.cluster import dask_client
from horizonbench.tasks.storage import rows_to_table, staged, write_table


@dataclass
class GenerationStats:
    family: str
    kept: int
    considered: int
    certified: int
    rejections: dict[str, int] = field(default_factory=dict)
    unfilled_bins: dict[int, int] = field(default_factory=dict)
    path: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "kept": self.kept,
            "candidates_considered": self.considered,
            "candidates_certified": self.certified,
            "rejections": dict(sorted(self.rejections.items())),
            "unfilled_bins": {str(k): v for k, v in sorted(self.unfilled_bins.items())},
            "path": self.path,
        }


def sample_family(client: Any, family_name: str, spec: FamilySpec, root_seed: int, window: int) -> Selector:
    """Run shards on the cluster, feeding results to the selector strictly in order.

    Up to ``window`` shards are in flight; results that finish early wait their turn,
    so the kept set is the same for any number of workers.
    """
    sampling = spec.sampling
    selector = Selector(sampling)
    size = sampling.shard_size
    family = get_family(family_name)
    limit = sampling.max_candidates
    counter = getattr(family, "candidate_count", None)
    if counter is not None:  # enumerated families: never ask beyond the candidate space
        limit = min(limit, counter(family.params_model.model_validate(spec.params)))
    n_shards = math.ceil(limit / size)
    inflight: dict[int, Any] = {}
    next_shard = 0
    expected = 0
    if sampling.bins is not None:
        goal = min(limit, sampling.bins.per_bin * len(sampling.bins.edges()))
    else:
        goal = min(limit, sampling.count or limit)
    with prog.progress(f"generate {family_name}", goal) as bar:
        try:
            while not selector.done and expected < n_shards:
                while len(inflight) < window and next_shard < n_shards:
                    start = next_shard * size
                    stop = min(start + size, limit)
                    inflight[next_shard] = client.submit(
                        generate_shard,
                        family_name,
                        spec.params,
                        root_seed,
                        start,
                        stop,
                        selector.open_lengths(),
                        pure=False,
                    )
                    next_shard += 1
                result = inflight.pop(expected).result()
                expected += 1
                before = len(selector.kept)
                for index, length, row, rejection in result:
                    selector.feed(index, length, row, rejection)
                bar.advance(len(selector.kept) - before)
        finally:
            for fut in inflight.values():
                fut.cancel()
    return selector


@task(name="generate", cache_policy=NONE)
def generate_instances(cfg: Config, run: str) -> list[dict[str, Any]]:
    """Generate every family's instances into staging; returns per-family statistics."""
    logger = get_run_logger()
    run_dir = Path(run)
    stats = []
    with dask_client(cfg.dask) as client:
        workers = len(client.scheduler_info().get("workers", {})) or cfg.dask.n_workers  # type: ignore[attr-defined]
        window = max(2, 3 * workers * cfg.dask.threads_per_worker)
        for name, spec in cfg.families.items():
            family = get_family(name)
            selector = sample_family(client, name, spec, cfg.run.seed, window)
            rows = sorted(selector.kept, key=lambda r: r["candidate_index"])
            rel = f"instances/{name}/part-0.parquet"
            write_table(
                rows_to_table(rows, family.instance_schema), staged(run_dir, rel), f"instances/{name}"
            )
            st = GenerationStats(
                family=name,
                kept=len(rows),
                considered=selector.considered,
                certified=selector.certified,
                rejections=dict(selector.rejections),
                unfilled_bins=selector.unfilled(),
                path=rel,
            )
            logger.info(
                "%s: kept %d of %d candidates (%d certified, rejected %s)%s",
                name,
                st.kept,
                st.considered,
                st.certified,
                st.rejections or "none",
                f"; {len(st.unfilled_bins)} bins short of quota" if st.unfilled_bins else "",
            )
            stats.append(st.as_dict())
    return stats
