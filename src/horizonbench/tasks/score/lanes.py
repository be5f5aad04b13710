"""The score stage's client loop: shards handed out in lanes, the scores table written in order.

In-process each shard is scored here, in order; on a Dask cluster each worker gets a
contiguous range of the attempts table (:class:`Lanes`), a worker whose range is done
takes over half of the largest one left, and :class:`_Sinks` puts every range's rows
back in the table's order (:func:`score_table`). The bytes do not depend on the number
of workers.

What taking over half a range buys (issue 24): the workers end together instead of one
idling while the other finishes its range. The score stage of 12,000 noisy answers to
40x40 mazes on two workers took 21.9 s with it and 22.5 s without (each round's ratio
1.03-1.54, median 1.12; 3 interleaved rounds on a machine where other processes kept
1.8 of the 2 cores busy, ``benchmarks/tricks.py --only lanes --repeat 3``,
2026-12-03); with 1 core busy elsewhere it made no difference (2.73 s against 2.67 s,
5 rounds, ``--repeat 5``): it pays when the workers run at uneven speeds (a loaded
machine, a cluster of unequal ones), and costs ten lines of bookkeeping. What guards
it: ``Lanes`` is pure bookkeeping, and ``tests/test_scoring_shards.py`` drives it in
any order (every row in exactly one shard, the pieces in order are the table) and pins
the bytes against the in-process run.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.run_folder.table_parts import TableWriter
from horizonbench.tasks.score.cutting import (
    MAX_SEGMENTS,
    AttemptLayout,
    InstanceIndex,
    Shard,
    ShardSizer,
    shard_payload,
    shard_sources,
)
from horizonbench.tasks.score.shards import (
    SCORE_ROW_GROUP,
    ScoreBatch,
    ShardSource,
    release_groups,
    score_shard,
    score_source,
)


class _Sinks:
    """The score rows of each (segment, piece), written in that order at ``close``: a
    piece is a run of positions scored in order (the whole line in-process, a worker's
    range on a cluster; see :func:`score_table`). The rows of piece (0, 0), first in
    the table whatever happens, go straight into the table; the others are spooled to
    Arrow IPC files beside it and copied in at ``close``. So the client holds no more
    than a shard's rows, whatever the number of segments and pieces."""

    _SPOOL = pa.ipc.IpcWriteOptions(compression="lz4")

    def __init__(self, writer: TableWriter, dest: Path) -> None:
        self.writer = writer
        self.dest = dest
        self.paths: dict[tuple[int, int], Path] = {}
        self._spools: dict[tuple[int, int], pa.ipc.RecordBatchStreamWriter] = {}
        self._files: dict[tuple[int, int], Any] = {}

    def write(self, segment: int, piece: int, table: pa.Table) -> None:
        if not table.num_rows:
            return
        key = (segment, piece)
        if key == (0, 0):
            self.writer.write(table)
            return
        spool = self._spools.get(key)
        if spool is None:
            path = self.paths[key] = self.dest.with_name(
                f".{self.dest.name}.{os.getpid()}.seg{segment}-{piece}.arrows"
            )
            self._files[key] = pa.OSFile(str(path), "wb")
            spool = self._spools[key] = pa.ipc.new_stream(self._files[key], table.schema, options=self._SPOOL)
        spool.write_table(table)

    def close(self) -> None:
        for key in sorted(self._spools):
            self._spools.pop(key).close()
            self._files.pop(key).close()
            with pa.memory_map(str(self.paths[key])) as source, pa.ipc.open_stream(source) as reader:
                for batch in reader:
                    self.writer.write(pa.Table.from_batches([batch]))
            self.paths.pop(key).unlink()

    def abort(self) -> None:
        for key in list(self._spools):
            self._spools.pop(key).close()
            self._files.pop(key).close()
        for path in self.paths.values():
            path.unlink(missing_ok=True)
        self.paths.clear()


def scores_writer(dest: Path, row_group_rows: int = SCORE_ROW_GROUP) -> TableWriter:
    """The scores table, written as shards arrive, renamed into place at ``close``."""
    return TableWriter(dest, SCORES_SCHEMA, "scores", row_group_rows)


