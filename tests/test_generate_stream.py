"""The generate stage's streaming parts: which rows of a shard travel on, and how big
the next shard is."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.tasks.generate import ShardSizer, rows_at


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
