"""World-model episodes: the agent interface, the offline agents, per-step scoring,
study seeds, and shards."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from horizonbench.analysis import phase, trajectory
from horizonbench.analysis.worlds import critical_points, grid
from horizonbench.datasets.worlds.agents import AgentStep, BoundedMemoryAgent, OracleAgent
from horizonbench.datasets.worlds.base import (
    OBSERVATION_MODES,
    REGIMES,
    StressSpec,
    episode_seed,
    format_action,
    format_fact,
)
from horizonbench.datasets.worlds.episode import EpisodeSpec, jaccard, run_episode
from horizonbench.datasets.worlds.study import (
    ENVIRONMENTS,
    AgentSpec,
    Study,
    environment_class,
    resolve_horizon,
    run_shard,
)

ENVS = tuple(ENVIRONMENTS)


def episode(
    env_name: str, sc: int, dd: int, variant: int = 0, archetype: int = 0, factor: float = 2.0, **axes
):
    spec = REGIMES["III"].spec(sc, dd).replace(**axes)
    seed = episode_seed(7, [env_name, *spec.cell()], archetype, variant)
    ep = resolve_horizon(EpisodeSpec(env_name, spec, seed, archetype, variant, "III"), factor)
    return environment_class(env_name)(ep.spec), ep


# --- the oracle --------------------------------------------------------------------


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("observation", OBSERVATION_MODES)
def test_the_oracle_tracks_the_world_exactly_and_wins_in_every_observation_mode(env_name, observation):
    for sc, dd, archetype in ((5, 1, 0), (12, 2, 3), (20, 4, 7)):
        env, ep = episode(env_name, sc, dd, archetype=archetype, observation=observation)
        result = run_episode(env, OracleAgent(), ep)
        row = result.episode
        assert row["success"], (env_name, observation, sc, dd, row["error_counts"])
        assert row["invalid_actions"] == 0
        assert [s["jaccard"] for s in result.steps] == [1.0] * len(result.steps)
        assert all(s["consistent"] for s in result.steps)
        assert all(s["dependency_correct"] for s in result.steps)
        assert all(s["self_check_correct"] for s in result.steps)
        assert row["steps"] == row["optimal_length"]
        assert math.isnan(row["tau_w"]) and math.isnan(row["tau_a"]) and row["collapse_type"] is None


# --- the bounded-memory agent ------------------------------------------------------


def success_by_sc(env_name: str, capacity: int, scs, dd: int = 1, n: int = 30) -> dict[int, float]:
    agent = BoundedMemoryAgent(capacity)
    out = {}
    for sc in scs:
        wins = 0
        for v in range(n):
            env, ep = episode(env_name, sc, dd, variant=v, archetype=v % 10, factor=1.5)
            wins += run_episode(env, agent, ep).episode["success"]
        out[sc] = wins / n
    return out


@pytest.mark.parametrize("env_name", ENVS)
def test_the_bounded_agent_falls_off_a_cliff_at_its_capacity(env_name):
    C = 12
    rates = success_by_sc(env_name, C, range(C - 3, C + 4))
    assert rates[C - 3] > 0.8, rates
    assert rates[C + 3] < 0.2, rates
    frame = pd.DataFrame([{"model": "b", "sc": sc, "dd": 1, "success": p} for sc, p in rates.items()])
    star = phase.critical_point(frame["sc"], frame["success"]).value
    assert abs(star - C) <= 2, (star, rates)


@pytest.mark.parametrize("env_name", ENVS)
def test_within_capacity_the_bounded_agent_is_the_oracle(env_name):
    for sc in (5, 9):
        env, ep = episode(env_name, sc, 2, variant=3)
        a = run_episode(env, OracleAgent("x"), ep)
        b = run_episode(env, BoundedMemoryAgent(sc, "x"), ep)
        assert a.steps == b.steps and a.episode == b.episode


def test_beyond_capacity_the_world_state_goes_wrong_before_the_actions_do():
    failed = 0
    for v in range(20):
        env, ep = episode("stateful_puzzle", 16, 1, variant=v, archetype=v % 10, factor=1.5)
        result = run_episode(env, BoundedMemoryAgent(12), ep)
        if result.episode["success"]:
            continue
        failed += 1
        first_wrong = next(s["step"] for s in result.steps if s["jaccard"] < 1.0)
        assert first_wrong < result.episode["tau_a"]
        assert result.episode["collapse_type"] in trajectory.COLLAPSE_TYPES
    assert failed >= 15


def test_bounded_agent_needs_a_positive_capacity():
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="capacity"):
            BoundedMemoryAgent(bad)  # type: ignore[arg-type]


# --- scoring what an agent writes ----------------------------------------------------


class Scripted:
    """A non-privileged agent that writes given texts: what a real model could do."""

    privileged = False

    def __init__(self, steps):
        self.name = "scripted"
        self._steps = list(steps)
        self.seen_env = "unset"

    def begin(self, observation, task, env):
        self.seen_env = env
        self.task = task

    def act(self, observation):
        return self._steps.pop(0) if self._steps else AgentStep("noop")


def test_what_an_agent_writes_is_read_strictly_and_scored_per_step():
    env, ep = episode("stateful_puzzle", 5, 1, factor=1.0)
    probe = environment_class("stateful_puzzle")(ep.spec)
    probe.reset(ep.seed, ep.archetype)
    gold = probe.observable_gold()
    plan = probe.optimal_plan()
    first_pre = probe.preconditions(plan[0])
    agent = Scripted(
        [
            AgentStep("__import__('os').system('true')", state=None),
            AgentStep("<script>go(room1)</script>", state=tuple(gold), preconditions=(), expects_valid=True),
            AgentStep(
                f"  `{format_action(plan[0])}`  ",
                state=tuple(gold) + (("open", "box999"),),
                preconditions=tuple(first_pre),
                expects_valid=False,
            ),
        ]
    )
    result = run_episode(env, agent, ep)
    assert agent.seen_env is None  # a model never sees the environment
    s0, s1, s2 = result.steps[:3]
    assert not s0["action_valid"] and s0["error"] == "unknown_action" and s0["action_read"] is None
    assert s0["jaccard"] == 0.0 and not s0["consistent"] and s0["state_size"] == -1
    assert s0["dependency_correct"] is None and s0["self_check_correct"] is None
    assert not s1["action_valid"] and s1["error"] == "unknown_action"
    assert s1["jaccard"] == 1.0 and s1["dependency_correct"] is False and s1["self_check_correct"] is False
    assert s2["action_valid"], s2
    assert s2["dependency_correct"] is True and s2["self_check_correct"] is False
    assert s2["jaccard"] == pytest.approx(len(gold) / (len(gold) + 1))
    assert result.episode["steps"] == ep.spec.horizon and not result.episode["success"]
    assert result.episode["tau_a"] == 0.0


class Observer:
    """A privileged agent that writes exactly what it could know (the observable gold
    state, or only its first ``keep`` facts in sorted order) and acts ``action``, with
    no preconditions or verdict: probes for one scoring rule at a time."""

    privileged = True
    name = "observer"

    def __init__(self, action: str = "noop", keep=None) -> None:
        self.action = action
        self.keep = keep  # number of facts kept from the observable gold state, given its size
        self.hidden_steps = 0

    def begin(self, observation, task, env):
        self.env = env

    def act(self, observation):
        known = sorted(self.env.observable_gold())
        self.hidden_steps += frozenset(known) != frozenset(self.env.gold_state())
        state = known if self.keep is None else known[: self.keep(len(known))]
        return AgentStep(self.action, state=tuple(state))


def test_jaccard_is_against_what_the_agent_could_know_in_partial_observation():
    """Partial observation with mutation: the world changes where the agent cannot see,
    so the full gold state differs from the observable one on most steps. An agent that
    states exactly what it could know has Jaccard 1.0 at every step and ``gold_size`` is
    the observable state's size."""
    env, ep = episode("graph_nav", 10, 2, observation="partial", mutation="high")
    agent = Observer()
    result = run_episode(env, agent, ep)
    assert agent.hidden_steps >= len(result.steps) // 2 > 0  # the two states differ often
    assert [s["jaccard"] for s in result.steps] == [1.0] * len(result.steps)
    assert result.episode["mean_jaccard"] == 1.0 and math.isnan(result.episode["tau_w"])


