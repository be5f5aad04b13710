"""Blocks World read as the paper's Algorithms 5 and 6 (issue 25): the blockwise start
sampler, the random-walk goal, the node-limited BFS, and the quota that counts trivial
and repeated candidates before dropping them (configs/recurrreason.yaml)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocks_world_strategies import configuration as _config
from blocks_world_strategies import states
from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.base import Certificate, Unsolved, bfs_path, trajectory_ok
from horizonbench.datasets.puzzles.blocks_world import (
    BlocksWorld,
    BlocksWorldParams,
    _draw_blockwise,
    draw_pair,
    random_walk,
)
from horizonbench.datasets.puzzles.blocks_world_search import _astar, bfs_algorithm5
from horizonbench.datasets.sampling import Selector
from horizonbench.datasets.shards import generate_shard
from horizonbench.schemas.config import SamplingSpec

BW = BlocksWorld()
PAPER = {
    "num_stacks": 3,
    "per_n": 100,
    "alpha": 3,
    "start_sampler": "blockwise",
    "goal": "walk",
    "walk_moves": 35,
    "search": "bfs",
    "node_limit": 150_000,
    "dedup": "after",
}


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 5), st.integers(2, 4), st.data())
def test_bfs_plans_are_legal_optimal_and_cut_only_by_the_limit(n, k, data):
    """Every plan replays legally to the goal; uncut, its length is the exact optimum
    (plain BFS); cut, it says so and popped exactly the limit."""
    start, goal = data.draw(states(n, k)), data.draw(states(n, k))
    limit = data.draw(st.sampled_from([1, 5, 50, 10**6]))
    config = _config(start, goal)
    found = BW.certify(config, limit, "bfs")
    exact = bfs_path(start, goal, lambda s: BW.successors(s, config.rules))
    if isinstance(found, Certificate):
        assert trajectory_ok(BW, config, found)
        assert isinstance(exact, Certificate) and found.length == exact.length
        assert found.nodes <= limit
    else:
        assert found.reason in ("node_limit", "unsolvable")
        if found.reason == "node_limit":
            assert found.nodes == limit
        else:
            assert isinstance(exact, Unsolved)
        if limit == 10**6:  # never cut this small a space: unreachable only on 2 stacks
            assert found.reason == "unsolvable" and k == 2


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 8), st.integers(2, 5), st.data())
def test_written_out_moves_are_the_successors_in_order(n, k, data):
    """The BFS's successor lists (3 stacks written out, the others by a loop) are the
    rules' successors in the rules' order: pop counts depend on that order."""
    from horizonbench.datasets.puzzles.blocks_world_search import _moves3, _moves_any

    state = data.draw(states(n, k))
    keyed = tuple("".join(s) for s in state)
    expected = [tuple("".join(s) for s in t) for _, t in BW.successors(state, {"num_stacks": k})]
    assert _moves_any(keyed) == expected
    if k == 3:
        assert _moves3(keyed) == expected


def test_bfs_counts_pops_as_algorithm_5():
    """The goal is tested on successors: a goal one move away costs one pop, and a limit
    of that many pops still finds it; a start that is its goal is 0 moves, 0 pops."""
    start = (("A", "B"), (), ())
    one = BW.certify(_config(start, (("A",), ("B",), ())), 1, "bfs")
    assert isinstance(one, Certificate) and (one.length, one.nodes) == (1, 1)
    same = bfs_algorithm5(start, start, 1)
    assert isinstance(same, Certificate) and (same.length, same.nodes) == (0, 0)
    far = ((), (), ("B", "A"))
    assert isinstance(bfs_algorithm5(start, far, 1), Unsolved)
    got = bfs_algorithm5(start, far, 10**6)
    assert isinstance(got, Certificate) and got.length == _astar(start, far, 10**6).length  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(2, 5), st.integers(0, 60), st.integers(0, 2**32 - 1))
def test_walk_goals_are_reachable_within_the_walk(n, k, moves, seed):
    """A walk goal is a legal state at most ``moves`` moves from the start (A* says so)."""
    rng = np.random.default_rng(seed)
    start = _draw_blockwise(rng, n, k)
    goal = random_walk(rng, start, moves)
    assert sorted(b for s in goal for b in s) == sorted(b for s in start for b in s) and len(goal) == k
    if k >= 3 or goal == start:
        found = _astar(start, goal, 10**6)
        assert isinstance(found, Certificate) and found.length <= moves


def test_blockwise_starts_keep_block_order_and_cover_3_to_the_n():
    """Blocks A..n are placed in order, so every stack reads alphabetically bottom-up,
    and all 3^n placements occur (n = 3: 27)."""
    rng = np.random.default_rng(0)
    seen = {_draw_blockwise(rng, 3, 3) for _ in range(2000)}
    assert len(seen) == 27
    assert all(list(s) == sorted(s) for state in seen for s in state)


def test_default_params_draw_as_before():
    """The uniform sampler with independent goals stays the default, draw for draw."""
    from horizonbench.datasets.puzzles.blocks_world import _draw_state, _rng

    params = BlocksWorldParams()
    rng_a, rng_b = _rng(7, 6, "3"), _rng(7, 6, "3")
    assert draw_pair(rng_a, 6, params) == (_draw_state(rng_b, 6, 3), _draw_state(rng_b, 6, 3))


def _run_paper(ns: list[int]) -> tuple[dict[int, int], dict[int, int], Selector]:
    """Generation as the pipeline does it: shards in index order, fed to the selector."""
    params = PAPER | {"ns": ns}
    fam = get_family("blocks_world")
    spec = SamplingSpec.model_validate(
        {"bins": {"min": min(ns), "max": max(ns) + 1, "width": 1, "per_bin": 100}}
    )
    selector = Selector(spec)
    puzzles: dict[int, int] = {}
    moves: dict[int, int] = {}
    total = fam.candidate_count(fam.params_model.model_validate(params))
    for start in range(0, total, 50):
        for index, length, row, rejection in generate_shard(
            "blocks_world", params, 0, start, min(start + 50, total)
        ):
            if selector.feed(index, length, row is not None, rejection):
                assert row is not None
                puzzles[row["n"]] = puzzles.get(row["n"], 0) + 1
                moves[row["n"]] = moves.get(row["n"], 0) + row["solution_length"]
    return puzzles, moves, selector


def test_the_first_100_solved_fill_the_quota_then_trivial_and_repeats_go():
    """n = 1..4 (no BFS cut this small): each n keeps exactly the distinct pairs with
    start != goal among its FIRST 100 candidates, as Algorithm 6 taken literally, so
    n = 1 keeps 6 and n = 2 about half of its 100 (Table 4: 6, 52, 92, 99)."""
    ns = [1, 2, 3, 4]
    puzzles, moves, selector = _run_paper(ns)
    params = BlocksWorldParams.model_validate(PAPER | {"ns": ns})
    for n in ns:
        first = BW.configurations(n, params, 0)[:100]
        expected = {(c.start, c.goal) for c in first if c.start != c.goal}
        assert puzzles[n] == len(expected), n
        assert selector.bin_counts[n] == 100
    assert puzzles[1] == 6 and moves[1] == 6
    assert 40 <= puzzles[2] <= 70 and puzzles[3] >= 85 and puzzles[4] >= 95
    assert selector.rejections["start_is_goal"] > 0 and selector.rejections["repeated_pair"] > 0
    assert selector.slots_dropped == sum(100 - puzzles[n] for n in ns)
    assert not selector.unfilled()


def _paper_table(tmp_path, workers: int, shard_size: int | None) -> tuple[bytes, int]:
    """The paper reading's instance table as the generate stage streams it."""
    from horizonbench.schemas.config import DaskSpec, FamilySpec
    from horizonbench.tasks.cluster.client import dask_client
    from horizonbench.tasks.generate.instances import sample_family
    from horizonbench.tasks.run_folder.table_parts import PartWriter, part_files

    spec = FamilySpec.model_validate(
        {
            "params": PAPER | {"ns": [1, 2, 3], "per_n": 20},
            "sampling": {"bins": {"min": 1, "max": 4, "width": 1, "per_bin": 20}, "shard_size": shard_size},
        }
    )
    dest = tmp_path / f"w{workers}-s{shard_size}"
    family = get_family("blocks_world")
    with (
        dask_client(DaskSpec(n_workers=workers)) as client,
        PartWriter(dest, family.instance_schema, "instances/blocks_world") as writer,
    ):
        selector = sample_family(
            client, "blocks_world", spec, root_seed=5, window=3 * workers, sink=writer.write
        )
    assert not selector.unfilled() and selector.slots_dropped > 0
    return b"".join(f.name.encode() + f.read_bytes() for f in part_files(dest)), selector.kept


