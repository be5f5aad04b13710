"""Generate stage: oversample candidates on Dask, keep them in index order, stream the
kept rows into the staged instance table part by part."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.registry import get_family
from horizonbench.datasets.sampling import Selector
from horizonbench.datasets.shards import generate_shard_batch
from horizonbench.schemas.config import Config, FamilySpec
from horizonbench.tasks import progress as prog
from horizonbench.tasks.cluster import dask_client
from horizonbench.tasks.layout import instances_rel
from horizonbench.tasks.storage import staged
from horizonbench.tasks.table_parts import PartWriter


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


class ShardSizer:
    """How many candidates the next shard gets: about ``target_seconds`` of worker CPU,
    and never so many that the candidates still needed pile onto one worker.

    A fixed ``shard_size`` from the config is used as given. Either way the kept set is
    the same: shard boundaries change only which rows travel, never which are kept.
    """

    MIN, MAX = 8, 20_000

    def __init__(self, fixed: int | None, goal: int, workers: int, target_seconds: float = 1.0) -> None:
        self.fixed = fixed
        self.goal = goal
        self.workers = max(1, workers)
        self.target = target_seconds
        self.per_candidate: float | None = None

    def observe(self, candidates: int, cpu_seconds: float) -> None:
        if candidates:
            rate = max(cpu_seconds, 1e-6) / candidates
            self.per_candidate = rate if self.per_candidate is None else 0.5 * (self.per_candidate + rate)

    def _need(self, kept: int, considered: int, in_flight: int) -> float:
        """Candidates still needed at the keep rate seen so far, beyond those in flight."""
        rate = max(kept / considered, 0.05) if considered else 1.0
        return max(self.goal - kept, 1) / rate - in_flight

    def covered(self, kept: int, considered: int, in_flight: int) -> bool:
        """Do the candidates in flight already cover what is needed? (then wait for them:
        a 10-instance run should not generate a window of shards)."""
        return self.fixed is None and in_flight > 0 and self._need(kept, considered, in_flight) <= 0

    def next(self, kept: int, considered: int, in_flight: int) -> int:
        if self.fixed is not None:
            return self.fixed
        need = self._need(kept, considered, in_flight)
        spread = math.ceil(max(need, self.MIN) / self.workers)
        if self.per_candidate is None:  # first wave: small shards to learn the cost
            return max(self.MIN, min(64, spread))
        by_time = int(self.target / self.per_candidate)
        return max(self.MIN, min(self.MAX, by_time, spread))


def rows_at(table: pa.Table, positions: list[int]) -> pa.Table:
    """The rows at sorted ``positions``, as zero-copy slices of runs: ``take`` copies
    every nested value (a maze's facts), and most shards keep all their rows."""
    if len(positions) == table.num_rows:
        return table
    runs: list[pa.Table] = []
    start = prev = positions[0]
    for p in positions[1:]:
        if p != prev + 1:
            runs.append(table.slice(start, prev + 1 - start))
            start = p
        prev = p
    runs.append(table.slice(start, prev + 1 - start))
    return pa.concat_tables(runs) if len(runs) > 1 else runs[0]


def sample_family(
    client: Any,
    family_name: str,
    spec: FamilySpec,
    root_seed: int,
    window: int,
    sink: Callable[[pa.Table], None] | None = None,
    workers: int | None = None,
) -> Selector:
    """Run shards on the cluster, feeding results to the selector strictly in order.

    Up to ``window`` shards are in flight; results that finish early wait their turn,
    so the kept set is the same for any number of workers and any shard size. Kept
    rows go to ``sink`` as Arrow tables in candidate order, shard by shard: the client
    holds at most the shards in flight, whatever the count.
    """
    sampling = spec.sampling
    selector = Selector(sampling)
    family = get_family(family_name)
    limit = sampling.max_candidates
    counter = getattr(family, "candidate_count", None)
    if counter is not None:  # enumerated families: never ask beyond the candidate space
        limit = min(limit, counter(family.params_model.model_validate(spec.params)))
    if sampling.bins is not None:
        goal = min(limit, sampling.bins.per_bin * len(sampling.bins.edges()))
    else:
        goal = min(limit, sampling.count or limit)
    sizer = ShardSizer(sampling.shard_size, goal, workers or max(1, window // 3))
    inflight: deque[tuple[int, Any]] = deque()
    cursor = 0
    pending = 0  # candidates submitted, not yet fed
    with prog.progress(f"generate {family_name}", goal) as bar:
        try:
            while not selector.done and (inflight or cursor < limit):
                while (
                    len(inflight) < window
                    and cursor < limit
                    and not sizer.covered(selector.kept, selector.considered, pending)
                ):
                    size = min(sizer.next(selector.kept, selector.considered, pending), limit - cursor)
                    fut = client.submit(
                        generate_shard_batch,
                        family_name,
                        spec.params,
                        root_seed,
                        cursor,
                        cursor + size,
                        selector.open_lengths(),
                        pure=False,
                    )
                    inflight.append((size, fut))
                    cursor += size
                    pending += size
                size, fut = inflight.popleft()
                batch = fut.result()
                pending -= size
                sizer.observe(len(batch.outcomes), batch.cpu_seconds)
                before = selector.kept
                take: list[int] = []
                position = 0
                for index, length, rejection, has_row in batch.outcomes:
                    if selector.feed(index, length, has_row, rejection):
                        take.append(position)
                    position += has_row
                if take and sink is not None:
                    sink(rows_at(batch.table(), take))
                bar.advance(selector.kept - before)
        finally:
            for _, fut in inflight:
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
            rel = instances_rel(name)
            with PartWriter(staged(run_dir, rel), family.instance_schema, rel) as writer:
                selector = sample_family(
                    client,
                    name,
                    spec,
                    cfg.run.seed,
                    window,
                    writer.write,
                    workers * cfg.dask.threads_per_worker,
                )
            st = GenerationStats(
                family=name,
                kept=selector.kept,
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
