"""World agents with planted mechanisms (issue 22): the decaying agent, whose world state
fails a known number of steps before its actions do, and the unusable agent, the real
harness over an offline model whose answers are unusable at a set rate; and the fixes
they exposed (the lag table was empty, unusable answers read as world-state collapse,
budget stops were left out of the rates, the dry run never warned of a budget too small
for the horizon)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.analysis import trajectory
from horizonbench.analysis import worlds as world_analysis
from horizonbench.core.errors import ConfigError
from horizonbench.datasets.worlds.agents import (
    DecayingMemoryAgent,
    OracleAgent,
    decay_hazard,
    make_agent,
    planted_lag,
    planted_lag_distribution,
    planted_success,
    tau_w_delay,
)
from horizonbench.datasets.worlds.base import REGIMES, episode_seed
from horizonbench.datasets.worlds.episode import EpisodeSpec, run_episode
from horizonbench.datasets.worlds.study import AgentSpec, Study, environment_class, resolve_horizon, run_shard
from horizonbench.harness.agent import HarnessSettings
from horizonbench.harness.estimate import estimate_agent, format_world_estimate
from horizonbench.harness.offline import UNUSABLE_ANSWERS, UnusableAnswersAgent, planted_outcomes
from horizonbench.harness.outputs import PlannerOutput, SelfDiagOutput, UpdaterOutput, read_output
from horizonbench.schemas.config import parse_config
from horizonbench.tasks.evaluate.world_episodes import agent_specs

ENVS = ("stateful_puzzle", "graph_nav", "tool_dag")


def episode(env_name: str, sc: int, dd: int = 1, variant: int = 0, archetype: int = 0, factor: float = 1.5):
    spec = REGIMES["III"].spec(sc, dd)
    seed = episode_seed(23, [env_name, *spec.cell()], archetype, variant)
    ep = resolve_horizon(EpisodeSpec(env_name, spec, seed, archetype, variant, "III"), factor)
    return environment_class(env_name)(ep.spec), ep


# --- the decaying agent: planted truth ----------------------------------------------------


def test_the_planted_delay_follows_the_analysis_definition_of_tau_w():
    assert [tau_w_delay(t) for t in range(8)] == [0, 1, 2, 2, 2, 2, 2, 2]
    for t in range(12):
        r = [1.0] * t + [0.0] * 10
        assert trajectory.tau_w(r) == t + tau_w_delay(t)
    assert planted_lag(10, 5) == -3 and planted_lag(0, 0) == 0


def test_the_hazard_grows_with_sc_beyond_capacity_only():
    assert decay_hazard(10, 12, 0.05) == 0.0 == decay_hazard(12, 12, 0.05)
    hs = [decay_hazard(sc, 12, 0.05) for sc in range(12, 30)]
    assert all(a < b for a, b in zip(hs, hs[1:], strict=False))
    assert decay_hazard(13, 12, 0.05) == pytest.approx(0.05)
    assert decay_hazard(40, 12, 1.0) == 1.0 and decay_hazard(40, 12, 0.0) == 0.0


@given(
    sc=st.integers(3, 60),
    length=st.integers(1, 200),
    capacity=st.integers(1, 40),
    rate=st.floats(0.0, 1.0),
    lead=st.integers(0, 30),
)
def test_the_planted_lag_distribution_is_a_distribution(sc, length, capacity, rate, lead):
    dist = planted_lag_distribution(sc, length, capacity, rate, lead)
    if decay_hazard(sc, capacity, rate) == 0.0 or length <= lead:
        assert dist == {}
        assert planted_success(sc, length, capacity, rate, lead) == 1.0
    else:
        assert math.isclose(sum(dist.values()), 1.0)
        assert set(dist) <= {-lead, 1 - lead, 2 - lead}
        assert all(p >= 0 for p in dist.values())
    assert 0.0 <= planted_success(sc, length, capacity, rate, lead) <= 1.0


@pytest.mark.parametrize("env_name", ENVS)
def test_the_decaying_agent_plants_its_lag_exactly_in_static_worlds(env_name):
    """In every environment: tau_A = onset + lead and tau_W = onset + delay, so each lost
    episode's lag is the planted one; with lead 6 the world state always fails first;
    an episode is won exactly when the first wrong action would come after the plan."""
    lead, checked, won = 6, 0, 0
    for v in range(16):
        env, ep = episode(env_name, 18, 2, variant=v, archetype=v % 10)
        agent = DecayingMemoryAgent(10, 0.03, lead, "decaying")
        row = run_episode(env, agent, ep).episode
        assert agent.onset is not None
        lost = agent.onset + lead < row["optimal_length"]
        assert row["success"] == (not lost), (agent.onset, row["optimal_length"])
        if row["success"]:
            won += 1
            continue
        checked += 1
        assert row["tau_a"] == agent.onset + lead
        assert row["tau_w"] == agent.onset + tau_w_delay(agent.onset)
        assert row["lag"] == planted_lag(agent.onset, lead) < 0
        # the onset columns date the drop itself: the lead as planted, without tau_W's delay
        assert row["tau_w_onset"] == agent.onset and row["lag_onset"] == -lead
        assert row["collapse_type"] in trajectory.COLLAPSE_TYPES
    assert checked >= 8, (checked, won)


@pytest.mark.parametrize(("env_name", "ctype"), [("tool_dag", "world_state"), ("graph_nav", "compound")])
def test_the_decaying_agents_collapse_type_follows_the_environments_consistency_check(env_name, ctype):
    """Not planted, but stated in the README: tool_dag flags the mistaken state as
    inconsistent, so the collapse opens at the onset and the world state dominates;
    graph_nav does not, so it opens at the first wrong action, with both signals."""
    types = []
    for v in range(12):
        env, ep = episode(env_name, 16, 2, variant=v, archetype=v % 10)
        row = run_episode(env, DecayingMemoryAgent(10, 0.02, 5, "d"), ep).episode
        if not row["success"]:
            types.append(row["collapse_type"])
    assert len(types) >= 8 and set(types) == {ctype}


@pytest.mark.parametrize("env_name", ENVS)
def test_within_capacity_the_decaying_agent_is_the_oracle(env_name):
    for sc in (5, 9):
        env, ep = episode(env_name, sc, 2, variant=3)
        a = run_episode(env, OracleAgent("x"), ep)
        b = run_episode(environment_class(env_name)(ep.spec), DecayingMemoryAgent(sc, 0.5, 2, "x"), ep)
        assert a.steps == b.steps and a.episode == b.episode


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sc=st.integers(6, 16),
    capacity=st.integers(3, 8),
    rate=st.floats(0.01, 0.3),
    lead=st.integers(0, 8),
    variant=st.integers(0, 50),
    env_name=st.sampled_from(ENVS),
)
def test_every_lost_decaying_episode_has_the_planted_times(sc, capacity, rate, lead, variant, env_name):
    env, ep = episode(env_name, sc, 1, variant=variant, archetype=variant % 10)
    agent = DecayingMemoryAgent(capacity, rate, lead, "d")
    result = run_episode(env, agent, ep)
    row = result.episode
    if sc <= capacity:  # never scrambles: the oracle
        assert agent.onset is None and row["success"] and row["invalid_actions"] == 0
        return
    assert agent.onset is not None
    if agent.onset + lead >= row["optimal_length"]:
        assert row["success"]
        return
    assert not row["success"] and row["outcome"] == "failure"
    assert row["tau_a"] == agent.onset + lead
    assert row["tau_w"] == agent.onset + tau_w_delay(agent.onset)
    # the state is exact before the onset and entirely wrong from it on
    js = [s["jaccard"] for s in result.steps]
    assert js[: agent.onset] == [1.0] * agent.onset and set(js[agent.onset :]) == {0.0}


def test_the_decaying_agent_is_reproducible_and_its_onset_is_geometric():
    onsets = []
    for v in range(300):
        env, ep = episode("graph_nav", 14, 1, variant=v, archetype=v % 10)
        a = DecayingMemoryAgent(10, 0.05, 3, "d")
        first = run_episode(env, a, ep)
        onsets.append(a.onset)
        if v < 3:  # the same world and agent give the same rows
            again = run_episode(
                environment_class("graph_nav")(ep.spec), DecayingMemoryAgent(10, 0.05, 3, "d"), ep
            )
            assert again.episode == first.episode and again.steps == first.steps
    h = decay_hazard(14, 10, 0.05)
    # the mean of a geometric onset (failures before the first hit) is (1 - h) / h
    mean, sd = (1 - h) / h, math.sqrt(1 - h) / h
    assert abs(np.mean(onsets) - mean) < 4 * sd / math.sqrt(len(onsets))


def test_success_and_the_lag_distribution_match_the_planted_functions_over_a_study():
    """Calibration in small: over 240 worlds the successes and the counts of each lag are
    within 4 standard deviations of what planted_success and planted_lag_distribution
    predict from each world's sc and L* (independent episodes: sums of Bernoullis)."""
    C, r, k = 8, 0.04, 3
    study = Study(ENVS, "III", (9, 12, 16), (1,), 10, 8, horizon_factor=1.5)
    rows, _ = run_shard(
        study.episodes(4), [AgentSpec("d", "decaying", {"capacity": C, "rate": r, "lead": k})], 1.5
    )
    wins = [row["success"] for row in rows]
    p_win = [planted_success(row["sc"], row["optimal_length"], C, r, k) for row in rows]
    var = sum(p * (1 - p) for p in p_win)
    assert abs(sum(wins) - sum(p_win)) < 4 * math.sqrt(var) + 1, (sum(wins), sum(p_win))
    for lag in (-k, 1 - k, 2 - k):
        probs = [
            (1 - pw) * planted_lag_distribution(row["sc"], row["optimal_length"], C, r, k).get(lag, 0.0)
            for row, pw in zip(rows, p_win, strict=True)
        ]
        seen = sum(1 for row in rows if not row["success"] and row["lag"] == lag)
        sd = math.sqrt(sum(q * (1 - q) for q in probs))
        assert abs(seen - sum(probs)) < 4 * sd + 1, (lag, seen, sum(probs))
    assert 0.1 < np.mean(wins) < 0.9  # both outcomes well represented


