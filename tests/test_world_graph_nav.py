"""GraphNav: world sizes, the door structure, solver, dependencies, branching, observation
modes, mutation, error labels, determinism and speed."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from math import isqrt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.base import (
    MUTATION_RATES,
    REGIMES,
    Action,
    Environment,
    Fact,
    StressSpec,
    episode_seed,
    format_action,
    parse_action,
    parse_facts,
)
from horizonbench.datasets.worlds.graph_nav import (
    ARCHETYPES,
    DOORS_TABLE,
    MAX_OBJECT_ROOMS,
    VERBS,
    GraphNav,
    World,
    build_world,
    door_count,
)
from world_helpers import hash_seed_digests, make_env, replay, run_policy, search, trace

GRID_SC = (5, 10, 20, 40)
GRID_DD = (1, 2, 4, 6)


# every test starts from a reset GraphNav on a long horizon
make = partial(make_env, GraphNav)


def entities(env: GraphNav) -> Mapping[str, tuple[str, ...]]:
    return env._task.entities  # noqa: SLF001


def action_space(env: GraphNav) -> list[Action]:
    """Every well-formed action of the world (right verbs, arities and kinds)."""
    names = entities(env)
    items = names["key"] + names["decoy"]
    kinds = {
        "go": [names["room"]],
        "take": [items],
        "drop": [items],
        "toggle": [names["switch"]],
        "unlock": [names["door"]],
        "examine": [items + names["switch"] + names["door"]],
        "noop": [],
    }
    return [(verb, *args) for verb, arg_lists in kinds.items() for args in itertools.product(*arg_lists)]


def agent_room(env: GraphNav) -> str:
    return next(f[2] for f in env.gold_state() if f[:2] == ("at", "agent"))


def reachable(world: World, start: str, open_doors: Iterable[str]) -> set[str]:
    """The rooms reachable from ``start`` through passages and the doors given."""
    open_doors = set(open_doors)
    seen = {start}
    queue = deque([start])
    while queue:
        r = queue.popleft()
        for s, d in world.links[r]:
            if s not in seen and (d is None or d in open_doors):
                seen.add(s)
                queue.append(s)
    return seen


def walk_to(env: GraphNav, room: str) -> None:
    """Step along a shortest path of passages and unlocked doors to ``room``."""
    w = env.world
    gold = set(env.gold_state())
    here = agent_room(env)
    back: dict[str, str | None] = {here: None}
    queue = deque([here])
    while queue:
        r = queue.popleft()
        for s, d in w.links[r]:
            if s not in back and (d is None or ("unlocked", d) in gold):
                back[s] = r
                queue.append(s)
    path = []
    while room != here:
        path.append(("go", room))
        room = back[room]  # type: ignore[assignment]
    replay(env, reversed(path))


def through(plan: tuple[Action, ...], door: str) -> tuple[Action, ...]:
    """The prefix of ``plan`` up to and including the unlocking of ``door``."""
    return plan[: plan.index(("unlock", door)) + 1]


# --- the contract --------------------------------------------------------------------


def test_graph_nav_keeps_the_environment_contract() -> None:
    env = make(10, 2)
    assert isinstance(env, Environment)
    assert GraphNav.name == "graph_nav" and env.spec.sc == 10
    assert {"nonexistent_edge", "missing_key", "stale_inventory", "unknown_action"} <= set(
        GraphNav.error_labels
    )
    assert len(set(GraphNav.error_labels)) == len(GraphNav.error_labels)
    assert set(GraphNav.verbs) == {"go", "take", "drop", "toggle", "unlock", "examine", "noop"}
    assert GraphNav.sc_kinds == ("room",)
    assert env.preconditions(("fly", "room1")) is None and env.preconditions(("noop",)) == frozenset()
    with pytest.raises(TypeError):
        GraphNav({"sc": 10, "dd": 2})  # type: ignore[arg-type]


# --- state cardinality ----------------------------------------------------------------


def test_door_table_rule() -> None:
    assert set(DOORS_TABLE) == set(range(3, 61))
    for sc, k in DOORS_TABLE.items():
        assert k == max(1, isqrt(sc)) == door_count(sc) and k + 1 <= sc
    assert [DOORS_TABLE[sc] for sc in (3, 4, 8, 9, 15, 16, 24, 25, 35, 36, 48, 49, 60)] == [
        1,
        2,
        2,
        3,
        3,
        4,
        4,
        5,
        5,
        6,
        6,
        7,
        7,
    ]
    for bad in (2, 61, 10.0, True):
        with pytest.raises(ValueError, match="^sc:"):
            door_count(bad)  # type: ignore[arg-type]


def test_sc_is_the_room_count_and_every_sc_builds_its_own_world() -> None:
    worlds = set()
    for sc in range(3, 61):
        env = GraphNav(REGIMES["III"].spec(sc=sc, dd=1).replace(horizon=10_000))
        _, task = env.reset(episode_seed(0, ("sc", sc, "dd", 1), 0, 0), sc % 10)
        w = env.world
        assert len(task.entities["room"]) == len(w.rooms) == sc == task.extra["rooms"]
        assert len(task.entities["door"]) == len(task.subgoals) == DOORS_TABLE[sc]
        assert sum(task.extra["regions"]) == sc and min(task.extra["regions"]) >= 1
        worlds.add(env.gold_state())
        results = replay(env, env.optimal_plan())
        assert results[-1].success and results[-1].done
        assert task.optimal_length == len(env.optimal_plan())
    assert len(worlds) == 58
    # the reference code's collisions: 10/11 and 16/17 built the same world
    for a, b in ((10, 11), (16, 17)):
        ga, gb = (make(sc, 2, seed=5, archetype=0).gold_state() for sc in (a, b))
        assert ga != gb
        assert len({f[1] for f in ga if f[0] == "passage"} | {f[2] for f in ga if f[0] == "passage"}) <= a


def test_study_grid_plans_win_and_horizon_shortfalls_are_flagged() -> None:
    short = 0
    for sc, dd, archetype in itertools.product(GRID_SC, GRID_DD, range(10)):
        spec = REGIMES["III"].spec(sc=sc, dd=dd)
        env = GraphNav(spec.replace(horizon=10_000))
        seed = episode_seed(0, spec, archetype, 0)
        env.reset(seed, archetype)
        plan = env.optimal_plan()
        assert replay(env, plan)[-1].success
        _, task40 = GraphNav(spec).reset(seed, archetype)
        assert task40.optimal_length == len(plan) and task40.horizon == 40
        assert task40.horizon_short == (len(plan) > 40)
        short += task40.horizon_short
    assert 0 < short < 160  # at T=40 the largest cells cannot be won: the pipeline must know


@settings(max_examples=60, deadline=None)
@given(
    sc=st.integers(3, 60),
    dd=st.integers(1, 12),
    archetype=st.integers(0, 9),
    seed=st.integers(0, 2**62),
    branching=st.sampled_from([1, 2, 3, 4, 8, 16]),
)
def test_any_world_is_won_by_its_plan(sc: int, dd: int, archetype: int, seed: int, branching: int) -> None:
    env = make(sc, dd, seed, archetype, branching=branching)
    plan = env.optimal_plan()
    results = replay(env, plan)
    assert results[-1].success and not any(r.success for r in results[:-1])
    assert set(env._task.goal) <= set(results[-1].gold)  # noqa: SLF001
    # L* = walking + one action per requirement + one unlock per door
    k = DOORS_TABLE[sc]
    assert sum(a[0] in ("take", "toggle") for a in plan) == k * dd
    assert sum(a[0] == "unlock" for a in plan) == k and len(plan) == env._task.optimal_length  # noqa: SLF001


# --- the door structure ---------------------------------------------------------------


def test_regions_are_joined_only_by_their_doors() -> None:
    for sc, archetype, seed in itertools.product(range(3, 61), range(10), range(2)):
        w = build_world(sc, 2, seed, archetype)
        k = len(w.doors)
        assert len(w.regions) == k + 1 and sorted(r for m in w.regions for r in m) == sorted(w.rooms)
        for a, b in w.passages:
            assert w.region_of[a] == w.region_of[b]  # passages stay inside a region
        for i, members in enumerate(w.regions):
            assert reachable(w, members[0], ()) == set(members)  # a region is connected
            assert w.entrances[i] in members
        for j, d in enumerate(w.doors, start=1):
            assert 0 <= w.parents[j] < j
            assert w.region_of[w.near[d]] == w.parents[j] and w.far[d] == w.entrances[j] == w.regions[j][0]
            assert set(w.ends[d]) == {w.near[d], w.far[d]}
        assert w.region_of[w.start_room] == 0 and w.region_of[w.goal_room] == k


def test_the_goal_is_behind_a_chain_of_locked_doors() -> None:
    """Without door k the goal is out of reach, and without door j-1 so are the objects
    of door j: every door is on every way to the goal."""
    for sc, archetype, seed in itertools.product(range(3, 61), range(10), range(2)):
        w = build_world(sc, 3, seed, archetype)
        every = set(w.doors)
        assert w.goal_room not in reachable(w, w.start_room, ())
        assert w.goal_room not in reachable(w, w.start_room, every - {w.doors[-1]})
        assert w.goal_room in reachable(w, w.start_room, every)
        for j, d in enumerate(w.doors):
            places = {w.place[o] for o in w.objects[d]}
            assert {w.region_of[p] for p in places} == {j}  # door j+1 (1-based) uses region j
            assert len(places) <= MAX_OBJECT_ROOMS
            if j:
                cut = reachable(w, w.start_room, every - {w.doors[j - 1]})
                assert not places & cut


# --- the solver is optimal ------------------------------------------------------------


SMALL = [(sc, dd, a) for sc in range(3, 10) for dd in (1, 2) for a in (sc % 10, (sc + 5) % 10)] + [
    (5, 3, 2),
    (6, 3, 7),
    (7, 3, 4),
    (10, 1, 8),
]


@pytest.mark.parametrize(("sc", "dd", "archetype"), SMALL)
def test_solver_length_equals_breadth_first_search(sc: int, dd: int, archetype: int) -> None:
    env = make(sc, dd, seed=sc * 31 + dd, archetype=archetype, branching=1)
    assert search(env) == len(env.optimal_plan())


# --- dependency density ---------------------------------------------------------------


def test_dd_is_the_number_of_distinct_requirements_per_door() -> None:
    for sc, dd, archetype in itertools.product(GRID_SC, GRID_DD, range(0, 10, 3)):
        env = make(sc, dd, seed=5, archetype=archetype)
        _, task = env.reset(5, archetype)
        gold = set(env.gold_state())
        everything = []
        for j, sg in enumerate(task.subgoals):
            assert sg.name == f"door{j + 1}" and sg.target == ("unlocked", sg.name)
            assert sg.after == (f"door{j}" if j else None)
            assert len(sg.preconditions) == dd == len(sg.enablers)
            assert not set(sg.preconditions) & gold and ("locked", sg.name) in gold
            everything += sg.preconditions
            for fact, enabler in zip(sg.preconditions, sg.enablers, strict=True):
                assert {"held": "take", "on": "toggle"}[fact[0]] == enabler[0] and fact[1] == enabler[1]
            assert set(sg.sealed) == (set(env.world.objects[sg.name]) if j else set())
        assert len(everything) == len(set(everything)) == dd * len(task.subgoals)
        requires = {("requires", sg.name, *p) for sg in task.subgoals for p in sg.preconditions}
        assert requires <= set(task.facts)
        kinds = {p[0] for sg in task.subgoals for p in sg.preconditions}
        if dd >= 3:
            assert kinds == {"held", "on"}


@settings(max_examples=40, deadline=None)
@given(sc=st.integers(3, 60), dd=st.integers(1, 11), archetype=st.integers(0, 9), seed=st.integers(0, 2**62))
def test_one_more_dependency_adds_one_object_per_door_and_lengthens_the_plan(
    sc: int, dd: int, archetype: int, seed: int
) -> None:
    a, b = build_world(sc, dd, seed, archetype), build_world(sc, dd + 1, seed, archetype)
    layout = ("rooms", "regions", "passages", "ends", "near", "start_room", "goal_room")
    assert all(getattr(a, f) == getattr(b, f) for f in layout)  # the same map
    for d in a.doors:
        was = [(p, a.place[x]) for p, x in a.requires[d]]
        now = [(p, b.place[x]) for p, x in b.requires[d]]
        assert now[:dd] == was and len(now) == dd + 1
    la, lb = (len(make(sc, x, seed, archetype).optimal_plan()) for x in (dd, dd + 1))
    assert lb >= la + len(a.doors)
    assert make(sc, dd, seed, archetype).gold_state() != make(sc, dd + 1, seed, archetype).gold_state()


def test_more_dependencies_and_more_rooms_make_longer_plans() -> None:
    table = {}
    for sc, dd in itertools.product(GRID_SC, GRID_DD):
        lengths = [len(make(sc, dd, seed=v, archetype=v).optimal_plan()) for v in range(10)]
        table[sc, dd] = sum(lengths) / len(lengths)
    for sc in GRID_SC:
        row = [table[sc, dd] for dd in GRID_DD]
        assert all(x < y for x, y in itertools.pairwise(row)), (sc, row)
    for dd in GRID_DD:
        column = [table[sc, dd] for sc in GRID_SC]
        assert all(x < y for x, y in itertools.pairwise(column)), (dd, column)


NEEDED = [(5 + a % 4, 2, a, a) for a in range(10)]


@pytest.mark.parametrize(("sc", "dd", "seed", "archetype"), NEEDED)
def test_every_requirement_is_needed_on_every_solution(sc: int, dd: int, seed: int, archetype: int) -> None:
    env = make(sc, dd, seed, archetype, branching=1)
    _, task = env.reset(seed, archetype)
    assert search(env) == len(env.optimal_plan())
    for sg in task.subgoals:
        for fact, enabler in zip(sg.preconditions, sg.enablers, strict=True):
            assert search(env, forbid=[enabler]) is None, (sg.name, fact, enabler)


def test_the_needed_requirements_cover_keys_and_switches() -> None:
    kinds = {
        p[0]
        for sc, dd, seed, a in NEEDED
        for d, ps in build_world(sc, dd, seed, a).requires.items()
        for p in ps
    }
    assert kinds == {"held", "on"}


def test_skipping_an_enabler_loses_big_worlds_too() -> None:
    for sc, dd in ((20, 4), (40, 6)):
        env = make(sc, dd, seed=3, archetype=4)
        plan = env.optimal_plan()
        _, task = env.reset(3, 4)
        for sg in task.subgoals[:2]:
            for fact, enabler in zip(sg.preconditions, sg.enablers, strict=True):
                env.reset(3, 4)
                crippled = [a for a in plan if a != enabler]
                results = dict(zip(crippled, (env.step(a) for a in crippled), strict=True))
                assert not any(r.success for r in results.values())
                unlock = results[("unlock", sg.name)]
                assert not unlock.valid and fact in unlock.unmet and unlock.error == "missing_key"


# --- branching ------------------------------------------------------------------------


def test_branching_adds_valid_actions_not_plan_length() -> None:
    for sc, dd, archetype in ((5, 1, 0), (10, 2, 3), (20, 4, 6), (40, 1, 9), (60, 3, 1)):
        means, plans, previous = [], set(), None
        for b in (1, 2, 3, 4, 8, 16):
            env = make(sc, dd, seed=11, archetype=archetype, branching=b)
            assert len(env.decoys) == (b - 1) * (DOORS_TABLE[sc] + 1)
            plan = env.optimal_plan()
            plans.add(plan)
            counts = [len(env.valid_actions())]
            for action in plan[:-1]:
                env.step(action)
                counts.append(len(env.valid_actions()))
            if previous is not None:
                assert all(x >= y for x, y in zip(counts, previous, strict=True))  # never fewer choices
            previous = counts
            means.append(sum(counts) / len(counts))
        assert len(plans) == 1  # the same world and the same L* at every branching level
        assert all(a < b for a, b in itertools.pairwise(means)), means


def test_decoys_open_nothing() -> None:
    """A decoy can be taken, examined and dropped, is in no requirement, and does not
    change the shortest solution (checked by search over the real dynamics)."""
    for sc, dd, archetype in ((4, 1, 0), (5, 1, 3), (6, 1, 5)):
        bare = make(sc, dd, seed=2, archetype=archetype, branching=1)
        env = make(sc, dd, seed=2, archetype=archetype, branching=2)
        assert env.optimal_plan() == bare.optimal_plan()
        assert search(env) == search(bare) == len(env.optimal_plan())
        decoy, room = sorted(env.decoys.items())[0]
        assert all(decoy not in f for sg in env._task.subgoals for f in sg.preconditions)  # noqa: SLF001
        walk_to(env, room)
        replay(env, [("take", decoy), ("examine", decoy), ("drop", decoy)])


# --- actions and labels ---------------------------------------------------------------


def _random_states(env: GraphNav, seed: int, steps: int) -> Iterator[None]:
    rng = random.Random(seed)
    space = action_space(env)
    plan = list(env.optimal_plan())
    for _ in range(steps):
        if env.done:
            return
        yield None
        r = rng.random()
        if plan and r < 0.4:
            env.step(plan.pop(0))
        elif r < 0.85:
            env.step(rng.choice(env.valid_actions()))
        else:
            env.step(rng.choice(space))


def test_valid_actions_are_exactly_the_actions_whose_preconditions_hold() -> None:
    for sc, dd, archetype in ((6, 2, 1), (10, 2, 2), (12, 3, 7), (20, 2, 3)):
        env = make(sc, dd, seed=sc, archetype=archetype, branching=3, mutation="medium")
        space = action_space(env)
        for _ in _random_states(env, seed=sc, steps=80):
            gold = set(env.gold_state())
            expected = sorted(a for a in space if env.preconditions(a) <= gold)
            assert list(env.valid_actions()) == expected
            snap = env.snapshot()
            for action in random.Random(len(gold)).sample(space, 12):
                env.restore(snap)
                pre = env.preconditions(action)
                result = env.step(action)
                assert result.valid == (action in expected)
                assert set(result.unmet) == pre - gold
                assert (result.error is None) == result.valid
            env.restore(snap)


def test_valid_actions_read_back_from_their_text() -> None:
    env = make(20, 2, seed=4, archetype=5, branching=4)
    for action in env.valid_actions() + tuple(action_space(env)[:300]):
        assert parse_action(format_action(action), VERBS) == action
    assert parse_facts("\n".join(f"{f[0]}({', '.join(f[1:])})" for f in env.gold_state())) == list(
        env.gold_state()
    )


def test_invalid_actions_are_labelled_and_change_nothing() -> None:
    seen: set[str] = set()
    for seed, archetype in itertools.product(range(6), range(10)):
        env = make(10, 2, seed, archetype)
        w = env.world
        plan = env.optimal_plan()
        here = w.start_room

        def expect(action: object, label: str, env: GraphNav = env) -> None:
            before = env.gold_state()
            result = env.step(action)  # type: ignore[arg-type]
            assert not result.valid and result.error == label, (action, result.error, result.unmet)
            assert result.gold == before
            seen.add(label)

        # the graph has no such way
        expect(("go", here), "nonexistent_edge")
        far = [r for r in w.rooms if r != here and all(s != r for s, _ in w.links[here])]
        expect(("go", far[0]), "nonexistent_edge")
        away = [d for d in w.doors if here not in w.ends[d]]
        if away:
            expect(("unlock", away[0]), "nonexistent_edge")
            expect(("examine", away[0]), "nonexistent_edge")
        # not an action of this world
        for bad in (("fly", here), ("go",), ("go", "room99"), ("take", here), ("noop", "x"), "go(room1)", 42):
            expect(bad, "unknown_action")
        expect(("toggle", w.doors[0]), "unknown_action")
        expect(("unlock", "door99"), "unknown_action")
        # objects that are elsewhere and never were where the action needs them
        elsewhere = [o for o in (*w.keys, *w.switches) if w.place[o] != here]
        expect(("take" if elsewhere[0] in w.keys else "toggle", elsewhere[0]), "object_not_here")
        expect(("drop", w.keys[0]) if w.keys else ("examine", elsewhere[0]), "object_not_here")
        # the lock stops the agent: unlock without the requirements, go through a locked door
        d1 = w.doors[0]
        walk_to(env, w.near[d1])
        expect(("unlock", d1), "missing_key")
        expect(("go", w.far[d1]), "missing_key")
        # stale inventory: a key that was taken, then dropped and left behind
        keys1 = [x for x in w.objects[d1] if x in w.keys]
        if keys1:
            key = keys1[0]
            walk_to(env, w.place[key])
            replay(env, [("take", key)])
            expect(("take", key), "stale_inventory")  # already in hand
            replay(env, [("drop", key)])
            expect(("drop", key), "stale_inventory")
            walk_to(env, w.near[d1])
            expect(("unlock", d1), "stale_inventory")
            if w.near[d1] != w.place[key]:
                expect(("take", key), "stale_inventory")
        env.reset(seed, archetype)
        replay(env, through(plan, d1))
        expect(("unlock", d1), "already_unlocked")
        for key in keys1:
            expect(("drop", key), "stale_inventory")  # it stayed in the lock
        assert env.step(("noop",)).valid
    assert seen == set(GraphNav.error_labels)


def _stale_by_history(fact: Fact, held_before: set[str], lay_before: set[tuple[str, str]]) -> bool:
    return fact[1] in held_before or (fact[0] == "at" and (fact[1], fact[2]) in lay_before)


def _expected_label(
    action: Action, unmet: tuple[Fact, ...], kinds: Mapping[str, str], held_before: set, lay_before: set
) -> str:
    """The label of the module docstring, computed from the gold history of a run."""
    found = set()
    for f in unmet:
        if f[0] == "passage" or f[:2] == ("at", "agent"):
            found.add("nonexistent_edge")
        elif f[0] == "locked":
            found.add("already_unlocked")
        elif f[0] in ("held", "at") and kinds[f[1]] in ("key", "decoy"):
            if _stale_by_history(f, held_before, lay_before):
                found.add("stale_inventory")
            else:
                found.add("missing_key" if action[0] == "unlock" else "object_not_here")
        elif f[0] in ("on", "unlocked"):
            found.add("missing_key")
        else:
            found.add("object_not_here")
    order = ("nonexistent_edge", "already_unlocked", "stale_inventory", "missing_key", "object_not_here")
    return next(label for label in order if label in found)


def _remember(gold: Iterable[Fact], kinds: Mapping[str, str], held: set, lay: set) -> None:
    """Add a gold state's held items and items on floors to the run's history."""
    for f in gold:
        if f[0] == "held":
            held.add(f[1])
        elif f[0] == "at" and kinds.get(f[1]) in ("key", "decoy"):
            lay.add((f[1], f[2]))


def test_labels_follow_their_definitions_on_random_runs() -> None:
    counts: dict[str, int] = {}
    for seed in range(16):
        env = make(12, 3, seed, archetype=seed % 10, mutation="high", branching=3)
        kinds = {n: kind for kind, names in entities(env).items() for n in names}
        held_before: set[str] = set()
        lay_before: set[tuple[str, str]] = set()
        _remember(env.gold_state(), kinds, held_before, lay_before)
        rng = random.Random(seed)
        space = action_space(env)
        plan = list(env.optimal_plan())
        for _ in range(400):
            if env.done:
                break
            r = rng.random()
            if plan and r < 0.35:
                action = plan.pop(0)  # progress, so doors open and keys go into locks
            else:
                action = rng.choice(space) if r < 0.7 else rng.choice(env.valid_actions())
            result = env.step(action)
            if not result.valid:
                want = _expected_label(action, result.unmet, kinds, held_before, lay_before)
                assert result.error == want, (action, result.unmet, result.error)
                counts[want] = counts.get(want, 0) + 1
            elif action[0] == "take":  # held, even if it slipped again before the agent looked
                held_before.add(action[1])
            _remember(result.gold, kinds, held_before, lay_before)
    assert set(counts) == set(GraphNav.error_labels) - {"unknown_action"}, counts


def test_the_horizon_ends_an_episode_without_success() -> None:
    env = GraphNav(StressSpec(sc=10, dd=2, horizon=5))
    _, task = env.reset(1, 0)
    assert task.horizon_short and task.horizon_ratio < 1
    results = [env.step(("noop",)) for _ in range(5)]
    assert [r.done for r in results] == [False] * 4 + [True]
    assert not results[-1].success and "out of steps" in results[-1].observation.message
    assert env.t == 5 and env.done
    with pytest.raises(RuntimeError, match="over"):
        env.step(("noop",))
    with pytest.raises(RuntimeError, match="reset"):
        GraphNav(StressSpec(sc=10, dd=2)).step(("noop",))
    with pytest.raises(ValueError, match="^archetype:"):
        env.reset(1, 10)
    with pytest.raises(ValueError, match="^seed:"):
        env.reset(-1, 0)


def test_entering_the_goal_room_wins_at_once() -> None:
    env = make(20, 2, seed=6, archetype=6)
    plan = env.optimal_plan()
    results = replay(env, plan)
    assert plan[-1] == ("go", env.world.goal_room)
    assert [r.success for r in results].index(True) == len(plan) - 1
    assert "goal reached" in results[-1].observation.message and env.done
    assert env._task.goal == (("at", "agent", env.world.goal_room),)  # noqa: SLF001


# --- observation modes ----------------------------------------------------------------


def test_clean_observations_are_the_gold_state() -> None:
    env = make(20, 4, seed=2, archetype=1, observation="clean", mutation="medium")
    for r in run_policy(env, 1):
        assert r.observation.facts == r.gold and r.observation.injected == ()
        assert env.observable_gold() == frozenset(r.gold)


def test_partial_observations_hide_state_never_the_task() -> None:
    env = GraphNav(StressSpec(sc=20, dd=4, horizon=10_000, observation="partial"))
    first, task = env.reset(2, 1)
    assert first.facts == env.gold_state() and first.task == task.facts  # the briefing
    requires = {("requires", sg.name, *p) for sg in task.subgoals for p in sg.preconditions}
    assert requires <= set(task.facts) and ("goal", "at", "agent", env.world.goal_room) in task.facts
    smaller = 0
    for r in run_policy(env, 2, steps=300):
        obs = r.observation
        assert obs.task == task.facts and obs.injected == ()
        assert set(obs.facts) <= set(r.gold)  # partial hides, never lies
        here = agent_room(env)
        assert ("at", "agent", here) in obs.facts
        local = {f for f in r.gold if f[0] == "at" and f[2] == here} | {f for f in r.gold if f[0] == "held"}
        assert local <= set(obs.facts)  # the agent's room and hands are always in sight
        smaller += len(obs.facts) < len(r.gold)
        # without mutation, what the agent saw and did tells it the whole world
        assert env.observable_gold() == frozenset(r.gold)
    assert smaller > 0


def test_partial_observation_with_mutation_loses_track_of_unseen_rooms() -> None:
    lost = 0
    for seed in range(6):
        env = make(20, 2, seed, archetype=seed, observation="partial", mutation="high")
        for r in run_policy(env, seed, steps=120):
            known = env.observable_gold()
            assert known <= frozenset(r.gold)
            lost += len(known) < len(r.gold)
    assert lost > 0


def test_examining_a_door_shows_its_switches_wherever_they_are() -> None:
    shown = 0
    for seed in range(30):
        env = make(20, 3, seed, archetype=seed % 10, observation="partial")
        w = env.world
        d = w.doors[0]
        plan = through(env.optimal_plan(), d)[:-1]  # everything done, not yet unlocked
        replay(env, plan)
        remote = {("on", s) for p, s in w.requires[d] if p == "on" and w.place[s] != agent_room(env)}
        if not remote:
            continue
        looked = env.step(("noop",)).observation.facts
        assert not remote & set(looked)
        examined = env.step(("examine", d))
        assert examined.valid and remote <= set(examined.observation.facts)
        assert not remote & set(env.step(("noop",)).observation.facts)
        shown += 1
    assert shown > 5


def test_distractors_mention_only_entities_that_do_not_exist() -> None:
    env = make(10, 2, seed=3, archetype=2, observation="distractor", mutation="low")
    names = {n for kind in entities(env).values() for n in kind} | {"agent"}
    results = list(run_policy(env, 3))
    for r in results:
        injected = set(r.observation.injected)
        assert injected and injected <= set(r.observation.facts)
        assert set(r.observation.facts) - injected == set(r.gold)
        for fact in injected:
            assert not set(fact[1:]) & names, fact
        assert not env.invariant_violations(r.gold)
        assert env.invariant_violations(injected)  # an agent that adopts them is caught
    # the phantom building is persistent: its facts never contradict each other
    phantom = set().union(*(r.observation.injected for r in results))
    assert not [p for p in env.invariant_violations(phantom) if "two places" in p or "both" in p]
    phantom_rooms = {a for f in phantom for a in f[1:] if a.startswith("room")}
    for room in phantom_rooms:
        assert env.step(("go", room)).error == "unknown_action"


def test_conflicts_contradict_an_earlier_observation() -> None:
    env = make(20, 2, seed=4, archetype=3, observation="conflict", mutation="medium")
    conflicts = 0
    previous = set(env.gold_state())
    for r in run_policy(env, 4, steps=150):
        obs = r.observation
        assert len(obs.injected) <= 1
        assert set(obs.facts) - set(obs.injected) == set(r.gold)
        for lie in obs.injected:
            conflicts += 1
            slot = env.slot(lie)
            assert lie not in r.gold and slot is not None
            earlier = [f for f in previous if env.slot(f) == slot]
            assert earlier and lie not in earlier  # the previous observation showed another value
        previous = set(obs.facts) - set(obs.injected)
    assert conflicts > 30


def test_the_conflict_briefing_tells_the_truth_and_later_observations_lie() -> None:
    """A conflict contradicts what an *earlier* observation showed, so the briefing
    (t = 0) has none to contradict: it is the gold state, with nothing injected, for
    every world; later observations do lie (about half of them, at CONFLICT_RATE)."""
    lied_later = 0
    for seed in range(24):
        env = GraphNav(StressSpec(sc=10 + seed % 3, dd=2, horizon=200, observation="conflict"))
        obs, _ = env.reset(seed, seed % 10)
        assert obs.injected == () and obs.facts == env.gold_state(), seed
        lied_later += any(r.observation.injected for r in run_policy(env, seed, steps=6))
    assert lied_later >= 12


# --- mutation -------------------------------------------------------------------------


def started(sc: int, dd: int, seed: int, archetype: int, steps: int, **axes: object) -> GraphNav:
    """An episode (any axes) restored to the state after the first ``steps`` actions of
    its optimal plan, played in the same world without mutation."""
    static = make(sc, dd, seed, archetype, branching=axes.get("branching", 4))
    replay(static, static.optimal_plan()[:steps])
    env = make(sc, dd, seed, archetype, **axes)
    env.restore(static.snapshot())
    return env


def test_static_worlds_never_change_by_themselves_and_mutation_counts_grow() -> None:
    counts = {}
    for level in ("static", "low", "medium", "high"):
        changed = 0
        for seed in range(4):
            plan = make(20, 4, seed, archetype=seed).optimal_plan()
            # switches on, keys in hand
            env = started(20, 4, seed, seed, plan.index(("unlock", "door1")), mutation=level)
            for _ in range(300):
                before = env.gold_state()
                r = env.step(("noop",))
                if level == "static":
                    assert r.gold == before and not r.events
                changed += r.gold != before
                assert bool(r.events) == (r.gold != before)
        counts[level] = changed
    assert counts["static"] == 0 < counts["low"] < counts["medium"] < counts["high"], counts
    assert MUTATION_RATES["low"] < MUTATION_RATES["high"]


def test_mutations_never_achieve_anything_and_keep_the_task_solvable() -> None:
    kinds_seen: set[str] = set()
    for seed in range(10):
        half = len(make(6 + seed % 3, 2, seed, archetype=seed).optimal_plan()) // 2
        env = started(6 + seed % 3, 2, seed, seed, half, mutation="high", branching=1)
        w = env.world
        for _ in range(40):
            before = set(env.gold_state())
            r = env.step(("noop",))
            new = set(r.gold) - before
            assert len(new) <= 1
            for f in new:  # a switch turned off or a key put on a floor, nothing else
                assert f[0] == "off" or (f[0] == "at" and f[1] in w.keys), f
                kinds_seen.add(f[0])
                if f[0] == "at":
                    old = next(g for g in before - set(r.gold) if g[1] == f[1])
                    if old[0] == "at":
                        assert w.region_of[old[2]] == w.region_of[f[2]]  # it stays in its region
                    else:
                        assert old == ("held", f[1]) and f[2] == agent_room(env)  # it slipped here
        static = make(6 + seed % 3, 2, seed, archetype=seed, branching=1)  # the same world, no mutation
        static.restore(env.snapshot())
        assert static.gold_state() == env.gold_state()
        assert search(static) is not None
    assert kinds_seen == {"off", "at"}


# --- determinism ----------------------------------------------------------------------


def test_the_same_seed_gives_the_same_episode() -> None:
    for mode in ("clean", "partial", "distractor", "conflict"):
        spec = StressSpec(sc=20, dd=4, horizon=60, observation=mode, mutation="high")
        assert trace(GraphNav, spec, 77, 5, 1) == trace(GraphNav, spec, 77, 5, 1)
        assert trace(GraphNav, spec, 77, 5, 1) != trace(GraphNav, spec, 78, 5, 1)


def test_archetypes_and_variants_give_different_worlds() -> None:
    spec = StressSpec(sc=10, dd=2)
    worlds = {}
    for archetype, variant in itertools.product(range(10), range(10)):
        env = GraphNav(spec)
        env.reset(episode_seed(0, spec, archetype, variant), archetype)
        worlds[archetype, variant] = env.gold_state()
    assert len(set(worlds.values())) == 100
    assert len({(a.regions, a.rooms) for a in ARCHETYPES}) == 10
    assert len({a.regions for a in ARCHETYPES}) >= 6
    # the region layouts really differ: the parent trees of a 7-door world
    parents = {build_world(60, 1, 0, a).parents for a in range(10) if ARCHETYPES[a].regions != "tree"}
    assert len(parents) >= 6


_DIGEST = """
import hashlib
from horizonbench.datasets.worlds.base import StressSpec
from horizonbench.datasets.worlds.graph_nav import GraphNav
h = hashlib.sha256()
for mode in ("partial", "distractor", "conflict"):
    env = GraphNav(StressSpec(sc=20, dd=4, horizon=200, branching=5, observation=mode, mutation="high"))
    obs, task = env.reset(12345, 7)
    h.update(repr((obs.facts, task.facts, task.text, env.optimal_plan())).encode())
    for i in range(150):
        if env.done:
            break
        acts = env.valid_actions()
        r = env.step(acts[(i * 7) % len(acts)])
        seen = sorted(env.observable_gold())
        h.update(repr((r.observation.facts, r.gold, r.error, r.events, seen)).encode())
