"""Same config and seed, same bytes, whatever the number of workers or shard size."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import pytest

from horizonbench.schemas.config import DaskSpec, FamilySpec
from horizonbench.tasks.cluster import progress
from horizonbench.tasks.cluster.client import dask_client
from horizonbench.tasks.generate.instances import sample_family
from horizonbench.tasks.run_folder.table_parts import PartWriter, part_files

progress.ENABLED["value"] = False

SPEC = {
    "params": {"grid_rows": 10, "grid_cols": 10, "num_keys": 2, "noise_ratio": 0.5, "shuffle_ratio": 0.7},
    "sampling": {"bins": {"min": 10, "max": 40, "width": 5, "per_bin": 4}, "max_candidates": 20000},
}


def _table_bytes(tmp_path, workers: int, shard_size: int | None, address: str | None = None) -> bytes:
    """The instance table as the generate stage streams it: in parts of 20 rows cut into
    row groups of 5, so part and row-group boundaries fall inside shards."""
    from horizonbench.core.registry import get_family

    spec = FamilySpec.model_validate(SPEC | {"sampling": SPEC["sampling"] | {"shard_size": shard_size}})
    dest = tmp_path / f"w{workers}-s{shard_size}-{'remote' if address else 'local'}"
    with (
        dask_client(DaskSpec(n_workers=workers, address=address)) as client,
        PartWriter(dest, get_family("maze").instance_schema, "instances/maze", 20, 5) as writer,
    ):
        selector = sample_family(client, "maze", spec, root_seed=123, window=3 * workers, sink=writer.write)
    files = part_files(dest)
    assert len(files) == 2 and selector.kept == 24  # 6 bins x 4
    assert [pq.ParquetFile(f).metadata.num_row_groups for f in files] == [4, 1]
    return b"".join(f.name.encode() + f.read_bytes() for f in files)


@pytest.mark.flow
def test_instance_table_is_byte_identical_for_1_and_4_workers(tmp_path):
    one = _table_bytes(tmp_path, workers=1, shard_size=40)
    four = _table_bytes(tmp_path, workers=4, shard_size=40)
    other_shards = _table_bytes(tmp_path, workers=4, shard_size=7)
    adaptive = _table_bytes(tmp_path, workers=2, shard_size=None)
    assert hashlib.sha256(one).hexdigest() == hashlib.sha256(four).hexdigest()
    assert one == other_shards == adaptive


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


# --- per-attempt seeds --------------------------------------------------------------------


def _seed_config(samples: int):
    """Two offline models, a maze answered as whole plans and Hanoi step by step."""
    from horizonbench.schemas.config import parse_config

    sampling = {"bins": {"min": 1, "max": 40, "width": 40, "per_bin": 3}}
    return parse_config(
        {
            "run": {"name": "seeds", "seed": 11},
            "families": {
                "maze": {"params": SPEC["params"], "sampling": sampling},
                "hanoi": {"params": {"ns": [2, 3]}, "sampling": sampling, "modes": ["rollout"]},
            },
            "evaluation": {
                "samples": samples,
                "models": [
                    {"name": "oracle", "provider": "offline", "kind": "oracle"},
                    {"name": "noisy", "provider": "offline", "kind": "noisy", "eps": 0.1},
                ],
            },
        }
    )


def _hanoi_rows() -> list[dict]:
    from horizonbench.core.registry import get_family

    hanoi = get_family("hanoi")
    params = hanoi.params_model.model_validate({"ns": [2, 3]})
    cands = [hanoi.generate_candidate(params, 1000 + i, i) for i in range(3)]
    return [c.row for c in cands if c.row is not None]


def test_every_sample_of_every_instance_gets_its_own_seed():
    """The seeds of whole-plan requests and of rollout steps are distinct for every
    (model, instance, sample) and step: one seed shared by an instance's samples would
    make its n answers one answer n times, which only a slow statistical test would
    notice. The same config gives the same seeds again."""
    import numpy as np

    from horizonbench.core.types import Completion
    from horizonbench.tasks.evaluate.attempts import build_conversations, build_requests

    cfg = _seed_config(samples=4)
    rows = [{"instance_id": f"maze-{i}", "family": "maze"} for i in range(3)]
    hanoi = _hanoi_rows()
    assert len(hanoi) == 3
    prompted = [("maze", "plan", row, ()) for row in rows] + [("hanoi", "rollout", row, ()) for row in hanoi]
    plan_seeds: dict[tuple, int] = {}
    step_seeds: dict[tuple, int] = {}
    for model in ("oracle", "noisy"):
        requests = build_requests(cfg, prompted, model)
        assert [r.seed for r in requests] == [r.seed for r in build_requests(cfg, prompted, model)]
        for r in requests:
            plan_seeds[model, r.instance_id, r.sample] = r.seed
        for conv in build_conversations(cfg, prompted, model):
            request = conv.first()
            while request is not None:  # the oracle's answers, step by step
                step_seeds[model, request.instance_id, request.sample, request.turn] = request.seed
                state = conv.family.puzzle.format_state(conv.episode.state)
                text = conv.family.offline_step(conv.row, state, "oracle", np.random.default_rng(0), 0.0)
                request = conv.next(Completion(text, "stop"))
    assert len(plan_seeds) == 2 * 3 * 4 and len(set(plan_seeds.values())) == len(plan_seeds)
    steps = 2 * 4 * sum(row["solution_length"] for row in hanoi)
    assert len(step_seeds) >= steps and len(set(step_seeds.values())) == len(step_seeds)