def test_the_lag_table_recovers_the_planted_lag_where_the_bounded_agent_left_it_empty():
    """Issue 22: the bounded agent's Jaccard never fell below 1/2, so tau_W was never
    defined and the lag table was empty. The decaying agent's lags are all planted."""
    study = Study(("stateful_puzzle",), "III", (14, 18), (1,), 10, 2, horizon_factor=1.5)
    agents = [
        AgentSpec("bounded-10", "bounded", {"capacity": 10}),
        AgentSpec("decaying-10", "decaying", {"capacity": 10, "rate": 0.05, "lead": 5}),
    ]
    rows, _ = run_shard(study.episodes(0), agents, 1.5)
    lags = world_analysis.lags(pd.DataFrame(rows)).set_index("model")
    assert lags.loc["bounded-10", "count"] == 0  # the defect, as it stands for the bounded agent
    d = lags.loc["decaying-10"]
    assert d["count"] == d["n_failed"] >= 20
    assert d["share_world_first"] == 1.0 and d["median"] == planted_lag(5, 5) == -3
    # the onset lag is the planted lead itself, and its interval (every lag equal) is that point
    assert d["onset_count"] == d["count"] and d["onset_mean"] == -5.0
    assert d["onset_mean_low"] == d["onset_mean_high"] == -5.0