@pytest.mark.flow
def test_the_cut_then_drop_rule_gives_the_same_bytes_for_any_workers(tmp_path):
    """Slots taken by dropped candidates are counted in candidate order, so the kept
    rows do not depend on workers or shard sizes."""
    one, kept = _paper_table(tmp_path, 1, 7)
    assert (one, kept) == _paper_table(tmp_path, 2, None)
    assert 0 < kept < 60


def test_the_report_says_how_many_quota_slots_went_to_dropped_candidates():
    from horizonbench.tasks.report.run_info import report_counts

    gen = {
        "family": "blocks_world",
        "kept": 6,
        "candidates_considered": 100,
        "candidates_certified": 6,
        "rejections": {"start_is_goal": 30, "repeated_pair": 64},
        "unfilled_bins": {},
    }
    lines = report_counts({"generation": [gen | {"quota_slots_dropped": 94}]})
    assert lines["blocks_world: quota slots to dropped trivial or repeated candidates"] == 94
    assert not any("quota slots" in k for k in report_counts({"generation": [gen]}))
    overlap = {"split_rule": "pooled", "validation": {"steps": 19, "in_train": 2, "share": 2 / 19}}
    lines = report_counts({"generation": [gen | {"step_overlap": overlap}]})
    key = "blocks_world: validation steps repeating a training step (pooled split)"
    assert lines[key] == "2 of 19 (10.5%)"
