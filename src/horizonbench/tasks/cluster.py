"""The Dask cluster generation runs on: a LocalCluster by default, or an existing one.

Workers run only pure functions (no Prefect inside them), so they never start a
Prefect server of their own, whatever the Prefect configuration.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from horizonbench.schemas.config import DaskSpec


@contextlib.contextmanager
def dask_client(spec: DaskSpec) -> Iterator[object]:
    from distributed import Client, LocalCluster

    if spec.address:
        client = Client(spec.address)
        try:
            yield client
        finally:
            client.close()
        return
    # silence the cluster's own chatter; our progress bar says what happens
    for name in ("distributed", "distributed.nanny", "distributed.scheduler"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cluster = LocalCluster(
        n_workers=spec.n_workers,
        threads_per_worker=spec.threads_per_worker,
        processes=spec.processes,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
