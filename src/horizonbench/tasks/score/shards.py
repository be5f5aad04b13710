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

import contextlib
import os
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horizonbench.core.registry import get_family
from horizonbench.core.types import Score
from horizonbench.datasets.shards import from_ipc, gc_paused
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.evaluate.rollouts import score_rollout
from horizonbench.tasks.run_folder.table_parts import TableWriter, part_files

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
#: zstd: as cheap as LZ4 here (measured: the same client and worker CPU), in smaller
#: messages; compressed on the calling thread (a shard's buffers are small, and a Dask
#: worker has one thread: Arrow's pool would take CPU from the other worker)
_IPC = pa.ipc.IpcWriteOptions(compression="zstd", use_threads=False)
#: decoded row groups a process keeps (bytes): consecutive shards read the same ones
GROUP_CACHE_BYTES = 256 << 20


def to_ipc(table: pa.Table) -> bytes:
    """A table as one zstd-compressed Arrow IPC stream (``datasets.shards.to_ipc``,
    compressed on this thread)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


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
        # NaN: not a measure of this family (the puzzles' legal-move shares have their own
        # columns since issue 22); written as null
        "precision": None if s.precision != s.precision else s.precision,
        "precision_positional": extra.get("precision_positional"),
        "recall": None if s.recall != s.recall else s.recall,
        "plan_length": s.plan_length,
        "violation": s.violation,
        "first_violation_step": s.first_violation_step,
        "parse_error": extra.get("parse_error"),
        "n": row.get("n"),
        "optimality_gap": extra.get("optimality_gap"),
        "move_legality_rate": extra.get("move_legality_rate"),
        "steps_taken": extra.get("steps_taken"),
        "legal_move_coverage": extra.get("legal_move_coverage"),
        "best_progress": extra.get("best_progress"),
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
        "legal_move_coverage": None,
        "best_progress": None,
    }


# The cyclic collector is paused while a shard is scored (``gc_paused``, the one the
# generator's shards use): a shard allocates some hundred thousand containers (the
# rows as dicts, each solution step a dict, the parsed plans, the score rows) and frees
# nearly all of them by reference counting, yet with the collector on its passes were
# a third of the worker's CPU on a shard of 1,800 answers (5,500 against 8,700 answers
# per CPU-second), more in a process with a larger heap. Any cycle made meanwhile is
# collected by the first pass after.


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
    (all as Arrow IPC, see :func:`to_ipc`). What a Dask worker runs when it cannot read
    the client's files (:func:`score_source` otherwise).

    ``slices``: the lengths of the runs of consecutive table rows the attempts were cut
    from (one run if empty). A shard holds every answer to its instances, whichever model
    gave it, so each instance's judge (its world read from the facts) is made once.
    """
    with gc_paused():
        began = time.thread_time()
        tables = {label: from_ipc(data) for label, data in instances.items()}
        return _score_tables(from_ipc(attempts), tables, slices, began)


def score_source(source: ShardSource) -> ScoreBatch | None:
    """Score one shard read from the files themselves (:class:`ShardSource`): what a Dask
    worker runs, so that the client neither decodes nor ships the attempts and instance
    rows (on two cores, the client's CPU is taken from the workers). None when this
    process does not see the client's files (another machine, or a file rewritten since):
    the client then ships the rows (:func:`score_shard`)."""
    with gc_paused():
        began = time.thread_time()
        if not source.visible():
            return None
        attempts, instances = read_source(source)
        return _score_tables(attempts, instances, [stop - start for start, stop in source.slices], began)


def _score_tables(
    attempts: pa.Table, instances: Mapping[str, pa.Table], slices: Sequence[int], began: float
) -> ScoreBatch:
    atts = attempts.to_pylist()
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for label, table in instances.items():
        for row in _pylist(table):
            rows[(label, row["instance_id"])] = row
    scored = score_rows_at(atts, rows)
    table = pa.Table.from_pylist([row for _, row in scored], schema=SCORES_SCHEMA)
    ends = np.cumsum(list(slices) or [len(atts)])
    at = np.fromiter((i for i, _ in scored), dtype=np.int64, count=len(scored))
    pieces = np.bincount(np.searchsorted(ends, at, side="right"), minlength=len(ends))
    return ScoreBatch(to_ipc(table), len(atts), time.thread_time() - began, tuple(pieces.tolist()))


