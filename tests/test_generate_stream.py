"""The generate stage's streaming parts: which rows of a shard travel on, and how big
the next shard is."""

from __future__ import annotations

import threading

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.tasks.generate.instances import ShardSizer, rows_at


@settings(deadline=None)  # the first call imports pyarrow.compute
@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_rows_at_takes_exactly_the_positions(keep: list[bool]) -> None:
    positions = [i for i, k in enumerate(keep) if k]
    if not positions:
        return
    table = pa.table({"i": list(range(len(keep))), "facts": [[str(i)] * (i % 3) for i in range(len(keep))]})
    assert rows_at(table, positions).to_pylist() == table.take(positions).to_pylist()


def test_shard_sizer_learns_the_cost_and_spreads_the_need() -> None:
    sizer = ShardSizer(None, goal=100_000, workers=2, target_seconds=1.0)
    assert sizer.next(0, 0, 0) == 64  # nothing known yet: a small first wave
    sizer.observe(64, 0.064)  # 1 ms per candidate
    assert sizer.next(64, 64, 0) == 1_000  # about a second of worker CPU
    small = ShardSizer(None, goal=10, workers=2)
    small.observe(64, 0.001)
    assert small.next(0, 0, 0) == ShardSizer.MIN  # ten instances: never a big shard
    assert small.covered(kept=0, considered=0, in_flight=16)  # in flight already covers it
    assert not small.covered(kept=0, considered=0, in_flight=0)
    # half the candidates rejected so far: twice as many still needed
    assert not small.covered(kept=4, considered=8, in_flight=8)
    assert small.covered(kept=4, considered=8, in_flight=12)
    assert ShardSizer(37, goal=10, workers=2).next(0, 0, 0) == 37  # the config's size as given
    assert not ShardSizer(37, goal=10, workers=2).covered(0, 0, 100)


def test_a_costly_first_shard_does_not_shrink_the_next_ones() -> None:
    """The median of recent shards, not a mean: a worker's first shard paying its first
    calls (ten times the others, measured) is one outlier among five."""
    sizer = ShardSizer(None, goal=100_000, workers=2, target_seconds=1.0)
    sizer.observe(64, 0.64)  # 10 ms per candidate: a cold worker
    sizer.observe(64, 0.064)
    sizer.observe(64, 0.064)  # 1 ms per candidate since
    assert sizer.next(192, 192, 0) == 1_000
    for _ in range(5):  # a change that lasts is followed
        sizer.observe(64, 0.128)
    assert sizer.next(512, 512, 0) == 500


#: the slow head's state (the workers of an in-process cluster share this module)
_SLOW: dict = {"others": 0, "enough": threading.Event(), "lock": threading.Lock()}


def _slow_head(family, params, seed, start, stop, wanted):  # noqa: ANN001, ANN202
    """``generate_shard_batch``, whose first shard waits for eight others to finish."""
    from horizonbench.datasets.shards import generate_shard_batch

    if start == 0:
        _SLOW["released"] = _SLOW["enough"].wait(timeout=10)
    out = generate_shard_batch(family, params, seed, start, stop, wanted)
    if start:
        with _SLOW["lock"]:
            _SLOW["others"] += 1
            if _SLOW["others"] >= 8:
                _SLOW["enough"].set()
    return out


def test_a_worker_is_never_left_idle_behind_a_slow_first_shard(monkeypatch) -> None:  # noqa: ANN001
    """While the head of the queue is still running, finished shards wait for their
    turn without holding a slot of the window: the free worker goes on with new ones.
    The head here waits until eight other shards have finished (at most the window's
    other slots, three, could before), and the table is the one an inline run keeps."""
    from distributed import Client, LocalCluster

    import horizonbench.tasks.generate.instances as generate
    from horizonbench.schemas.config import FamilySpec
    from horizonbench.tasks.cluster.client import InlineClient

    _SLOW["others"], _SLOW["released"] = 0, None
    _SLOW["enough"].clear()
    spec = FamilySpec.model_validate(
        {
            "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
            "sampling": {"count": 200, "shard_size": 10, "max_candidates": 4_000},
        }
    )
    want: list[pa.Table] = []
    generate.sample_family(InlineClient(), "maze", spec, 3, 4, sink=want.append)
    monkeypatch.setattr(generate, "generate_shard_batch", _slow_head)
    got: list[pa.Table] = []
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        generate.sample_family(client, "maze", spec, 3, 4, sink=got.append, workers=2)
    assert _SLOW["released"], "the head timed out: the others stopped behind it"
    assert pa.concat_tables(got).equals(pa.concat_tables(want))


def test_a_warmed_worker_imports_nothing_more_for_its_first_shard() -> None:
    """``warm_worker`` (run on each worker as the cluster starts) leaves the first shard
    no import to pay, pyarrow's own lazy import of pandas included (0.17 s of CPU)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from horizonbench.tasks.cluster.client import warm_worker\n"
        "warm_worker(('maze',))\n"
        "before = set(sys.modules)\n"
        "from horizonbench.datasets.shards import generate_shard_batch\n"
        "generate_shard_batch('maze', {'grid_rows': 6, 'grid_cols': 6, 'num_keys': 1}, 1, 0, 4, None)\n"
        "new = set(sys.modules) - before\n"
        "print(sorted(m for m in new if m.split('.')[0] in ('pandas', 'scipy', 'numpy'))[:5])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
