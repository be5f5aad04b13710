"""One shard of candidate generation: the unit of work a Dask worker runs.

Pure and picklable by name (family name, plain params), so it runs the same on a
LocalCluster, a remote cluster, or in-process.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from horizonbench.core.registry import family_of, get_family
from horizonbench.core.seeding import derive_seed

ShardResult = list[tuple[int, int | None, dict[str, Any] | None, str | None]]
#: a candidate skipped, uncertified, because its bin was already full when the shard
#: was sent (the selector ignores it: it would not have been kept)
NOT_NEEDED = "not_needed"


def candidate_seed(root_seed: int, family: str, index: int) -> int:
    """The seed of candidate ``index``. It ignores noise and shuffle settings on purpose:
    the same root seed gives the same base mazes at every noise level, as in seqBench."""
    return derive_seed(root_seed, family, "candidate", index)


_GC_LOCK = threading.Lock()
#: shards running in this process with the cyclic collector paused, and whether it was
#: on when the first of them paused it
_GC_STATE = {"pauses": 0, "was_enabled": False}


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a shard runs.

    A candidate allocates thousands of small tuples, lists and dicts and frees them by
    reference counting (a family that sets ``acyclic_generation`` makes no reference
    cycles: for the maze, a test checks that a collection after a shard finds nothing,
    so nothing piles up while paused), yet the allocations alone trigger
    collections, and the full ones walk every row the shard has kept so far: about 4%
    of the CPU of a 2,000-candidate shard. The score stage's shards pause it too
    (``tasks.score.shards``). Counted, so that shards running in several threads of one
    worker restore the collector only when the last one ends.

    What it buys (issue 24), measured side by side with the collector on (medians of 5
    interleaved rounds on the loaded machine, another 1.9 cores busy, 2026-12-03,
    ``benchmarks/tricks.py --only gc --repeat 5``): ``generate_shard`` of 400 20x20
    mazes 0.34 s of CPU paused against 0.40 s on (1.4% of it inside the collector's
    passes, up to 29% when a full pass falls in the shard), ``score_source`` over 12,000
    answers 2.66 s against 3.12 s (3.8%, up to 6.9%). With 1 core busy elsewhere (the
    same command, 17:38 UTC): generation 0.17 s against 0.18 s, scoring 1.72 s against
    1.90 s (2.9%, up to 9.4%). What guards it: a family says it
    makes no cycles (``acyclic_generation``; for the maze a test finds nothing for a
    collection after a shard to free), and the counter restores the collector however
    the shards end (``tests/test_scoring_shards.py``).
    """
    with _GC_LOCK:
        if _GC_STATE["pauses"] == 0:
            _GC_STATE["was_enabled"] = gc.isenabled()
            gc.disable()
        _GC_STATE["pauses"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_STATE["pauses"] -= 1
            if _GC_STATE["pauses"] == 0 and _GC_STATE["was_enabled"]:
                gc.enable()


def generate_shard(
    family_name: str,
    params: dict[str, Any],
    root_seed: int,
    start: int,
    stop: int,
    wanted: Collection[int] | None = None,
) -> ShardResult:
    """Candidates ``start..stop-1`` as (index, length, row, rejection) tuples.

    Rows whose length is not in ``wanted`` (the lengths of the bins still open when the
    shard was sent) are dropped here, keeping only their length: oversampling for rare
    short paths then ships almost no rows back. A bin full at send time stays full, so
    nothing the selector would keep is ever dropped.
    """
    family = get_family(family_name)
    p = family.params_model.model_validate(params)
    # families that know a candidate's difficulty before certifying it (puzzles: its n)
    # skip the ones no open bin wants: their certificate would be thrown away
    early = getattr(family, "candidate_difficulty", None) if wanted is not None else None
    out: ShardResult = []
    # a family whose candidates make no reference cycles says so (``acyclic_generation``)
    with gc_paused() if getattr(family, "acyclic_generation", False) else nullcontext():
        for index in range(start, stop):
            if early is not None and early(p, index) not in wanted:  # type: ignore[operator]
                out.append((index, None, None, NOT_NEEDED))
                continue
            seed = candidate_seed(root_seed, family_of(family_name), index)
            cand = family.generate_candidate(p, seed, index)
            if cand.row is None:
                # a dropped candidate that fills a quota slot keeps its difficulty
                out.append((index, cand.quota_difficulty, None, cand.rejection or "rejected"))
                continue
            length = family.difficulty(cand.row)
            row = cand.row
            if wanted is not None and length not in wanted:
                row = None
            out.append((index, length, row, None))
    return out


@dataclass(frozen=True)
class ShardBatch:
    """A shard as it travels back to the client: per-candidate outcomes, and the rows
    still wanted as one compressed Arrow stream (about a tenth of the pickled dicts,
    and decoded by the client without building a Python object per value)."""

    #: (index, length, rejection, has_row) per candidate, in index order
    outcomes: list[tuple[int, int | None, str | None, bool]]
    rows: bytes
    #: CPU seconds the shard took on its worker (the client sizes later shards by it)
    cpu_seconds: float

    def table(self) -> pa.Table:
        return from_ipc(self.rows)


_IPC = pa.ipc.IpcWriteOptions(compression="zstd")


def to_ipc(table: pa.Table) -> bytes:
    """A table as one zstd-compressed Arrow IPC stream: how shards travel to the client."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def from_ipc(data: bytes) -> pa.Table:
    with pa.ipc.open_stream(data) as reader:
        return reader.read_all()


def generate_shard_batch(
    family_name: str,
    params: dict[str, Any],
    root_seed: int,
    start: int,
    stop: int,
    wanted: Collection[int] | None = None,
) -> ShardBatch:
    """``generate_shard`` packed for the trip back: what a Dask worker runs."""
    began = time.thread_time()
    result = generate_shard(family_name, params, root_seed, start, stop, wanted)
    schema = get_family(family_name).instance_schema
    table = pa.Table.from_pylist([row for _, _, row, _ in result if row is not None], schema=schema)
    outcomes = [(index, length, rejection, row is not None) for index, length, row, rejection in result]
    return ShardBatch(outcomes, to_ipc(table), time.thread_time() - began)
