"""Breadth-first search over (room, keys held, doors unlocked): the optimality certificate.

Every instance is proven solvable from its own facts, with the gold plan's length
equal to the shortest possible, and the number of distinct optimal plans counted.
At generation time the world comes from the generator's fact items rather than from
parsing the strings again, so the items are first proven to render to exactly the
strings shown: a listing whose text and structure disagree is not certified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from horizonbench.datasets.maze.facts import FactItem, World, render_fact, world_from_items
from horizonbench.datasets.maze.rules import State, tables_of, transitions


@dataclass
class Solution:
    """Result of the search. ``length`` counts actions including start and rescue.

    ``dist`` and ``on_optimal`` are filled only with ``track=True``: the shortest
    distance of every state seen, and the states that lie on some optimal plan (used
    by the simulator's progress ratio, which must credit any optimal plan, not one).
    """

    length: int | None
    count: int
    dist: dict[State, int] = field(default_factory=dict)
    on_optimal: set[State] = field(default_factory=set)


def world_of_listing(items: Sequence[FactItem], facts: Sequence[str]) -> World | None:
    """The world of a generated listing, or None when ``items`` do not render to ``facts``
    one for one (then the search would certify a maze the model is not shown)."""
    if len(items) != len(facts):
        return None
    for (kind, slots), fact in zip(items, facts, strict=True):
        if render_fact(kind, slots) != fact:
            return None
    return world_from_items(items)


def solve(world: World, *, track: bool = False, max_states: int = 2_000_000) -> Solution:
    if world.start is None or world.goal is None:
        return Solution(None, 0)
    s0: State = (world.start, 0, 0, -1)
    dist: dict[State, int] = {s0: 0}
    count: dict[State, int] = {s0: 1}
    preds: dict[State, list[State]] = {}
    frontier = [s0]
    depth = 0
    goal = world.goal
    tables = tables_of(world)
    while frontier:
        goals = [s for s in frontier if s[0] == goal and s[3] < 0]
        if goals:
            sol = Solution(depth + 2, sum(count[s] for s in goals))
            if track:
                sol.dist = dist
                sol.on_optimal = _backward_closure(goals, preds)
            return sol
        nxt: list[State] = []
        d1 = depth + 1
        for s in frontier:
            c = count[s]
            for _, _, t in transitions(world, s, tables):
                d = dist.get(t)
                if d is None:
                    dist[t] = d1
                    count[t] = c
                    nxt.append(t)
                    if track:
                        preds[t] = [s]
                elif d == d1:
                    count[t] += c
                    if track:
                        preds[t].append(s)
        if len(dist) > max_states:
            raise RuntimeError(f"state space exceeds {max_states} states")
        frontier = nxt
        depth = d1
    return Solution(None, 0, dist if track else {})


def _backward_closure(goals: list[State], preds: dict[State, list[State]]) -> set[State]:
    seen = set(goals)
    stack = list(goals)
    while stack:
        for p in preds.get(stack.pop(), ()):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen
