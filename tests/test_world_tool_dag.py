"""ToolDAG: world sizes, solver, dependencies, branching, observation modes, mutation,
error labels, no declared results, determinism and speed."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from collections.abc import Iterable, Iterator
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.base import (
    REGIMES,
    Action,
    Environment,
    Fact,
    StepResult,
    StressSpec,
    episode_seed,
    format_action,
    parse_action,
)
from horizonbench.datasets.worlds.tool_dag import (
    ARCHETYPES,
    ERROR_LABELS,
    PARAM_NAMES,
    TYPE_NAMES,
    VERBS,
    ToolDAG,
    World,
    build_world,
    components,
    optimal_length,
)
from world_helpers import hash_seed_digests, make_env, replay, run_policy, search, trace

GRID_SC = (5, 10, 20, 40)
GRID_DD = (1, 2, 4, 6)


# every test starts from a reset ToolDAG on a long horizon
make = partial(make_env, ToolDAG)


def names_of(env: ToolDAG) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(value names: variables, inputs, scratch; tools: real and decoy)."""
    e = env._task.entities  # noqa: SLF001
    return e["variable"] + e["input"] + e["scratch"], e["tool"] + e["decoy"]


def action_space(env: ToolDAG) -> list[Action]:
    """Every action text an agent could plausibly write here: all verbs over all names,
    of every kind (so wrong types, invented names and non-tools are in)."""
    values, tools = names_of(env)
    params = PARAM_NAMES[: env.spec.dd]
    everything = values + tools
    acts: list[Action] = [("noop",)]
    acts += [("bind", t, a, u) for t in tools for a in params for u in (*values, "v999", tools[0])]
    acts += [("call", u) for u in everything]
    acts += [("inspect", u) for u in everything]
    acts += [("submit", u) for u in (*everything, "v999")]
    return acts


def same_type(world: World, u: str) -> list[str]:
    """The other real names of ``u``'s type: well-typed wrong wirings for it."""
    return [n for n in (*world.inputs, *world.variables) if n != u and world.type_of[n] == world.type_of[u]]


def ready_before(world: World, tool: str, u: str) -> list[str]:
    """The well-typed wrong wirings for ``u`` that hold values when the plan runs ``tool``:
    inputs and variables of tools earlier in the order."""
    earlier = {world.writes[t] for t in world.order[: world.order.index(tool)]}
    return [n for n in same_type(world, u) if n in world.inputs or n in earlier]


def play(env: ToolDAG, actions: Iterable[Action]) -> list[StepResult]:
    """Step through ``actions`` whatever happens (mutation may spoil some)."""
    return [env.step(a) for a in actions]


def plan_after(world: World, tools: Iterable[str]) -> list[Action]:
    """Wire as specified and call ``tools`` (in the given order)."""
    out: list[Action] = []
    for t in tools:
        out += [("bind", t, a, u) for a, u in zip(PARAM_NAMES, world.requires[t], strict=False)]
        out.append(("call", t))
    return out


# --- the contract ------------------------------------------------------------------


def test_the_environment_keeps_the_contract() -> None:
    env = make(5, 2)
    assert isinstance(env, Environment)
    assert ToolDAG.name == "tool_dag" and env.spec.sc == 5 and ToolDAG.sc_kinds == ("variable",)
    assert {"missing_argument", "skipped_dependency", "fabricated_result", "unknown_action"} == set(
        ERROR_LABELS
    )
    assert dict(ToolDAG.verbs) == {"bind": 3, "call": 1, "inspect": 1, "submit": 1, "noop": 0}
    assert max(VERBS.values()) <= 8  # parse_action reads at most 8 arguments, whatever dd is
    assert env.t == 0 and not env.done
    with pytest.raises(TypeError, match="spec"):
        ToolDAG({"sc": 5, "dd": 2})  # type: ignore[arg-type]


# --- state cardinality -------------------------------------------------------------