@pytest.mark.parametrize("env_name", ["stateful_puzzle", "graph_nav"])
def test_a_world_state_at_jaccard_one_half_is_not_bad_but_below_it_is(env_name):
    """``world_bad`` is ``R < 1/2`` (module docstring), so R = 1/2 exactly is not a
    world-state failure. Every action here is unreadable (invalid: the collapse starts
    at step 0) and every stated state consistent; with half the gold facts (R = 0.5) only
    the actions are bad, so the type is ``action_validity``; with one fact fewer (R just
    under 0.5) both signals are bad on every step: ``compound``."""
    env, ep = episode(env_name, 10, 2)
    result = run_episode(env, Observer("?", keep=lambda n: n // 2), ep)
    assert {s["gold_size"] % 2 for s in result.steps} == {0}  # so R is exactly 1/2
    assert {s["jaccard"] for s in result.steps} == {0.5}
    assert all(s["consistent"] and not s["action_valid"] for s in result.steps)
    assert result.episode["collapse_onset"] == 0.0
    assert result.episode["collapse_type"] == "action_validity"
    env, ep = episode(env_name, 10, 2)
    below = run_episode(env, Observer("?", keep=lambda n: n // 2 - 1), ep)
    assert max(s["jaccard"] for s in below.steps) < 0.5
    assert below.episode["collapse_type"] == "compound"


class UndeclaredOracle(OracleAgent):
    """The oracle, but it declares no preconditions and gives no self-check verdict."""

    def act(self, observation):
        step = super().act(observation)
        return AgentStep(step.action, state=step.state)


@pytest.mark.parametrize("env_name", ENVS)
def test_undeclared_preconditions_are_not_dependency_errors(env_name):
    """Preconditions an agent did not declare are null, never wrong: the oracle that
    declares none has no bad step, so no collapse onset and no collapse type, and its
    dependency accuracy is undefined (NaN), not 0."""
    env, ep = episode(env_name, 12, 2, archetype=3)
    result = run_episode(env, UndeclaredOracle(), ep)
    row = result.episode
    assert row["success"] and row["invalid_actions"] == 0
    assert {s["dependency_correct"] for s in result.steps} == {None}
    assert math.isnan(row["dependency_accuracy"])
    assert math.isnan(row["collapse_onset"]) and row["collapse_type"] is None


def test_jaccard():
    a = {("at", "x", "r1"), ("open", "b")}
    assert jaccard(a, a) == 1.0
    assert jaccard(set(), set()) == 1.0
    assert jaccard(a, set()) == 0.0
    assert jaccard(a, {("open", "b")}) == 0.5


# --- studies, seeds, shards -----------------------------------------------------------


def test_no_two_episodes_of_the_shipped_studies_share_a_seed():
    grid_study = Study(ENVS, "III", (5, 10, 20, 40), (1, 2, 4, 6), 10, 10)
    fine = Study(("stateful_puzzle",), "III", tuple(range(10, 21)), (1,), 10, 5, horizon_factor=1.5)
    seeds = [e.seed for s in (grid_study, fine) for e in s.episodes(0)]
    assert len(seeds) == 3 * 16 * 100 + 11 * 50
    # the fine scan shares the grid's worlds nowhere, even at sc = 10 and 20
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2**63 for s in seeds)


def test_seeds_come_from_the_coordinates_only():
    a = Study(ENVS, "III", (5, 10), (1, 2), 2, 3).episodes(0)
    b = Study(ENVS, "III", (10, 5), (2, 1), 2, 3).episodes(0)
    assert {(e.env, e.spec, e.archetype, e.variant): e.seed for e in a} == {
        (e.env, e.spec, e.archetype, e.variant): e.seed for e in b
    }
    assert {e.seed for e in a}.isdisjoint(
        e.seed for e in Study(ENVS, "III", (5, 10), (1, 2), 2, 3).episodes(1)
    )


def test_a_horizon_factor_keeps_the_worlds_and_sets_t_from_each_plan():
    fixed = Study(("stateful_puzzle",), "III", (20,), (4,), 3, 2).episodes(0)
    rel = Study(("stateful_puzzle",), "III", (20,), (4,), 3, 2, horizon_factor=1.5).episodes(0)
    assert [e.seed for e in fixed] != [e.seed for e in rel]  # the seed records the rule
    rel2 = Study(("stateful_puzzle",), "III", (20,), (4,), 3, 2, horizon_factor=3.0).episodes(0)
    for a, b in zip(rel, rel2, strict=True):
        a1, b1 = resolve_horizon(a, 1.5), resolve_horizon(b, 3.0)
        ea, eb = environment_class("stateful_puzzle")(a1.spec), environment_class("stateful_puzzle")(b1.spec)
        _, ta = ea.reset(a1.seed, a1.archetype)
        _, tb = eb.reset(b1.seed, b1.archetype)
        assert ta.optimal_length == tb.optimal_length
        assert a1.spec.horizon == math.ceil(1.5 * ta.optimal_length)
        assert b1.spec.horizon == math.ceil(3.0 * tb.optimal_length)
    # the paper's T = 40 is shorter than most sc = 20, dd = 4 plans: flagged, not hidden
    agents = [AgentSpec("oracle", "oracle")]
    rows, _ = run_shard(fixed, agents)
    assert any(r["horizon_short"] for r in rows)
    for r in rows:
        assert r["horizon_short"] == (r["horizon"] < r["optimal_length"])
        if r["horizon_short"]:
            assert not r["success"]


def test_shards_concatenate_to_the_same_rows_in_any_split():
    study = Study(ENVS, "III", (5, 13), (1, 2), 2, 2, horizon_factor=1.5)
    eps = study.episodes(3)
    agents = [AgentSpec("oracle", "oracle"), AgentSpec("b12", "bounded", {"capacity": 12})]
    whole = run_shard(eps, agents, 1.5)
    parts = [run_shard(eps[i : i + 3], agents, 1.5) for i in range(0, len(eps), 3)]
    assert [r for p in parts for r in p[0]] == whole[0]
    assert [r for p in parts for r in p[1]] == whole[1]
    ids = [r["episode_id"] for r in whole[0]]
    assert len(ids) == len(set(ids)) == len(eps) * 2


def test_analysis_reads_the_bounded_cliff_from_episode_rows():
    study = Study(("stateful_puzzle",), "III", tuple(range(9, 16)), (1,), 10, 2, horizon_factor=1.5)
    rows, _ = run_shard(study.episodes(0), [AgentSpec("b12", "bounded", {"capacity": 12})], 1.5)
    episodes = pd.DataFrame(rows)
    cells = grid(episodes)
    assert set(cells["sc"]) == set(range(9, 16)) and (cells["n"] == 20).all()
    crit = critical_points(episodes, bootstrap=50)
    assert abs(float(crit["sc_star"].iloc[0]) - 12) <= 2
    assert crit["sc_star_low"].iloc[0] <= crit["sc_star"].iloc[0] <= crit["sc_star_high"].iloc[0]


def test_unknown_environment_is_named():
    with pytest.raises(KeyError, match="unknown environment 'maze'"):
        environment_class("maze")


def test_regime_backdrops_and_axes_overrides():
    study = Study(("stateful_puzzle",), "V", (40,), (6,), 1, 1, axes={"observation": "partial"})
    (spec,) = study.specs()
    assert spec == StressSpec(sc=40, dd=6, horizon=80, branching=8, observation="partial", mutation="medium")
    assert format_fact(("at", "a", "b")) == "at(a, b)"
    assert np.isfinite(spec.mutation_rate)
