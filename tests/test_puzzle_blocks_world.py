"""Blocks World: rules, text forms, sampling and the A* certificates (checked against BFS)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from blocks_world_strategies import configuration as _config
from blocks_world_strategies import states
from horizonbench.datasets.puzzles import blocks_world as bwm
from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    IllegalMove,
    Unsolved,
    bfs_path,
    distance_map,
    trajectory_ok,
)
from horizonbench.datasets.puzzles.blocks_world import (
    BlocksWorld,
    BlocksWorldParams,
    all_states,
    count_states,
)
from horizonbench.datasets.puzzles.blocks_world_search import _Goal

BW = BlocksWorld()
DEFAULT = BlocksWorldParams()
RULES3 = {"num_stacks": 3}


# --- certificates -------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(2, 4), st.data())
def test_astar_matches_bfs(n: int, k: int, data: st.DataObject) -> None:
    start = data.draw(states(n, k))
    goal = data.draw(states(n, k))
    config = _config(start, goal)
    expected = bfs_path(start, goal, lambda s: BW.successors(s, config.rules))
    result = BW.certify(config, 10**6)
    if isinstance(expected, Unsolved):
        assert k == 2 and isinstance(result, Unsolved) and result.reason == "unsolvable"
    else:
        assert isinstance(result, Certificate) and result.length == expected.length
        assert trajectory_ok(BW, config, result)


def test_two_stacks_split_into_n_plus_one_state_islands() -> None:
    # moving between two stacks keeps "stack 1 upwards, then stack 2 downwards" fixed
    start, goal = (("A", "B"), ()), (("B", "A"), ())
    result = BW.certify(_config(start, goal), 10**6)
    assert isinstance(result, Unsolved) and result.reason == "unsolvable" and result.nodes <= 3
    assert BW.certify(_config(start, (("A",), ("B",))), 10**6).length == 1


def test_heuristic_is_admissible_and_consistent() -> None:
    rng = np.random.default_rng(7)
    for n, k in [(3, 3), (4, 3), (5, 3), (4, 4)]:
        for _ in range(6):
            goal = bwm._draw_state(rng, n, k)
            facts = _Goal(tuple("".join(s) for s in goal))
            dist = distance_map(goal, lambda s, k=k: (t for _, t in BW.successors(s, {"num_stacks": k})))
            assert len(dist) == count_states(n, k)

            def h(state, facts=facts):
                key = ["".join(s) for s in state]
                cps, bound_sum, w = facts.measure(key)
                return bound_sum + facts.penalty(key, cps, w)

            for state, d in dist.items():
                hs = h(state)
                assert hs <= d, (state, goal)
                for _, nxt in BW.successors(state, {"num_stacks": k}):
                    assert hs <= 1 + h(nxt), (state, nxt, goal)


def test_every_certificate_replays_and_counts() -> None:
    for n in range(1, 8):
        configs = BW.configurations(n, DEFAULT, seed=0)
        results = [BW.certify(c, DEFAULT.node_limit) for c in configs]
        for config, result in zip(configs, results, strict=True):
            assert isinstance(result, Certificate), config.label
            assert trajectory_ok(BW, config, result)
            assert result.length >= 1
        if n >= 3:
            assert len(configs) == 300


def test_node_limit_is_reported() -> None:
    config = next(c for c in BW.configurations(8, DEFAULT, seed=0) if BW.certify(c, 10**6).length > 3)
    assert BW.certify(config, 1).reason == "node_limit"


# --- sampling -----------------------------------------------------------------------


def test_counts_and_enumeration_agree() -> None:
    for n, k in [(0, 3), (1, 2), (2, 3), (3, 3), (3, 4), (4, 2)]:
        everything = all_states(n, k)
        assert len(everything) == len(set(everything)) == count_states(n, k)
    assert count_states(10, 3) == 3628800 * 66


def test_configurations_small_spaces_are_enumerated() -> None:
    one = BW.configurations(1, DEFAULT, seed=0)
    assert len(one) == 6 and len({(c.start, c.goal) for c in one}) == 6
    two = BW.configurations(2, DEFAULT, seed=0)
    assert len(two) == 12 * 11 and len({(c.start, c.goal) for c in two}) == 132
    assert all(c.start != c.goal and c.rules == RULES3 for c in one + two)
    assert [c.label for c in two] != sorted(c.label for c in two)  # shuffled
    assert BW.configurations(2, DEFAULT, seed=1) != two


def test_configurations_are_distinct_seeded_draws() -> None:
    configs = BW.configurations(6, DEFAULT, seed=3)
    assert len(configs) == 300
    assert len({(c.start, c.goal) for c in configs}) == 300
    assert all(c.start != c.goal for c in configs)
    assert all(BW.check_state(c.start, 6, c.rules) is None for c in configs)
    assert configs[0].label.startswith("draw ")
    assert configs == BW.configurations(6, DEFAULT, seed=3)
    assert configs != BW.configurations(6, DEFAULT, seed=4)
    small = BlocksWorldParams(per_n=5, alpha=2, num_stacks=4)
    assert [len(c.start) for c in BW.configurations(6, small, seed=0)] == [4] * 10


def test_draws_are_uniform_over_states() -> None:
    rng = np.random.default_rng(11)
    counts = Counter(bwm._draw_state(rng, 2, 3) for _ in range(12_000))
    assert set(counts) == set(all_states(2, 3))
    assert all(850 < c < 1150 for c in counts.values()), counts


# --- rules --------------------------------------------------------------------------

STATE = (("A", "B"), ("C",), ())


@pytest.mark.parametrize(
    ("move", "kind"),
    [
        (("A", 1, 3), "not_top_block"),
        (("C", 1, 3), "not_top_block"),
        (("A", 3, 1), "empty_stack"),
        (("B", 1, 1), "same_stack"),
        (("B", 1, 4), "no_such_stack"),
        (("B", 0, 2), "no_such_stack"),
        (("D", 1, 2), "no_such_block"),
    ],
)
def test_apply_names_the_broken_rule(move: tuple[str, int, int], kind: str) -> None:
    with pytest.raises(IllegalMove) as err:
        BW.apply(STATE, move, RULES3)
    assert err.value.kind == kind and kind in BW.violations


def test_apply_and_successors() -> None:
    assert BW.apply(STATE, ("B", 1, 3), RULES3) == (("A",), ("C",), ("B",))
    assert BW.apply(STATE, ("C", 2, 1), RULES3) == (("A", "B", "C"), (), ())
    assert [m for m, _ in BW.successors(STATE, RULES3)] == [
        ("B", 1, 2),
        ("B", 1, 3),
        ("C", 2, 1),
        ("C", 2, 3),
    ]
    assert (("A",), ("B",), ()) != (("B",), ("A",), ())  # stacks are positions


def test_check_state() -> None:
    assert BW.check_state(STATE, 3, RULES3) is None
    assert "stacks" in BW.check_state(STATE[:2], 3, RULES3)
    assert "C appears 0" in BW.check_state((("A", "B"), (), ()), 3, RULES3)
    assert "A appears 2" in BW.check_state((("A", "B"), ("C", "A"), ()), 3, RULES3)
    assert "'D'" in BW.check_state((("A", "B"), ("C", "D"), ()), 3, RULES3)


# --- text ---------------------------------------------------------------------------


def test_text_forms() -> None:
    assert BW.format_state(STATE) == "[[A, B], [C], []]"
    assert BW.format_move(("B", 1, 3)) == "[B, 1, 3]"
    for text in ("[[A, B], [C], []]", "[['A','B'],[\"C\"],[]]", "state: [ [A B] , (C), [] ]\n"):
        assert BW.parse_state(text) == STATE
    answer = 'Try [[A, 1, 2]]. No wait.\nFinal: [["B", 1, 3], [C, 2, 1], (A, 1, 2)] done [1]'
    assert BW.parse_moves(answer) == [("B", 1, 3), ("C", 2, 1), ("A", 1, 2)]
    assert BW.parse_moves("[]") == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no list", "no move list"),
        ("[B, 1, 3]", "no move list"),
        ("[[B, 1]]", "move 1"),
        ("[[b, 1, 3]]", "block letter"),
        ("[[B, one, 3]]", "stack number"),
        ("[[B, [1], 3]]", "deeper"),
    ],
)
def test_parse_moves_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(BadText, match=problem):
        BW.parse_moves(text)


@pytest.mark.parametrize(("text", "problem"), [("A B C", "no state list"), ("[[A, 1]]", "block letter")])
def test_parse_state_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(BadText, match=problem):
        BW.parse_state(text)


@settings(max_examples=200, deadline=None)
@given(states(), st.integers(0, 2**32 - 1))
def test_round_trip_and_noise_is_wrong(state: tuple[tuple[str, ...], ...], seed: int) -> None:
    n, rules = sum(map(len, state)), {"num_stacks": len(state)}
    assert BW.check_state(state, n, rules) is None
    assert BW.parse_state(BW.format_state(state)) == state
    legal = dict(BW.successors(state, rules))
    moves = list(legal)
    assert BW.parse_moves("[" + ", ".join(map(BW.format_move, moves)) + "]") == moves
    rng = np.random.default_rng(seed)
    if n:
        bad = BW.illegal_move(state, rules, rng)
        with pytest.raises(IllegalMove):
            BW.apply(state, bad, rules)
        assert BW.parse_moves("[" + BW.format_move(bad) + "]") == [bad]
    wrong = BW.wrong_successor(state, rules, rng)
    assert wrong != state and wrong not in legal.values()
    assert BW.parse_state(BW.format_state(wrong)) == wrong


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.text(alphabet="ABCab0123 ,[]()'\"\n", max_size=80)))
def test_parsers_raise_only_bad_text(text: str) -> None:
    for parse in (BW.parse_state, BW.parse_moves):
        try:
            parse(text)
        except BadText:
            pass


def test_hostile_input_is_linear() -> None:
    for text in ("[" * 200_000, "[[A, " * 50_000, "[[" + "A, " * 100_000 + "]]"):
        for parse in (BW.parse_state, BW.parse_moves):
            try:
                parse(text)
            except BadText:
                pass


# --- params and prompt --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_stacks": 1}, "num_stacks"),
        ({"num_stacks": 7}, "num_stacks"),
        ({"ns": [0]}, "ns"),
        ({"per_n": 0}, "per_n"),
    ],
)
def test_params_errors_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        BlocksWorldParams(**kwargs)
    assert field in str(err.value)


def test_params_defaults_and_extra_forbidden() -> None:
    assert (DEFAULT.per_n, DEFAULT.alpha, DEFAULT.num_stacks, DEFAULT.node_limit) == (100, 3, 3, 1_000_000)
    assert DEFAULT.ns == list(range(1, 11))
    with pytest.raises(ValidationError):
        BlocksWorldParams(stacks=3)


def test_describe_rules_states_the_rules_and_formats() -> None:
    text = BW.describe_rules({"num_stacks": 4}, 3)
    for needle in ("A, B, C", "4 stacks", "top block", "[[A, B], [C], []]", "[B, 1, 3]", "bottom"):
        assert needle in text
