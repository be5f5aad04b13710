"""Same config and seed, same bytes, whatever the number of workers or shard size."""

from __future__ import annotations

import hashlib

import pytest

from horizonbench.schemas.config import DaskSpec, FamilySpec
from horizonbench.tasks import progress
from horizonbench.tasks.cluster import dask_client
from horizonbench.tasks.generate import sample_family
from horizonbench.tasks.storage import rows_to_table, write_table

progress.ENABLED["value"] = False

SPEC = {
    "params": {"grid_rows": 10, "grid_cols": 10, "num_keys": 2, "noise_ratio": 0.5, "shuffle_ratio": 0.7},
    "sampling": {"bins": {"min": 10, "max": 40, "width": 5, "per_bin": 4}, "max_candidates": 20000},
}


def _table_bytes(tmp_path, workers: int, shard_size: int, address: str | None = None) -> bytes:
    from horizonbench.core.registry import get_family

    spec = FamilySpec.model_validate(SPEC | {"sampling": SPEC["sampling"] | {"shard_size": shard_size}})
    with dask_client(DaskSpec(n_workers=workers, address=address)) as client:
        selector = sample_family(client, "maze", spec, root_seed=123, window=3 * workers)
    rows = sorted(selector.kept, key=lambda r: r["candidate_index"])
    dest = tmp_path / f"w{workers}-s{shard_size}-{'remote' if address else 'local'}.parquet"
    write_table(rows_to_table(rows, get_family("maze").instance_schema), dest, "instances/maze")
    return dest.read_bytes()


@pytest.mark.flow
def test_instance_table_is_byte_identical_for_1_and_4_workers(tmp_path):
    one = _table_bytes(tmp_path, workers=1, shard_size=40)
    four = _table_bytes(tmp_path, workers=4, shard_size=40)
    other_shards = _table_bytes(tmp_path, workers=4, shard_size=7)
    assert hashlib.sha256(one).hexdigest() == hashlib.sha256(four).hexdigest()
    assert one == other_shards


@pytest.mark.flow
def test_an_existing_cluster_gives_the_same_bytes(tmp_path):
    """--dask-address: a scheduler the test starts on 127.0.0.1, reached over TCP."""
    from distributed import LocalCluster

    local = _table_bytes(tmp_path, workers=2, shard_size=40)
    with LocalCluster(
        n_workers=3, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, processes=True
    ) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        remote = _table_bytes(tmp_path, workers=1, shard_size=40, address=cluster.scheduler_address)
    assert remote == local
