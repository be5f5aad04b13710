"""StatefulPuzzle: world sizes, solver, dependencies, branching, observation modes,
mutation, error labels, determinism and speed."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from collections import deque
from collections.abc import Iterable
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.base import (
    REGIMES,
    Action,
    Fact,
    StressSpec,
    episode_seed,
    format_action,
    parse_action,
)
from horizonbench.datasets.worlds.stateful_puzzle import (
    ARCHETYPES,
    SC_TABLE,
    VERBS,
    StatefulPuzzle,
    build_world,
)
from world_helpers import hash_seed_digests, make_env, replay, run_policy, search, trace

GRID_SC = (5, 10, 20, 40)
GRID_DD = (1, 2, 4, 6)


# every test starts from a reset StatefulPuzzle on a long horizon
make = partial(make_env, StatefulPuzzle)


def action_space(env: StatefulPuzzle) -> list[Action]:
    """Every well-formed action of the world (right verbs, arities and kinds)."""
    task_entities = env.world
    names = {
        "room": task_entities.rooms,
        "container": task_entities.containers,
        "item": task_entities.items,
        "switch": task_entities.switches,
        "subgoal": task_entities.subgoal_names,
    }
    movable = names["item"] + tuple(n for n in env._kind if env._kind[n] == "decoy")  # noqa: SLF001
    kinds = {
        "go": [names["room"]],
        "take": [movable],
        "put": [movable, names["container"] + names["room"]],
        "open": [names["container"]],
        "close": [names["container"]],
        "use": [movable, names["container"]],
        "combine": [movable, movable],
        "activate": [names["switch"]],
        "examine": [names["container"] + names["switch"] + movable],
        "finish_subgoal": [names["subgoal"]],
        "noop": [],
    }
    return [(verb, *args) for verb, arg_lists in kinds.items() for args in itertools.product(*arg_lists)]


def walk_to(env: StatefulPuzzle, room: str) -> None:
    """Step along a shortest path of doors to ``room``."""
    w = env.world
    here = next(f[2] for f in env.gold_state() if f[:2] == ("at", "agent"))
    back = {here: None}
    queue = deque([here])
    while queue:
        r = queue.popleft()
        for s in w.neighbors[r]:
            if s not in back:
                back[s] = r
                queue.append(s)
    path = []
    while room != here:
        path.append(("go", room))
        room = back[room]
    replay(env, reversed(path))


def gold_loc(env: StatefulPuzzle, x: str) -> Fact:
    return next(f for f in env.gold_state() if f[0] in ("at", "in", "held", "fitted") and f[1] == x)


# --- state cardinality -------------------------------------------------------------


def test_sc_table_rule_and_anchors() -> None:
    assert set(SC_TABLE) == set(range(3, 61))
    anchors = {5: (2, 1, 2, 2), 10: (3, 3, 4, 3), 20: (5, 6, 9, 4), 40: (8, 12, 20, 6)}
    for sc, want in anchors.items():
        c = SC_TABLE[sc]
        assert (c.rooms, c.containers, c.items, c.subgoals) == want
    previous = None
    for sc in range(3, 61):
        c = SC_TABLE[sc]
        assert c.rooms + c.containers + c.items == sc
        assert 1 <= c.subgoals <= c.items and c.rooms >= 1 and c.containers >= 1
        if previous is not None:
            steps = (c.rooms - previous.rooms, c.containers - previous.containers, c.items - previous.items)
            assert sorted(steps) == [0, 0, 1], sc  # each sc adds exactly one entity
            assert c.subgoals >= previous.subgoals
        previous = c
    assert len({(c.rooms, c.containers, c.items) for c in SC_TABLE.values()}) == 58


def test_every_sc_builds_its_own_world_and_its_plan_wins() -> None:
    worlds = set()
    for sc in range(3, 61):
        env = StatefulPuzzle(REGIMES["III"].spec(sc=sc, dd=1).replace(horizon=10_000))
        _, task = env.reset(episode_seed(0, ("sc", sc, "dd", 1), 0, 0), sc % 10)
        c = SC_TABLE[sc]
        counts = tuple(len(task.entities[kind]) for kind in ("room", "container", "item"))
        assert counts == (c.rooms, c.containers, c.items)
        assert len(task.subgoals) == c.subgoals
        worlds.add(env.gold_state())
        results = replay(env, env.optimal_plan())
        assert results[-1].success and results[-1].done
        assert task.optimal_length == len(env.optimal_plan())
    assert len(worlds) == 58


def test_study_grid_plans_win_and_horizon_shortfalls_are_flagged() -> None:
    short = 0
    for sc, dd, archetype in itertools.product(GRID_SC, GRID_DD, range(10)):
        spec = REGIMES["III"].spec(sc=sc, dd=dd)
        env = StatefulPuzzle(spec.replace(horizon=10_000))
        seed = episode_seed(0, spec, archetype, 0)
        _, task = env.reset(seed, archetype)
        plan = env.optimal_plan()
        assert replay(env, plan)[-1].success
        _, task40 = StatefulPuzzle(spec).reset(seed, archetype)
        assert task40.optimal_length == len(plan) and task40.horizon == 40
        assert task40.horizon_short == (len(plan) > 40)
        short += task40.horizon_short
    assert 0 < short < 160  # at T=40 the largest cells cannot be won: the pipeline must know


@settings(max_examples=40, deadline=None)
@given(
    sc=st.integers(3, 60),
    dd=st.integers(1, 8),
    archetype=st.integers(0, 9),
    seed=st.integers(0, 2**62),
    branching=st.sampled_from([1, 2, 4, 8, 16]),
)
def test_any_world_is_won_by_its_plan(sc: int, dd: int, archetype: int, seed: int, branching: int) -> None:
    env = make(sc, dd, seed, archetype, branching=branching)
    plan = env.optimal_plan()
    results = replay(env, plan)
    assert results[-1].success and not any(r.success for r in results[:-1])
    goal = set(env._task.goal)  # noqa: SLF001
    assert goal <= set(results[-1].gold)


# --- the solver is optimal ----------------------------------------------------------


SMALL = [(sc, dd, a) for sc in range(3, 9) for dd in (1, 2) for a in (sc % 10, (sc + 5) % 10)] + [
    (5, 3, 2),
    (6, 3, 7),
]


@pytest.mark.parametrize(("sc", "dd", "archetype"), SMALL)
def test_solver_length_equals_breadth_first_search(sc: int, dd: int, archetype: int) -> None:
    env = make(sc, dd, seed=sc * 31 + dd, archetype=archetype, branching=1)
    assert search(env) == len(env.optimal_plan())


# --- dependency density -------------------------------------------------------------


def test_dd_is_the_number_of_distinct_preconditions_per_subgoal() -> None:
    for sc, dd, archetype in itertools.product(GRID_SC, GRID_DD, range(0, 10, 3)):
        env = make(sc, dd, seed=5, archetype=archetype)
        _, task = env.reset(5, archetype)
        gold = set(env.gold_state())
        everything = []
        for sg in task.subgoals:
            assert len(sg.preconditions) == dd == len(sg.enablers)
            assert not set(sg.preconditions) & gold and sg.target not in gold
            everything += sg.preconditions
            for fact, enabler in zip(sg.preconditions, sg.enablers, strict=True):
                assert {("on",): "activate", ("held",): "take", ("fitted",): "combine", ("unlocked",): "use"}[
                    fact[:1]
                ] == enabler[0]
        assert len(everything) == len(set(everything)) == dd * len(task.subgoals)
        requires = {("requires", sg.name, *p) for sg in task.subgoals for p in sg.preconditions}
        assert requires <= set(task.facts)


def test_more_dependencies_make_longer_plans() -> None:
    for sc in GRID_SC:
        means = []
        for dd in GRID_DD:
            lengths = [len(make(sc, dd, seed=v, archetype=v).optimal_plan()) for v in range(10)]
            means.append(sum(lengths) / len(lengths))
        assert means == sorted(means) and means[0] < means[-1], (sc, means)


def _worlds_with(kind: str) -> tuple[int, int, int, int]:
    """A small world (sc, dd, seed, archetype) with a precondition of ``kind``."""
    for sc, dd, archetype, seed in itertools.product(range(5, 9), (1, 2), range(10), range(40)):
        w = build_world(sc, dd, seed, archetype)
        if any(k == kind for stage in w.stages for k, _ in stage.mechanisms):
            return sc, dd, seed, archetype
    raise AssertionError(f"no small world with a {kind}")


@pytest.mark.parametrize("kind", ["switch", "tool", "part", "lock"])
def test_every_precondition_is_needed_on_every_solution(kind: str) -> None:
    sc, dd, seed, archetype = _worlds_with(kind)
    env = make(sc, dd, seed, archetype, branching=1)
    _, task = env.reset(seed, archetype)
    assert search(env) is not None
    for sg in task.subgoals:
        for fact, enabler in zip(sg.preconditions, sg.enablers, strict=True):
            assert search(env, forbid=[enabler]) is None, (sg.name, fact, enabler)


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
                finish = results[("finish_subgoal", sg.name)]
                assert not finish.valid and fact in finish.unmet


# --- branching ---------------------------------------------------------------------


def test_branching_adds_valid_actions_not_plan_length() -> None:
    for sc, dd, archetype in ((5, 1, 0), (10, 2, 3), (20, 4, 6), (40, 1, 9)):
        means, lengths = [], set()
        for b in (1, 2, 4, 8, 16):
            env = make(sc, dd, seed=11, archetype=archetype, branching=b)
            plan = env.optimal_plan()
            lengths.add(len(plan))
            counts = [len(env.valid_actions())]
            for action in plan[:-1]:
                env.step(action)
                counts.append(len(env.valid_actions()))
            means.append(sum(counts) / len(counts))
        assert len(lengths) == 1
        assert all(a < b for a, b in itertools.pairwise(means)), means


# --- actions and labels --------------------------------------------------------------


def _random_states(env: StatefulPuzzle, seed: int, steps: int) -> Iterable[None]:
    rng = random.Random(seed)
    space = action_space(env)
    for _ in range(steps):
        if env.done:
            return
        yield None
        valid = env.valid_actions()
        env.step(rng.choice(valid) if rng.random() < 0.85 else rng.choice(space))


def test_valid_actions_are_exactly_the_actions_whose_preconditions_hold() -> None:
    for sc, dd, archetype in ((6, 2, 1), (10, 2, 2), (12, 3, 7)):
        env = make(sc, dd, seed=sc, archetype=archetype, branching=2)
        space = action_space(env)
        for _ in _random_states(env, seed=sc, steps=60):
            gold = set(env.gold_state())
            expected = sorted(a for a in space if env.preconditions(a) <= gold)
            assert list(env.valid_actions()) == expected
            snap = env.snapshot()
            for action in random.Random(len(gold)).sample(space, 12):
                env.restore(snap)
                result = env.step(action)
                assert result.valid == (action in expected)
                assert set(result.unmet) == env_pre_unmet(env, snap, action)
            env.restore(snap)


def env_pre_unmet(env: StatefulPuzzle, snap: object, action: Action) -> set[Fact]:
    after = env.snapshot()
    env.restore(snap)
    unmet = env.preconditions(action) - set(env.gold_state())
    env.restore(after)
    return unmet


def test_valid_actions_read_back_from_their_text() -> None:
    env = make(20, 2, seed=4, archetype=5, branching=4)
    for action in env.valid_actions() + tuple(action_space(env)[:200]):
        assert parse_action(format_action(action), VERBS) == action


def test_invalid_actions_are_labelled_and_change_nothing() -> None:
    seen: set[str] = set()
    for seed, archetype in itertools.product(range(12), range(10)):
        env = make(10, 2, seed, archetype)
        w = env.world
        here = w.start_room

        def expect(action: object, label: str, env: StatefulPuzzle = env) -> None:
            before = env.gold_state()
            result = env.step(action)  # type: ignore[arg-type]
            assert not result.valid and result.error == label, (action, result.error, result.unmet)
            assert result.gold == before
            seen.add(label)

        expect(("go", here), "object_location_error")
        expect(("finish_subgoal", "sg1"), "object_location_error")
        expect(("finish_subgoal", "sg2"), "object_location_error")
        for bad in (("fly", here), ("go",), ("go", "room99"), ("take", here), ("noop", "x"), "go(room1)", 42):
            expect(bad, "unknown_action")
        far = [r for r in w.rooms if r != here and r not in w.neighbors[here]]
        if far:
            expect(("go", far[0]), "object_location_error")
        elsewhere = [x for x in w.items if (w.room_of.get(w.start_loc[x][2], w.start_loc[x][2])) != here]
        if elsewhere:
            expect(("take", elsewhere[0]), "object_location_error")
        expect(("put", w.items[0], w.containers[0]), "object_location_error")  # not held
        box = w.containers[0]
        walk_to(env, w.room_of[box])
        expect(("close", box), "precondition_violation")
        inside = [x for x in w.items if w.start_loc[x] == ("in", x, box) and x not in env._gate]  # noqa: SLF001
        if inside:
            expect(("take", inside[0]), "precondition_violation")  # closed container
        if box in w.keys.values():
            expect(("open", box), "precondition_violation")  # locked
        sealed_switches = [s for s in w.switches if w.stage_of[s] >= 2]
        if sealed_switches:
            walk_to(env, w.room_of[sealed_switches[0]])
            expect(("activate", sealed_switches[0]), "precondition_violation")
            assert env.step(("noop",)).valid
    assert seen == {"object_location_error", "precondition_violation", "unknown_action"}


def test_a_wrong_key_and_a_sealed_item_are_precondition_violations() -> None:
    found = 0
    for seed, archetype in itertools.product(range(30), (3, 6, 7, 8, 9)):
        env = make(20, 2, seed, archetype)
        w = env.world
        if not w.keys:
            continue
        key, box = next(iter(w.keys.items()))
        gate = env._gate  # noqa: SLF001
        others = [x for x in w.items if x != key and x not in gate and w.start_loc[x][0] == "at"]
        if not others:
            continue
        other = others[0]
        walk_to(env, w.start_loc[other][2])
        assert env.step(("take", other)).valid
        walk_to(env, w.room_of[box])
        result = env.step(("use", other, box))
        assert result.error == "precondition_violation" and result.unmet == (("key_of", other, box),)
        sealed = [x for x in w.items if w.stage_of.get(x, 0) >= 2 and w.start_loc[x][0] == "at"]
        if sealed:
            walk_to(env, w.start_loc[sealed[0]][2])
            result = env.step(("take", sealed[0]))
            previous = w.stages[w.stage_of[sealed[0]] - 2].name
            assert result.error == "precondition_violation" and result.unmet == (("done", previous),)
            found += 1
    assert found > 3


def test_finishing_a_subgoal_cannot_be_declared() -> None:
    for sc, dd, archetype in ((5, 2, 0), (10, 4, 1), (20, 6, 2)):
        env = make(sc, dd, seed=9, archetype=archetype)
        _, task = env.reset(9, archetype)
        for sg in task.subgoals:
            assert not env.step(("finish_subgoal", sg.name)).valid
        rng = random.Random(sc)
        for _ in range(2000):
            if env.done:
                break
            gold = set(env.gold_state())
            for i, sg in enumerate(task.subgoals):
                pre = env.preconditions(("finish_subgoal", sg.name))
                really_done = (
                    ("pending", sg.name) in gold
                    and sg.target in gold
                    and set(sg.preconditions) <= gold
                    and (i == 0 or ("done", task.subgoals[i - 1].name) in gold)
                )
                assert (pre <= gold) == really_done
            options = env.valid_actions()
            env.step(rng.choice(options + tuple(("finish_subgoal", s.name) for s in task.subgoals)))
        # the plan still wins from reset, and only at its last step
        env.reset(9, archetype)
        results = replay(env, env.optimal_plan())
        assert [r.success for r in results].index(True) == len(results) - 1


def test_the_horizon_ends_an_episode_without_success() -> None:
    env = StatefulPuzzle(StressSpec(sc=10, dd=2, horizon=5))
    _, task = env.reset(1, 0)
    assert task.horizon_short and task.horizon_ratio < 1
    results = [env.step(("noop",)) for _ in range(5)]
    assert [r.done for r in results] == [False] * 4 + [True]
    assert not results[-1].success and "out of steps" in results[-1].observation.message
    with pytest.raises(RuntimeError, match="over"):
        env.step(("noop",))
    with pytest.raises(RuntimeError, match="reset"):
        StatefulPuzzle(StressSpec(sc=10, dd=2)).step(("noop",))
    with pytest.raises(ValueError, match="^archetype:"):
        env.reset(1, 10)
    with pytest.raises(ValueError, match="^seed:"):
        env.reset(-1, 0)


# --- observation modes --------------------------------------------------------------


def test_clean_observations_are_the_gold_state() -> None:
    env = make(20, 4, seed=2, archetype=1, observation="clean", mutation="medium")
    for r in run_policy(env, 1):
        assert r.observation.facts == r.gold and r.observation.injected == ()
        assert env.observable_gold() == frozenset(r.gold)


def test_partial_observations_hide_state_never_the_task() -> None:
    env = StatefulPuzzle(StressSpec(sc=20, dd=4, horizon=10_000, observation="partial"))
    first, task = env.reset(2, 1)
    assert first.facts == env.gold_state() and first.task == task.facts  # the briefing
    requires = {("requires", sg.name, *p) for sg in task.subgoals for p in sg.preconditions}
    assert requires <= set(task.facts)
    smaller = 0
    for r in run_policy(env, 2, steps=200):
        obs = r.observation
        assert obs.task == task.facts and obs.injected == ()
        assert set(obs.facts) <= set(r.gold)  # partial hides, never lies
        statuses = {f for f in r.gold if f[0] in ("done", "pending")}
        assert statuses <= set(obs.facts)
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


def test_distractors_mention_only_entities_that_do_not_exist() -> None:
    env = make(10, 2, seed=3, archetype=2, observation="distractor", mutation="low")
    names = {n for kind in env._task.entities.values() for n in kind} | {"agent"}  # noqa: SLF001
    results = list(run_policy(env, 3))
    for r in results:
        injected = set(r.observation.injected)
        assert injected and injected <= set(r.observation.facts)
        assert set(r.observation.facts) - injected == set(r.gold)
        for fact in injected:
            assert not set(fact[1:]) & names, fact
        assert not env.invariant_violations(r.gold)
        assert env.invariant_violations(injected)  # an agent that adopts them is caught
    # the phantom world is persistent: its facts never contradict each other
    phantom = set().union(*(r.observation.injected for r in results))
    assert not [p for p in env.invariant_violations(phantom) if "two places" in p or "both" in p]


def test_conflicts_contradict_an_earlier_observation() -> None:
    env = make(20, 2, seed=4, archetype=3, observation="conflict", mutation="medium")
    shown: dict[object, Fact] = {}
    for fact in env._observe("x").facts:  # noqa: SLF001 - the reset observation
        shown[env.slot(fact)] = fact
    conflicts = 0
    previous = set(env.gold_state())
    for r in run_policy(env, 4, steps=150):
        obs = r.observation
        assert len(obs.injected) <= 1
        assert set(obs.facts) - set(obs.injected) == set(r.gold)
        for lie in obs.injected:
            conflicts += 1
            slot = env.slot(lie)
            assert lie not in r.gold
            earlier = [f for f in previous if env.slot(f) == slot]
            assert earlier and lie not in earlier  # the previous observation showed another value
        previous = set(obs.facts) - set(obs.injected)
    assert conflicts > 30


# --- mutation ----------------------------------------------------------------------


def test_static_worlds_never_change_by_themselves_and_mutation_counts_grow() -> None:
    counts = {}
    for level in ("static", "low", "medium", "high"):
        changed = 0
        for seed in range(4):
            env = make(20, 2, seed, archetype=seed, mutation=level)
            for action in env.optimal_plan()[:15]:  # some containers open, switches on
                env.step(action)
            for _ in range(300):
                before = env.gold_state()
                r = env.step(("noop",))
                if level == "static":
                    assert r.gold == before and not r.events
                changed += r.gold != before
                assert bool(r.events) == (r.gold != before)
        counts[level] = changed
    assert counts["static"] == 0 < counts["low"] < counts["medium"] < counts["high"], counts


def test_mutations_never_achieve_anything_and_keep_the_task_solvable() -> None:
    goals_reached = ("on", "held", "fitted", "unlocked", "open", "done")
    for seed in range(8):
        env = make(6, 1, seed, archetype=seed, mutation="high", branching=1)
        _, task = env.reset(seed, seed)
        for action in env.optimal_plan()[: len(env.optimal_plan()) // 2]:
            env.step(action)
        for _ in range(40):
            before = set(env.gold_state())
            r = env.step(("noop",))
            new = set(r.gold) - before
            pending = {sg.target for sg in task.subgoals if ("pending", sg.name) in before}
            assert not [f for f in new if f[0] in goals_reached or f in pending]
        static = make(6, 1, seed, archetype=seed, branching=1)  # the same world without mutation
        static.restore(env.snapshot())
        assert static.gold_state() == env.gold_state()
        assert search(static) is not None


# --- determinism -------------------------------------------------------------------


def test_the_same_seed_gives_the_same_episode() -> None:
    for mode in ("clean", "partial", "distractor", "conflict"):
        spec = StressSpec(sc=20, dd=4, horizon=60, observation=mode, mutation="high")
        assert trace(StatefulPuzzle, spec, 77, 5, 1) == trace(StatefulPuzzle, spec, 77, 5, 1)
        assert trace(StatefulPuzzle, spec, 77, 5, 1) != trace(StatefulPuzzle, spec, 78, 5, 1)


def test_archetypes_and_variants_give_different_worlds() -> None:
    spec = StressSpec(sc=10, dd=2)
    worlds = {}
    for archetype, variant in itertools.product(range(10), range(10)):
        env = StatefulPuzzle(spec)
        env.reset(episode_seed(0, spec, archetype, variant), archetype)
        worlds[archetype, variant] = env.gold_state()
    assert len(set(worlds.values())) == 100
    assert len({a.shape for a in ARCHETYPES}) == 10


_DIGEST = """
import hashlib
from horizonbench.datasets.worlds.base import StressSpec
from horizonbench.datasets.worlds.stateful_puzzle import StatefulPuzzle
h = hashlib.sha256()
for mode in ("partial", "distractor", "conflict"):
    env = StatefulPuzzle(StressSpec(sc=20, dd=4, horizon=200, observation=mode, mutation="high"))
    obs, task = env.reset(12345, 7)
    h.update(repr((obs.facts, task.facts, env.optimal_plan())).encode())
    for i in range(150):
        if env.done:
            break
        acts = env.valid_actions()
        r = env.step(acts[(i * 7) % len(acts)])
        h.update(repr((r.observation.facts, r.gold, r.error, r.events)).encode())
