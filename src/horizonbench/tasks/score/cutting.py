"""Cutting the attempts table into shards: the client's plan for the score stage.

Where each attempt's instance rows are (:class:`InstanceIndex`), where a shard may
start (never inside a rollout episode: :func:`episode_cuts`), how many attempts a shard
holds (:class:`ShardSizer`) and which rows it takes (:class:`AttemptLayout`,
:class:`Shard`); then what a worker is sent (:func:`shard_sources`, or the rows
themselves, :func:`shard_payload`). Reads only the two or three columns it needs, in
Arrow; the scoring itself is :mod:`horizonbench.tasks.score.shards`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horizonbench.core.registry import get_family
from horizonbench.tasks.run_folder.table_parts import part_files
from horizonbench.tasks.score.shards import ROW_COLUMNS, FileRef, ShardSource, read_group, read_source, to_ipc


def score_columns(label: str, schema: pa.Schema) -> list[str]:
    """The instance columns a family's scoring reads (its ``score_columns``, or all), with
    those the score rows copy."""
    wanted = getattr(get_family(label), "score_columns", None)
    if wanted is None:
        return list(schema.names)
    keep = set(wanted) | set(ROW_COLUMNS)
    return [name for name in schema.names if name in keep]


class InstanceIndex:
    """A family label's instance table by row position: every id (to find an attempt's
    instance, hashed in Arrow), and where the rows at given positions are (file, row
    group, rows within it) for whoever reads them (:func:`read_source`)."""

    def __init__(self, folder: Path, label: str) -> None:
        self.files = part_files(folder)
        if not self.files:
            raise FileNotFoundError(f"no instance table for {label!r} in {folder}")
        self.refs = [FileRef.of(path) for path in self.files]
        self.schema = pq.read_schema(self.files[0])
        self.columns = tuple(score_columns(label, self.schema))
        self.label = label
        ids, groups = [], []
        for f, path in enumerate(self.files):
            with pq.ParquetFile(path) as pf:
                ids.append(pf.read(columns=["instance_id"]).column(0))
                groups += [(f, g, pf.metadata.row_group(g).num_rows) for g in range(pf.num_row_groups)]
        self.ids = pa.chunked_array([c for a in ids for c in a.chunks], type=pa.string()).combine_chunks()
        #: (file, row group) of every row group, and the first row of each
        self.groups = [(f, g) for f, g, _ in groups]
        self.starts = np.cumsum([0] + [n for _, _, n in groups])

    def __len__(self) -> int:
        return len(self.ids)

    def positions(self, ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The row position of each of ``ids`` (KeyError for one not in the table)."""
        pos = pc.index_in(ids, value_set=self.ids)
        if pos.null_count:
            lost = ids.filter(pc.is_null(pos))[0].as_py()
            raise KeyError(f"attempt for an instance not in {self.label!r}: {lost!r}")
        return np.asarray(pos.to_numpy(zero_copy_only=False), dtype=np.int64)

    def parts(self, positions: np.ndarray) -> tuple[tuple[FileRef, int, np.ndarray], ...]:
        """Where the rows at ``positions`` (ascending, distinct) are: (file, row group,
        rows within it), in that order."""
        group_of = np.searchsorted(self.starts, positions, side="right") - 1
        out = []
        for k in np.unique(group_of):
            f, g = self.groups[int(k)]
            out.append((self.refs[f], g, positions[group_of == k] - self.starts[k]))
        return tuple(out)

    def rows_at(self, positions: np.ndarray) -> pa.Table:
        """The rows at ``positions`` (ascending, distinct), in that order."""
        taken = [
            read_group(ref, g, self.columns).take(pa.array(rows)) for ref, g, rows in self.parts(positions)
        ]
        if not taken:
            f, g = self.groups[0]
            return read_group(self.refs[f], g, self.columns).slice(0, 0)
        return pa.concat_tables(taken) if len(taken) > 1 else taken[0]


def episode_cuts(pf: pq.ParquetFile) -> np.ndarray | None:
    """Where a shard may not start: True at row p when a rollout episode has rows both
    before p and at or after it. None when every attempt is a whole plan."""
    mode = pf.read(columns=["mode"]).column(0)
    rollout = pc.equal(mode, "rollout")
    if not pc.any(rollout).as_py():
        return None
    keys = pf.read(columns=["model", "family", "instance_id", "sample"])
    where = np.flatnonzero(rollout.to_numpy(zero_copy_only=False))
    keys = keys.take(pa.array(where))
    joined = pc.binary_join_element_wise(
        keys["model"], keys["family"], keys["instance_id"], pc.cast(keys["sample"], pa.string()), "\x1f"
    )
    episode = pc.dictionary_encode(joined).combine_chunks().indices.to_numpy()
    count = int(episode.max()) + 1
    first = np.full(count, len(mode), dtype=np.int64)
    last = np.full(count, -1, dtype=np.int64)
    np.minimum.at(first, episode, where)
    np.maximum.at(last, episode, where)
    inside = np.zeros(len(mode) + 2, dtype=np.int64)
    np.add.at(inside, first + 1, 1)
    np.add.at(inside, last + 1, -1)
    return np.cumsum(inside)[: len(mode) + 1] > 0


