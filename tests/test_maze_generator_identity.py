"""Maze instances are a pure function of (params, seed, index) across versions.

The digests below were computed with the generator as it stood before the speed-up of
issue 11 (commit 9b1d9bd): any change to the random streams, the tree, the rewind, the
fact rendering or the certificate's figures changes a digest. A deliberate change of
the instances must update them and say so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze.certificate import solve, world_of_listing
from horizonbench.datasets.maze.facts import world_from_facts
from horizonbench.datasets.maze.family import FACTS_MISMATCH
from horizonbench.datasets.maze.generator import generate_maze
from horizonbench.datasets.maze.grid import CuttableTree, _plain_kruskal, grid_edges, kruskal_tree
from horizonbench.datasets.shards import candidate_seed

FAMILY = MazeFamily()
CANDIDATES_PER_CASE = 8

CASES: list[tuple[dict[str, Any], str]] = [
    (
        dict(grid_rows=5, grid_cols=5, num_keys=0, noise_ratio=0.0, shuffle_ratio=0.0),
        "66569a0c54eb2bb75da185cb9dca4464b0ad1b9afbc7a0a0d114b6118fcbf0b3",
    ),
    (
        dict(
            grid_rows=5, grid_cols=5, num_keys=2, noise_ratio=1.0, shuffle_ratio=1.0, num_keys_mode="at_most"
        ),
        "50a28c33a60245b1cf6986062af02282311afe4996d8eed024fd1bb8c9bbe689",
    ),
    (
        dict(grid_rows=2, grid_cols=9, num_keys=1, noise_ratio=0.5, shuffle_ratio=0.5),
        "e4b67c8ab6f1c57d1372bf0e746becafbcdadf47128bab3342500edcfdadf632",
    ),
    (
        dict(grid_rows=8, grid_cols=13, num_keys=3, noise_ratio=0.3, shuffle_ratio=0.7, decoy_doors=0),
        "7f06303df58f4515ebde44f8f95a5559baffc4acb868bc1b119c430ae1d8ccf4",
    ),
    (
        dict(
            grid_rows=12,
            grid_cols=12,
            num_keys=4,
            noise_ratio=2.0,
            shuffle_ratio=1.0,
            decoy_doors=3,
            num_keys_mode="at_most",
        ),
        "b5e606ad0f4bf39b1ba03c3021d1f953315f5a8d43a15a9c6c5cf26f2bdc0d32",
    ),
    (
        dict(grid_rows=20, grid_cols=20, num_keys=1, noise_ratio=0.0, shuffle_ratio=1.0),
        "661f6f4956b15526b53d3017649cd8b08b58c3f32d55b999058a31a7e5db63d4",
    ),
    (
        dict(grid_rows=30, grid_cols=27, num_keys=0, noise_ratio=1.0, shuffle_ratio=0.25),
        "9ba67542eb37f3e28b788026c58083d2f2007d934ebd14354d78726f8044508a",
    ),
    (
        dict(
            grid_rows=40,
            grid_cols=40,
            num_keys=2,
            noise_ratio=0.0,
            shuffle_ratio=1.0,
            num_keys_mode="at_most",
        ),
        "b09fd19fb2ab408f089eb94ec88c27b79a125248e7c076bf6aeece98d2e5980c",
    ),
    (
        dict(grid_rows=40, grid_cols=40, num_keys=2, noise_ratio=1.0, shuffle_ratio=1.0),
        "2ae3ab795873099cce0a9d415efb70ceb911f0d7df1d2d0d75407ce8f236ee4d",
    ),
    (
        dict(grid_rows=40, grid_cols=40, num_keys=4, noise_ratio=0.5, shuffle_ratio=0.0, decoy_doors=6),
        "bda007b8b9a4a2d39904fdde185fc95e0db0732807d9fcbaee5b38c7cd31a800",
    ),
    (
        dict(grid_rows=3, grid_cols=3, num_keys=3, noise_ratio=1.0, shuffle_ratio=1.0),
        "161efc2762206f1c5bd5e89b293e9e2a03eb6bd9ad37303a5f0ac7b5c5713bd1",
    ),
    (
        dict(
            grid_rows=6, grid_cols=4, num_keys=4, noise_ratio=0.0, shuffle_ratio=0.0, num_keys_mode="at_most"
        ),
        "6b7160dc5d0934832495057d42fa9555ec2d912f2bcefaf50320b42b57e04c05",
    ),
]


def digest(params: dict[str, Any]) -> str:
    """One hash over the rows (and rejections) of the first candidates of a setting."""
    p = MazeParams(**params)
    h = hashlib.sha256()
    for index in range(CANDIDATES_PER_CASE):
        cand = FAMILY.generate_candidate(p, candidate_seed(2024, "maze", index), index)
        h.update(json.dumps([cand.row, cand.rejection], sort_keys=True).encode())
    return h.hexdigest()


@pytest.mark.parametrize(("params", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_rows_are_identical_to_the_pinned_version(params: dict[str, Any], expected: str) -> None:
    assert digest(params) == expected


# --- the fast paths agree with their references -------------------------------------------


PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SIDES = st.integers(2, 14)
SEEDS = st.integers(0, 2**63 - 1)


@st.composite
def mazes(draw: st.DrawFn) -> Any:
    rows, cols = draw(SIDES), draw(SIDES)
    keys = draw(st.integers(0, min(4, rows * cols // 2 - 1)))
    noise = draw(st.floats(0.0, 2.0, allow_nan=False))
    shuffle = draw(st.floats(0.0, 1.0, allow_nan=False))
    return generate_maze(rows, cols, keys, noise, shuffle, draw(st.integers(0, 3)), draw(SEEDS))


@given(SIDES, SIDES, SEEDS)
@PROPS
def test_subdivided_kruskal_is_plain_kruskal(rows: int, cols: int, seed: int) -> None:
    fast = kruskal_tree(rows, cols, np.random.default_rng(seed))
    weights = 1.0 + np.random.default_rng(seed).random(grid_edges(rows, cols)[0].shape[0])
    plain = _plain_kruskal(rows, cols, weights)
    assert [a.tolist() for a in fast] == [a.tolist() for a in plain]


def test_tied_weights_fall_back_to_the_plain_grid() -> None:
    class Tied:
        def random(self, size: int) -> np.ndarray:
            return np.zeros(size)

    u, v = kruskal_tree(4, 5, Tied())  # type: ignore[arg-type]
    assert u.shape[0] == 19 and [a.tolist() for a in _plain_kruskal(4, 5, np.ones(31))] == [
        u.tolist(),
        v.tolist(),
    ]


@given(SIDES, SIDES, SEEDS, st.lists(st.integers(0, 10_000), max_size=4))
@PROPS
def test_cuttable_tree_searches_in_scipys_undirected_order(
    rows: int, cols: int, seed: int, cuts: list[int]
) -> None:
    u, v = kruskal_tree(rows, cols, np.random.default_rng(seed))
    n = rows * cols
    tree = CuttableTree(u, v, rows, cols)
    keep = np.ones(u.shape[0], dtype=bool)
    for c in cuts:
        i = c % u.shape[0]
        tree.cut(int(u[i]), int(v[i]))
        keep[i] = False
    plain = csr_matrix((np.ones(int(keep.sum())), (u[keep], v[keep])), shape=(n, n))
    for source in {0, n - 1, seed % n}:
        want = breadth_first_order(plain, source, directed=False, return_predecessors=True)
        got = tree.bfs(source)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


@given(mazes())
@PROPS
def test_certificate_accepts_generated_listings_and_agrees_with_the_plain_search(maze: Any) -> None:
    world = world_of_listing(maze.items, maze.facts)
    assert world is not None
    parsed = world_from_facts(list(maze.facts))
    assert (world.rooms, world.adj, world.locks, world.keys_in_room) == (
        parsed.rooms,
        parsed.adj,
        parsed.locks,
        parsed.keys_in_room,
    )
    fast, tracked = solve(world), solve(parsed, track=True)
    assert (fast.length, fast.count) == (tracked.length, tracked.count)
    assert fast.length == len(maze.gold)


@given(mazes(), st.data())
@PROPS
def test_certificate_rejects_a_listing_whose_text_and_structure_disagree(
    maze: Any, data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(maze.facts) - 1))
    kind, slots = maze.items[i]
    other = data.draw(
        st.sampled_from([it for it in maze.items if it != maze.items[i]] or [("bob", ("ZZ99",))])
    )
    corrupt_items = maze.items[:i] + (other,) + maze.items[i + 1 :]
    assert world_of_listing(corrupt_items, maze.facts) is None
    corrupt_facts = maze.facts[:i] + (maze.facts[i] + " ",) + maze.facts[i + 1 :]
    assert world_of_listing(maze.items, corrupt_facts) is None
    assert world_of_listing(maze.items[:-1], maze.facts) is None


def test_family_rejects_a_corrupted_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    import horizonbench.datasets.maze.family as family

    real = family.generate_maze

    def corrupted(*args: Any) -> Any:
        maze = real(*args)
        return dataclasses.replace(maze, items=maze.items[1:] + maze.items[:1])

    monkeypatch.setattr(family, "generate_maze", corrupted)
    params = MazeParams(grid_rows=6, grid_cols=6, num_keys=1, noise_ratio=0.5)
    cand = FAMILY.generate_candidate(params, candidate_seed(1, "maze", 0), 0)
    assert cand.row is None and cand.rejection == FACTS_MISMATCH
