"""The score stage in shards: the scores table is the same bytes in-process, on a
LocalCluster with one or two workers, and for any shard size, and the same rows as
scoring every attempt at once; rollout episodes stay whole; sweep labels share ids."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.core.registry import get_family
from horizonbench.datasets.shards import generate_shard
from horizonbench.schemas.config import DaskSpec
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA, SCORES_SCHEMA
from horizonbench.tasks.cluster.client import dask_client
from horizonbench.tasks.evaluate.attempts import write_attempts
from horizonbench.tasks.run_folder.layout import ATTEMPTS_REL, instances_rel
from horizonbench.tasks.run_folder.table_parts import PartWriter, read_parts
from horizonbench.tasks.score.cutting import (
    MAX_SEGMENTS,
    AttemptLayout,
    InstanceIndex,
    ShardSizer,
    episode_cuts,
)
from horizonbench.tasks.score.lanes import Lanes, score_table, scores_writer
from horizonbench.tasks.score.shards import score_rows

MAZE = {"grid_rows": 6, "grid_cols": 6, "num_keys": 2, "num_keys_mode": "at_most", "shuffle_ratio": 1.0}
#: two sweep settings of one maze family (same seeds: the same ids) and a puzzle family
#: answered both as whole plans and step by step
FAMILIES: dict[str, tuple[dict[str, Any], int]] = {
    "maze@noise-0": ({**MAZE, "noise_ratio": 0.0}, 40),
    "maze@noise-1": ({**MAZE, "noise_ratio": 1.0}, 25),
    "hanoi": ({"ns": [1, 2, 3, 4]}, 12),
}
MODELS = [("oracle", "oracle", 0.0), ("noisy", "noisy", 0.1), ("random", "random", 0.0)]
SAMPLES = 3


def _attempt(model: str, label: str, iid: str, sample: int, turn: int, mode: str, text: str | None) -> dict:
    return {
        "attempt_key": f"{model}/{label}/{iid}/{sample}/{turn}",
        "model": model,
        "instance_id": iid,
        "family": label,
        "sample": sample,
        "turn": turn,
        "mode": mode,
        "prompt_sha256": "0" * 64,
        "response": text,
        "finish_reason": None if text is None else "stop",
        "input_tokens": 1,
        "output_tokens": 1,
        "latency_s": 0.0,
        "cost_usd": 0.0,
        "error": None if text is not None else "429",
        "error_class": None if text is not None else "rate_limit",
        "tries": 1,
        "reused": False,
        "via_batch": False,
        "served_model": None,
        "system_fingerprint": None,
    }


def make_run(root: Path, seed: int = 3) -> Path:
    """A run folder with instance tables (parts of 8 rows, row groups of 4) and an
    attempts table in the evaluate stage's order: model, label, instance, sample, with a
    few unanswered attempts and rollout episodes."""
    rnd = random.Random(seed)
    rows_of: dict[str, list[dict]] = {}
    for label, (params, count) in FAMILIES.items():
        family = get_family(label)
        rows = [r for _, _, r, rej in generate_shard(label, params, seed, 0, count) if rej is None]
        rows_of[label] = rows
        with PartWriter(root / instances_rel(label), family.instance_schema, "instances", 8, 4) as w:
            w.write(pa.Table.from_pylist(rows, schema=family.instance_schema))
    attempts = []
    for model, kind, eps in MODELS:
        for label, rows in rows_of.items():
            family = get_family(label)
            for row in rows:
                for sample in range(SAMPLES):
                    rng = np.random.default_rng(rnd.randrange(2**32))
                    text = family.offline_answer(row, kind, rng, eps) if rnd.random() > 0.05 else None
                    attempts.append(_attempt(model, label, row["instance_id"], sample, 0, "plan", text))
        if kind == "random":
            continue
        family = get_family("hanoi")
        for row in rows_of["hanoi"]:
            for sample in range(SAMPLES):
                rng = np.random.default_rng(rnd.randrange(2**32))
                ep = family.episode(row)
                while not ep.done:
                    state = family.puzzle.format_state(ep.state)
                    text = family.offline_step(row, state, kind, rng, eps)
                    if rnd.random() < 0.02:  # a failed step: the episode is unanswered
                        attempts.append(
                            _attempt(model, "hanoi", row["instance_id"], sample, ep.steps, "rollout", None)
                        )
                        break
                    attempts.append(
                        _attempt(model, "hanoi", row["instance_id"], sample, ep.steps, "rollout", text)
                    )
                    ep.feed(text, "stop")
    write_attempts(pa.Table.from_pylist(attempts, schema=ATTEMPTS_SCHEMA), root / ATTEMPTS_REL)
    return root


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("run"))


def folders(run: Path) -> dict[str, Path]:
    return {label: run / instances_rel(label) for label in FAMILIES}


def score(run: Path, name: str, client: Any = None, shard_rows: int | None = None) -> bytes:
    dest = run / "out" / name / "scores.parquet"
    score_table(run / ATTEMPTS_REL, folders(run), dest, client, shard_rows=shard_rows)
    return dest.read_bytes()


def all_at_once(run: Path) -> pa.Table:
    """Every attempt scored in one call, from whole instance rows."""
    attempts = pq.read_table(run / ATTEMPTS_REL).to_pylist()
    instances = {
        (label, r["instance_id"]): r
        for label in FAMILIES
        for r in read_parts(run / instances_rel(label)).to_pylist()
    }
    return pa.Table.from_pylist(score_rows(attempts, instances), schema=SCORES_SCHEMA)


def test_the_attempts_table_has_bounded_row_groups(tmp_path: Path, run: Path) -> None:
    rows = pq.read_table(run / ATTEMPTS_REL).slice(0, 100).to_pylist() * 120
    write_attempts(pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA), tmp_path / "a.parquet")
    meta = pq.ParquetFile(tmp_path / "a.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [5_000, 5_000, 2_000]


def test_shards_give_the_rows_of_scoring_all_at_once_and_the_same_bytes_for_any_shard_size(run: Path) -> None:
    adaptive = score(run, "adaptive")
    table = pq.read_table(run / "out" / "adaptive" / "scores.parquet")
    want = all_at_once(run)
    assert table.equals(want.replace_schema_metadata(table.schema.metadata))
    assert b"schema_version" in table.schema.metadata
    # every attempt of a whole plan has its row, every episode one
    n_plans = pq.read_table(run / ATTEMPTS_REL, filters=[("mode", "=", "plan")]).num_rows
    assert table.num_rows > n_plans and set(table["mode"].to_pylist()) == {"plan", "rollout"}
    assert not all(table["answered"].to_pylist())
    for size in (1, 7, 500, 100_000):
        assert score(run, f"fixed-{size}", shard_rows=size) == adaptive, size


def test_episodes_are_never_cut(run: Path) -> None:
    with pq.ParquetFile(run / ATTEMPTS_REL) as pf:
        cuts = episode_cuts(pf)
        keys = pf.read(columns=["model", "instance_id", "sample", "mode"]).to_pylist()
    assert cuts is not None and cuts.any() and not cuts[0] and not cuts[-1]
    for p in range(1, len(keys)):
        a, b = keys[p - 1], keys[p]
        same_episode = a["mode"] == b["mode"] == "rollout" and (
            a["model"],
            a["instance_id"],
            a["sample"],
        ) == (
            b["model"],
            b["instance_id"],
            b["sample"],
        )
        assert bool(cuts[p]) == same_episode


def test_scattered_episodes_and_a_shuffled_table_score_as_all_at_once(tmp_path: Path, run: Path) -> None:
    other = tmp_path / "shuffled"
    for label in FAMILIES:
        src = run / instances_rel(label)
        dest = other / instances_rel(label)
        dest.mkdir(parents=True)
        for f in src.iterdir():
            (dest / f.name).write_bytes(f.read_bytes())
    rows = pq.read_table(run / ATTEMPTS_REL).to_pylist()
    random.Random(1).shuffle(rows)
    write_attempts(pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA), other / ATTEMPTS_REL)
    got = score(other, "s", shard_rows=50)
    table = pq.read_table(other / "out" / "s" / "scores.parquet")
    assert table.equals(all_at_once(other).replace_schema_metadata(table.schema.metadata))
    assert got == score(other, "t", shard_rows=3_000)


def test_an_attempt_of_an_unknown_instance_is_an_error(tmp_path: Path, run: Path) -> None:
    rows = pq.read_table(run / ATTEMPTS_REL).slice(0, 3).to_pylist()
    rows[1]["instance_id"] = "maze-nope"
    write_attempts(pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA), tmp_path / ATTEMPTS_REL)
    with pytest.raises(KeyError, match="maze-nope"):
        score_table(tmp_path / ATTEMPTS_REL, folders(run), tmp_path / "scores.parquet")
    assert not list(tmp_path.glob(".scores.parquet*"))  # the temporary file is gone


def test_an_empty_attempts_table_gives_an_empty_scores_table(tmp_path: Path, run: Path) -> None:
    write_attempts(pa.Table.from_pylist([], schema=ATTEMPTS_SCHEMA), tmp_path / ATTEMPTS_REL)
    assert score_table(tmp_path / ATTEMPTS_REL, folders(run), tmp_path / "scores.parquet") == 0
    assert pq.read_table(tmp_path / "scores.parquet").num_rows == 0


def test_the_writer_cuts_row_groups_at_fixed_counts(tmp_path: Path, run: Path) -> None:
    table = all_at_once(run)
    for name, chunks in (("a", [table]), ("b", [table.slice(i, 37) for i in range(0, table.num_rows, 37)])):
        w = scores_writer(tmp_path / name / "scores.parquet", row_group_rows=100)
        for c in chunks:
            w.write(c)
        w.close()
    assert (tmp_path / "a" / "scores.parquet").read_bytes() == (
        tmp_path / "b" / "scores.parquet"
    ).read_bytes()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_same_bytes_on_a_local_cluster(run: Path, workers: int) -> None:
    from distributed import Client, LocalCluster

    want = score(run, "in-process")
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        assert score(run, f"cluster-{workers}", client) == want
        assert score(run, f"cluster-{workers}-small", client, shard_rows=300) == want
        # an existing scheduler, as ``--dask-address`` gives it
        with dask_client(DaskSpec(address=cluster.scheduler_address)) as external:
            assert score(run, f"external-{workers}", external, shard_rows=200) == want


def test_the_score_task_scores_a_large_run_on_its_cluster(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage's own choice: above ``IN_PROCESS_MAX`` attempts it starts the config's
    LocalCluster and scores there, to the bytes an in-process scoring gives."""
    from horizonbench.schemas.config import parse_config
    from horizonbench.tasks.run_folder.storage import staged
    from horizonbench.tasks.score import stage

    cfg = parse_config(
        {
            "run": {"name": "t", "seed": 3},
            "families": {
                label: {"params": p, "sampling": {"count": n}} for label, (p, n) in FAMILIES.items()
            },
            "dask": {"n_workers": 2},
        }
    )
    want = score(run, "in-process-for-task")
    clusters: list[DaskSpec] = []
    real = stage.dask_client

    def counting(spec: DaskSpec) -> Any:
        clusters.append(spec)
        return real(spec)

    monkeypatch.setattr(stage, "dask_client", counting)
    monkeypatch.setattr(stage, "IN_PROCESS_MAX", 0)
    path = stage.score_attempts.fn(cfg, str(run))
    assert path == str(staged(run, stage.SCORES_REL))
    assert Path(path).read_bytes() == want and clusters == [cfg.dask]


