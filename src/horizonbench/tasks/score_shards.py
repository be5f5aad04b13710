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

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping
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
    return [row for _, row in sorted(out, key=lambda pair: pair[0])]


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

    def table(self) -> pa.Table:
        return from_ipc(self.rows)


def score_shard(attempts: bytes, instances: dict[str, bytes]) -> ScoreBatch:
    """Score one shard: its attempts and, per family label, the instance rows they answer
    (all as Arrow IPC, see :func:`to_ipc`). What a Dask worker runs."""
    began = time.thread_time()
    atts = from_ipc(attempts).to_pylist()
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for label, data in instances.items():
        for row in from_ipc(data).to_pylist():
            rows[(label, row["instance_id"])] = row
    table = pa.Table.from_pylist(score_rows(atts, rows), schema=SCORES_SCHEMA)
    return ScoreBatch(to_ipc(table), len(atts), time.thread_time() - began)


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
    """Finds a family label's instance rows by id, reading only the row groups that hold
    them (and only the scoring columns), with the last few decoded row groups kept:
    consecutive attempts answer neighbouring instances."""

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
        #: id -> position for the row groups used last (and the next one)
        self._near: dict[str, int] = {}
        self._near_groups: set[int] = set()

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

    def _positions(self, ids: pa.Array) -> np.ndarray:
        """Row positions of ``ids``: looked up among the row groups used last and the one
        after them (consecutive shards answer neighbouring instances), else hashed
        against every id of the table."""
        wanted = ids.to_pylist()
        near = self._near
        found = [near.get(i, -1) for i in wanted]
        positions = np.array(found, dtype=np.int64)
        missing = positions < 0
        if missing.any():
            pos = pc.index_in(ids.filter(pa.array(missing)), value_set=self.ids)
            if pos.null_count:
                lost = ids.filter(pa.array(missing)).filter(pc.is_null(pos))[0].as_py()
                raise KeyError(f"attempt for an instance not in {self.label!r}: {lost!r}")
            positions[missing] = pos.to_numpy()
        groups = set((np.searchsorted(self.starts, positions, side="right") - 1).tolist())
        groups |= {k + 1 for k in groups if k + 1 < len(self.groups)}
        if groups != self._near_groups:
            self._near = {}
            for k in sorted(groups):
                start, stop = int(self.starts[k]), int(self.starts[k + 1])
                names = self.ids.slice(start, stop - start).to_pylist()
                self._near.update(zip(names, range(start, stop), strict=True))
            self._near_groups = groups
        return positions

    def rows(self, ids: pa.Array) -> pa.Table:
        """The rows of ``ids`` (distinct), in that order."""
        positions = self._positions(ids)
        group_of = np.searchsorted(self.starts, positions, side="right") - 1
        parts = []
        order = []
        for k in np.unique(group_of):
            sel = np.flatnonzero(group_of == k)
            parts.append(self._group(int(k)).take(pa.array(positions[sel] - self.starts[k])))
            order.append(sel)
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        back = np.empty(len(positions), dtype=np.int64)
        back[np.concatenate(order)] = np.arange(len(positions))
        return table.take(pa.array(back))


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
    """Attempts per shard: about ``target_seconds`` of worker CPU (short, so that the
    last shards end together), between MIN and MAX (MAX bounds the bytes in flight:
    responses run to kilobytes); fixed if given."""

    MIN, MAX, FIRST = 200, 5_000, 500

    def __init__(self, fixed: int | None, target_seconds: float = 0.25) -> None:
        self.fixed = fixed
        self.target = target_seconds
        self.per_attempt: float | None = None

    def observe(self, attempts: int, cpu_seconds: float) -> None:
        if attempts:
            rate = max(cpu_seconds, 1e-6) / attempts
            self.per_attempt = rate if self.per_attempt is None else 0.5 * (self.per_attempt + rate)

    def next(self) -> int:
        if self.fixed is not None:
            return self.fixed
        if self.per_attempt is None:
            return self.FIRST
        return max(self.MIN, min(self.MAX, int(self.target / self.per_attempt)))