def _release(client: Any) -> None:
    """Drop the decoded row groups kept here and on the workers (best effort: a worker
    that left keeps nothing)."""
    release_groups()
    if client is not None:
        with contextlib.suppress(Exception):
            client.run(release_groups)


@dataclass
class Lane:
    """One worker's range of positions ``[at, end)``, cut into shards in order. ``piece``
    is where the lane's current run of positions began: its rows' place in the table
    (a lane that takes over half of another's range starts a new piece)."""

    worker: str | None
    at: int
    end: int
    piece: int
    inflight: deque[tuple[Shard, ShardSource, Any, int]] = field(default_factory=deque)


class Lanes:
    """The table's positions split into contiguous ranges of about equal attempts, one
    per worker, each cut into shards in order; a lane whose range is done takes over
    the back half of the largest range not yet cut (if that holds at least two more
    shards), so the workers end together. Pure bookkeeping: every position goes to
    exactly one shard, and the rows of each (segment, piece), written in that order,
    are the table's order."""

    def __init__(self, layout: AttemptLayout, workers: Sequence[str | None]) -> None:
        self.layout = layout
        total = layout.attempts_between(0, layout.span)
        bounds = [0]
        for i in range(1, len(workers)):
            bounds.append(max(bounds[-1], layout.position(total * i // len(workers))))
        bounds.append(layout.span)
        self.lanes = [Lane(w, a, b, a) for w, a, b in zip(workers, bounds[:-1], bounds[1:], strict=True)]

    def left(self, lane: Lane) -> int:
        """Attempts of ``lane`` not yet cut into shards."""
        return self.layout.attempts_between(lane.at, lane.end)

    def _steal(self, lane: Lane, least: int) -> bool:
        victim = max(self.lanes, key=self.left)
        if self.left(victim) < 2 * least:
            return False
        mid = self.layout.split(victim.at, victim.end)
        if mid is None:
            return False
        lane.at, lane.end, lane.piece = mid, victim.end, mid
        victim.end = mid
        return True

    def uncut(self) -> int:
        """Attempts of the whole table not yet cut into shards."""
        return sum(self.left(lane) for lane in self.lanes)

    def next(self, lane: Lane, size: Callable[[int], int]) -> tuple[Shard, int] | None:
        """``lane``'s next shard, of ``size(attempts of the table not yet cut)``
        attempts, and its piece; None when no range has two shards' worth (``size(0)``
        each) left to share."""
        if self.left(lane) == 0 and not self._steal(lane, max(1, size(0))):
            return None
        shard, lane.at = self.layout.cut(lane.at, size(self.uncut()), lane.end)
        return shard, lane.piece


def score_table(
    attempts_path: Path,
    instance_folders: Mapping[str, Path],
    dest: Path,
    client: Any = None,
    *,
    shard_rows: int | None = None,
    window: int | None = None,
    max_segments: int = MAX_SEGMENTS,
) -> int:
    """Score every attempt of ``attempts_path`` into the scores table ``dest``; returns
    its row count. ``instance_folders``: each family label's instance table folder.

    Without a Dask ``client`` each shard is scored here, in order. With one, each
    worker gets a contiguous range of the table (:class:`Lanes`) and scores it in
    order, ``window`` shards in flight (default two per thread of the worker: one
    running, one queued): so the workers decode different row groups of the files (the
    tree's CPU per answer was 15% higher on two workers than on one when shards went to
    whichever worker was free; it is now the same), and on a cluster of several
    machines each reads its own part of the files. A worker whose range is done takes
    over the back half of the largest range not yet cut, and shards shrink with the
    work not yet cut, so all end together; the tasks only prefer their worker (another
    one takes them if it leaves). Each range's rows are written to its place in the
    table, so the bytes are those of the in-process run whatever the number of workers.

    A worker reads its shard's rows from the files itself (:func:`score_source`); if it
    does not see them (a scheduler on other machines) the client reads and ships them
    (:func:`score_shard`), same bytes again. ``shard_rows`` fixes the shard size
    (default: about half a second of worker CPU, less as the work runs out). Shards
    hold all answers to their instances (see :class:`AttemptLayout`) unless the table's
    order has more than ``max_segments`` rising runs.
    """
    indexes: dict[str, InstanceIndex] = {}

    def index(label: str) -> InstanceIndex:
        if label not in indexes:
            if label not in instance_folders:
                raise KeyError(f"attempts of an unknown family label {label!r}")
            indexes[label] = InstanceIndex(instance_folders[label], label)
        return indexes[label]

    writer = scores_writer(dest)
    sinks = _Sinks(writer, dest)
    lanes: list[Lane] = []
    ranges: Lanes
    sizer = ShardSizer(shard_rows)  # on a cluster: told the workers (below)
    #: the workers do not see the client's files: ship every shard's rows from here on
    ship = False

    def take(shard: Shard, batch: ScoreBatch, piece: int, bar: prog.Progress) -> None:
        sizer.observe(batch.attempts, batch.cpu_seconds)
        table = batch.table()
        at = 0
        for (segment, _, _), n in zip(shard.slices, batch.pieces, strict=True):
            sinks.write(segment, piece, table.slice(at, n))
            at += n
        bar.advance(batch.attempts)

    def submit(lane: Lane, fn: Callable[..., Any], *args: Any) -> Any:
        near = {"workers": [lane.worker], "allow_other_workers": True} if lane.worker else {}
        return client.submit(fn, *args, pure=False, **near)

    def settle(lane: Lane, bar: prog.Progress) -> None:
        nonlocal ship
        shard, source, fut, piece = lane.inflight.popleft()
        batch = fut.result()
        if batch is None:  # this worker cannot read the files: ship this and later shards
            ship = True
            batch = submit(lane, score_shard, *shard_payload(source)).result()
        take(shard, batch, piece, bar)

    def refill(lane: Lane, slots: int) -> None:
        while len(lane.inflight) < slots:
            cut = ranges.next(lane, sizer.next)
            if cut is None:
                return
            shard, piece = cut
            source = source_of(shard)
            if ship:
                fut = submit(lane, score_shard, *shard_payload(source))
            else:
                fut = submit(lane, score_source, source)
            lane.inflight.append((shard, source, fut, piece))

    try:
        with pq.ParquetFile(attempts_path) as pf, prog.progress("score", pf.metadata.num_rows) as bar:
            layout = AttemptLayout(pf, index, max_segments)
            source_of = shard_sources(attempts_path, layout, index)
            if client is None:
                for shard in layout.shards(sizer):
                    batch = score_source(source_of(shard))
                    if batch is None:
                        raise RuntimeError(
                            f"the attempts or instance files changed while scoring {attempts_path}"
                        )
                    take(shard, batch, 0, bar)
            else:
                from distributed import wait

                info = client.scheduler_info().get("workers", {})
                threads = {addr: int(w.get("nthreads", 1) or 1) for addr, w in info.items()}
                ranges = Lanes(layout, sorted(threads) or [None])
                lanes = ranges.lanes
                # shards shrink with the work not yet cut, so that what sits queued on a
                # worker (and cannot move to another) is small when the ranges run out
                sizer.workers = sum(threads.values()) or 1
                slots = {lane.worker: window or 2 * threads.get(lane.worker or "", 1) for lane in lanes}
                for lane in lanes:
                    refill(lane, slots[lane.worker])
                while any(lane.inflight for lane in lanes):
                    heads = [lane.inflight[0][2] for lane in lanes if lane.inflight]
                    if not any(fut.done() for fut in heads):
                        wait(heads, return_when="FIRST_COMPLETED")
                    for lane in lanes:
                        while lane.inflight and lane.inflight[0][2].done():
                            settle(lane, bar)
                        refill(lane, slots[lane.worker])
            sinks.close()
    except BaseException:
        for lane in lanes:
            for _, _, fut, _ in lane.inflight:
                fut.cancel()
        sinks.abort()
        writer.abort()
        raise
    finally:
        _release(client)
    writer.close()
    return writer.rows
