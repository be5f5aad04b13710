"""Hypothesis strategies for Blocks World states, shared by the family's tests and those
of the paper reading (tests/test_puzzle_blocks_world.py, tests/test_blocks_world_paper.py)."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from horizonbench.datasets.puzzles.base import Configuration


@st.composite
def states(draw: st.DrawFn, n: int | None = None, k: int | None = None) -> tuple[tuple[str, ...], ...]:
    """Any arrangement of n blocks on k stacks (all are reachable with k >= 3)."""
    n = draw(st.integers(0, 8)) if n is None else n
    k = draw(st.integers(2, 5)) if k is None else k
    order = draw(st.permutations("ABCDEFGHIJ"[:n]))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=k - 1, max_size=k - 1)))
    bounds = [0, *cuts, n]
    return tuple(tuple(order[a:b]) for a, b in itertools.pairwise(bounds))


def configuration(start, goal) -> Configuration:
    """A Blocks World configuration from a start and a goal of the same stacks."""
    return Configuration(sum(map(len, start)), {"num_stacks": len(start)}, start, goal)
