"""The Dask cluster generation runs on: a LocalCluster by default, or an existing one.

Workers run only pure functions (no Prefect inside them), so they never start a
Prefect server of their own, whatever the Prefect configuration.

A command may start its LocalCluster early (``shared_cluster``: the CLI does it while
the temporary Prefect server starts); ``dask_client`` then connects to that cluster
instead of starting one, and leaves it running for the next stage that needs it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from horizonbench.schemas.config import DaskSpec

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
def shared_cluster(spec: DaskSpec, families: tuple[str, ...] = ()) -> Iterator[object | None]:
    """Start the LocalCluster for ``spec`` now, for every ``dask_client(spec)`` inside
    the block; closed when the block ends. Each worker starts importing the modules of
    ``families`` at once (without waiting for it). Nothing is started for an existing
    scheduler (``spec.address``) or when a cluster for ``spec`` is already shared."""
    key = _key(spec)
    if spec.address or key in _SHARED:
        yield _SHARED.get(key)
        return
    from distributed import Client

    cluster = _local_cluster(spec)
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
