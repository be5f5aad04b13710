"""The fast paths of maze generation (issue 10, "generation at the limit") against their
references, and the certificate still able to reject a wrong instance.

``tests/test_maze_generator_identity.py`` pins the rows themselves; this file holds each
shortcut to the plain computation it replaces, on inputs the pinned rows never reach
(tied weights, corrupted plans, unnormalised worlds).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import Step
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze.certificate import (
    _listing_world,
    gold_violation,
    render_items,
    solve,
    world_of_listing,
)
from horizonbench.datasets.maze.facts import World, door_key, render_fact, world_from_facts, world_from_items
from horizonbench.datasets.maze.generator import _rng, _Stream, generate_maze
from horizonbench.datasets.maze.grid import _plain_kruskal, grid_edges, kruskal_mask
from horizonbench.datasets.maze.rules import apply, apply_plan, door_bits, tables_of
from horizonbench.datasets.maze.simulator import replay
from horizonbench.datasets.shards import candidate_seed, gc_paused, generate_shard

FAMILY = MazeFamily()
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SIDES = st.integers(2, 12)
SEEDS = st.integers(0, 2**63 - 1)


class _Quantised:
    """A stand-in generator whose weights take only a few values: many exact ties."""

    def __init__(self, seed: int, levels: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._levels = levels

    def random(self, size: int) -> np.ndarray:
        return np.floor(self._rng.random(size) * self._levels) / self._levels


@given(SIDES, SIDES, SEEDS, st.sampled_from([1, 2, 3, 7, 50]))
@PROPS
def test_radix_ordered_kruskal_breaks_ties_as_the_plain_grid_does(
    rows: int, cols: int, seed: int, levels: int
) -> None:
    u, v = grid_edges(rows, cols)
    mask = kruskal_mask(rows, cols, _Quantised(seed, levels))  # type: ignore[arg-type]
    weights = 1.0 + _Quantised(seed, levels).random(u.shape[0])
    pu, pv = _plain_kruskal(rows, cols, weights)
    assert [u[mask].tolist(), v[mask].tolist()] == [pu.tolist(), pv.tolist()]


# --- the certificate's pieces against their plain versions ----------------------------------


def _reference_tables(world: World) -> Any:
    """``rules._tables`` as it was written before issue 10: door by door."""
    bits = door_bits(world)
    nbrs = []
    for room, adj in enumerate(world.adj):
        row = []
        for nb in adj:
            door = door_key(room, nb)
            if door in world.locks:
                key = world.locks[door]
                row.append((nb, bits[door], -1 if key is None else key))
            else:
                row.append((nb, 0, -1))
        nbrs.append(row)
    keys = [[(k, 1 << k, str(k)) for k in world.keys_in_room.get(r, ())] for r in range(len(world.rooms))]
    return nbrs, keys


@st.composite
def mazes(draw: st.DrawFn) -> Any:
    rows, cols = draw(SIDES), draw(SIDES)
    keys = draw(st.integers(0, min(4, rows * cols // 2 - 1)))
    noise = draw(st.floats(0.0, 2.0, allow_nan=False))
    shuffle = draw(st.floats(0.0, 1.0, allow_nan=False))
    return generate_maze(rows, cols, keys, noise, shuffle, draw(st.integers(0, 3)), draw(SEEDS))


@given(mazes())
@PROPS
def test_tables_are_the_door_by_door_tables(maze: Any) -> None:
    world = world_from_facts(list(maze.facts))
    assert tables_of(world) == _reference_tables(world_from_facts(list(maze.facts)))


def test_tables_ignore_a_lock_that_is_not_a_door_of_the_world() -> None:
    world = World()
    world.connect("A1", "B1")
    world.connect("B1", "C1")
    world.connect("C1", "C1")  # a room joined to itself: two entries, one door
    world.locks[(1, 0)] = 3  # written high room first: no door of the world
    world.locks[(2, 2)] = 4
    world.locks[(0, 7)] = None  # a room the world does not have
    world.keys_in_room[1] = [3]
    assert tables_of(world) == _reference_tables(world)


@given(mazes())
@PROPS
def test_the_listing_world_is_world_from_items_with_its_tables(maze: Any) -> None:
    world = world_of_listing(maze.items, maze.facts)
    plain = world_from_items(maze.items)
    assert world is not None and dataclasses.asdict(world) == dataclasses.asdict(plain)
    assert world._tables == _reference_tables(world_from_items(maze.items))  # type: ignore[attr-defined]


def test_the_listing_world_reads_odd_listings_as_world_from_items() -> None:
    items = [
        ("open", ("A1", "B1")),
        ("open", ("B1", "A1")),  # the same door twice
        ("locked", ("B1", "C1")),
        ("requires", ("C1", "B1", "4")),  # written the other way round
        ("requires", ("C1", "D1", "5")),  # no locked door: ignored
        ("requires", ("E9", "B1", "6")),  # a room never connected
        ("key", ("4", "A1")),
        ("key", ("4", "A1")),  # repeated: one key
        ("key", ("7", "Z9")),  # a room of its own
        ("open", ("C1", "C1")),  # a room joined to itself
        ("locked", ("C1", "D1")),  # locked, its key never stated
        ("bob", ("D1",)),
        ("alice", ("A1",)),
    ]
    world, plain = _listing_world(items), world_from_items(items)
    assert dataclasses.asdict(world) == dataclasses.asdict(plain)
    assert world._tables == _reference_tables(world_from_items(items))  # type: ignore[attr-defined]


def test_rendered_items_are_render_fact_and_fail_as_it_does() -> None:
    items = [
        ("open", ("A1", "B1")),
        ("locked", ("B1", "A1")),
        ("requires", ("A1", "B1", "7")),
        ("key", ("7", "C3")),
        ("bob", ("AA12",)),
        ("alice", ("Z9",)),
    ]
    assert render_items(items) == [render_fact(kind, slots) for kind, slots in items]
    assert render_items([("bob", "A1")]) == ["Bob is in room A1."]  # not a tuple: % decides
    for bad in (
        ("open", ("A1",)),
        ("open", ("A1", "B1", "C1")),
        ("door", ("A1", "B1")),
        ("key", ["7", "C3"]),
    ):
        with pytest.raises((TypeError, ValueError)):
            render_fact(*bad)  # type: ignore[arg-type]
        with pytest.raises((KeyError, TypeError)):  # KeyError: an unknown kind
            render_items([bad])  # type: ignore[list-item]


def test_contracted_search_walks_a_ring_of_corridors_both_ways() -> None:
    # a ring A1-B1-C1-D1-E1-F1-A1 with the start on it and the goal off it (two shortest
    # plans, one each way round): corridors recorded on the way out are taken back
    ring = "A1 B1 C1 D1 E1 F1 A1".split()
    facts = [render_fact("open", (a, b)) for a, b in zip(ring, ring[1:], strict=False)]
    facts += [render_fact("open", ("D1", "G1")), render_fact("bob", ("A1",)), render_fact("alice", ("G1",))]
    fast, plain = solve(world_from_facts(facts)), solve(world_from_facts(facts), track=True)
    assert (fast.length, fast.count) == (plain.length, plain.count) == (6, 2)


@given(st.one_of(SEEDS, st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**64, -1])), st.integers(0, 3))
@PROPS
def test_stream_generators_are_default_rng_of_seed_and_stream(seed: int, stream: int) -> None:
    if seed < 0:
        with pytest.raises(ValueError):
            np.random.default_rng([seed, stream])
        with pytest.raises(ValueError):
            _rng(seed, stream)
        return
    assert _rng(seed, stream).bit_generator.state == np.random.default_rng([seed, stream]).bit_generator.state


DRAWS = st.one_of(
    st.tuples(st.just("integers"), st.sampled_from([1, 2, 3, 17, 1600, 2**31, 2**32 - 1, 2**32, 2**40])),
    st.tuples(st.just("integers"), st.integers(1, 5000)),
    st.tuples(st.just("sample"), st.integers(0, 12_000), st.integers(0, 300)),
    st.tuples(st.just("sample"), st.sampled_from([10, 16, 40, 1450]), st.integers(0, 10)),
)


@given(SEEDS, st.integers(0, 40), st.booleans(), st.lists(DRAWS, max_size=12))
@PROPS
def test_the_python_stream_draws_what_numpy_draws(
    seed: int, doubles: int, odd: bool, draws: list[Any]
) -> None:
    numpy_rng = np.random.default_rng([seed, 0])
    numpy_rng.random(doubles)  # the tree's weights come first
    if odd:
        numpy_rng.integers(7)  # a stream holding half of a 64-bit output
    ours = _Stream(np.random.default_rng([seed, 0]))
    ours._generator.bit_generator.state = numpy_rng.bit_generator.state
    ours._load()
    for how, *args in draws:
        if how == "integers":
            assert ours.integers(args[0]) == int(numpy_rng.integers(args[0]))
        else:
            population, size = args[0], min(args[1], args[0])
            assert (
                ours.sample(population, size)
                == numpy_rng.choice(population, size=size, replace=False).tolist()
            )


def _mutations(plan: tuple[Step, ...], data: st.DataObject) -> tuple[Step, ...]:
    """The gold plan with one step dropped, repeated, moved or given another argument."""
    i = data.draw(st.integers(0, len(plan) - 1))
    how = data.draw(st.sampled_from(["drop", "repeat", "swap", "arg", "action"]))
    steps = list(plan)
    if how == "drop":
        del steps[i]
    elif how == "repeat":
        steps.insert(i, steps[i])
    elif how == "swap" and i + 1 < len(steps):
        steps[i], steps[i + 1] = steps[i + 1], steps[i]
    elif how == "arg":
        arg = data.draw(st.sampled_from(["A1", "B2", "C3", "1", "7", "Alice", ""]))
        steps[i] = Step(steps[i].action, arg)
    elif how == "action":
        action = data.draw(st.sampled_from(["move_to", "use_key", "pick_up_key", "fly"]))
        steps[i] = Step(action, steps[i].arg)
    return tuple(steps)


@given(mazes(), st.data())
@PROPS
def test_gold_check_is_the_simulators_replay(maze: Any, data: st.DataObject) -> None:
    world = world_from_facts(list(maze.facts))
    assert gold_violation(world, maze.gold) is None and replay(world, maze.gold) is None
    for _ in range(4):
        plan = _mutations(maze.gold, data)
        assert gold_violation(world, plan) == replay(world, plan)


@given(mazes(), st.data())
@PROPS
def test_apply_plan_is_apply_step_by_step(maze: Any, data: st.DataObject) -> None:
    world = world_from_facts(list(maze.facts))
    plan = _mutations(maze.gold, data)[1:]
    state: Any = (world.start, 0, 0, -1)
    bad = None
    for step in plan:
        state, bad = apply(world, state, step)
        if bad is not None:
            break
    assert apply_plan(world, (world.start, 0, 0, -1), plan) == (state, bad)  # type: ignore[arg-type]


# --- the certificate can still fail ------------------------------------------------------------


def _corrupting(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    import horizonbench.datasets.maze.family as family

    real = family.generate_maze
    monkeypatch.setattr(family, "generate_maze", lambda *args: change(real(*args)))


PARAMS = MazeParams(grid_rows=6, grid_cols=6, num_keys=1, noise_ratio=0.5)


def test_family_rejects_a_gold_plan_that_breaks_a_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # the key is used before it is picked up: as long as the optimum, but illegal
    def swapped(maze: Any) -> Any:
        gold = list(maze.gold)
        i = next(j for j, s in enumerate(gold) if s.action == "pick_up_key")
        k = next(j for j, s in enumerate(gold) if s.action == "use_key")
        gold[i], gold[k] = gold[k], gold[i]
        return dataclasses.replace(maze, gold=tuple(gold))

    _corrupting(monkeypatch, swapped)
    cand = FAMILY.generate_candidate(PARAMS, candidate_seed(1, "maze", 0), 0)
    assert cand.row is None and (cand.rejection or "").startswith("gold_invalid:")


def test_family_rejects_a_gold_plan_longer_than_the_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    def detour(maze: Any) -> Any:
        gold = list(maze.gold)
        back = Step("move_to", gold[0].arg)
        return dataclasses.replace(maze, gold=(gold[0], gold[1], back, *gold[1:]))

    _corrupting(monkeypatch, detour)
    cand = FAMILY.generate_candidate(PARAMS, candidate_seed(1, "maze", 0), 0)
    assert cand.row is None and cand.rejection == "gold_not_optimal"


def test_family_rejects_a_listing_without_the_goal(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_alice(maze: Any) -> Any:
        keep = [i for i, (kind, _) in enumerate(maze.items) if kind != "alice"]
        return dataclasses.replace(
            maze, items=tuple(maze.items[i] for i in keep), facts=tuple(maze.facts[i] for i in keep)
        )

    _corrupting(monkeypatch, no_alice)
    cand = FAMILY.generate_candidate(PARAMS, candidate_seed(1, "maze", 0), 0)
    assert cand.row is None and cand.rejection == "unsolvable"


def test_the_certificate_finds_a_closed_corridor() -> None:
    """Every open door written as locked, with no key for it: no plan reaches the goal."""
    maze = generate_maze(6, 6, 0, 0.0, 0.0, 0, 11)  # no keys: every door on the path is open
    assert any(kind == "open" for kind, _ in maze.items)
    items = tuple(("locked", slots) if kind == "open" else (kind, slots) for kind, slots in maze.items)
    facts = tuple(
        f.replace("by an open door", "by a closed and locked door") if kind == "open" else f
        for (kind, _), f in zip(maze.items, maze.facts, strict=True)
    )
    world = world_of_listing(items, facts)
    assert world is not None and solve(world).length is None


# --- the shard's paused collector ----------------------------------------------------------------

MAZE_40 = {"grid_rows": 40, "grid_cols": 40, "num_keys": 2, "num_keys_mode": "at_most", "noise_ratio": 1.0}


CYCLES_PROBE = """
import gc, json, sys
from horizonbench.datasets.shards import generate_shard
maze = json.loads(sys.argv[1])
generate_shard("maze", maze, 3, 0, 2)  # first use: imports and caches, made once
gc.collect()
gc.disable()
result = generate_shard("maze", maze, 3, 0, 30)
rejected = sum(1 for r in result if r[3] is None)
del result
print(rejected, gc.collect())
"""


def test_a_maze_shard_leaves_no_cycles_for_the_paused_collector() -> None:
    """In a process of its own: in the test process, threads left by other tests (an
    event loop, a log worker) make garbage of their own while the shard runs."""
    out = subprocess.run(
        [sys.executable, "-c", CYCLES_PROBE, json.dumps(MAZE_40)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    rejected, collected = (int(x) for x in out.stdout.split())
    assert rejected > 0
    assert collected == 0


def test_the_collector_comes_back_as_it_was() -> None:
    assert gc.isenabled()
    generate_shard("maze", MAZE_40, 3, 0, 2)
    assert gc.isenabled()
    gc.disable()
    try:
        generate_shard("maze", MAZE_40, 3, 0, 2)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