class ShardSizer:
    """Attempts per shard: about ``target_seconds`` of worker CPU (each task costs the
    client some milliseconds of Dask's CPU, so not too short), between MIN and MAX (MAX
    bounds the bytes in flight: responses run to kilobytes); fixed if given. With
    ``workers``, the last shards shrink (never above a ``2 * workers``-th of what is
    left) so that the workers end together: a quarter second left on one worker while
    the other idles is a tenth of a 24k-attempt run on two."""

    MIN, MAX, FIRST = 200, 5_000, 500

    def __init__(self, fixed: int | None, target_seconds: float = 0.5, workers: int = 0) -> None:
        self.fixed = fixed
        self.target = target_seconds
        self.workers = workers
        self.per_attempt: float | None = None
        self._recent: deque[float] = deque(maxlen=5)

    def observe(self, attempts: int, cpu_seconds: float) -> None:
        """Learn from a scored shard: the median of the last five shards' cost per
        attempt (a worker's first shard, paying its first calls, does not shrink the
        next ones as a running mean would)."""
        if attempts:
            self._recent.append(max(cpu_seconds, 1e-6) / attempts)
            self.per_attempt = float(np.median(self._recent))

    def next(self, remaining: int | None = None) -> int:
        """The next shard's attempts, ``remaining`` being the attempts not yet cut."""
        if self.fixed is not None:
            return self.fixed
        n = self.FIRST if self.per_attempt is None else int(self.target / self.per_attempt)
        if self.workers and remaining is not None:
            n = min(n, -(-remaining // (2 * self.workers)))
        return max(self.MIN, min(self.MAX, n))


#: at most this many runs of rising instance order (segments) are read side by side;
#: a table in another order is cut into consecutive shards instead
MAX_SEGMENTS = 32


@dataclass(frozen=True)
class Shard:
    """What one shard scores: rows ``[start, stop)`` of the attempts table from each
    of some segments (``(segment, start, stop)``, in segment order), and per family
    label the positions (ascending) of the instance rows they answer."""

    slices: tuple[tuple[int, int, int], ...]
    instances: tuple[tuple[str, np.ndarray], ...]

    @property
    def attempts(self) -> int:
        return sum(stop - start for _, start, stop in self.slices)


class AttemptLayout:
    """Where each attempt's instance is, and the order the table is in: read once, in
    Arrow, from two columns (no per-row Python).

    Each attempt gets a key, its instance's position among all labels' instance rows
    (labels in the order they first appear). The evaluate stage writes attempts model
    by model, each model's in instance order, so the keys rise in a few long runs
    (segments, one per model). Shards are then ranges of keys, taking from every
    segment the rows of those instances: all answers to an instance meet in one shard
    and its world is read once, not once per model. The rows of a shard go back to
    their segments, and segments are written one after the other, so the output order
    is the table's. A table in another order (many segments) falls back to shards of
    consecutive rows that never cut a rollout episode.
    """

    def __init__(self, pf: pq.ParquetFile, index: Callable[[str], InstanceIndex], max_segments: int) -> None:
        self.rows = pf.metadata.num_rows
        codes = np.empty(self.rows, dtype=np.int32)
        positions = np.empty(self.rows, dtype=np.int64)
        self.labels: list[str] = []
        at = 0
        for batch in pf.iter_batches(batch_size=65_536, columns=["family", "instance_id"]):
            enc = pc.dictionary_encode(batch.column(0))  # codes in order of first appearance
            local = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
            to_global = []
            for code, label in enumerate(enc.dictionary.to_pylist()):
                if label not in self.labels:
                    self.labels.append(label)
                g = self.labels.index(label)
                to_global.append(g)
                mask = local == code
                ids = batch.column(1).filter(pa.array(mask))
                positions[at : at + batch.num_rows][mask] = index(label).positions(ids)
            codes[at : at + batch.num_rows] = np.asarray(to_global, dtype=np.int32)[local]
            at += batch.num_rows
        sizes = [len(index(label)) for label in self.labels]
        #: first key of each label, and the number of keys
        self.offsets = np.cumsum([0, *sizes])
        self.keys = self.offsets[codes] + positions if self.rows else positions
        breaks = np.flatnonzero(self.keys[1:] < self.keys[:-1]) + 1
        starts = np.concatenate([[0], breaks]).astype(np.int64)
        stops = np.concatenate([breaks, [self.rows]]).astype(np.int64)
        self.grouped = len(starts) <= max_segments
        #: (start, stop) of each segment; one for the whole table when not grouped
        self.segments = (
            list(zip(starts.tolist(), stops.tolist(), strict=True)) if self.grouped else [(0, self.rows)]
        )
        self.cuts = None if self.grouped else episode_cuts(pf)
        if self.grouped:
            self._counts = np.bincount(self.keys, minlength=int(self.offsets[-1]))
            self._cum = np.concatenate([[0], np.cumsum(self._counts)]).astype(np.int64)
            self._seg_keys = [self.keys[a:b] for a, b in self.segments]
        else:
            self._cum = np.arange(self.rows + 1, dtype=np.int64)

    def _instances(self, keys: np.ndarray) -> tuple[tuple[str, np.ndarray], ...]:
        """Distinct ascending ``keys`` as (label, positions)."""
        out = []
        label_of = np.searchsorted(self.offsets, keys, side="right") - 1
        for g in np.unique(label_of):
            out.append((self.labels[int(g)], keys[label_of == g] - self.offsets[g]))
        return tuple(out)

    # Shards are cut from a line of positions: instance keys for a grouped table (a
    # shard takes every row of the keys it covers), rows otherwise. ``_cum[p]`` is the
    # number of attempts before position p.

    @property
    def span(self) -> int:
        """The number of positions (a shard covers positions ``[a, b)``)."""
        return len(self._cum) - 1

    def attempts_between(self, a: int, b: int) -> int:
        return int(self._cum[b] - self._cum[a])

    def legal(self, p: int) -> int:
        """The first position at or after ``p`` where a shard may start (never inside a
        rollout episode)."""
        if self.grouped or self.cuts is None:
            return p
        while p < self.rows and self.cuts[p]:
            p += 1
        return p

    def cut(self, a: int, n: int, end: int) -> tuple[Shard, int]:
        """The shard of about ``n`` attempts from position ``a`` (never past ``end``, a
        legal position), and the position after it."""
        if self.grouped:
            b = int(np.searchsorted(self._cum, self._cum[a] + n, side="left"))
            b = min(max(b, a + 1), end)
            slices = []
            for s, ((start, _), keys) in enumerate(zip(self.segments, self._seg_keys, strict=True)):
                lo, hi = np.searchsorted(keys, [a, b], side="left").tolist()
                if hi > lo:
                    slices.append((s, start + lo, start + hi))
            return Shard(tuple(slices), self._instances(np.flatnonzero(self._counts[a:b]) + a)), b
        b = min(end, self.legal(min(end, a + max(1, n))))
        return Shard(((0, a, b),), self._instances(np.unique(self.keys[a:b]))), b

    def shards(self, sizer: ShardSizer) -> Iterator[Shard]:
        """The shards, each of about ``sizer.next()`` attempts (asked as each is cut)."""
        a = 0
        while (left := self.attempts_between(a, self.span)) > 0:
            shard, a = self.cut(a, sizer.next(left), self.span)
            yield shard

    def position(self, attempts: int) -> int:
        """The first legal position with at least ``attempts`` attempts before it."""
        return min(self.span, self.legal(int(np.searchsorted(self._cum, attempts, side="left"))))

    def split(self, a: int, end: int) -> int | None:
        """A legal position about halfway through the attempts of ``[a, end)``, strictly
        inside it, or None."""
        mid = self.position(int(self._cum[a] + (self._cum[end] - self._cum[a]) // 2))
        return mid if a < mid < end else None


def shard_sources(
    attempts_path: Path, layout: AttemptLayout, index: Callable[[str], InstanceIndex]
) -> Callable[[Shard], ShardSource]:
    """Each shard's :class:`ShardSource` (the client's only work per shard: no rows read)."""
    ref = FileRef.of(attempts_path)
    meta = pq.read_metadata(attempts_path)
    groups = tuple(np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]).tolist())

    def source(shard: Shard) -> ShardSource:
        instances = tuple(
            (label, index(label).columns, index(label).parts(pos)) for label, pos in shard.instances
        )
        slices = tuple((start, stop) for _, start, stop in shard.slices)
        return ShardSource(ref, groups, slices, instances)

    return source


def shard_payload(source: ShardSource) -> tuple[bytes, dict[str, bytes], tuple[int, ...]]:
    """``score_shard``'s arguments for a worker that cannot read the files: the shard's
    rows, read here, as Arrow IPC."""
    attempts, instances = read_source(source)
    return (
        to_ipc(attempts),
        {label: to_ipc(table) for label, table in instances.items()},
        tuple(stop - start for start, stop in source.slices),
    )
