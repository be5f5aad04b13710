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

This module holds what a worker runs: scoring a shard's rows and reading them from the
files. The client's side lives beside it: :mod:`horizonbench.tasks.score.cutting` cuts the
attempts table into shards, :mod:`horizonbench.tasks.score.lanes` hands them to the
workers and writes the scores table in order.

No Prefect here: a worker imports this module only.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench.core.registry import get_family
from horizonbench.core.types import Score
from horizonbench.datasets.shards import from_ipc, gc_paused
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.evaluate.rollouts import score_rollout

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
# a third of the worker's CPU on a shard of 1,800 answers when this went in (5,500
# against 8,700 answers per CPU-second), more in a process with a larger heap; on
# 2026-12-03 the passes were 3.8% of it and the shards took 1.13x the CPU with the
# collector on (``datasets.shards.gc_paused`` has the figures and the command). Any
# cycle made meanwhile is collected by the first pass after.


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
