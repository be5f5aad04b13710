"""The Dask cluster generation runs on: a LocalCluster by default, or an existing one.

Workers run only pure functions (no Prefect inside them), so they never start a
Prefect server of their own, whatever the Prefect configuration.

A command may start its LocalCluster early (``shared_cluster``: the CLI does it while
the temporary Prefect server starts); ``dask_client`` then connects to that cluster
instead of starting one, and leaves it running for the next stage that needs it.

A small run (``small_run``: a few instances, no world study) shares a cluster of one
worker thread in this process instead: a worker process costs about 1.5 s of CPU to
start (its own imports of distributed, numpy and the family), more than generating a
hundred instances, and on two cores that CPU comes out of the start-up the user waits
for. The instances are the same bytes (they never depend on the workers).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from horizonbench.schemas.config import Config, DaskSpec, SamplingSpec

#: a run that keeps at most this many instances over all families and sweep settings
#: (and simulates no world study) generates on one thread of this process
SMALL_RUN_MAX = 100

#: the LocalCluster started by ``shared_cluster``, by the spec it was started for
_SHARED: dict[str, Any] = {}


def _quiet() -> None:
    # silence the cluster's own chatter; our progress bar says what happens
    for name in ("distributed", "distributed.nanny", "distributed.scheduler"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _local_cluster(spec: DaskSpec) -> Any:
    from distributed import LocalCluster

    _quiet()
    return LocalCluster(
        n_workers=spec.n_workers,
        threads_per_worker=spec.threads_per_worker,
        processes=spec.processes,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )


def _kept_at_most(sampling: SamplingSpec) -> int | None:
    """How many instances a family's sampling keeps at most (None: not known beforehand)."""
    if sampling.count is not None:
        return sampling.count
    if sampling.bins is not None:
        return len(sampling.bins.edges()) * sampling.bins.per_bin
    return None  # ``all``: the family's whole candidate space


def small_run(cfg: Config) -> bool:
    """Whether ``cfg`` is small enough to generate on a thread of this process: at most
    SMALL_RUN_MAX instances in all (sweep settings count as families), no world study,
    no existing scheduler, and worker processes asked for (else nothing changes)."""
    if cfg.dask.address or not cfg.dask.processes or cfg.worlds is not None or not cfg.families:
        return False
    total = 0
    for spec in cfg.families.values():
        for sampling in [spec.sampling, *(s.sampling or spec.sampling for s in spec.sweep)]:
            kept = _kept_at_most(sampling)
            if kept is None:
                return False
            total += kept
    return total <= SMALL_RUN_MAX


def _key(spec: DaskSpec) -> str:
    return spec.model_dump_json()


def warm_worker(families: tuple[str, ...]) -> int:
    """Import what the first shard needs (run on each worker while the command waits)."""
    from horizonbench.core.registry import get_family
    from horizonbench.datasets import shards  # noqa: F401

    for name in families:
        get_family(name)
    return len(families)


@contextlib.contextmanager
def shared_cluster(
    spec: DaskSpec, families: tuple[str, ...] = (), *, in_process: bool = False
) -> Iterator[object | None]:
    """Start the LocalCluster for ``spec`` now, for every ``dask_client(spec)`` inside
    the block; closed when the block ends. Each worker starts importing the modules of
    ``families`` at once (without waiting for it). Nothing is started for an existing
    scheduler (``spec.address``) or when a cluster for ``spec`` is already shared.

    ``in_process`` (for a ``small_run``): the cluster shared under ``spec`` is one
    worker thread in this process, whatever ``spec`` asks for."""
    key = _key(spec)
    if spec.address or key in _SHARED:
        yield _SHARED.get(key)
        return
    from distributed import Client

    started = spec.model_copy(update={"n_workers": 1, "threads_per_worker": 1, "processes": False})
    cluster = _local_cluster(started if in_process else spec)
    client = Client(cluster)
    warming = [
        client.submit(warm_worker, families, workers=[address], pure=False, allow_other_workers=False)
        for address in client.scheduler_info().get("workers", {})
    ]
    _SHARED[key] = cluster
    try:
        yield cluster
    finally:
        _SHARED.pop(key, None)
        for fut in warming:
            fut.cancel()
        client.close()
        cluster.close()


@contextlib.contextmanager
def dask_client(spec: DaskSpec) -> Iterator[object]:
    from distributed import Client

    if spec.address:
        client = Client(spec.address)
        try:
            yield client
        finally:
            client.close()
        return
    shared = _SHARED.get(_key(spec))
    if shared is not None:
        client = Client(shared)
        try:
            yield client
        finally:
            client.close()
        return
    cluster = _local_cluster(spec)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