# --- the unusable agent: the real harness, offline ------------------------------------------------


def test_the_unusable_answers_are_refused_by_the_harness_readers():
    for text in UNUSABLE_ANSWERS:
        for schema in (PlannerOutput, UpdaterOutput, SelfDiagOutput):
            parsed, error = read_output(text, schema)
            assert parsed is None and error


@pytest.mark.parametrize("env_name", ENVS)
def test_with_rate_0_the_unusable_agent_scores_as_the_oracle(env_name):
    env, ep = episode(env_name, 8, 2, variant=1)
    oracle = run_episode(env, OracleAgent("u"), ep)
    got = run_episode(environment_class(env_name)(ep.spec), make_agent("unusable", "u", {"rate": 0.0}), ep)
    for key in ("success", "steps", "mean_jaccard", "invalid_actions", "outcome", "collapse_type"):
        assert got.episode[key] == oracle.episode[key], key
    assert got.episode["calls"] == 3 * got.episode["steps"] and got.episode["fallbacks"] == 0
    assert got.episode["memory"] == "structured" and got.episode["output_tokens"] > 0


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("streak", [3, 2])
def test_a_model_that_never_answers_usably_is_a_format_failure_not_a_world_state_collapse(env_name, streak):
    """Issue 22: it read ``collapse_type: world_state`` with 0 invalid actions and ran the
    whole horizon at 12 calls a step."""
    env, ep = episode(env_name, 5)
    agent = UnusableAnswersAgent("u", 1.0, {"fallback_streak": streak})
    result = run_episode(env, agent, ep)
    e = result.episode
    assert (e["outcome"], e["success"], e["collapse_type"]) == ("format_failure", False, "format")
    assert e["steps"] == streak and e["invalid_actions"] == streak
    assert e["calls"] == streak * 3 * (1 + HarnessSettings().repairs)
    assert {s["error"] for s in result.steps} == {"planner_fallback"}
    assert {s["action_valid"] for s in result.steps} == {False}


