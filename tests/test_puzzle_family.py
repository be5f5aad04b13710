"""The puzzle families through the family protocol: rows, prompts, whole-plan scoring,
rollout episodes and their failure modes, and the offline baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from horizonbench.analysis.compounding import fit_eps
from horizonbench.core.errors import ConfigError
from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.base import Certificate, trajectory_ok
from horizonbench.datasets.puzzles.family import PuzzleFamily
from horizonbench.datasets.puzzles.rollout import Episode
from horizonbench.schemas.config import parse_config
from puzzle_helpers import PUZZLES, SMALL, puzzle_rows


def rows_of(name: str, limit: int = 200) -> list[dict]:
    out = puzzle_rows(name, limit=limit)
    assert out, name
    return out


@pytest.fixture(scope="module", params=PUZZLES)
def puzzle(request):
    return request.param, get_family(request.param), rows_of(request.param)


def test_rows_follow_the_schema_and_replay(puzzle):
    import pyarrow as pa

    name, fam, rows = puzzle
    table = pa.Table.from_pylist(rows, schema=fam.instance_schema)
    assert table.num_rows == len(rows)
    for row in rows:
        assert row["family"] == name and 1 <= row["n"] <= 10
        assert len(row["moves"]) == row["solution_length"] == len(row["states"]) - 1
        assert row["states"][0] == row["initial_state"] and row["states"][-1] == row["goal_state"]
        assert fam.trajectory_problem(row) == "ok"
    assert len({r["instance_id"] for r in rows}) == len(rows)


def test_generation_is_a_pure_function_of_params(puzzle):
    name, _, rows = puzzle
    assert rows_of(name) == rows


def test_oracle_plan_succeeds_and_random_rarely_does(puzzle):
    _, fam, rows = puzzle
    rng = np.random.default_rng(0)
    for row in rows:
        s = fam.score(row, fam.parse_answer(fam.offline_answer(row, "oracle", rng, 0.0)))
        assert s.success and s.valid and s.exact_match and s.violation is None
        assert s.extra["optimality_gap"] == 0.0 and s.progress_ratio == 1.0


def test_plan_prompt_shows_rules_states_and_an_example_that_is_not_the_puzzle(puzzle):
    _, fam, rows = puzzle
    ps = fam.prompt_model()
    for row in rows[:20]:
        msgs = fam.render_prompt(row, ps)
        text = msgs[-1].content
        assert row["initial_state"] in text and row["goal_state"] in text
        assert f"Start: {row['initial_state']}\nGoal: {row['goal_state']}\n\nGive" in text
        example = fam._example(row)
        if example is not None:
            assert example["n"] != row["n"]


def _play(fam: PuzzleFamily, row: dict, kind: str, eps: float, seed: int) -> Episode:
    ep = fam.episode(row)
    rng = np.random.default_rng(seed)
    while not ep.done:
        ep.feed(fam.offline_step(row, fam.puzzle.format_state(ep.state), kind, rng, eps))
    return ep


def test_oracle_rollout_reaches_the_goal_in_optimal_steps(puzzle):
    _, fam, rows = puzzle
    for row in rows:
        ep = _play(fam, row, "oracle", 0.0, 0)
        assert ep.solved and ep.failure is None
        assert ep.steps == row["solution_length"] and ep.legality_rate() == 1.0
        s = fam.score_episode(row, ep)
        assert s.success and s.extra["optimality_gap"] == 0.0 and s.extra["mode"] == "rollout"


def test_random_rollouts_end_in_a_named_mode(puzzle):
    _, fam, rows = puzzle
    modes = set()
    for i, row in enumerate(rows):
        ep = _play(fam, row, "random", 0.0, i)
        assert ep.done
        assert ep.solved or ep.failure in ("loop", "horizon_exceeded", "premature_stop")
        assert ep.steps <= 2 * row["solution_length"]
        modes.add(ep.failure)
    assert modes - {None}, "random walks never failed"


def test_noisy_mistakes_are_always_failures(puzzle):
    """eps = 1: the first step is a mistake, in both modes."""
    _, fam, rows = puzzle
    rng = np.random.default_rng(3)
    for row in rows:
        s = fam.score(row, fam.parse_answer(fam.offline_answer(row, "noisy", rng, 1.0)))
        assert not s.success and s.first_violation_step == 0 and s.violation in fam.violations
        ep = _play(fam, row, "noisy", 0.999999, 5)
        assert ep.failure == "invalid_move" and ep.failure_step == 0


def test_failure_modes_of_a_rollout():
    fam = get_family("hanoi")
    row = next(r for r in rows_of("hanoi") if r["n"] == 3)
    pz = fam.puzzle
    states = row["states"]

    def fed(*answers: str, finish: str = "stop") -> Episode:
        ep = fam.episode(row)
        for a in answers:
            ep.feed(a, finish)
        return ep

    assert fed("I think the answer is a banana").failure == "invalid_output"
    assert fed("STOP").failure == "premature_stop"
    assert fed(f"Next state: {states[1]}", finish="length").failure == "budget_exceeded"
    assert fed(f"Next state: {states[2]}").failure == "invalid_move"  # two moves at once
    # one legal move and back again: a loop
    assert fed(f"Next state: {states[1]}", f"Next state: {states[0]}").failure == "loop"
    ok = fed(*[f"reasoning...\nNext state: {s}" for s in states[1:]])
    assert ok.solved and ok.failure is None
    # wandering without loops until T_max = 2 L*
    ep = fam.episode(row)
    seen = {ep.state}
    rng = np.random.default_rng(0)
    while not ep.done:
        options = [t for _, t in pz.successors(ep.state, fam.rules_of(row)) if t not in seen and t != ep.goal]
        if not options:
            break
        nxt = options[int(rng.integers(len(options)))]
        seen.add(nxt)
        ep.feed(pz.format_state(nxt))
    assert ep.failure in ("horizon_exceeded", None) or ep.steps < 2 * row["solution_length"]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_answer_text_ends_in_a_named_state(text):
    fam = get_family("river_crossing")
    row = rows_of("river_crossing")[3]
    ep = fam.episode(row)
    ep.feed(text)
    assert ep.failure in (None, "invalid_output", "invalid_move", "loop", "premature_stop")
    s = fam.score(row, fam.parse_answer(text))
    assert s.violation in fam.violations or s.success


@pytest.mark.parametrize("mode", ["plan", "rollout"])
def test_noisy_eps_is_recovered_by_the_compounding_fit(mode):
    """The noisy baseline fails each move with probability eps: the fitted eps of
    P = (1 - eps)^L must land within 15% of the truth."""
    eps = 0.05
    L, s = [], []
    for name in ("hanoi", "blocks_world", "river_crossing"):
        fam = get_family(name)
        rows = rows_of(name)
        for rep in range(8 if mode == "plan" else 4):
            for i, row in enumerate(rows):
                seed = rep * 100_003 + i
                if mode == "plan":
                    text = fam.offline_answer(row, "noisy", np.random.default_rng(seed), eps)
                    ok = fam.score(row, fam.parse_answer(text)).success
                else:
                    ok = _play(fam, row, "noisy", eps, seed).solved
                L.append(row["solution_length"])
                s.append(ok)
    fit = fit_eps(np.array(L), np.array(s))
    assert abs(fit.eps - eps) / eps < 0.15, fit
    assert fit.eps_low < eps < fit.eps_high


@pytest.mark.parametrize(
    ("family", "params", "field"),
    [
        ("hanoi", {"ns": [0]}, "ns"),
        ("hanoi", {"ns": [11]}, "ns"),
        ("river_crossing", {"capacities": [0]}, "capacities"),
        ("blocks_world", {"num_stacks": 1}, "num_stacks"),
        ("checkers", {"ns": [3, 12]}, "ns"),
    ],
)
def test_bad_n_or_capacity_is_one_clear_error_naming_the_field(family, params, field):
    raw = {"families": {family: {"params": params, "sampling": {"all": True}}}}
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    message = str(err.value)
    assert f"families.{family}.params.{field}" in message and "\n" not in message


def test_a_mode_the_family_lacks_is_refused():
    raw = {
        "families": {
            "maze": {
                "params": {"grid_rows": 4, "grid_cols": 4},
                "sampling": {"count": 1},
                "modes": ["rollout"],
            }
        }
    }
    with pytest.raises(ConfigError, match=r"families\.maze\.modes: maze supports plan, not 'rollout'"):
        parse_config(raw)


def test_fit_eps_edges():
    f = fit_eps(np.array([3, 5, 7]), np.array([True, True, True]))
    assert f.eps == 0.0 and f.eps_low == 0.0 and 0 < f.eps_high < 1
    f = fit_eps(np.array([3, 5, 7]), np.array([False, False, False]))
    assert f.eps == 1.0 and f.eps_high == 1.0 and 0 < f.eps_low < 1
    assert math.isnan(fit_eps(np.array([0]), np.array([True])).eps)


#: the 95% point of chi-square with 1 degree of freedom, from scipy (not the module's copy)
_CHI2_95 = float(stats.chi2.ppf(0.95, 1))


def _exact_loglik(eps: float, L: np.ndarray, s: np.ndarray) -> float:
    """The compounding model's log-likelihood written independently: each attempt is a
    Bernoulli draw with success probability (1 - eps)^L."""
    return float(stats.bernoulli.logpmf(s.astype(int), np.power(1.0 - eps, L)).sum())


def test_fit_eps_all_solved_upper_bound_is_the_closed_form_lr_bound() -> None:
    """Every attempt solved: log L(eps) = sum(L) log(1 - eps), maximal (0) at eps = 0, so
    the 95% LR bound solves -2 sum(L) log(1 - eps) = chi2(1, 0.95):
    eps_high = 1 - exp(-3.84 / (2 sum L)). (Using chi2 instead of chi2 / 2 on the
    log-likelihood scale would give 1 - exp(-3.84 / sum L), about twice as far.)"""
    L = np.array([3, 5, 7, 1, 12])
    f = fit_eps(L, np.ones(L.size, dtype=bool))
    assert f.eps_high == pytest.approx(1.0 - math.exp(-_CHI2_95 / (2 * L.sum())), rel=1e-8)


@settings(max_examples=60, deadline=None)
@given(
    attempts=st.lists(st.tuples(st.integers(1, 40), st.booleans()), min_size=2, max_size=30).filter(
        lambda a: 0 < sum(ok for _, ok in a) < len(a)
    )
)
def test_fit_eps_interval_is_the_exact_profile_likelihood_interval(attempts) -> None:
    """With both outcomes present the bounds are where the deviance
    2 (log L(eps_hat) - log L(eps)) reaches chi2(1, 0.95), on a log-likelihood written
    independently of the module (eps is the only parameter, so this is its profile), and
    every eps strictly between them has a smaller deviance."""
    L = np.array([a for a, _ in attempts], dtype=float)
    s = np.array([ok for _, ok in attempts], dtype=bool)
    f = fit_eps(L, s)
    best = _exact_loglik(f.eps, L, s)
    grid = np.linspace(1e-6, 1 - 1e-6, 401)
    assert best >= max(_exact_loglik(e, L, s) for e in grid) - 1e-6  # eps_hat is the maximum

    def deviance(e: float) -> float:
        return 2.0 * (best - _exact_loglik(e, L, s))

    assert f.eps_low < f.eps < f.eps_high
    for bound in (f.eps_low, f.eps_high):
        if 1e-9 < bound < 1 - 1e-9:
            assert deviance(bound) == pytest.approx(_CHI2_95, abs=1e-5)
    for e in np.linspace(f.eps_low, f.eps_high, 12)[1:-1]:
        assert deviance(float(e)) < _CHI2_95


@pytest.mark.parametrize("name", PUZZLES)
def test_a_certificate_that_stops_short_of_the_goal_is_not_a_trajectory(name: str) -> None:
    """``trajectory_ok`` checks the end, not only legality and agreement: every proper
    prefix of a certificate replays legally and matches its own states, yet it stops
    before the goal, so it is rejected; the whole certificate is accepted."""
    puzzle = get_family(name).puzzle  # type: ignore[attr-defined]
    params = puzzle.params_model.model_validate(SMALL[name])
    checked = 0
    for n in SMALL[name]["ns"]:
        for config in puzzle.configurations(n, params, 0)[:3]:
            cert = puzzle.certify(config, params.node_limit)
            if not isinstance(cert, Certificate) or cert.length == 0:
                continue
            assert trajectory_ok(puzzle, config, cert)
            for cut in range(cert.length):
                short = Certificate(cert.states[: cut + 1], cert.moves[:cut], cert.nodes)
                assert not trajectory_ok(puzzle, config, short), (name, config.label, cut)
            checked += 1
    assert checked >= 3, name


def test_every_family_meets_the_widened_contract():
    """The maze is unchanged (plan only); the puzzles add the episode half."""
    from horizonbench.core.registry import EpisodeFamily, Family, family_modes, family_names

    assert {"maze", *PUZZLES} <= set(family_names())
    maze = get_family("maze")
    assert isinstance(maze, Family) and not isinstance(maze, EpisodeFamily)
    assert family_modes(maze) == ("plan",)
    for name in PUZZLES:
        fam = get_family(name)
        assert isinstance(fam, EpisodeFamily) and family_modes(fam) == ("plan", "rollout")