# ---------------------------------------------------------------------------------------------
# shards of all answers to an instance: the layout and the reordering of their rows
# ---------------------------------------------------------------------------------------------


def _layout(path: Path, run: Path, max_segments: int = MAX_SEGMENTS) -> AttemptLayout:
    indexes = {label: InstanceIndex(f, label) for label, f in folders(run).items()}
    with pq.ParquetFile(path) as pf:
        return AttemptLayout(pf, indexes.__getitem__, max_segments)


def test_the_evaluate_order_is_a_few_segments_and_shards_hold_all_answers_to_their_instances(
    run: Path,
) -> None:
    """Model by model, each in instance order: a segment per model (and one per model's
    rollout episodes, which follow its plans); every shard takes all rows of its
    instances from every segment, and each row is in exactly one shard."""
    layout = _layout(run / ATTEMPTS_REL, run)
    assert layout.grouped and len(layout.segments) == 5
    table = pq.read_table(run / ATTEMPTS_REL, columns=["model", "family", "instance_id"])
    keys = [(r["family"], r["instance_id"]) for r in table.to_pylist()]
    seen = np.zeros(table.num_rows, dtype=np.int64)
    last_stop = [start for start, _ in layout.segments]
    shard_of: dict[tuple[str, str], int] = {}
    for n, shard in enumerate(layout.shards(ShardSizer(40))):
        for segment, start, stop in shard.slices:
            assert start >= last_stop[segment] and stop <= layout.segments[segment][1]
            last_stop[segment] = stop
            seen[start:stop] += 1
            for k in keys[start:stop]:
                assert shard_of.setdefault(k, n) == n  # an instance's answers meet in one shard
        got = {
            (label, iid)
            for label, pos in shard.instances
            for iid in InstanceIndex(folders(run)[label], label).ids.take(pa.array(pos)).to_pylist()
        }
        assert got == {k for _, start, stop in shard.slices for k in keys[start:stop]}
    assert (seen == 1).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_lanes_give_every_row_to_one_shard_and_their_pieces_in_order_are_the_table(
    run: Path, data: st.DataObject
) -> None:
    """The cluster's bookkeeping (``Lanes``), driven in any order: workers asking for
    shards in turn, of any size, taking over each other's ranges. Every row goes to
    exactly one shard, and the rows of each (segment, piece), appended as the lane cut
    them and written in (segment, piece) order, are the table's rows in order: what
    ``score_table`` writes. Both layouts: all answers to an instance a shard, and
    consecutive rows (which never cut a rollout episode)."""
    grouped = data.draw(st.booleans(), label="grouped")
    layout = _layout(run / ATTEMPTS_REL, run, MAX_SEGMENTS if grouped else 1)
    assert layout.grouped == grouped
    workers = data.draw(st.integers(1, 4), label="workers")
    ranges = Lanes(layout, [f"w{i}" for i in range(workers)])
    least = data.draw(st.integers(1, 50), label="least")
    sinks: dict[tuple[int, int], list[int]] = {}
    live = list(ranges.lanes)
    while live:
        lane = data.draw(st.sampled_from(live), label="asks")
        got = ranges.next(lane, lambda left: least if left == 0 else data.draw(st.integers(1, 150)))
        if got is None:
            live.remove(lane)
            continue
        shard, piece = got
        for segment, start, stop in shard.slices:
            sinks.setdefault((segment, piece), []).extend(range(start, stop))
    assert [r for key in sorted(sinks) for r in sinks[key]] == list(range(layout.rows))
    if not grouped and layout.cuts is not None:  # no piece starts inside an episode
        assert not any(layout.cuts[piece] for _, piece in sinks)