def test_the_fallback_share_is_the_planted_rate():
    rate, steps, fallen = 0.2, 0, 0
    study = Study(ENVS, "III", (8,), (1,), 5, 4, horizon_factor=1.5)
    for ep in study.episodes(1):
        ep = resolve_horizon(ep, 1.5)
        agent = UnusableAnswersAgent("u", rate, {"fallback_streak": 1000})
        result = run_episode(environment_class(ep.env)(ep.spec), agent, ep)
        steps += len(result.steps)
        fallen += sum(1 for s in result.steps if s["error"] == "planner_fallback")
        assert result.episode["outcome"] in ("success", "failure")
    share = fallen / steps
    assert steps > 500
    assert abs(share - rate) < 4 * math.sqrt(rate * (1 - rate) / steps), (share, steps)


def test_the_unusable_agent_meets_the_episode_budget_and_the_stop_counts_as_a_failure():
    env, ep = episode("stateful_puzzle", 8)
    agent = UnusableAnswersAgent("u", 0.0, {"episode_output_tokens": 300})
    e = run_episode(env, agent, ep).episode
    assert e["outcome"] == "budget_exceeded" and not e["success"]
    assert "300" in e["budget_detail"]
    cell = world_analysis.grid(pd.DataFrame([e])).iloc[0]
    assert (cell["n"], cell["p"], cell["budget_exceeded"], cell["n_finished"]) == (1, 0.0, 1, 0)