def test_every_sc_builds_its_own_world_and_its_plan_wins() -> None:
    worlds = set()
    for sc in range(3, 61):
        c = components(sc, 2)
        assert c.variables == c.tools == sc and c.inputs == 2 + -(-sc // 4)
        env = ToolDAG(REGIMES["III"].spec(sc=sc, dd=2).replace(horizon=10_000))
        _, task = env.reset(7, sc % 10)  # one seed for all: sc alone must change the world
        assert len(task.entities["variable"]) == len(task.entities["tool"]) == sc
        assert sum(len(task.entities[kind]) for kind in ToolDAG.sc_kinds) == sc
        assert len(task.subgoals) == sc and task.extra["variables"] == sc
        worlds.add(env.gold_state())
        results = replay(env, env.optimal_plan())
        assert results[-1].success and results[-1].done
        assert task.optimal_length == len(env.optimal_plan()) == optimal_length(sc, 2) == 3 * sc + 1
    assert len(worlds) == 58
    # the reference code's flaw: sc 10/11 and 16/17 built the same world
    for a, b in ((10, 11), (16, 17)):
        assert len(build_world(a, 3, 1, 0).variables) + 1 == len(build_world(b, 3, 1, 0).variables)
    with pytest.raises(ValueError, match="^sc:"):
        components(61, 1)


def test_every_variable_is_needed_and_the_target_is_the_sink() -> None:
    for sc, dd, archetype in itertools.product((3, 10, 40), (1, 3, 12), range(10)):
        w = build_world(sc, dd, seed=sc + dd, archetype=archetype)
        consumers: dict[str, set[str]] = {t: set() for t in w.tools}
        for t, ups in w.upstream.items():
            for up in ups:
                consumers[up].add(t)
        assert not consumers[w.producer[w.target]]
        assert all(consumers[t] for t in w.tools if t != w.producer[w.target])
        # the order is topological and every tool reads dd distinct names
        seen: set[str] = set()
        for t in w.order:
            assert set(w.upstream[t]) <= seen
            assert len(w.requires[t]) == len(set(w.requires[t])) == dd
            assert {w.producer[u] for u in w.requires[t] if u in w.producer} == set(w.upstream[t])
            seen.add(t)
        if dd == 1:  # one input per tool: every shape is a chain
            assert all(len(ups) == (t != w.order[0]) for t, ups in w.upstream.items())


def test_study_grid_plans_win_and_horizon_shortfalls_are_flagged() -> None:
    short = 0
    for sc, dd, archetype in itertools.product(GRID_SC, GRID_DD, range(0, 10, 3)):
        spec = REGIMES["III"].spec(sc=sc, dd=dd)
        env = ToolDAG(spec.replace(horizon=10_000))
        seed = episode_seed(0, spec, archetype, 0)
        env.reset(seed, archetype)
        plan = env.optimal_plan()
        assert replay(env, plan)[-1].success
        _, task40 = ToolDAG(spec).reset(seed, archetype)
        assert task40.optimal_length == len(plan) and task40.horizon == 40
        assert task40.horizon_short == (len(plan) > 40)
        short += task40.horizon_short
    assert 0 < short < 64  # the pipeline must know which cells no agent can win at T=40


@settings(max_examples=80, deadline=None)
@given(
    sc=st.integers(3, 60),
    dd=st.integers(1, 12),
    archetype=st.integers(0, 9),
    seed=st.integers(0, 2**62),
    branching=st.sampled_from([1, 2, 4, 8, 16]),
)
def test_any_world_is_won_by_its_plan(sc: int, dd: int, archetype: int, seed: int, branching: int) -> None:
    env = make(sc, dd, seed, archetype, branching=branching)
    plan = env.optimal_plan()
    assert len(plan) == optimal_length(sc, dd)
    results = replay(env, plan)
    assert results[-1].success and not any(r.success for r in results[:-1])
    assert set(env._task.goal) <= set(results[-1].gold)  # noqa: SLF001


# --- the solver is optimal ----------------------------------------------------------

# (sc, dd, seed, archetype): small worlds, most with well-typed wrong wirings available
SMALL = [
    (3, 1, 34, 0),
    (3, 1, 34, 5),
    (3, 1, 34, 9),
    (3, 2, 95, 0),
    (3, 2, 95, 5),
    (3, 2, 95, 8),
    (4, 1, 125, 0),
    (4, 1, 125, 4),
    (4, 1, 125, 8),
    (5, 1, 156, 3),
    (5, 1, 156, 8),
]


@pytest.mark.parametrize(("sc", "dd", "seed", "archetype"), SMALL)
def test_solver_length_equals_breadth_first_search(sc: int, dd: int, seed: int, archetype: int) -> None:
    env = make(sc, dd, seed, archetype, branching=1)
    assert search(env) == len(env.optimal_plan()) == sc * (dd + 1) + 1


# --- dependency density -------------------------------------------------------------


def test_dd_is_the_number_of_typed_parameters_of_every_tool() -> None:
    for sc, dd, archetype in itertools.product(GRID_SC, (1, 2, 6, 12), range(0, 10, 3)):
        env = make(sc, dd, seed=5, archetype=archetype, branching=3)
        task = env._task  # noqa: SLF001
        facts = set(task.facts)
        for t in task.entities["tool"] + task.entities["decoy"]:
            params = sorted(f[2] for f in facts if f[0] == "param" and f[1] == t)
            assert params == sorted(PARAM_NAMES[:dd])
        gold = set(env.gold_state())
        for sg in task.subgoals:
            assert len(sg.preconditions) == dd == len(sg.enablers)
            assert not set(sg.preconditions) & gold and sg.target not in gold
            for pre, enabler in zip(sg.preconditions, sg.enablers, strict=True):
                assert pre[0] == "bound" and enabler == ("bind", *pre[1:])
                assert ("requires", *pre[1:]) in facts
                ptype = next(f[3] for f in facts if f[:3] == ("param", *pre[1:3]))
                assert ("type", pre[3], ptype) in gold  # the wiring the task asks for is well-typed


@settings(max_examples=80, deadline=None)
@given(sc=st.integers(3, 60), dd=st.integers(1, 11), archetype=st.integers(0, 9), seed=st.integers(0, 2**40))
def test_more_dependencies_change_the_world_and_lengthen_plans(
    sc: int, dd: int, archetype: int, seed: int
) -> None:
    lo, hi = make(sc, dd, seed, archetype), make(sc, dd + 1, seed, archetype)
    assert len(hi.optimal_plan()) - len(lo.optimal_plan()) == sc
    assert lo.gold_state() != hi.gold_state() and lo._task.facts != hi._task.facts  # noqa: SLF001
    requires = [f for f in hi._task.facts if f[0] == "requires"]  # noqa: SLF001
    assert len(requires) == sc * (dd + 1)


def _needed_actions(env: ToolDAG) -> list[Action]:
    task = env._task  # noqa: SLF001
    return [("call", sg.name) for sg in task.subgoals] + [e for sg in task.subgoals for e in sg.enablers]


@pytest.mark.parametrize(("sc", "dd", "seed", "archetype"), [(3, 1, 34, 5), (3, 2, 95, 8), (4, 1, 125, 8)])
def test_every_call_and_every_wire_is_needed_on_every_solution(
    sc: int, dd: int, seed: int, archetype: int
) -> None:
    env = make(sc, dd, seed, archetype, branching=1)
    w = env.world
    # not vacuous: some parameter could take another name of its type (a wrong wiring)
    assert any(same_type(w, u) for t in w.tools for u in w.requires[t])
    assert search(env) is not None
    for action in _needed_actions(env):
        assert search(env, forbid=[action]) is None, action


def test_skipping_or_miswiring_a_step_loses_big_worlds_too() -> None:
    miswired = 0
    for sc, dd, archetype in ((20, 4, 4), (40, 6, 9)):
        env = make(sc, dd, seed=3, archetype=archetype)
        w = env.world
        plan = env.optimal_plan()
        for index in (0, len(plan) // 3, len(plan) // 2, len(plan) - 3):
            action = plan[index]
            if action[0] == "call":
                action = plan[index - 1]
            env.reset(3, archetype)
            crippled = [a for a in plan if a != action]
            results = dict(zip(crippled, (env.step(a) for a in crippled), strict=True))
            assert not any(r.success for r in results.values())
            assert results[("call", action[1])].error == "missing_argument"  # the unwired tool
            later = [results[("call", t)].error for t in w.order[w.order.index(action[1]) + 1 :]]
            assert "skipped_dependency" in later or action[1] == w.producer[w.target]
            assert results[plan[-1]].error == "fabricated_result"
            others = ready_before(w, action[1], action[3])
            if others:  # a well-typed wrong wire: every call is valid, the result is not
                miswired += 1
                env.reset(3, archetype)
                wrong = [(*a[:3], others[0]) if a == action else a for a in plan]
                steps = [env.step(a) for a in wrong]
                assert all(r.valid for r in steps[:-1])
                assert ("value", w.target, w.genuine[w.target]) not in steps[-2].gold
                assert steps[-1].error == "fabricated_result" and not steps[-1].success
    assert miswired > 2


# --- branching ---------------------------------------------------------------------


def test_branching_adds_valid_actions_not_plan_length() -> None:
    for sc, dd, archetype in ((5, 1, 0), (10, 2, 3), (20, 4, 6), (40, 1, 9)):
        means, lengths, worlds = [], set(), set()
        for b in (1, 2, 4, 8, 16):
            env = make(sc, dd, seed=11, archetype=archetype, branching=b)
            plan = env.optimal_plan()
            lengths.add(len(plan))
            real = set(env.world.variables + env.world.inputs + env.world.tools)
            worlds.add(tuple(f for f in env.gold_state() if f[1] in real))
            assert len(env._task.entities["decoy"]) == b - 1  # noqa: SLF001
            counts = [len(env.valid_actions())]
            for action in plan[:-1]:
                env.step(action)
                counts.append(len(env.valid_actions()))
            means.append(sum(counts) / len(counts))
        assert len(lengths) == 1 and len(worlds) == 1
        assert all(a < b for a, b in itertools.pairwise(means)), means


def test_decoys_are_callable_and_never_help() -> None:
    env = make(6, 2, seed=4, archetype=1, branching=4)
    dec = env.decoys
    w = env.world
    for d in dec.tools:  # wire each decoy with the first real names of the right types
        for a, ty in zip(PARAM_NAMES, dec.param_types[d], strict=False):
            u = next(x for x in (*w.inputs, *w.variables) if w.type_of[x] == ty)
            assert env.step(("bind", d, a, u)).valid
    replay(env, env.optimal_plan()[:-1])
    called = [env.step(("call", d)) for d in dec.tools]
    assert all(r.valid for r in called)
    assert all(("empty", s) not in env.gold_state() for s in dec.scratch)
    assert env.step(("submit", dec.scratch[0])).error == "fabricated_result"
    assert env.step(env.optimal_plan()[-1]).success


# --- actions and labels --------------------------------------------------------------


def _random_states(env: ToolDAG, seed: int, steps: int) -> Iterator[None]:
    rng = random.Random(seed)
    space = action_space(env)
    plan = list(env.optimal_plan())
    for i in range(steps):
        if env.done:
            return
        yield None
        roll = rng.random()
        if roll < 0.4 and i < len(plan):
            env.step(plan[i])
        elif roll < 0.85:
            env.step(rng.choice(env.valid_actions()))
        else:
            env.step(rng.choice(space))


def test_valid_actions_are_exactly_the_actions_whose_preconditions_hold() -> None:
    for sc, dd, archetype in ((4, 2, 9), (8, 2, 2), (10, 3, 4)):
        env = make(sc, dd, seed=sc, archetype=archetype, branching=2, mutation="medium")
        space = action_space(env)
        for _ in _random_states(env, seed=sc, steps=60):
            gold = set(env.gold_state())
            expected = sorted(a for a in space if (pre := env.preconditions(a)) is not None and pre <= gold)
            assert list(env.valid_actions()) == expected
            snap = env.snapshot()
            for action in random.Random(len(gold)).sample(space, 12):
                env.restore(snap)
                pre = env.preconditions(action)
                result = env.step(action)
                assert result.valid == (action in expected)
                assert set(result.unmet) == (set() if pre is None else pre - gold)
                assert result.error in (None, *ERROR_LABELS)
            env.restore(snap)


def test_valid_actions_read_back_from_their_text() -> None:
    env = make(20, 4, seed=4, archetype=5, branching=4)
    for action in env.valid_actions() + tuple(action_space(env)[:300]):
        assert parse_action(format_action(action), VERBS) == action


def test_invalid_actions_are_labelled_and_change_nothing() -> None:
    seen: set[str] = set()
    for seed, archetype in itertools.product(range(4), range(10)):
        env = make(10, 3, seed, archetype)
        w = env.world

        def expect(action: object, label: str, env: ToolDAG = env) -> StepResult:
            before, t = env.gold_state(), env.t
            result = env.step(action)  # type: ignore[arg-type]
            assert not result.valid and result.error == label, (action, result.error, result.unmet)
            assert result.gold == before and env.t == t + 1 and not result.success
            seen.add(label)
            return result

        leaf, inner = w.order[0], w.order[-1]
        tv = w.target
        # missing_argument: nothing wired, or a name of another type
        r = expect(("call", leaf), "missing_argument")
        assert set(r.unmet) == {
            ("bound", leaf, a, u) for a, u in zip(PARAM_NAMES, w.requires[leaf], strict=False)
        }
        u = w.requires[inner][0]
        wrong = next(n for n in (*w.inputs, *w.variables) if w.type_of[n] != w.type_of[u])
        r = expect(("bind", inner, "a1", wrong), "missing_argument")
        assert r.unmet == (("type", wrong, w.type_of[u]),)
        # skipped_dependency: everything wired, but an upstream tool has not run
        replay(env, plan_after(w, [inner])[:-1])
        r = expect(("call", inner), "skipped_dependency")
        assert {f[1] for f in r.unmet} == {x for x in w.requires[inner] if x in w.producer}
        assert all(f[0] == "value" for f in r.unmet)
        # fabricated_result: declaring what was not computed, using names nobody produced
        for name in (tv, w.inputs[0], w.order[0], "v999", "result"):
            expect(("submit", name), "fabricated_result")
        expect(("bind", inner, "a1", "v999"), "fabricated_result")
        expect(("bind", inner, "a1", w.genuine[tv]), "fabricated_result")
        # unknown_action: no action of this world
        for bad in (
            ("fly", tv),
            ("call",),
            ("call", "t999"),
            ("call", tv),
            ("bind", inner, "a9", u),
            ("bind", "t999", "a1", u),
            ("bind", inner, "a1"),
            ("inspect", "v999"),
            ("noop", "x"),
            ("declare", tv),
            ("set", tv, w.genuine[tv]),
            ("call", ["t1"]),
            "call(t1)",
            42,
            (),
        ):
            expect(bad, "unknown_action")
        assert env.step(("inspect", tv)).valid and env.step(("noop",)).valid
    assert seen == set(ERROR_LABELS)


def test_missing_argument_wins_over_skipped_dependency() -> None:
    env = make(10, 3, seed=2, archetype=1)
    w = env.world
    inner = next(t for t in w.order if w.upstream[t])
    up = next(i for i, u in enumerate(w.requires[inner]) if u in w.producer)
    assert env.step(("bind", inner, PARAM_NAMES[up], w.requires[inner][up])).valid  # wired, still empty
    r = env.step(("call", inner))
    assert r.error == "missing_argument"
    assert {f[0] for f in r.unmet} == {"bound", "value"}


# --- no declared results ------------------------------------------------------------


def test_a_result_cannot_be_declared_only_computed() -> None:
    for sc, dd, archetype in ((5, 2, 9), (10, 4, 4), (20, 6, 2)):
        env = make(sc, dd, seed=9, archetype=archetype, branching=3)
        w = env.world
        tv = w.target
        values, tools = names_of(env)
        # at reset nothing can be submitted, whatever name or token is offered
        for u in (*values, *tools, w.genuine[tv], "target", "result", "v0"):
            r = env.step(("submit", u))
            assert r.error == "fabricated_result" and not r.success
        for bad in (
            ("declare", tv),
            ("set", tv, w.genuine[tv]),
            ("assign", tv, w.genuine[tv]),
            ("return", tv),
        ):
            assert env.step(bad).error == "unknown_action"  # no verb writes a value
        # only the target tool's own call, on genuine values wired as specified, counts
        plan = list(env.optimal_plan())
        replay(env, plan[:-1])
        assert ("value", tv, w.genuine[tv]) in env.gold_state()
        for u in values:
            if u != tv:
                assert env.step(("submit", u)).error == "fabricated_result"
        # re-run an upstream tool on a well-typed wrong wire: the target is tainted
        # once recomputed, and declaring it fails although it holds a value
        victim = next(
            (t, i, o)
            for t in w.order
            for i, u in enumerate(w.requires[t])
            for o in same_type(w, u)
            if o != tv
        )
        t, i, other = victim
        downstream = w.order[w.order.index(t) :]
        replay(env, [("bind", t, PARAM_NAMES[i], other), *(("call", d) for d in downstream)])
        gold = set(env.gold_state())
        assert ("value", tv, w.genuine[tv]) not in gold and any(f[:2] == ("value", tv) for f in gold)
        assert env.step(("submit", tv)).error == "fabricated_result"
        # repairing the wire and recomputing downstream wins
        results = replay(
            env, [("bind", t, PARAM_NAMES[i], w.requires[t][i]), *(("call", d) for d in downstream)]
        )
        assert not results[-1].success
        assert env.step(("submit", tv)).success


def test_a_variable_is_genuine_exactly_when_its_chain_ran_as_specified() -> None:
    """An independent model of provenance, kept beside the environment under a policy
    that mixes the plan with random well-typed (often wrong) wiring and mutation."""
    genuine_seen = tainted_seen = 0
    for seed, archetype in itertools.product(range(3), (9, 4, 2)):
        env = make(6, 2, seed, archetype, mutation="medium", branching=2)
        w = env.world
        flag = dict.fromkeys(w.variables, False)
        rng = random.Random(seed)
        plan = list(env.optimal_plan()[:-1])
        for i in range(400):
            if env.done:
                break
            bound = {(f[1], f[2]): f[3] for f in env.gold_state() if f[0] == "bound"}
            action = plan[i % len(plan)] if rng.random() < 0.5 else rng.choice(env.valid_actions())
            r = env.step(action)
            if r.valid and action[0] == "call" and action[1] in w.requires:
                t = action[1]
                flag[w.writes[t]] = all(
                    bound.get((t, a)) == u and (u in w.inputs or flag[u])
                    for a, u in zip(PARAM_NAMES, w.requires[t], strict=False)
                )
            for event in r.events:
                if event.endswith(" expired") and event.split()[0] in flag:
                    flag[event.split()[0]] = False
            gold = set(r.gold)
            for v in w.variables:
                assert (("value", v, w.genuine[v]) in gold) == flag[v], (v, action)
                genuine_seen += flag[v]
                tainted_seen += not flag[v] and ("empty", v) not in gold
            assert r.success == (action == ("submit", w.target) and r.valid)
    assert genuine_seen > 100 and tainted_seen > 100


def test_the_horizon_ends_an_episode_without_success() -> None:
    env = ToolDAG(StressSpec(sc=10, dd=2, horizon=5))
    _, task = env.reset(1, 0)
    assert task.horizon_short and task.horizon_ratio < 1
    results = [env.step(("noop",)) for _ in range(5)]
    assert [r.done for r in results] == [False] * 4 + [True]
    assert not results[-1].success and "out of steps" in results[-1].observation.message
    with pytest.raises(RuntimeError, match="over"):
        env.step(("noop",))
    with pytest.raises(RuntimeError, match="reset"):
        ToolDAG(StressSpec(sc=10, dd=2)).step(("noop",))
    with pytest.raises(RuntimeError, match="reset"):
        ToolDAG(StressSpec(sc=10, dd=2)).optimal_plan()
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


def test_partial_observations_show_the_touched_slots_never_hide_the_task() -> None:
    env = ToolDAG(StressSpec(sc=20, dd=4, horizon=10_000, observation="partial"))
    first, task = env.reset(2, 1)
    assert first.facts == env.gold_state() and first.task == task.facts  # the briefing
    requires = {("requires", *p[1:]) for sg in task.subgoals for p in sg.preconditions}
    assert {f for f in task.facts if f[0] == "requires"} == requires
    assert ("target", env.world.target) in task.facts
    smaller = 0
    for r in run_policy(env, 2, steps=200):
        obs = r.observation
        assert obs.task == task.facts and obs.injected == ()
        assert set(obs.facts) <= set(r.gold)  # partial hides, never lies
        assert any(f[0] in ("pending", "submitted") for f in obs.facts)
        smaller += len(obs.facts) < len(r.gold) // 4
        # without mutation, what the agent saw and did tells it the whole namespace
        assert env.observable_gold() == frozenset(r.gold)
    assert smaller > 50
    # what a step shows: a bind shows the wire, a call its inputs and output
    env.reset(2, 1)
    w = env.world
    leaf = w.order[0]
    shown = replay(env, plan_after(w, [leaf]))
    out = w.writes[leaf]
    assert ("bound", leaf, "a1", w.requires[leaf][0]) in shown[0].observation.facts
    assert ("value", out, w.genuine[out]) in shown[-1].observation.facts
    assert all(f[1] != w.order[-1] for f in shown[-1].observation.facts if f[0] in ("bound", "unbound"))


def test_partial_observation_with_mutation_loses_track_of_the_namespace() -> None:
    lost = unseen = 0
    for seed in range(6):
        env = make(20, 2, seed, archetype=seed, observation="partial", mutation="high")
        for r in run_policy(env, seed, steps=120):
            known = env.observable_gold()
            assert known <= frozenset(r.gold)
            lost += len(known) < len(r.gold)
            for event in r.events:
                name, _, what = event.partition(" ")
                fact = ("empty", name) if what == "expired" else ("unbound", *name.split("."))
                assert fact in r.gold
                if fact not in r.observation.facts:  # a change out of sight: the agent cannot know it
                    unseen += 1
                    assert fact not in known
    assert lost > 0 and unseen > 0


def test_distractors_mention_only_names_that_do_not_exist() -> None:
    env = make(10, 2, seed=3, archetype=2, observation="distractor", mutation="low", branching=3)
    e = env._task.entities  # noqa: SLF001
    names = {n for kind in e.values() for n in kind}
    results = list(run_policy(env, 3))
    for r in results:
        injected = set(r.observation.injected)
        assert injected and injected <= set(r.observation.facts)
        assert set(r.observation.facts) - injected == set(r.gold)
        for fact in injected:
            assert not set(fact[1:]) & names, fact
        assert not env.invariant_violations(r.gold)
        assert env.invariant_violations(injected)  # an agent that adopts them is caught
    env.reset(3, 2)
    # the phantom namespace is persistent: its facts never contradict each other
    phantom = set().union(*(r.observation.injected for r in results))
    clashes = [p for p in env.invariant_violations(phantom) if "two values" in p or "wired twice" in p]
    assert not clashes
    # acting on a phantom variable is using a value nobody produced
    fake = next(f[1] for f in phantom if f[0] in ("value", "empty"))
    tool = e["tool"][0]
    assert env.step(("bind", tool, "a1", fake)).error == "fabricated_result"


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
            now = [f for f in r.gold if env.slot(f) == slot]
            assert now == earlier  # ... which still holds
            assert not env.invariant_violations([lie])  # a plausible fact about a real slot
        previous = set(obs.facts) - set(obs.injected)
    assert conflicts > 30


# --- mutation ----------------------------------------------------------------------


def test_static_worlds_never_change_by_themselves_and_mutation_counts_grow() -> None:
    counts = {}
    for level in ("static", "low", "medium", "high"):
        changed = 0
        for seed in range(4):
            env = make(20, 2, seed, archetype=seed, mutation=level)
            plan = env.optimal_plan()[:-1]
            for i in range(300):  # an agent that keeps (re)doing the work: there is always some to undo
                r = env.step(plan[i % len(plan)])
                changed += bool(r.events)
                if level == "static":
                    assert not r.events
            for _ in range(20):  # on its own, the world changes exactly when an event says so
                before = env.gold_state()
                r = env.step(("noop",))
                assert bool(r.events) == (r.gold != before)
                if level == "static":
                    assert r.gold == before
        counts[level] = changed
    assert counts["static"] == 0 < counts["low"] < counts["medium"] < counts["high"], counts


def test_mutations_never_achieve_anything_and_keep_the_task_solvable() -> None:
    kinds: set[str] = set()
    for seed in range(8):
        env = make(10, 3, seed, archetype=seed, mutation="high")
        w = env.world
        play(env, env.optimal_plan()[: len(env.optimal_plan()) // 2])
        for _ in range(60):
            before = set(env.gold_state())
            r = env.step(("noop",))
            new = set(r.gold) - before
            assert all(f[0] in ("empty", "unbound") for f in new), new
            kinds |= {f[0] for f in new}
            assert not any(f[0] == "empty" and f[1] in w.inputs for f in new)  # inputs never expire
        # the same world without mutation, from here: rewiring and rerunning everything wins
        static = make(10, 3, seed, archetype=seed)
        static.restore(env.snapshot())
        assert static.gold_state() == env.gold_state()
        results = replay(static, [*plan_after(w, w.order), ("submit", w.target)])
        assert results[-1].success
    assert kinds == {"empty", "unbound"}
    for seed in range(4):  # and, exhaustively, in small worlds
        env = make(3, 1, seed, archetype=seed, mutation="high", branching=1)
        play(env, env.optimal_plan()[:-1])
        for _ in range(10):
            env.step(("noop",))
        static = make(3, 1, seed, archetype=seed, branching=1)
        static.restore(env.snapshot())
        assert search(static) is not None


def test_an_expired_value_must_be_recomputed() -> None:
    found = 0
    for seed in range(20):
        env = make(8, 2, seed, archetype=seed % 10, mutation="high")
        w = env.world
        for r in run_policy(env, seed, steps=200):
            for event in r.events:
                name = event.split()[0]
                if not event.endswith(" expired") or name not in w.producer:
                    continue
                consumers = [t for t in w.tools if name in w.requires[t]]
                gold = set(r.gold)
                for t in consumers:
                    if env.done:
                        continue
                    if all(
                        ("bound", t, a, u) in gold for a, u in zip(PARAM_NAMES, w.requires[t], strict=False)
                    ):
                        snap = env.snapshot()
                        result = env.step(("call", t))
                        assert result.error == "skipped_dependency"
                        assert ("value", name, w.genuine[name]) in result.unmet
                        env.restore(snap)
                        found += 1
    assert found > 3


# --- determinism -------------------------------------------------------------------


def test_the_same_seed_gives_the_same_episode() -> None:
    for mode in ("clean", "partial", "distractor", "conflict"):
        spec = StressSpec(sc=20, dd=4, horizon=60, observation=mode, mutation="high")
        assert trace(ToolDAG, spec, 77, 5, 1) == trace(ToolDAG, spec, 77, 5, 1)
        assert trace(ToolDAG, spec, 77, 5, 1) != trace(ToolDAG, spec, 78, 5, 1)


def test_archetypes_and_variants_give_different_worlds() -> None:
    spec = StressSpec(sc=10, dd=2)
    worlds, structures = set(), set()
    for archetype, variant in itertools.product(range(10), range(10)):
        env = ToolDAG(spec)
        _, task = env.reset(episode_seed(0, spec, archetype, variant), archetype)
        worlds.add(env.gold_state())
        structures.add(tuple(f for f in task.facts if f[0] in ("requires", "target")))
    assert len(worlds) == len(structures) == 100
    assert len({a.shape for a in ARCHETYPES}) == 10
    # the shapes themselves differ: the DAGs over topological positions, one seed
    shapes = set()
    for archetype in range(10):
        w = build_world(12, 3, 0, archetype)
        pos = {t: i for i, t in enumerate(w.order)}
        shapes.add(tuple(tuple(sorted(pos[u] for u in w.upstream[t])) for t in w.order))
    assert len(shapes) == 10


def test_tokens_are_opaque_and_distinct() -> None:
    w = build_world(30, 4, 5, 6)
    tokens = list(w.genuine.values())
    assert len(set(tokens)) == len(tokens)
    assert all(len(tok) == 8 and int(tok, 16) >= 0 for tok in tokens)
    other = build_world(30, 4, 6, 6)
    assert not set(tokens) & set(other.genuine.values())  # another seed, other values


_DIGEST = """
import hashlib
from horizonbench.datasets.worlds.base import StressSpec
from horizonbench.datasets.worlds.tool_dag import ToolDAG
h = hashlib.sha256()
for mode in ("partial", "distractor", "conflict"):
    env = ToolDAG(StressSpec(sc=20, dd=4, horizon=200, branching=6, observation=mode, mutation="high"))
    obs, task = env.reset(12345, 7)
    h.update(repr((obs.facts, task.facts, task.text, env.optimal_plan())).encode())
    plan = list(env.optimal_plan())
    for i in range(150):
        if env.done:
            break
        acts = env.valid_actions()
        r = env.step(plan[i % len(plan)] if i % 2 else acts[(i * 7) % len(acts)])
        h.update(repr((r.observation.facts, r.gold, r.error, r.events)).encode())
print(h.hexdigest())
"""


def test_episodes_do_not_depend_on_hash_randomisation() -> None:
    assert len(hash_seed_digests(_DIGEST)) == 1


# --- the task and agent-written states ---------------------------------------------


def test_task_states_the_target_every_signature_and_the_syntax() -> None:
    env = ToolDAG(REGIMES["IV"].spec())
    _, task = env.reset(3, 3)
    w = env.world
    assert task.env == "tool_dag" and task.goal == (("submitted", w.target),)
    assert f"submit({w.target})" in task.text and "You have 40 steps." in task.text
    for verb in ("bind(tool, param, name)", "call(tool)", "inspect(name)", "submit(variable)", "noop"):
        assert verb in task.text
    facts = set(task.facts)
    assert ("target", w.target) in facts
    for t in w.tools:
        v = w.writes[t]
        assert ("writes", t, v, w.type_of[v]) in facts
        sig = ", ".join(
            f"{a}: {w.type_of[u]} <- {u}" for a, u in zip(PARAM_NAMES, w.requires[t], strict=False)
        )
        assert f"{t}({sig}) -> {v}: {w.type_of[v]}" in task.text
    for d in task.entities["decoy"]:
        assert f"  {d}(" in task.text
    assert "expire" in task.text  # mutation is announced (regime IV mutates)
    assert set(task.entities) == {"variable", "input", "tool", "decoy", "scratch"}
    assert task.extra["decoys"] == 3 and task.extra["shape"] == ARCHETYPES[3].shape
    assert set(task.extra["types"]) <= set(TYPE_NAMES)


def test_subgoals_are_the_needed_calls_in_topological_order() -> None:
    for sc, dd, archetype in itertools.product((5, 20), (1, 3), range(10)):
        env = make(sc, dd, seed=archetype, archetype=archetype)
        task = env._task  # noqa: SLF001
        w = env.world
        names = [sg.name for sg in task.subgoals]
        assert names == list(w.order) and sorted(names) == sorted(w.tools)
        calls = [a[1] for a in env.optimal_plan() if a[0] == "call"]
        assert calls == names
        done: set[str] = set()
        for sg in task.subgoals:
            v = w.writes[sg.name]
            assert sg.target == ("value", v, w.genuine[v])
            assert [p[3] for p in sg.preconditions] == list(w.requires[sg.name])
            assert (sg.after is None) == (not w.upstream[sg.name])
            assert sg.after is None or (sg.after in w.upstream[sg.name] and sg.after in done)
            assert set(w.upstream[sg.name]) <= done and sg.sealed == ()
            done.add(sg.name)


def test_invariant_violations() -> None:
    env = make(10, 2, seed=1, archetype=0, branching=2)
    w = env.world
    replay(env, env.optimal_plan()[:7])
    gold = env.gold_state()
    assert env.invariant_violations(gold) == []
    assert env.invariant_violations([*gold, *env._task.facts]) == []  # noqa: SLF001 - the spec is no clash
    v, x, t = w.variables[0], w.inputs[0], w.order[0]
    u = w.requires[t][0]
    wrong = next(n for n in w.inputs + w.variables if w.type_of[n] != w.type_of[u])

    def flagged(facts: list[Fact], text: str) -> bool:
        return any(text in p for p in env.invariant_violations(facts))

    assert flagged([("value", v, "aa"), ("empty", v)], f"{v} holds two values")
    assert flagged([("bound", t, "a1", u), ("unbound", t, "a1")], f"{t}.a1 is wired twice")
    assert flagged([("pending", w.target), ("submitted", w.target)], "both pending and submitted")
    assert flagged([("empty", x)], "given inputs are never empty")
    assert flagged([("value", "v99", "aa")], "no variable or input")
    assert flagged([("bound", "t99", "a1", u)], "no tool")
    assert flagged([("bound", t, "a7", u)], f"{t} has no parameter a7")
    assert flagged([("bound", t, "a1", wrong)], f"takes a {w.type_of[u]}")
    assert flagged([("type", u, "banana")], "no type")
    other_type = next(ty for ty in TYPE_NAMES if ty != w.type_of[u])
    assert flagged([("type", u, other_type)], f"declared a {w.type_of[u]}")
    assert flagged([("submitted", v if v != w.target else w.variables[1])], "not the target")
    assert flagged([("flying", v)], "unknown predicate")
    assert flagged([("empty", v, "now")], "takes 1")
    assert flagged(["value(v1, aa)"], "not a tuple")  # type: ignore[list-item]
    assert env.normalize([["empty", v]]) == {("empty", v)}  # type: ignore[list-item]
    assert env.slot(("value", v, "aa")) == env.slot(("empty", v)) == ("var", v)
    assert env.slot(("bound", t, "a1", u)) == env.slot(("unbound", t, "a1")) == ("arg", t, "a1")
    assert env.slot(("requires", t, "a1", u)) is None


def test_snapshots_restore_the_whole_episode() -> None:
    env = make(20, 2, seed=8, archetype=8, observation="conflict", mutation="high")
    play(env, env.optimal_plan()[:10])
    snap = env.snapshot()
    a = [(r.gold, r.observation.facts, r.events) for r in run_policy(env, 5, steps=30)]
    env.restore(snap)
    b = [(r.gold, r.observation.facts, r.events) for r in run_policy(env, 5, steps=30)]
    assert a == b
    other = make(20, 2, seed=9, archetype=8)
    with pytest.raises(ValueError, match="another episode"):
        other.restore(snap)
    wider = make(20, 2, seed=8, archetype=8, branching=5)  # other decoys: another episode
    with pytest.raises(ValueError, match="another episode"):
        wider.restore(snap)


# --- speed -------------------------------------------------------------------------


def test_steps_are_cheap() -> None:
    """Prints env steps per second on a valid-action walk (run with -s to see): the
    walk is drawn first, then replayed and timed, so the figure is the cost of
    ``step`` alone; a second figure includes a ``valid_actions()`` call per step.
    Asserts only a generous liveness bound."""
    for mode in ("clean", "partial", "distractor", "conflict"):
        env = make(20, 4, seed=1, archetype=1, observation=mode, mutation="medium", horizon=100_000)
        rng = random.Random(0)
        plan = env.optimal_plan()[:-1]  # never submit: the walk must not end
        walk = []
        for i in range(10_000):
            acts = [a for a in env.valid_actions() if a[0] != "submit"]
            action = plan[i % len(plan)]
            if i % 3 or action not in acts:
                action = acts[rng.randrange(len(acts))]
            walk.append(action)
            env.step(action)
        env.reset(1, 1)
        start = time.perf_counter()
        for action in walk:
            env.step(action)
        rate = len(walk) / (time.perf_counter() - start)
        env.reset(1, 1)
        start = time.perf_counter()
        for _ in range(3_000):
            acts = env.valid_actions()
            action = acts[rng.randrange(len(acts))]
            env.step(action if action[0] != "submit" else ("noop",))
        with_valid = 3_000 / (time.perf_counter() - start)
        print(f"tool_dag sc=20 dd=4 {mode}: {rate:,.0f} steps/s ({with_valid:,.0f} with valid_actions)")
        assert rate > 1_000 and with_valid > 500
        assert hashlib.sha256(repr(env.gold_state()).encode()).hexdigest()