def test_a_lane_whose_range_is_done_takes_over_half_of_the_largest(run: Path) -> None:
    layout = _layout(run / ATTEMPTS_REL, run)
    ranges = Lanes(layout, ["a", "b"])
    a, b = ranges.lanes
    assert a.end == b.at and abs(ranges.left(a) - ranges.left(b)) <= layout.rows // 10
    b_end, before = b.end, ranges.left(b)
    while a.at < a.end:
        assert ranges.next(a, lambda left: 40) is not None
    shard, piece = ranges.next(a, lambda left: 40)  # type: ignore[misc]
    assert piece == a.piece == b.end and a.end == b_end  # the back half of b's range
    assert ranges.left(b) == pytest.approx(before / 2, abs=layout.rows // 10)
    assert shard.slices and shard.slices[0][1] >= layout.segments[0][0]


def _lane_a_done(run: Path) -> tuple[Lanes, Any, Any]:
    """Two lanes over the run's attempts, the first one's range cut to its end."""
    ranges = Lanes(_layout(run / ATTEMPTS_REL, run), ["a", "b"])
    a, b = ranges.lanes
    while a.at < a.end:
        assert ranges.next(a, lambda left: 40) is not None
    return ranges, a, b


@pytest.mark.parametrize("half", [False, True])
def test_a_lane_takes_over_only_a_range_holding_two_shards(run: Path, half: bool) -> None:
    """The steal threshold, deterministically: a lane whose range is done takes over
    half of the largest range only if that range holds at least two shards' worth
    (``2 * size(0)`` attempts), so each half keeps a shard. With the other range holding
    ``left`` attempts, a shard size of ``left`` (or ``left // 2 + 1``) is refused and
    changes nothing; ``left // 2`` is taken."""
    ranges, a, b = _lane_a_done(run)
    left, b_range = ranges.left(b), (b.at, b.end)
    assert left > 100
    least = left // 2 + 1 if half else left
    assert ranges.next(a, lambda uncut: least if uncut == 0 else 40) is None
    assert (b.at, b.end) == b_range and ranges.left(a) == 0
    assert ranges.next(a, lambda uncut: left // 2 if uncut == 0 else 40) is not None
    assert a.end == b_range[1] and b.end == a.piece and b_range[0] < a.piece < b_range[1]


def test_two_workers_decode_different_row_groups(tmp_path: Path, run: Path) -> None:
    """On a cluster each worker scores a range of the table: the attempts' row groups
    are decoded by one worker each, except where two ranges meet (before the lanes, the
    shards went to whichever worker was free and both decoded nearly every group)."""
    from distributed import Client, LocalCluster

    import horizonbench.tasks.score.shards as shards

    want = score(run, "decode-in-process", shard_rows=40)
    other = tmp_path / "attempts.parquet"
    pq.write_table(pq.read_table(run / ATTEMPTS_REL), other, row_group_size=10)
    groups = pq.ParquetFile(other).metadata.num_row_groups
    assert groups > 50

    def decoded() -> dict[int, int]:
        return {g: n for (path, g), n in shards.DECODED.items() if path == str(other)}

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        dest = tmp_path / "scores.parquet"
        score_table(other, folders(run), dest, client, shard_rows=40)
        assert dest.read_bytes() == want
        per_worker = client.run(decoded)
    assert len(per_worker) == 2
    seen = [set(d) for d in per_worker.values()]
    assert seen[0] | seen[1] == set(range(groups))
    # five segments, each cut where the two ranges meet and where a lane took over
    # (measured 9 of 84 groups; 33 with the lanes' tasks free to go to either worker)
    assert len(seen[0] & seen[1]) <= groups // 5


def _reordered(run: Path, dest: Path, rows: list[dict], data: Any) -> Path:
    """The run's instances with ``rows`` as its attempts, cut into runs that are moved
    about and some of them shuffled (so the table has any number of segments)."""
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    cuts = sorted(rnd.sample(range(1, len(rows)), data.draw(st.integers(0, 6), label="cuts")))
    runs = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    rnd.shuffle(runs)
    for r in runs:
        if rnd.random() < data.draw(st.sampled_from([0.0, 0.3]), label="shuffle"):
            rnd.shuffle(r)
    dest.mkdir(parents=True, exist_ok=True)
    for label in FAMILIES:
        link = dest / instances_rel(label)
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(run / instances_rel(label))
    write_attempts(
        pa.Table.from_pylist([x for r in runs for x in r], schema=ATTEMPTS_SCHEMA), dest / ATTEMPTS_REL
    )
    return dest


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_order_any_shard_size_and_any_segment_limit_give_the_rows_of_scoring_all_at_once(
    tmp_path: Path, run: Path, data: Any
) -> None:
    """The property of the reordering: whatever the table's order, shard size and
    segment limit (grouped shards with spooled segments, or consecutive shards), the
    scores table has the bytes of every attempt scored in one call and written in
    table order."""
    rows = pq.read_table(run / ATTEMPTS_REL).to_pylist()
    rows = rows[:: data.draw(st.sampled_from([1, 3]), label="stride")]
    other = _reordered(run, tmp_path / f"r{data.draw(st.integers(0, 10**9), label='dir')}", rows, data)
    want = other / "want.parquet"
    w = scores_writer(want)
    w.write(all_at_once(other))
    w.close()
    size = data.draw(st.sampled_from([1, 13, 200, 5_000]), label="shard_rows")
    limit = data.draw(st.sampled_from([1, 3, MAX_SEGMENTS]), label="max_segments")
    dest = other / "got.parquet"
    score_table(other / ATTEMPTS_REL, folders(other), dest, shard_rows=size, max_segments=limit)
    assert dest.read_bytes() == want.read_bytes()
    assert sorted(p.name for p in other.iterdir() if p.name.startswith(".")) == []  # no spool left


def test_a_failing_shard_leaves_no_spool_or_table(
    tmp_path: Path, run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import horizonbench.tasks.score.lanes as lanes

    real = lanes.score_source
    calls = []

    def failing(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("worker lost")
        return real(*args)

    monkeypatch.setattr(lanes, "score_source", failing)
    dest = tmp_path / "scores.parquet"
    with pytest.raises(RuntimeError, match="worker lost"):
        score_table(run / ATTEMPTS_REL, folders(run), dest, shard_rows=60)
    assert list(tmp_path.iterdir()) == []


def test_the_instance_rows_decode_as_to_pylist_does(run: Path) -> None:
    """The shard's own decoding of list<struct> columns (solutions) gives the values of
    ``to_pylist``, also for slices, several chunks, nulls and nested fields."""
    from horizonbench.tasks.score.shards import _pylist

    step = pa.struct([("action", pa.string()), ("arg", pa.string())])
    odd = pa.table(
        {
            "a": pa.array(
                [[{"action": "x", "arg": "1"}], None, [], [{"action": None, "arg": "2"}]], pa.list_(step)
            ),
            "b": pa.array([[{"k": [1]}], [], [None], []], pa.list_(pa.struct([("k", pa.list_(pa.int64()))]))),
            "c": [1, 2, None, 4],
        }
    )
    tables = [odd, odd.slice(1, 2), pa.concat_tables([odd.slice(2), odd.slice(0, 2)])]
    for label in FAMILIES:
        table = read_parts(run / instances_rel(label))
        tables += [table, table.slice(3, 5), pa.concat_tables([table.slice(5), table.slice(0, 5)])]
    for table in tables:
        assert _pylist(table) == table.to_pylist()


# ---------------------------------------------------------------------------------------------
# workers read their shards from the files; the collector is paused while a shard is scored
# ---------------------------------------------------------------------------------------------


def test_any_row_groups_of_the_attempts_and_instance_files_give_the_same_bytes(
    tmp_path: Path, run: Path
) -> None:
    """A shard's slices are read by row group (``read_source``): slices across several
    small row groups, and a cache too small for one of them, change nothing."""
    import horizonbench.tasks.score.shards as shards

    want = score(run, "groups-default", shard_rows=90)
    other = tmp_path / "attempts.parquet"
    pq.write_table(pq.read_table(run / ATTEMPTS_REL), other, row_group_size=37)
    assert pq.ParquetFile(other).metadata.num_row_groups > 10
    dest = tmp_path / "scores.parquet"
    score_table(other, folders(run), dest, shard_rows=90)
    assert dest.read_bytes() == want
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shards, "GROUP_CACHE_BYTES", 1)
        score_table(other, folders(run), dest, shard_rows=90)
        assert dest.read_bytes() == want


def test_the_row_group_cache_is_bounded_and_released(
    tmp_path: Path, run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import horizonbench.tasks.score.shards as shards

    shards.release_groups()
    ref = shards.FileRef.of(run / ATTEMPTS_REL)
    first = shards.read_group(ref, 0, ("response",))
    assert shards.read_group(ref, 0, ("response",)) is first  # decoded once
    monkeypatch.setattr(shards, "GROUP_CACHE_BYTES", first.nbytes)
    shards.read_group(ref, 0, ("model",))
    assert list(shards._GROUPS) == [(ref, 0, ("model",))]  # the oldest dropped, the last kept
    assert shards.release_groups() == 1 and not shards._GROUPS
    score(run, "released")
    assert not shards._GROUPS  # nothing stays behind a scoring


def test_a_file_is_read_only_as_the_client_saw_it(tmp_path: Path) -> None:
    from horizonbench.tasks.score.shards import FileRef

    path = tmp_path / "f"
    path.write_bytes(b"abc")
    ref = FileRef.of(path)
    assert ref.visible()
    path.write_bytes(b"abcd")
    assert not ref.visible()
    assert not FileRef(str(tmp_path / "missing"), 3, ref.mtime_ns).visible()
    assert not FileRef(ref.path, 4, ref.mtime_ns + 1).visible()


def test_workers_that_cannot_see_the_files_get_the_rows_shipped(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduler on other machines: ``score_source`` finds no file as the client saw
    it and returns None; the client then reads and ships that shard and every later one
    (``score_shard``), to the same bytes."""
    import dataclasses

    from distributed import Client, LocalCluster

    import horizonbench.tasks.score.lanes as lanes
    import horizonbench.tasks.score.shards as shards

    want = score(run, "in-process-for-shipping", shard_rows=150)
    # on the module: Dask pickles the functions by value, a list of this test by copy
    monkeypatch.setattr(shards, "_seen_by_test", [], raising=False)
    seen: list[str] = shards._seen_by_test  # type: ignore[attr-defined]
    real_source, real_shard = shards.score_source, shards.score_shard

    def blind(source: Any) -> Any:
        shards._seen_by_test.append("source")  # type: ignore[attr-defined]
        return real_source(dataclasses.replace(source, attempts=shards.FileRef("/nonexistent", 0, 0)))

    def shipped(*args: Any) -> Any:
        shards._seen_by_test.append("shipped")  # type: ignore[attr-defined]
        return real_shard(*args)

    monkeypatch.setattr(lanes, "score_source", blind)
    monkeypatch.setattr(lanes, "score_shard", shipped)
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        assert score(run, "shipped", client, shard_rows=150) == want
    # every shard shipped once; after the first refusal no shard is offered by reference
    # again (only those already in flight, a window of three, come back refused)
    assert seen[0] == "source" and seen.count("source") <= 3 < seen.count("shipped")


def test_the_collector_is_paused_while_a_shard_is_scored_and_restored_after(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import threading

    import horizonbench.tasks.score.shards as shards

    states: list[bool] = []
    real = shards.score_rows_at

    def watching(*args: Any) -> Any:
        states.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(shards, "score_rows_at", watching)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            states.clear()
            score(run, f"gc-{enabled}", shard_rows=200)
            assert states and not any(states)
            assert gc.isenabled() is enabled
        # threads overlapping: the last one out restores the collector
        gc.enable()
        inside, release = threading.Event(), threading.Event()

        def hold() -> None:
            with shards.gc_paused():
                inside.set()
                release.wait(10)

        t = threading.Thread(target=hold)
        t.start()
        inside.wait(10)
        with shards.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other thread is still inside
        release.set()
        t.join()
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def _periodic(server: Any) -> dict[str, float]:
    return {name: pc.callback_time for name, pc in server.periodic_callbacks.items()}


@pytest.mark.parametrize("processes", [True, False])
def test_our_local_cluster_runs_less_of_dasks_periodic_work(processes: bool) -> None:
    """``CLUSTER_CONFIG``: worker processes (their nanny hands the configuration on) and
    in-process workers alike start without the statistical profiler, and with the tick
    and the system monitor slowed, the scheduler too; the client's own configuration is
    left as it was."""
    import dask
    from distributed import Client

    from horizonbench.tasks.cluster.client import _local_cluster

    before = dask.config.get("distributed")
    cluster = _local_cluster(DaskSpec(n_workers=1, processes=processes), dashboard=False)
    try:
        with Client(cluster) as client:
            [worker] = client.run(lambda dask_worker: _periodic(dask_worker)).values()
            scheduler = client.run_on_scheduler(lambda dask_scheduler: _periodic(dask_scheduler))
    finally:
        cluster.close()
    assert "profile" not in worker and "profile-cycle" not in worker
    for server in (worker, scheduler):
        assert server["tick"] == 1_000 and server["monitor"] == 2_000
    assert dask.config.get("distributed") == before