print(h.hexdigest())
"""


def test_episodes_do_not_depend_on_hash_randomisation() -> None:
    assert len(hash_seed_digests(_DIGEST)) == 1


# --- agent-written states -------------------------------------------------------------


def test_invariant_violations() -> None:
    env = make(10, 2, seed=1, archetype=0)
    gold = env.gold_state()
    assert env.invariant_violations(gold) == []
    assert env.invariant_violations([*gold, *env._task.facts]) == []  # noqa: SLF001 - the spec is no clash
    w = env.world
    key, door, switch = (w.keys or ("key1",))[0], w.doors[0], (w.switches or ("switch1",))[0]
    if w.keys:
        assert any(f"{key} is in two places" in p for p in env.invariant_violations([*gold, ("held", key)]))
    assert any(
        f"{door} is both locked and unlocked" in p
        for p in env.invariant_violations([*gold, ("unlocked", door)])
    )
    if w.switches:
        assert any(
            f"{switch} is both on and off" in p for p in env.invariant_violations([*gold, ("on", switch)])
        )
    assert any("two places" in p for p in env.invariant_violations([*gold, ("at", "agent", w.goal_room)]))
    assert any("no entity" in p for p in env.invariant_violations([("at", "key99", "room1")]))
    assert any("unknown predicate" in p for p in env.invariant_violations([("flying", door)]))
    assert any("is a door" in p for p in env.invariant_violations([("at", "agent", door)]))
    assert any("takes 1" in p for p in env.invariant_violations([("locked", door, "now")]))
    assert any("not a tuple" in p for p in env.invariant_violations(["locked(door1)"]))
    assert any("to itself" in p for p in env.invariant_violations([("passage", "room1", "room1")]))
    a, b = w.passages[0]
    assert env.normalize([("passage", b, a)]) == {("passage", a, b)}
    x, y = w.ends[door]
    assert env.normalize([("door", door, y, x)]) == {("door", door, x, y)}
    assert env.invariant_violations([("passage", b, a)]) == []


def test_snapshots_restore_the_whole_episode() -> None:
    env = started(20, 2, 8, 8, 10, observation="conflict", mutation="high")
    list(run_policy(env, 3, steps=10))
    snap = env.snapshot()
    a = [(r.gold, r.observation.facts, r.events, r.error) for r in run_policy(env, 5, steps=30)]
    env.restore(snap)
    b = [(r.gold, r.observation.facts, r.events, r.error) for r in run_policy(env, 5, steps=30)]
    assert a == b
    other = make(20, 2, seed=9, archetype=8)
    with pytest.raises(ValueError, match="another episode"):
        other.restore(snap)
    wider = make(20, 2, seed=8, archetype=8, branching=6)
    with pytest.raises(ValueError, match="another episode"):
        wider.restore(snap)


def test_task_text_states_the_goal_every_requirement_and_the_syntax() -> None:
    env = GraphNav(REGIMES["II"].spec())
    _, task = env.reset(3, 3)
    w = env.world
    assert f"reach {w.goal_room}" in task.text
    for sg in task.subgoals:
        assert sg.name in task.text
        for p in sg.preconditions:
            assert f"{p[0]}({', '.join(p[1:])})" in task.text
    for verb, arity in VERBS.items():
        assert (f"{verb}(" if arity else verb) in task.text
    assert "You have 40 steps." in task.text
    assert task.env == "graph_nav" and task.extra["rooms"] == 10 and task.extra["doors"] == 3
    assert set(task.entities) == {"room", "door", "key", "switch", "decoy"}
    assert len(task.entities["decoy"]) == 3 * 4  # branching 4: three per region


def test_the_oracle_agent_wins_in_every_observation_mode() -> None:
    from horizonbench.datasets.worlds.agents import OracleAgent
    from horizonbench.datasets.worlds.episode import EpisodeSpec, run_episode

    for mode in ("clean", "partial", "distractor", "conflict"):
        spec = StressSpec(sc=20, dd=4, horizon=200, observation=mode)
        seed = episode_seed(0, spec, 2, 0)
        result = run_episode(GraphNav(spec), OracleAgent(), EpisodeSpec("graph_nav", spec, seed, 2, 0))
        row = result.episode
        assert row["success"] and row["invalid_actions"] == 0 and row["mean_jaccard"] == 1.0, row


# --- speed ----------------------------------------------------------------------------


def test_steps_are_cheap() -> None:
    """Prints env steps per second on a random valid-action walk (run with -s to see);
    asserts only a generous liveness bound."""
    for mode in ("clean", "partial", "distractor", "conflict"):
        env = make(20, 4, seed=1, archetype=1, observation=mode, mutation="medium", horizon=100_000)
        rng = random.Random(0)
        n, stepping = 0, 0.0
        start = time.perf_counter()
        while n < 10_000:
            actions = env.valid_actions()
            action = actions[int(rng.random() * len(actions))]
            t0 = time.perf_counter()
            env.step(action)
            stepping += time.perf_counter() - t0
            n += 1
            if env.done:
                env.reset(1, 1)
        walk = n / (time.perf_counter() - start)
        print(f"graph_nav sc=20 dd=4 {mode}: {n / stepping:,.0f} steps/s ({walk:,.0f}/s with valid_actions)")
        assert walk > 500
        assert hashlib.sha256(repr(env.gold_state()).encode()).hexdigest()
