"""Finished generation shards kept on disk, so a rerun (or a resumed Ctrl-C) reuses them.

Every candidate's outcome is a pure function of (family, params, root seed, candidate
index) and of the generator's code, so a shard is keyed by a content hash of exactly
those (``shard_key``) plus its candidate range, never by the shard boundaries or the
timing that chose them. A later run covers its candidate index space with whatever
ranges are on disk and generates only the gaps (``tasks.generate.instances.sample_family``).

What a file holds, and why it is enough for any sampler state: the per-candidate
outcomes of the range, the rows the shard returned, and the set of lengths the shard
was asked for (``wanted``: the bins still open when it was sent, None for every row).
Rows of other lengths were dropped on the worker. Open bins only ever close, so a run
with the same sampling spec always finds every row it can keep; a run whose sampler
wants a length the file dropped notices it at that candidate and regenerates the rest
of the range (``generate._feed`` checks each candidate whose row is missing).

Layout (one folder per key, one file per range)::

    <root>/<family>-<key>/<start>-<stop>.hbshard     written to a .tmp name, renamed
    <root>/<family>-<key>/used                       touched when a run opens the key

The size is bounded by ``max_bytes`` (default ``DEFAULT_MAX_BYTES``, 4 GiB; the
config's ``generation.cache_max_gb``), applied when a generation finishes: ``prune``
drops whole keys least recently used first, then, if this run's own shards alone exceed
the bound, its highest candidate ranges (the start of the candidate space stays
reusable). Measured: 4,000 40x40 mazes (count mode) left 6.9 MiB of shards beside a
2.2 MiB instance table, so about 1.7 GiB per million; L-binned sampling stores the rows
of bins still open when each shard was sent, a little more than it keeps. A bound of 0
keeps shards only while a generation runs: a crash or Ctrl-C still resumes (nothing is
pruned on the way out), a finished run leaves none behind.

What it buys, and what it may cost (issue 24). A cache shared by a series of runs
(``generation.cache_dir``, outside the run folder, under the bound its user sets with
``generation.cache_max_gb``) turns an unchanged generation into reading files: the
demo's 12x12 mazes took 0.03 s of CPU instead of 1.11 s (0.23 s of wall time instead
of 8.9 s on the loaded machine). Its shards hold more bytes than the instance tables
they save (every candidate's outcome, the rows of bins still open, Arrow IPC rather
than dictionary-encoded Parquet): 0.24 MB for a 0.03 MB table there, and 2.8x at 30k
instances in count mode (issue 24: 54 MB for 19 MB). So the run's *own* cache
(``<run>/cache/shards``, the default) is pruned after a finished generation to no more
bytes than the run's instance tables (``run_bound``): while generating it is whole (an
interrupted generation resumes), afterwards it keeps only the start of the candidate
space that fits, which a rerun reads. The first of the demo's shards of 100 candidates
is larger than the whole table, so nothing is left and a rerun generates again (1.09 s of CPU
against 1.11 s); with shards of 20 candidates (tests/test_shard_cache.py) a rerun read
20 of its 120. Measured side by side
(medians of 3 interleaved rounds, another 1.9 cores busy meanwhile, 2026-12-03):
``benchmarks/tricks.py --only cache --repeat 3``. Guarded by
``tests/test_shard_cache.py`` (the run's own cache is never larger than its tables and a
rerun still reads its start; a shared cache's cap holds).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from horizonbench import __version__
from horizonbench.core.registry import family_of, get_family
from horizonbench.datasets.shards import ShardBatch, from_ipc, to_ipc
from horizonbench.tasks.run_folder.storage import umask_bits

#: where a run keeps its shards when the config names no shared folder
CACHE_REL = "cache/shards"
SUFFIX = ".hbshard"
#: bump when the file layout changes (old files then no longer match any key)
FORMAT = 1
_MAGIC = b"HBSHARD1\n"
#: default bound of one cache folder (a million 40x40 mazes take about 1.7 GiB)
DEFAULT_MAX_BYTES = 4 * 2**30
#: temporary files older than this are leftovers of a crashed write
_STALE_TMP_S = 3600.0

#: (index, length, rejection, has_row), as in ``ShardBatch.outcomes``
Outcome = tuple[int, int | None, str | None, bool]

_OUTCOME_SCHEMA = pa.schema(
    [
        ("length", pa.int64()),
        ("rejection", pa.string()),
        ("has_row", pa.bool_()),
    ]
)


def _package_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _sources(family: Any) -> list[Path]:
    """The source files a family's rows can depend on: its own package (or module, for
    a family defined in a single file), and the shard and seeding code every family
    runs through. A plug-in family outside horizonbench is hashed the same way."""
    module = sys.modules.get(type(family).__module__)
    files: list[Path] = []
    mod_file = getattr(module, "__file__", None)
    if mod_file:
        here = Path(mod_file).resolve()
        package = type(family).__module__.rpartition(".")[0]
        files += sorted(here.parent.rglob("*.py")) if package else [here]
    root = _package_root()
    files += sorted((root / "core").glob("*.py"))
    files += [root / "datasets" / "shards.py", root / "schemas" / "tables.py"]
    return files


@cache
def generator_fingerprint(family_name: str) -> str:
    """A hash of the code that generates a family's rows (and the horizonbench version).

    The version alone is not enough: generator changes land between releases, and a
    shared nightly cache must never serve rows an older generator made. Any edit of the
    family's package invalidates its shards, which costs one regeneration, never a
    wrong row.
    """
    family = get_family(family_name)
    h = hashlib.sha256(f"horizonbench {__version__} format {FORMAT}\n".encode())
    explicit = getattr(family, "generator_version", None)
    if explicit is not None:  # a family that versions its generator itself
        h.update(f"generator_version {explicit}\n".encode())
        return h.hexdigest()
    for path in _sources(family):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        h.update(path.name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def shard_key(family_label: str, params: dict[str, Any], root_seed: int) -> str:
    """The content key of a family's candidates: family (not the sweep label: two
    settings with equal params share their shards), params as validated and dumped (so
    defaults spelled out or left out give one key), root seed, generator fingerprint.
    Prompt settings are not in it: they change prompts, never instance rows."""
    name = family_of(family_label)
    family = get_family(name)
    dumped = family.params_model.model_validate(params).model_dump(mode="json")
    doc = {"family": name, "params": dumped, "seed": root_seed, "generator": generator_fingerprint(name)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CachedShard:
    """One finished shard read back: candidates ``start..stop-1``."""

    start: int
    stop: int
    #: lengths whose rows the shard kept (None: every row)
    wanted: frozenset[int] | None
    #: one per candidate, in index order
    outcomes: list[Outcome]
    rows: bytes

    def table(self) -> pa.Table:
        return from_ipc(self.rows)

    def covers(self, open_lengths: frozenset[int] | None) -> bool:
        """Does it hold every row a sampler with these open lengths could keep? (True
        for the rest of the range too, since open bins only close.)"""
        if self.wanted is None:
            return True
        return open_lengths is not None and open_lengths <= self.wanted


def _encode(start: int, stop: int, wanted: Iterable[int] | None, batch: ShardBatch) -> bytes:
    outcomes = pa.table(
        {
            "length": [o[1] for o in batch.outcomes],
            "rejection": [o[2] for o in batch.outcomes],
            "has_row": [o[3] for o in batch.outcomes],
        },
        schema=_OUTCOME_SCHEMA,
    )
    body = to_ipc(outcomes)
    payload = body + batch.rows
    header = {
        "format": FORMAT,
        "start": start,
        "stop": stop,
        "wanted": None if wanted is None else sorted(wanted),
        "outcome_bytes": len(body),
        "row_bytes": len(batch.rows),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    return _MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def _decode(data: bytes) -> CachedShard:
    if not data.startswith(_MAGIC):
        raise ValueError("not a shard file")
    end = data.index(b"\n", len(_MAGIC))
    header = json.loads(data[len(_MAGIC) : end])
    payload = data[end + 1 :]
    if header["format"] != FORMAT or len(payload) != header["outcome_bytes"] + header["row_bytes"]:
        raise ValueError("truncated or foreign shard file")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise ValueError("shard file checksum mismatch")
    start, stop = int(header["start"]), int(header["stop"])
    cols = from_ipc(payload[: header["outcome_bytes"]]).to_pydict()
    outcomes = [
        (start + i, length, rejection, bool(has_row))
        for i, (length, rejection, has_row) in enumerate(
            zip(cols["length"], cols["rejection"], cols["has_row"], strict=True)
        )
    ]
    if len(outcomes) != stop - start:
        raise ValueError("shard file outcome count does not match its range")
    wanted = header["wanted"]
    return CachedShard(
        start,
        stop,
        None if wanted is None else frozenset(wanted),
        outcomes,
        payload[header["outcome_bytes"] :],
    )


def _range_of(path: Path) -> tuple[int, int] | None:
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else ""
    a, sep, b = stem.partition("-")
    if not sep or not a.isdigit() or not b.isdigit() or int(a) >= int(b):
        return None
    return int(a), int(b)


class FamilyShards:
    """The shards of one key: list the ranges on disk, read one, store one."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.written = 0  # files this run stored

    def ranges(self) -> list[tuple[int, int]]:
        """The candidate ranges on disk, sorted by start (unreadable names ignored)."""
        try:
            paths = list(self.folder.iterdir())
        except FileNotFoundError:
            return []
        found = [r for r in (_range_of(p) for p in paths) if r is not None]
        return sorted(found)

    def _path(self, start: int, stop: int) -> Path:
        return self.folder / f"{start:012d}-{stop:012d}{SUFFIX}"

    def load(self, start: int, stop: int) -> CachedShard | None:
        """The shard of that range, or None when it is gone (another run pruned it) or
        damaged (then it is removed, so no later run trips on it)."""
        path = self._path(start, stop)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            shard = _decode(data)
            if (shard.start, shard.stop) != (start, stop):
                raise ValueError("range differs from the file name")
        except (ValueError, KeyError, TypeError, pa.ArrowException):
            path.unlink(missing_ok=True)
            return None
        return shard

    def store(self, start: int, stop: int, wanted: Iterable[int] | None, batch: ShardBatch) -> None:
        """Write a finished shard atomically (temporary name, then rename): a crash or
        Ctrl-C never leaves a half file under a real name. A full disk only loses the
        cache entry, never the run."""
        if len(batch.outcomes) != stop - start:
            raise ValueError(f"shard {start}-{stop} has {len(batch.outcomes)} outcomes")
        dest = self._path(start, stop)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(_encode(start, stop, wanted, batch))
            os.chmod(tmp, 0o666 & ~umask_bits())
            os.replace(tmp, dest)
            self.written += 1
        except OSError:
            tmp.unlink(missing_ok=True)

    def truncate(self, shard: CachedShard, stop: int) -> None:
        """Keep only candidates ``shard.start..stop-1`` of a shard that lacked a row a
        sampler needed at ``stop`` (that run regenerates and stores the rest with the
        rows it needs): otherwise every later run would stop at the same candidate."""
        keep = stop - shard.start
        if 0 < keep < shard.stop - shard.start:
            outcomes = shard.outcomes[:keep]
            rows = to_ipc(shard.table().slice(0, sum(o[3] for o in outcomes)))
            self.store(shard.start, stop, shard.wanted, ShardBatch(outcomes, rows, 0.0))
        if keep < shard.stop - shard.start:
            self._path(shard.start, shard.stop).unlink(missing_ok=True)