def iter_shards(
    pf: pq.ParquetFile, sizer: ShardSizer, cuts: np.ndarray | None, batch_rows: int = 5_000
) -> Iterator[pa.Table]:
    """The attempts table (its scoring columns) in consecutive shards of about
    ``sizer.next()`` rows, each ending where no rollout episode is cut."""
    pending: list[pa.Table] = []
    rows = start = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=list(ATTEMPT_COLUMNS)):
        pending.append(pa.Table.from_batches([batch]))
        rows += batch.num_rows
        while True:
            end = start + sizer.next()
            if cuts is not None:
                while end < start + rows and cuts[end]:
                    end += 1
            if end >= start + rows:
                break
            whole = pa.concat_tables(pending)
            yield whole.slice(0, end - start)
            pending, rows, start = [whole.slice(end - start)], rows - (end - start), end
    if rows:
        yield pa.concat_tables(pending)


def shard_payload(shard: pa.Table, indexes: Callable[[str], InstanceIndex]) -> tuple[bytes, dict[str, bytes]]:
    """A shard's attempts and the instance rows they answer, per family label."""
    instances: dict[str, bytes] = {}
    for label in pc.unique(shard["family"]).to_pylist():
        ids = pc.unique(shard.filter(pc.equal(shard["family"], label))["instance_id"])
        instances[label] = to_ipc(indexes(label).rows(ids))
    return to_ipc(shard.combine_chunks()), instances


def scores_writer(dest: Path, row_group_rows: int = SCORE_ROW_GROUP) -> TableWriter:
    """The scores table, written as shards arrive, renamed into place at ``close``."""
    return TableWriter(dest, SCORES_SCHEMA, "scores", row_group_rows)


def score_table(
    attempts_path: Path,
    instance_folders: Mapping[str, Path],
    dest: Path,
    client: Any = None,
    *,
    shard_rows: int | None = None,
    window: int | None = None,
) -> int:
    """Score every attempt of ``attempts_path`` into the scores table ``dest``; returns
    its row count. ``instance_folders``: each family label's instance table folder.

    With a Dask ``client`` up to ``window`` shards are in flight and their results are
    written in shard order as they come; without one each shard is scored here, by the
    same function, giving the same bytes. ``shard_rows`` fixes the shard size (default:
    about a quarter second of worker CPU).
    """
    indexes: dict[str, InstanceIndex] = {}

    def index(label: str) -> InstanceIndex:
        if label not in indexes:
            if label not in instance_folders:
                raise KeyError(f"attempts of an unknown family label {label!r}")
            indexes[label] = InstanceIndex(instance_folders[label], label)
        return indexes[label]

    if window is None and client is not None:
        workers = len(client.scheduler_info().get("workers", {})) or 1
        window = 3 * workers
    sizer = ShardSizer(shard_rows)
    writer = scores_writer(dest)
    inflight: deque[Any] = deque()

    def take(batch: ScoreBatch, bar: prog.Progress) -> None:
        sizer.observe(batch.attempts, batch.cpu_seconds)
        writer.write(batch.table())
        bar.advance(batch.attempts)

    try:
        with pq.ParquetFile(attempts_path) as pf, prog.progress("score", pf.metadata.num_rows) as bar:
            for shard in iter_shards(pf, sizer, episode_cuts(pf)):
                attempts, instances = shard_payload(shard, index)
                if client is None:
                    take(score_shard(attempts, instances), bar)
                    continue
                inflight.append(client.submit(score_shard, attempts, instances, pure=False))
                while len(inflight) >= max(1, window or 1):
                    take(inflight.popleft().result(), bar)
            while inflight:
                take(inflight.popleft().result(), bar)
    except BaseException:
        for fut in inflight:
            fut.cancel()
        writer.abort()
        raise
    writer.close()
    return writer.rows
