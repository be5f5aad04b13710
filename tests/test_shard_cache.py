"""Incremental generation: finished shards are kept on disk by content key and reused,
and the instance table is the same bytes with a cold, warm or partly warm cache, after
a change of sampling, and after a generation interrupted half-way and resumed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from horizonbench.core.registry import get_family, register_family
from horizonbench.core.types import Candidate
from horizonbench.schemas.config import DaskSpec, FamilySpec, parse_config
from horizonbench.tasks.cluster import progress
from horizonbench.tasks.cluster.client import dask_client
from horizonbench.tasks.generate.instances import SourceCounts, generate_all, sample_family
from horizonbench.tasks.generate.shard_cache import (
    CACHE_REL,
    SUFFIX,
    FamilyShards,
    ShardCache,
    cache_settings,
    folder_bytes,
    shard_key,
)
from horizonbench.tasks.run_folder.manifest import content_hashes
from horizonbench.tasks.run_folder.table_parts import PartWriter, part_files

progress.ENABLED["value"] = False


# --- a toy family: cheap, with rejections, and (one variant) lengths known early ---------


class ToyParams(BaseModel):
    salt: int = 0
    max_length: int = 8
    reject_one_in: int = 5


class ToyPrompt(BaseModel):
    pass


def _digits(p: ToyParams, index: int) -> int:
    return int(hashlib.sha256(f"{p.salt}:{index}".encode()).hexdigest()[:12], 16)


class ToyFamily:
    """Candidate ``index`` has length 1..max_length and is rejected one time in
    ``reject_one_in``, both pure functions of (params, index)."""

    name: ClassVar[str] = "toy"
    params_model: ClassVar[type[BaseModel]] = ToyParams
    prompt_model: ClassVar[type[BaseModel]] = ToyPrompt
    instance_schema: ClassVar[pa.Schema] = pa.schema(
        [("candidate_index", pa.int64()), ("seed", pa.int64()), ("length", pa.int64())]
    )
    violations: ClassVar[tuple[str, ...]] = ()

    def generate_candidate(self, params: BaseModel, seed: int, index: int) -> Candidate:
        p = ToyParams.model_validate(params.model_dump())
        d = _digits(p, index)
        if (d >> 20) % p.reject_one_in == 0:
            return Candidate(None, "toy_rejected")
        return Candidate({"candidate_index": index, "seed": seed, "length": 1 + d % p.max_length})

    def difficulty(self, row: Mapping[str, Any]) -> int:
        return int(row["length"])


class EarlyToyFamily(ToyFamily):
    """The toy with ``candidate_difficulty``, as the puzzles have: shards mark candidates
    of full bins ``not_needed`` without certifying them (no length, no row)."""

    name: ClassVar[str] = "toy_early"

    def candidate_difficulty(self, params: BaseModel, index: int) -> int:
        p = ToyParams.model_validate(params.model_dump())
        return 1 + _digits(p, index) % p.max_length


register_family("toy", ToyFamily)  # type: ignore[arg-type]
register_family("toy_early", EarlyToyFamily)  # type: ignore[arg-type]


class _InlineClient:
    """Just enough of a Dask client: runs each shard when submitted."""

    class _Done:
        def __init__(self, value: object) -> None:
            self.value = value

        def result(self, timeout: float | None = None) -> object:
            return self.value

        def cancel(self) -> None:
            pass

    def submit(self, fn: Callable[..., object], *args: object, pure: bool = True) -> _Done:
        return self._Done(fn(*args))


def _sampling(draw: Any) -> dict[str, Any]:
    limit = draw(st.integers(20, 300))
    shard = draw(st.integers(1, 60))
    if draw(st.booleans()):
        return {"count": draw(st.integers(1, 40)), "max_candidates": limit, "shard_size": shard}
    lo = draw(st.integers(1, 3))
    width = draw(st.integers(1, 3))
    bins = {"min": lo, "max": lo + width * draw(st.integers(1, 4)), "width": width}
    return {"bins": bins | {"per_bin": draw(st.integers(1, 6))}, "max_candidates": limit, "shard_size": shard}


def _toy_rows(
    family: str,
    sampling: dict[str, Any],
    window: int,
    shards: FamilyShards | None,
    counts: SourceCounts | None = None,
) -> list[dict[str, Any]]:
    spec = FamilySpec.model_validate({"params": {"salt": 3}, "sampling": sampling})
    rows: list[dict[str, Any]] = []
    sample_family(
        _InlineClient(),
        family,
        spec,
        11,
        window,
        lambda t: rows.extend(t.to_pylist()),
        shards=shards,
        counts=counts,
    )
    return rows


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_any_cached_subset_under_any_sampler_keeps_the_same_rows(tmp_path_factory: Any, data: Any) -> None:
    """Fill a cache under one sampling spec and shard size, delete any subset of its
    files, then sample under another spec: the rows are those of a run without a cache
    (a cached shard that lacks a row the new sampler keeps is regenerated from there),
    and a third run under the second spec (other shard sizes) finds every candidate it
    needs on disk."""
    family = data.draw(st.sampled_from(["toy", "toy_early"]))
    first, second = _sampling(data.draw), _sampling(data.draw)
    cache = ShardCache(tmp_path_factory.mktemp("cache"))
    shards = cache.family(family, {"salt": 3}, 11)
    window = data.draw(st.integers(1, 6))
    assert _toy_rows(family, first, window, shards) == _toy_rows(family, first, window, None)
    for path in sorted(shards.folder.glob(f"*{SUFFIX}")):
        if data.draw(st.booleans(), label=f"delete {path.name}"):
            path.unlink()
    expected = _toy_rows(family, second, 2, None)
    assert _toy_rows(family, second, data.draw(st.integers(1, 6)), shards) == expected
    again = SourceCounts()
    second["shard_size"] = data.draw(st.integers(1, 60))
    # window 1: no shard planned ahead of the selector's need, so none generated
    assert _toy_rows(family, second, 1, shards, again) == expected
    assert again.generated == 0


def test_a_damaged_or_foreign_file_is_a_miss_and_goes(tmp_path: Path) -> None:
    sampling = {"count": 20, "max_candidates": 200, "shard_size": 10}
    shards = ShardCache(tmp_path).family("toy", {"salt": 3}, 11)
    expected = _toy_rows("toy", sampling, 3, shards)
    files = sorted(shards.folder.glob(f"*{SUFFIX}"))
    files[0].write_bytes(files[0].read_bytes()[:-5])  # truncated
    files[1].write_bytes(b"not a shard")
    counts = SourceCounts()
    assert _toy_rows("toy", sampling, 3, shards, counts) == expected
    assert counts.generated == 20 and counts.from_cache > 0
    assert all(f.exists() for f in files)  # regenerated and stored again, whole


def test_the_key_is_the_content_not_the_spelling() -> None:
    assert shard_key("toy", {}, 1) == shard_key("toy", {"salt": 0, "max_length": 8}, 1)
    assert shard_key("toy", {}, 1) == shard_key("toy@a-sweep-setting", {}, 1)
    assert shard_key("toy", {}, 1) != shard_key("toy", {"salt": 1}, 1)
    assert shard_key("toy", {}, 1) != shard_key("toy", {}, 2)
    assert shard_key("toy", {}, 1) != shard_key("toy_early", {}, 1)


def test_prune_drops_idle_keys_first_then_this_runs_highest_ranges(tmp_path: Path) -> None:
    sampling = {"count": 40, "max_candidates": 400, "shard_size": 10}
    old = ShardCache(tmp_path)
    _toy_rows("toy", sampling, 2, old.family("toy", {"salt": 1}, 11))
    idle_bytes = sum(p.stat().st_size for p in tmp_path.rglob(f"*{SUFFIX}"))
    cache = ShardCache(tmp_path, max_bytes=10**9)
    mine = cache.family("toy", {"salt": 3}, 11)
    _toy_rows("toy", sampling, 2, mine)
    mine_files = sorted(mine.folder.glob(f"*{SUFFIX}"))
    mine_bytes = sum(p.stat().st_size for p in mine_files)
    assert cache.prune() == 0  # under the bound: nothing goes
    cache.max_bytes = mine_bytes
    assert cache.prune() == idle_bytes  # the key this run did not open goes whole
    assert sorted(tmp_path.iterdir()) == [mine.folder]
    cache.max_bytes = mine_bytes - 1
    cache.prune()
    assert sorted(mine.folder.glob(f"*{SUFFIX}")) == mine_files[:-1]  # the start stays
    cache.max_bytes = 0  # shards only while a generation runs
    cache.prune()
    assert not list(tmp_path.rglob(f"*{SUFFIX}"))


def test_cache_settings_read_the_config_defensively(tmp_path: Path) -> None:
    from types import SimpleNamespace

    cfg = parse_config({"families": {"maze": MAZE}})
    assert cache_settings(cfg, tmp_path) == (tmp_path / CACHE_REL, 4 * 2**30)
    shared = SimpleNamespace(generation=SimpleNamespace(cache_dir=str(tmp_path / "shared"), cache_max_gb=0.5))
    assert cache_settings(shared, tmp_path) == (tmp_path / "shared", 2**29)
    off = SimpleNamespace(generation=SimpleNamespace(cache_dir=None, cache_max_gb=0))
    assert cache_settings(off, tmp_path) == (tmp_path / CACHE_REL, 0)


# --- the real thing: maze shards on a LocalCluster ---------------------------------------

MAZE = {
    "params": {"grid_rows": 10, "grid_cols": 10, "num_keys": 2, "noise_ratio": 0.5, "shuffle_ratio": 0.7},
    "sampling": {"bins": {"min": 10, "max": 40, "width": 5, "per_bin": 4}, "max_candidates": 20000},
}


def _maze_bytes(
    client: Any,
    dest: Path,
    shards: FamilyShards | None,
    spec: dict[str, Any] = MAZE,
    shard_size: int | None = None,
    sink_hook: Callable[[], None] | None = None,
    workers: int = 2,
) -> tuple[bytes, SourceCounts]:
    """The instance table as the generate stage streams it (parts of 20 rows in row
    groups of 5, as tests/test_determinism.py cuts them), and where its candidates came
    from."""
    fs = FamilySpec.model_validate(spec | {"sampling": spec["sampling"] | {"shard_size": shard_size}})
    counts = SourceCounts()
    with PartWriter(dest, get_family("maze").instance_schema, "instances/maze", 20, 5) as writer:

        def sink(table: pa.Table) -> None:
            writer.write(table)
            if sink_hook is not None:
                sink_hook()

        sample_family(client, "maze", fs, 123, 3 * workers, sink, workers, shards=shards, counts=counts)
    return b"".join(f.name.encode() + f.read_bytes() for f in part_files(dest)), counts


@pytest.fixture(scope="module")
def maze_client() -> Any:
    with dask_client(DaskSpec(n_workers=2)) as client:
        yield client


@pytest.mark.flow
def test_cold_warm_and_partly_warm_caches_give_the_same_bytes(maze_client: Any, tmp_path: Path) -> None:
    plain, base = _maze_bytes(maze_client, tmp_path / "plain", None)
    cache = ShardCache(tmp_path / "cache")
    shards = cache.family("maze", MAZE["params"], 123)
    cold_bytes, cold = _maze_bytes(maze_client, tmp_path / "cold", shards)
    assert cold_bytes == plain and cold.from_cache == 0 and cold.generated >= base.generated
    files = sorted(shards.folder.glob(f"*{SUFFIX}"))
    assert files and all(not p.name.startswith(".") for p in shards.folder.iterdir() if p.name != "used")
    warm_bytes, warm = _maze_bytes(maze_client, tmp_path / "warm", shards, shard_size=7)
    assert warm_bytes == plain and warm.generated == 0 and warm.from_cache > 0
    for path in files[1::2]:  # every other range gone
        path.unlink()
    partial_bytes, partial = _maze_bytes(maze_client, tmp_path / "partial", shards)
    assert partial_bytes == plain
    assert 0 < partial.generated < cold.generated and partial.from_cache > 0
    # other params: another key, nothing reused, and the same bytes as without a cache
    other = MAZE | {"params": MAZE["params"] | {"noise_ratio": 0.3}}
    other_plain, _ = _maze_bytes(maze_client, tmp_path / "other-plain", None, other)
    other_shards = cache.family("maze", other["params"], 123)
    other_bytes, changed = _maze_bytes(maze_client, tmp_path / "other", other_shards, other)
    assert other_bytes == other_plain != plain
    assert changed.from_cache == 0 and changed.generated > 0
    # more instances per bin: the shards of the smaller run are reused where they can be
    more = MAZE | {"sampling": MAZE["sampling"] | {"bins": MAZE["sampling"]["bins"] | {"per_bin": 6}}}
    more_plain, _ = _maze_bytes(maze_client, tmp_path / "more-plain", None, more)
    more_bytes, grown = _maze_bytes(maze_client, tmp_path / "more", shards, more)
    assert more_bytes == more_plain and grown.from_cache > 0


@pytest.mark.flow
def test_an_interrupted_generation_resumes_from_its_finished_shards(maze_client: Any, tmp_path: Path) -> None:
    """Ctrl-C after the first kept rows (a KeyboardInterrupt from the sink, while other
    shards are still running): the shards that finished are on disk, and a resumed run
    (on another number of workers) generates fewer candidates for the same bytes."""
    plain, base = _maze_bytes(maze_client, tmp_path / "plain", None, shard_size=20)
    shards = ShardCache(tmp_path / "cache").family("maze", MAZE["params"], 123)
    calls = {"n": 0}

    def interrupt() -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _maze_bytes(maze_client, tmp_path / "interrupted", shards, shard_size=20, sink_hook=interrupt)
    stored = sorted(shards.folder.glob(f"*{SUFFIX}"))
    assert len(stored) >= 2
    assert not [p for p in shards.folder.iterdir() if p.name.endswith(".tmp")]
    with dask_client(DaskSpec(n_workers=1)) as one:
        resumed_bytes, resumed = _maze_bytes(one, tmp_path / "resumed", shards, workers=1)
    assert resumed_bytes == plain
    assert resumed.from_cache >= 40 and resumed.generated < base.generated


def _shard_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob(f"*{SUFFIX}"))


@pytest.mark.flow
def test_the_run_s_own_cache_costs_no_more_disk_than_its_instance_tables(tmp_path: Path) -> None:
    """The default cache (in the run folder, outside the manifest) is pruned after a
    finished generation to the bytes of the instance tables it saves (it held 2.8x
    them); it keeps the start of the candidate space, which a rerun reads."""
    spec = MAZE | {"sampling": MAZE["sampling"] | {"shard_size": 20}}
    cfg = parse_config({"families": {"maze": spec}, "dask": {"n_workers": 1, "processes": False}})
    first = generate_all(cfg, tmp_path)
    tables = tmp_path / ".staging" / "instances"
    before = [f.read_bytes() for f in part_files(tables / "maze")]
    assert 0 < _shard_bytes(tmp_path / CACHE_REL) <= folder_bytes(tables)
    second = generate_all(cfg, tmp_path)
    assert [f.read_bytes() for f in part_files(tables / "maze")] == before
    assert first[0]["candidates_from_cache"] == 0
    assert second[0]["candidates_from_cache"] > 0
    assert second[0]["candidates_generated"] < first[0]["candidates_generated"]
    assert second[0]["kept"] == first[0]["kept"] == 24
    assert _shard_bytes(tmp_path / CACHE_REL) <= folder_bytes(tables)
    assert not [k for k in content_hashes(tmp_path) if k.startswith("cache/") or k.endswith(SUFFIX)]


@pytest.mark.flow
def test_a_shared_cache_keeps_everything_under_the_cap_its_user_sets(tmp_path: Path) -> None:
    """``generation.cache_dir`` outside the run folder: nothing in the run folder, a
    whole generation kept under a roomy cap (the next run generates nothing), and a
    small cap (``generation.cache_max_gb``) holds."""
    shared = tmp_path / "shared"

    def config(max_gb: float) -> Any:
        return parse_config(
            {
                "families": {"maze": MAZE},
                "dask": {"n_workers": 1, "processes": False},
                "generation": {"cache_dir": str(shared), "cache_max_gb": max_gb},
            }
        )

    first = generate_all(config(1.0), tmp_path / "a")
    assert not (tmp_path / "a" / CACHE_REL).exists()
    assert _shard_bytes(shared) > folder_bytes(tmp_path / "a" / ".staging" / "instances")
    second = generate_all(config(1.0), tmp_path / "b")
    assert second[0]["candidates_generated"] == 0 < first[0]["candidates_generated"]
    cap = 4_000
    generate_all(config(cap / 2**30), tmp_path / "c")
    assert _shard_bytes(shared) <= cap


def test_the_planner_looks_no_further_ahead_through_the_cache_than_the_window(tmp_path: Path) -> None:
    """Cached ranges and finished shards hold a slot of the window (only a running head
    lets finished shards give theirs up): a rerun whose sampler is done near the end of
    the cache sends fewer shards past it than the window holds. Once finished shards
    never held a slot, and on the in-process client (every shard finished when sent)
    the planner ran 23 shards past the cache (161 candidates for nothing)."""
    from horizonbench.tasks.cluster.client import InlineClient

    client = InlineClient()
    shards = ShardCache(tmp_path / "cache").family("maze", MAZE["params"], 123)
    cold_bytes, cold = _maze_bytes(client, tmp_path / "cold", shards)
    assert cold.generated > 0 and cold.from_cache == 0
    for size in (None, 7):
        warm_bytes, warm = _maze_bytes(client, tmp_path / f"warm-{size}", shards, shard_size=size)
        assert warm_bytes == cold_bytes and warm.from_cache > 0
        assert warm.shards_generated < 3 * 2  # the window of two workers