class ShardCache:
    """A cache folder: the run's own ``<run>/cache/shards`` or a shared one for a series
    of nightly runs. Safe to share between concurrent runs: files are written by rename,
    a missing or damaged file is a miss, and equal keys hold equal outcomes."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._opened: set[Path] = set()

    def family(self, family_label: str, params: dict[str, Any], root_seed: int) -> FamilyShards:
        """The shards of a family's candidates under this config; marks the key used."""
        name = family_of(family_label)
        folder = self.root / f"{name}-{shard_key(family_label, params, root_seed)[:32]}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "used").touch()
        except OSError:
            pass  # an unwritable cache only means nothing is reused
        self._opened.add(folder)
        return FamilyShards(folder)

    def prune(self) -> int:
        """Keep the folder under ``max_bytes``; returns the bytes removed.

        Keys this process did not open go first, least recently used first; then, if
        the keys in use alone exceed the bound, their highest ranges, so the start of
        the candidate space stays reusable.
        """
        removed = 0
        now = time.time()
        keys: list[tuple[float, Path, list[tuple[Path, int]]]] = []
        try:
            folders = [p for p in self.root.iterdir() if p.is_dir()]
        except FileNotFoundError:
            return 0
        for folder in folders:
            files: list[tuple[Path, int]] = []
            for p in folder.iterdir():
                try:
                    st = p.stat()
                except OSError:
                    continue
                if p.name.endswith(".tmp"):
                    if now - st.st_mtime > _STALE_TMP_S:
                        p.unlink(missing_ok=True)
                    continue
                if p.name.endswith(SUFFIX):
                    files.append((p, st.st_size))
            try:
                used = (folder / "used").stat().st_mtime
            except OSError:
                used = 0.0
            keys.append((used, folder, files))
        total = sum(size for _, _, files in keys for _, size in files)
        if total <= self.max_bytes:
            return 0
        idle = sorted((k for k in keys if k[1] not in self._opened), key=lambda k: k[0])
        for _, folder, files in idle:
            if total <= self.max_bytes:
                break
            for p, size in files:
                p.unlink(missing_ok=True)
                total -= size
                removed += size
            _remove_folder(folder)
        if total > self.max_bytes:
            mine = [f for k in keys if k[1] in self._opened for f in k[2]]
            for p, size in sorted(mine, key=lambda f: _range_of(f[0]) or (0, 0), reverse=True):
                if total <= self.max_bytes:
                    break
                p.unlink(missing_ok=True)
                total -= size
                removed += size
        return removed


def _remove_folder(folder: Path) -> None:
    (folder / "used").unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # another run is writing into it again


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it is missing)."""
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def run_bound(bound: int, tables: Path) -> int:
    """The bound of a run's own cache: the user's, and never more bytes than the
    instance tables under ``tables`` that it saves regenerating (module docstring)."""
    return min(bound, folder_bytes(tables))


def cache_settings(cfg: Any, run_dir: Path) -> tuple[Path, int]:
    """The cache folder and bound a config asks for. ``generation.cache_dir`` (a shared
    folder for a series of runs; default ``<run>/cache/shards``) and
    ``generation.cache_max_gb`` are read defensively: older configs have no
    ``generation`` section."""
    gen = getattr(cfg, "generation", None)
    where = getattr(gen, "cache_dir", None)
    max_gb = getattr(gen, "cache_max_gb", None)
    root = Path(where).expanduser() if where else run_dir / CACHE_REL
    bound = DEFAULT_MAX_BYTES if max_gb is None else int(float(max_gb) * 2**30)
    return root, bound
