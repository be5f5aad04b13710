"""Scoring in shards: the pure code of the score stage, on a Dask cluster or in-process.

The client streams the attempts table in its order and cuts it into shards of
consecutive attempts (never inside a rollout episode). Each shard travels to a worker as
compressed Arrow IPC: its attempts (the columns scoring reads) and, per family label,
the instance rows they answer, with the columns scoring needs only. The worker parses,
replays and scores, and sends the score rows back the same way; the client writes them
in shard order into one Parquet file with row groups of a fixed size. So the bytes
never depend on the shard size, the number of workers, or whether a cluster was used,
and the client holds neither all attempts nor all instance rows, nor any as Python
objects.

No Prefect here: a worker imports this module only.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horizonbench.core.registry import get_family
from horizonbench.core.types import Score
from horizonbench.datasets.shards import from_ipc, to_ipc
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks import progress as prog
from horizonbench.tasks.rollouts import score_rollout
from horizonbench.tasks.table_parts import TableWriter, part_files

#: the attempt columns scoring reads
ATTEMPT_COLUMNS = (
    "model",
    "instance_id",
    "family",
    "sample",
    "turn",
    "mode",
    "response",
    "error_class",
    "finish_reason",
)
#: instance columns every score row copies (those a family's table has)
ROW_COLUMNS = ("instance_id", "solution_length", "num_keys", "noise_ratio", "shuffle_ratio", "n")
#: rows per row group of the scores table
SCORE_ROW_GROUP = 5_000
#: zstd: as cheap as LZ4 here (measured: the same client and worker CPU), in smaller messages


# ---------------------------------------------------------------------------------------------
# score rows (what a worker runs)
# ---------------------------------------------------------------------------------------------


def score_rows(
    attempts: list[dict[str, Any]], instances: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One score row per whole-plan attempt and one per rollout episode, in the
    attempts' order (an episode where its first row is). An attempt (or an episode with
    a step) without an answer gets ``answered=False`` and its error class: it is
    counted, never scored as a model failure (a provider outage is not a reasoning
    failure), and a rerun retries it."""
    return [row for _, row in score_rows_at(attempts, instances)]