print(h.hexdigest())
"""


def test_episodes_do_not_depend_on_hash_randomisation() -> None:
    assert len(hash_seed_digests(_DIGEST)) == 1


# --- stale room state ---------------------------------------------------------------


def test_stale_room_state_is_acting_on_what_was_last_seen() -> None:
    stale = 0
    for seed in range(40):
        env = make(10, 4, seed, archetype=seed % 10, observation="partial", mutation="high")
        last: dict[object, Fact] = {env.slot(f): f for f in env.gold_state()}
        for r in run_policy(env, seed, steps=120):
            if r.error == "stale_room_state":
                stale += 1
                assert all(last.get(env.slot(f)) == f for f in r.unmet), r.unmet
            for f in r.observation.facts:
                last[env.slot(f)] = f
    assert stale > 0
    for seed in range(10):
        env = make(10, 4, seed, archetype=seed, observation="clean", mutation="high")
        assert all(r.error != "stale_room_state" for r in run_policy(env, seed, steps=120))


# --- agent-written states -----------------------------------------------------------


def test_invariant_violations() -> None:
    env = make(10, 2, seed=1, archetype=0)
    gold = env.gold_state()
    assert env.invariant_violations(gold) == []
    assert env.invariant_violations([*gold, *env._task.facts]) == []  # noqa: SLF001 - the spec is no clash
    w = env.world
    x, box = w.items[0], w.containers[0]
    two_places = [*gold, ("held", x)]
    assert any(f"{x} is in two places" in p for p in env.invariant_violations(two_places))
    flip = [*gold, ("open", box)]
    assert any(f"{box} is both open and closed" in p for p in env.invariant_violations(flip))
    assert any("no entity" in p for p in env.invariant_violations([("at", "item99", "room1")]))
    assert any("unknown predicate" in p for p in env.invariant_violations([("flying", x)]))
    assert any("is a room" in p for p in env.invariant_violations([("in", x, "room1")]))
    assert any("takes 1" in p for p in env.invariant_violations([("open", box, "now")]))
    assert any("not a tuple" in p for p in env.invariant_violations(["open(box1)"]))
    a, b = w.doors[0]
    assert env.normalize([("door", b, a)]) == {("door", a, b)}
    assert env.invariant_violations([("door", b, a)]) == []


def test_snapshots_restore_the_whole_episode() -> None:
    env = make(20, 2, seed=8, archetype=8, observation="conflict", mutation="high")
    replay(env, env.optimal_plan()[:10])
    snap = env.snapshot()
    a = [(r.gold, r.observation.facts, r.events) for r in run_policy(env, 5, steps=30)]
    env.restore(snap)
    b = [(r.gold, r.observation.facts, r.events) for r in run_policy(env, 5, steps=30)]
    assert a == b
    other = make(20, 2, seed=9, archetype=8)
    with pytest.raises(ValueError, match="another episode"):
        other.restore(snap)


def test_task_text_names_every_subgoal_and_requirement() -> None:
    env = StatefulPuzzle(REGIMES["II"].spec())
    _, task = env.reset(3, 3)
    for sg in task.subgoals:
        assert sg.name in task.text
        for p in sg.preconditions:
            assert f"{p[0]}({', '.join(p[1:])})" in task.text
    assert "You have 40 steps." in task.text
    assert task.extra["rooms"] == 3 and task.env == "stateful_puzzle"


# --- speed -------------------------------------------------------------------------


def test_steps_are_cheap() -> None:
    """Prints env steps per second (run with -s to see); asserts nothing about speed."""
    for mode in ("clean", "partial", "distractor", "conflict"):
        env = make(40, 6, seed=1, archetype=1, observation=mode, mutation="medium", horizon=100_000)
        actions = list(env.optimal_plan()) + [("noop",), ("go", "room1"), ("take", "item1")] * 20
        n = 0
        start = time.perf_counter()
        while n < 10_000:
            for action in actions:
                if env.done:
                    env.reset(1, 1)
                env.step(action)
                n += 1
        rate = n / (time.perf_counter() - start)
        print(f"stateful_puzzle sc=40 dd=6 {mode}: {rate:,.0f} steps/s")
        assert hashlib.sha256(repr(env.gold_state()).encode()).hexdigest()


def test_examine_shows_a_closed_container_under_partial_observation() -> None:
    shown = 0
    for seed in range(20):
        env = make(20, 1, seed, archetype=seed % 10, observation="partial")
        w = env.world
        full = [b for b in w.containers if any(loc == ("in", x, b) for x, loc in w.start_loc.items())]
        if not full:
            continue
        box = full[0]
        walk_to(env, w.room_of[box])
        inside = {f for f in env.gold_state() if f[0] == "in" and f[2] == box}
        looked = env.step(("noop",)).observation.facts
        assert ("closed", box) in looked and not inside & set(looked)
        examined = env.step(("examine", box))
        assert examined.valid and inside <= set(examined.observation.facts)
        assert not inside & set(env.step(("noop",)).observation.facts)  # closed again to the eye
        shown += 1
    assert shown > 5