# ---------------------------------------------------------------------------------------------
# reading a shard from the files (a worker, or the client when a worker cannot)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileRef:
    """A file as the client saw it: a worker reads it only if it sees the same size and
    modification time (else it is another machine's file, or rewritten since)."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path | str) -> FileRef:
        st = os.stat(path)
        return cls(str(path), st.st_size, st.st_mtime_ns)

    def visible(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns


@dataclass(frozen=True)
class ShardSource:
    """Where one shard's rows are: rows ``[start, stop)`` of the attempts file (each
    slice, in order; ``groups``: the first row of each of its row groups) and, per
    family label, the instance rows as (file, row group, rows within it) with the
    columns scoring reads. A few hundred bytes, whatever the shard's size."""

    attempts: FileRef
    groups: tuple[int, ...]
    slices: tuple[tuple[int, int], ...]
    instances: tuple[tuple[str, tuple[str, ...], tuple[tuple[FileRef, int, np.ndarray], ...]], ...]

    def visible(self) -> bool:
        files = {self.attempts} | {ref for _, _, parts in self.instances for ref, _, _ in parts}
        return all(ref.visible() for ref in files)


_GROUPS: OrderedDict[tuple[FileRef, int, tuple[str, ...]], pa.Table] = OrderedDict()
_GROUPS_LOCK = threading.Lock()
#: how many times this process decoded each (file, row group): what the workers' lanes
#: keep apart (read by the tests; a few dozen entries a run)
DECODED: Counter[tuple[str, int]] = Counter()


def read_group(ref: FileRef, group: int, columns: tuple[str, ...]) -> pa.Table:
    """One row group of a Parquet file (those columns), decoded once while it stays among
    the last ``GROUP_CACHE_BYTES`` of row groups read: consecutive shards take rows of
    the same row groups (each model's answers to neighbouring instances)."""
    key = (ref, group, columns)
    with _GROUPS_LOCK:
        table = _GROUPS.get(key)
        if table is not None:
            _GROUPS.move_to_end(key)
            return table
    with pq.ParquetFile(ref.path) as pf:
        table = pf.read_row_group(group, columns=list(columns), use_threads=False)
    with _GROUPS_LOCK:
        DECODED[(ref.path, group)] += 1
        _GROUPS[key] = table
        total = sum(t.nbytes for t in _GROUPS.values())
        while len(_GROUPS) > 1 and total > GROUP_CACHE_BYTES:
            _, dropped = _GROUPS.popitem(last=False)
            total -= dropped.nbytes
    return table


def release_groups() -> int:
    """Drop the decoded row groups this process keeps; returns how many (run on every
    worker when a scoring ends, so nothing stays behind for the stages after)."""
    with _GROUPS_LOCK:
        n = len(_GROUPS)
        _GROUPS.clear()
    return n


def read_source(source: ShardSource) -> tuple[pa.Table, dict[str, pa.Table]]:
    """A shard's attempts (the columns scoring reads, its slices in order) and, per
    label, its instance rows (in the order given)."""
    starts = np.asarray(source.groups, dtype=np.int64)
    pieces = []
    for start, stop in source.slices:
        g0 = int(np.searchsorted(starts, start, side="right")) - 1
        g1 = int(np.searchsorted(starts, stop, side="left"))
        for g in range(g0, g1):
            lo, hi = max(start, int(starts[g])), min(stop, int(starts[g + 1]))
            group = read_group(source.attempts, g, ATTEMPT_COLUMNS)
            pieces.append(group.slice(lo - int(starts[g]), hi - lo))
    if pieces:
        attempts = pa.concat_tables(pieces).combine_chunks()
    else:
        attempts = read_group(source.attempts, 0, ATTEMPT_COLUMNS).slice(0, 0)
    instances = {}
    for label, columns, parts in source.instances:
        taken = [read_group(ref, g, columns).take(pa.array(rows)) for ref, g, rows in parts]
        instances[label] = pa.concat_tables(taken) if len(taken) > 1 else taken[0]
    return attempts, instances


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