def test_the_unusable_agent_needs_a_rate_and_structured_memory():
    for bad in (-0.1, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match="rate"):
            UnusableAnswersAgent("u", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory"):
        UnusableAnswersAgent("u", 0.5, {"memory": "summary"})
    with pytest.raises(ValueError, match="fallback_streak"):
        UnusableAnswersAgent("u", 0.5, {"fallback_streak": 0})


# --- configs ----------------------------------------------------------------------------------


def _study(agents: list[dict], **harness) -> dict:
    return {
        "run": {"name": "planted", "seed": 1},
        "worlds": {
            "environments": ["graph_nav"],
            "sc": [5, 8],
            "dd": [1],
            "archetypes": 1,
            "variants": 1,
            "horizon_factor": 1.5,
            "agents": agents,
            **({"harness": harness} if harness else {}),
        },
    }


def test_configs_name_the_planted_agents_and_their_harness_limits_reach_them():
    cfg = parse_config(
        _study(
            [
                {"name": "d", "kind": "decaying", "capacity": 6, "rate": 0.1, "lead": 4},
                {"name": "u", "kind": "unusable", "rate": 0.5},
            ],
            episode_output_tokens=5000,
            fallback_streak=2,
        )
    )
    d, u = agent_specs(cfg)
    assert (d.kind, dict(d.params)) == ("decaying", {"capacity": 6, "rate": 0.1, "lead": 4})
    assert u.kind == "unusable" and u.params["rate"] == 0.5
    assert (
        u.params["harness"]["fallback_streak"] == 2 and u.params["harness"]["episode_output_tokens"] == 5000
    )
    rows, _ = run_shard(cfg.worlds.study().episodes(1), [d, u], 1.5)
    assert {r["model"] for r in rows} == {"d", "u"}
    assert parse_config(_study([{"name": "o", "kind": "oracle"}])).worlds.harness.fallback_streak == 3


@pytest.mark.parametrize(
    ("agent", "needle"),
    [
        ({"kind": "decaying", "rate": 0.1, "lead": 4}, "needs 'capacity'"),
        ({"kind": "decaying", "capacity": 6, "lead": 4}, "needs 'rate'"),
        ({"kind": "decaying", "capacity": 6, "rate": 0.1}, "needs 'lead'"),
        ({"kind": "decaying", "capacity": 6, "rate": 1.5, "lead": 4}, "rate"),
        ({"kind": "decaying", "capacity": 6, "rate": 0.1, "lead": -1}, "lead"),
        ({"kind": "decaying", "capacity": 6, "rate": "0.1", "lead": 4}, "rate"),
        ({"kind": "unusable"}, "needs 'rate'"),
        ({"kind": "unusable", "rate": 0.5, "capacity": 3}, "capacity"),
        ({"kind": "unusable", "rate": 0.5, "lead": 3}, "lead"),
        ({"kind": "oracle", "rate": 0.5}, "rate"),
        ({"kind": "bounded", "capacity": 3, "lead": 2}, "lead"),
        ({"kind": "unusable", "rate": 0.5, "memory": "summary"}, "memory"),
    ],
)
def test_planted_agent_configs_are_strict(agent, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config(_study([{"name": "a", **agent}]))


def test_the_fallback_streak_is_validated():
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ConfigError, match="fallback_streak"):
            parse_config(_study([{"name": "o", "kind": "oracle"}], fallback_streak=bad))


# --- the dry run's budget warning -------------------------------------------------------------------


class _Price:
    def cost(self, i: int, o: int) -> float:
        return 0.0


def test_the_dry_run_warns_per_cell_when_an_episode_at_t_outruns_its_budget():
    study = Study(("stateful_puzzle",), "III", (5, 20), (1,), 2, 1, horizon_factor=1.5)
    eps = [resolve_horizon(e, 1.5) for e in study.episodes(0)]
    roomy = estimate_agent(eps, HarnessSettings(episode_output_tokens=10**7), _Price(), None)
    assert roomy["over_budget_cells"] == []
    # a budget between the two cells' needs: only sc = 20 is warned about
    tight = HarnessSettings(episode_output_tokens=4000)
    row = estimate_agent(eps, tight, _Price(), None)
    cells = row["over_budget_cells"]
    assert [(c["env"], c["sc"], c["dd"]) for c in cells] == [("stateful_puzzle", 20, 1)]
    assert cells[0]["over"] == 2 and cells[0]["most_tokens"] > 4000
    text = format_world_estimate([{"agent": "m", "memory": "structured", **row}])
    (line,) = [x for x in text.splitlines() if x.startswith("warning:")]
    assert "sc=20 dd=1" in line and "4,000" in line and "budget_exceeded" in line


def test_the_planted_outcome_probabilities_are_exact_in_small_cases():
    # never usable: a format failure after `streak` steps, unless T ends it first
    assert planted_outcomes(1.0, 5, 10, 3) == {"success": 0.0, "format_failure": 1.0, "failure": 0.0}
    assert planted_outcomes(1.0, 5, 3, 3)["failure"] == 1.0  # the 3rd fallback is the last step
    assert planted_outcomes(0.0, 5, 10, 3) == {"success": 1.0, "format_failure": 0.0, "failure": 0.0}
    # L* = 1, T = 2, streak 1: win at step 0 (1 - r), else the fallback ends it (r)
    r = 0.3
    got = planted_outcomes(r, 1, 2, 1)
    assert got["success"] == pytest.approx(1 - r) and got["format_failure"] == pytest.approx(r)
    # L* = 2, T = 3, streak 2: UU, UFU win; FU U win; FF format; UFF: 3rd step is the last
    got = planted_outcomes(r, 2, 3, 2)
    q = 1 - r
    assert got["success"] == pytest.approx(q * q + q * r * q + r * q * q)
    assert got["format_failure"] == pytest.approx(r * r)
    assert sum(got.values()) == pytest.approx(1.0)


def test_the_unusable_agents_outcomes_match_the_planted_probabilities():
    """Calibration in small: over 180 static worlds, the counts of each outcome are
    within 4 sd of the sums of planted_outcomes over the episodes' L* and T."""
    rate, streak = 0.25, 2
    study = Study(ENVS, "III", (6,), (1,), 10, 6, horizon_factor=1.5)
    counts = {"success": 0, "format_failure": 0, "failure": 0}
    expected = {k: [] for k in counts}
    for ep in study.episodes(9):
        ep = resolve_horizon(ep, 1.5)
        agent = UnusableAnswersAgent("u", rate, {"fallback_streak": streak})
        row = run_episode(environment_class(ep.env)(ep.spec), agent, ep).episode
        counts[row["outcome"]] += 1
        for k, p in planted_outcomes(rate, row["optimal_length"], row["horizon"], streak).items():
            expected[k].append(p)
    for k, ps in expected.items():
        sd = math.sqrt(sum(p * (1 - p) for p in ps))
        assert abs(counts[k] - sum(ps)) < 4 * sd + 1, (k, counts, {k: sum(v) for k, v in expected.items()})
    assert counts["success"] and counts["format_failure"]