def score_rows_at(
    attempts: list[dict[str, Any]], instances: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[tuple[int, dict[str, Any]]]:
    """:func:`score_rows`, each row with the index of the attempt it stands at (an
    episode's first row): a shard of several slices of the table says with it which
    slice each row goes back to."""
    out: list[tuple[int, dict[str, Any]]] = []
    families: dict[str, Any] = {}
    episodes: dict[tuple[str, str, str, int], list[int]] = {}
    # visit each instance's attempts together (its scorer prepares the instance once),
    # then restore the attempts' order
    order = sorted(range(len(attempts)), key=lambda i: (attempts[i]["family"], attempts[i]["instance_id"]))
    scorer_key: tuple[str, str] | None = None
    scorer: Callable[[str], Score] | None = None
    for i in order:
        att = attempts[i]
        if att.get("mode", "plan") == "rollout":
            episodes.setdefault(
                (att["model"], att["family"], att["instance_id"], int(att["sample"])), []
            ).append(i)
            continue
        key = (att["family"], att["instance_id"])
        row = instances[key]
        if att["response"] is None:
            out.append((i, _unanswered(att, row, att.get("error_class"))))
            continue
        if key != scorer_key:
            fam = families.setdefault(att["family"], get_family(att["family"]))
            scorer, scorer_key = _scorer(fam, row), key
        assert scorer is not None
        out.append((i, _scored(att, row, scorer(att["response"]), "plan")))
    for idxs in episodes.values():
        turns = [attempts[i] for i in idxs]
        att = min(turns, key=lambda t: t["turn"])
        row = instances[(att["family"], att["instance_id"])]
        fam = families.setdefault(att["family"], get_family(att["family"]))
        s = score_rollout(fam, row, turns)
        if s is None:
            failed = [t for t in sorted(turns, key=lambda t: t["turn"]) if t["response"] is None]
            why = failed[0].get("error_class") if failed else "incomplete"
            out.append((min(idxs), _unanswered(att, row, why)))
        else:
            out.append((min(idxs), _scored(att, row, s, "rollout")))
    return sorted(out, key=lambda pair: pair[0])


def _scorer(family: Any, row: Mapping[str, Any]) -> Callable[[str], Score]:
    """The family's scorer of answers to one instance (``answer_scorer``), or parse and
    score one by one."""
    make = getattr(family, "answer_scorer", None)
    if make is not None:
        return make(row)  # type: ignore[no-any-return]
    return lambda text: family.score(row, family.parse_answer(text))


def _base(att: Mapping[str, Any], mode: str) -> dict[str, Any]:
    return {
        "model": att["model"],
        "instance_id": att["instance_id"],
        "family": att["family"],
        "mode": mode,
        "sample": att["sample"],
    }


def _scored(att: Mapping[str, Any], row: Mapping[str, Any], s: Score, mode: str) -> dict[str, Any]:
    extra = s.extra or {}
    return {
        **_base(att, mode),
        "answered": True,
        "error_class": None,
        "solution_length": row["solution_length"],
        "num_keys": row.get("num_keys"),
        "noise_ratio": row.get("noise_ratio"),
        "shuffle_ratio": row.get("shuffle_ratio"),
        "success": s.success,
        "valid": s.valid,
        "exact_match": s.exact_match,
        "progress_ratio": s.progress_ratio,
        "precision": s.precision,
        "precision_positional": extra.get("precision_positional"),
        "recall": s.recall,
        "plan_length": s.plan_length,
        "violation": s.violation,
        "first_violation_step": s.first_violation_step,
        "parse_error": extra.get("parse_error"),
        "n": row.get("n"),
        "optimality_gap": extra.get("optimality_gap"),
        "move_legality_rate": extra.get("move_legality_rate"),
        "steps_taken": extra.get("steps_taken"),
    }


def _unanswered(att: Mapping[str, Any], row: Mapping[str, Any], error_class: str | None) -> dict[str, Any]:
    return {
        **_base(att, att.get("mode", "plan")),
        "answered": False,
        "error_class": error_class or "other",
        "solution_length": row["solution_length"],
        "num_keys": row.get("num_keys"),
        "noise_ratio": row.get("noise_ratio"),
        "shuffle_ratio": row.get("shuffle_ratio"),
        "success": False,
        "valid": False,
        "exact_match": False,
        "progress_ratio": 0.0,
        "precision": 0.0,
        "precision_positional": None,
        "recall": 0.0,
        "plan_length": 0,
        "violation": None,
        "first_violation_step": None,
        "parse_error": None,
        "n": row.get("n"),
        "optimality_gap": None,
        "move_legality_rate": None,
        "steps_taken": None,
    }


@dataclass(frozen=True)
class ScoreBatch:
    """A scored shard on its way back: the score rows as compressed Arrow IPC."""

    rows: bytes
    attempts: int
    #: CPU seconds the shard took on its worker (the client sizes later shards by it)
    cpu_seconds: float
    #: score rows per slice of the shard's attempts, in order (the client files each
    #: slice's rows where that slice of the attempts table stands)
    pieces: tuple[int, ...] = ()

    def table(self) -> pa.Table:
        return from_ipc(self.rows)


def score_shard(attempts: bytes, instances: dict[str, bytes], slices: Sequence[int] = ()) -> ScoreBatch:
    """Score one shard: its attempts and, per family label, the instance rows they answer
    (all as Arrow IPC, see :func:`to_ipc`). What a Dask worker runs.

    ``slices``: the lengths of the runs of consecutive table rows the attempts were cut
    from (one run if empty). A shard holds every answer to its instances, whichever model
    gave it, so each instance's judge (its world read from the facts) is made once.
    """
    began = time.thread_time()
    atts = from_ipc(attempts).to_pylist()
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for label, data in instances.items():
        for row in _pylist(from_ipc(data)):
            rows[(label, row["instance_id"])] = row
    scored = score_rows_at(atts, rows)
    table = pa.Table.from_pylist([row for _, row in scored], schema=SCORES_SCHEMA)
    ends = np.cumsum(list(slices) or [len(atts)])
    at = np.fromiter((i for i, _ in scored), dtype=np.int64, count=len(scored))
    pieces = np.bincount(np.searchsorted(ends, at, side="right"), minlength=len(ends))
    return ScoreBatch(to_ipc(table), len(atts), time.thread_time() - began, tuple(pieces.tolist()))


def _pylist(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist()``, with each list-of-structs column (a maze's solution, some
    200 steps an instance) built from its flat child arrays: pyarrow's own conversion
    of the struct values was half the cost of decoding a shard's instance rows."""
    names, columns = table.column_names, []
    for column in table.itercolumns():
        columns.append(_struct_lists(column) or column.to_pylist())
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _struct_lists(column: pa.ChunkedArray) -> list[Any] | None:
    """A list<struct> column without nulls (at any level) whose fields are flat, as
    Python lists of dicts; None for any other column."""
    kind = column.type
    if not pa.types.is_list(kind) or not pa.types.is_struct(kind.value_type):
        return None
    fields = [kind.value_type.field(i) for i in range(kind.value_type.num_fields)]
    if any(pa.types.is_nested(f.type) for f in fields):
        return None
    out: list[Any] = []
    for chunk in column.chunks:
        values = chunk.flatten()  # the chunk's own struct values, from its first offset on
        if chunk.null_count or values.null_count:
            return None
        children = [values.field(i) for i in range(len(fields))]
        if any(c.null_count for c in children):
            return None
        keys = [f.name for f in fields]
        items = [
            dict(zip(keys, v, strict=True)) for v in zip(*(c.to_pylist() for c in children), strict=True)
        ]
        offsets = chunk.offsets.to_numpy()
        base = int(offsets[0]) if len(offsets) else 0
        out += [
            items[a - base : b - base]
            for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
        ]
    return out


# ---------------------------------------------------------------------------------------------
# the client: instance look-up, shard cutting, streaming output
# ---------------------------------------------------------------------------------------------


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
    instance, hashed in Arrow) and the rows at given positions, read from the row
    groups that hold them (the scoring columns only), the last few decoded row groups
    kept: consecutive shards answer neighbouring instances."""

    def __init__(self, folder: Path, label: str, cache_groups: int = 2) -> None:
        self.files = part_files(folder)
        if not self.files:
            raise FileNotFoundError(f"no instance table for {label!r} in {folder}")
        self.schema = pq.read_schema(self.files[0])
        self.columns = score_columns(label, self.schema)
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
        self._cache: OrderedDict[int, pa.Table] = OrderedDict()
        self.cache_groups = cache_groups

    def __len__(self) -> int:
        return len(self.ids)

    def _group(self, k: int) -> pa.Table:
        table = self._cache.get(k)
        if table is None:
            f, g = self.groups[k]
            with pq.ParquetFile(self.files[f]) as pf:
                table = pf.read_row_group(g, columns=self.columns)
            self._cache[k] = table
            while len(self._cache) > self.cache_groups:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(k)
        return table

    def positions(self, ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The row position of each of ``ids`` (KeyError for one not in the table)."""
        pos = pc.index_in(ids, value_set=self.ids)
        if pos.null_count:
            lost = ids.filter(pc.is_null(pos))[0].as_py()
            raise KeyError(f"attempt for an instance not in {self.label!r}: {lost!r}")
        return np.asarray(pos.to_numpy(zero_copy_only=False), dtype=np.int64)

    def rows_at(self, positions: np.ndarray) -> pa.Table:
        """The rows at ``positions`` (ascending, distinct), in that order."""
        group_of = np.searchsorted(self.starts, positions, side="right") - 1
        parts = []
        for k in np.unique(group_of):
            sel = positions[group_of == k] - self.starts[k]
            parts.append(self._group(int(k)).take(pa.array(sel)))
        if not parts:
            return self._group(0).slice(0, 0)
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


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

    def observe(self, attempts: int, cpu_seconds: float) -> None:
        if attempts:
            rate = max(cpu_seconds, 1e-6) / attempts
            self.per_attempt = rate if self.per_attempt is None else 0.5 * (self.per_attempt + rate)

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

    def _instances(self, keys: np.ndarray) -> tuple[tuple[str, np.ndarray], ...]:
        """Distinct ascending ``keys`` as (label, positions)."""
        out = []
        label_of = np.searchsorted(self.offsets, keys, side="right") - 1
        for g in np.unique(label_of):
            out.append((self.labels[int(g)], keys[label_of == g] - self.offsets[g]))
        return tuple(out)

    def shards(self, sizer: ShardSizer) -> Iterator[Shard]:
        """The shards, each of about ``sizer.next()`` attempts (asked as each is cut)."""
        if not self.rows:
            return
        if not self.grouped:
            yield from self._consecutive(sizer)
            return
        counts = np.bincount(self.keys, minlength=int(self.offsets[-1]))
        cum = np.concatenate([[0], np.cumsum(counts)])
        seg_keys = [self.keys[a:b] for a, b in self.segments]
        a = 0
        while cum[a] < self.rows:
            b = int(np.searchsorted(cum, cum[a] + sizer.next(self.rows - int(cum[a])), side="left"))
            b = min(max(b, a + 1), len(counts))
            slices = []
            for s, ((start, _), keys) in enumerate(zip(self.segments, seg_keys, strict=True)):
                lo, hi = np.searchsorted(keys, [a, b], side="left").tolist()
                if hi > lo:
                    slices.append((s, start + lo, start + hi))
            yield Shard(tuple(slices), self._instances(np.flatnonzero(counts[a:b]) + a))
            a = b

    def _consecutive(self, sizer: ShardSizer) -> Iterator[Shard]:
        start = 0
        while start < self.rows:
            end = min(self.rows, start + max(1, sizer.next(self.rows - start)))
            if self.cuts is not None:
                while end < self.rows and self.cuts[end]:
                    end += 1
            yield Shard(((0, start, end),), self._instances(np.unique(self.keys[start:end])))
            start = end


class _Rows:
    """Rows of one segment of the attempts table (its scoring columns), read forward:
    each call takes the rows after the last ones, decoding only the row groups they
    are in (a batch of them at a time)."""

    def __init__(self, path: Path, start: int, stop: int, batch_rows: int = 2_048) -> None:
        self._pf = pq.ParquetFile(path)
        meta = self._pf.metadata
        first = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
        g0 = int(np.searchsorted(first, start, side="right")) - 1
        g1 = int(np.searchsorted(first, stop, side="left"))
        self._batches = self._pf.iter_batches(
            batch_size=batch_rows, row_groups=list(range(g0, g1)), columns=list(ATTEMPT_COLUMNS)
        )
        #: decoded rows not yet taken, and the table row of the first of them
        self._pending: list[pa.RecordBatch] = []
        self._at = int(first[g0])

    def take(self, start: int, stop: int) -> list[pa.RecordBatch]:
        """Rows ``[start, stop)``; ``start`` at or after the end of the last call's."""
        out: list[pa.RecordBatch] = []
        while start < stop:
            if not self._pending:
                self._pending.append(next(self._batches))
            batch = self._pending[0]
            end = self._at + batch.num_rows
            if end <= start:  # rows before the segment, or skipped
                self._pending.pop(0)
                self._at = end
                continue
            lo, hi = start - self._at, min(stop, end) - self._at
            out.append(batch.slice(lo, hi - lo))
            start = self._at + hi
            if hi == batch.num_rows:
                self._pending.pop(0)
                self._at = end
        return out

    def close(self) -> None:
        self._pf.close()


class _Sinks:
    """The score rows of each segment, written in segment order: the first segment's
    straight into the table, the others' spooled to Arrow IPC files beside it (row
    order within a segment is shard order) and copied in at ``close``. So the client
    holds no more than a shard's rows, whatever the number of segments."""

    _SPOOL = pa.ipc.IpcWriteOptions(compression="lz4")

    def __init__(self, writer: TableWriter, dest: Path, segments: int) -> None:
        self.writer = writer
        self.paths = [dest.with_name(f".{dest.name}.{os.getpid()}.seg{s}.arrows") for s in range(segments)]
        self._spools: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
        self._files: dict[int, Any] = {}

    def write(self, segment: int, table: pa.Table) -> None:
        if not table.num_rows:
            return
        if segment == 0:
            self.writer.write(table)
            return
        spool = self._spools.get(segment)
        if spool is None:
            self._files[segment] = pa.OSFile(str(self.paths[segment]), "wb")
            spool = self._spools[segment] = pa.ipc.new_stream(
                self._files[segment], table.schema, options=self._SPOOL
            )
        spool.write_table(table)

    def close(self) -> None:
        for segment in sorted(self._spools):
            self._spools.pop(segment).close()
            self._files.pop(segment).close()
            with pa.memory_map(str(self.paths[segment])) as source, pa.ipc.open_stream(source) as reader:
                for batch in reader:
                    self.writer.write(pa.Table.from_batches([batch]))
            self.paths[segment].unlink()

    def abort(self) -> None:
        for segment in list(self._spools):
            self._spools.pop(segment).close()
            self._files.pop(segment).close()
        for path in self.paths:
            path.unlink(missing_ok=True)


def scores_writer(dest: Path, row_group_rows: int = SCORE_ROW_GROUP) -> TableWriter:
    """The scores table, written as shards arrive, renamed into place at ``close``."""
    return TableWriter(dest, SCORES_SCHEMA, "scores", row_group_rows)


class ShardReader:
    """The payloads of a table's shards: its attempt slices and the instance rows they
    answer, as Arrow IPC (the client's only work per shard, all in Arrow)."""

    def __init__(
        self, attempts_path: Path, layout: AttemptLayout, index: Callable[[str], InstanceIndex]
    ) -> None:
        self.index = index
        self.readers = [_Rows(attempts_path, start, stop) for start, stop in layout.segments]

    def payload(self, shard: Shard) -> tuple[bytes, dict[str, bytes], tuple[int, ...]]:
        """(attempts, instance rows by label, slice lengths): ``score_shard``'s arguments."""
        batches = [b for s, start, stop in shard.slices for b in self.readers[s].take(start, stop)]
        attempts = pa.Table.from_batches(batches).combine_chunks()
        instances = {label: to_ipc(self.index(label).rows_at(pos)) for label, pos in shard.instances}
        return to_ipc(attempts), instances, tuple(stop - start for _, start, stop in shard.slices)

    def close(self) -> None:
        for r in self.readers:
            r.close()


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

    With a Dask ``client`` up to ``window`` shards are in flight and their results are
    written in shard order as they come; without one each shard is scored here, by the
    same function, giving the same bytes. ``shard_rows`` fixes the shard size (default:
    about half a second of worker CPU, less at the end). Shards hold all answers to their instances
    (see :class:`AttemptLayout`) unless the table's order has more than
    ``max_segments`` rising runs.
    """
    indexes: dict[str, InstanceIndex] = {}

    def index(label: str) -> InstanceIndex:
        if label not in indexes:
            if label not in instance_folders:
                raise KeyError(f"attempts of an unknown family label {label!r}")
            indexes[label] = InstanceIndex(instance_folders[label], label)
        return indexes[label]

    workers = 0
    if client is not None:
        workers = len(client.scheduler_info().get("workers", {})) or 1
        window = window if window is not None else 3 * workers
    sizer = ShardSizer(shard_rows, workers=workers)
    writer = scores_writer(dest)
    inflight: deque[tuple[Shard, Any]] = deque()
    sinks: _Sinks | None = None
    reader: ShardReader | None = None

    def take(shard: Shard, batch: ScoreBatch, bar: prog.Progress) -> None:
        assert sinks is not None
        sizer.observe(batch.attempts, batch.cpu_seconds)
        table = batch.table()
        at = 0
        for (segment, _, _), n in zip(shard.slices, batch.pieces, strict=True):
            sinks.write(segment, table.slice(at, n))
            at += n
        bar.advance(batch.attempts)

    try:
        with pq.ParquetFile(attempts_path) as pf, prog.progress("score", pf.metadata.num_rows) as bar:
            layout = AttemptLayout(pf, index, max_segments)
            sinks = _Sinks(writer, dest, len(layout.segments))
            reader = ShardReader(attempts_path, layout, index)
            for shard in layout.shards(sizer):
                attempts, instances, slices = reader.payload(shard)
                if client is None:
                    take(shard, score_shard(attempts, instances, slices), bar)
                    continue
                fut = client.submit(score_shard, attempts, instances, slices, pure=False)
                inflight.append((shard, fut))
                while len(inflight) >= max(1, window or 1):
                    shard_done, fut = inflight.popleft()
                    take(shard_done, fut.result(), bar)
            while inflight:
                shard_done, fut = inflight.popleft()
                take(shard_done, fut.result(), bar)
            sinks.close()
    except BaseException:
        for _, fut in inflight:
            fut.cancel()
        if sinks is not None:
            sinks.abort()
        writer.abort()
        raise
    finally:
        if reader is not None:
            reader.close()
    writer.close()
    return writer.rows
