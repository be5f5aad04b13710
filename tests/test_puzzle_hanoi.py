"""Tower of Hanoi: certificates against the closed form, Algorithm 1 and plain BFS; the
text forms; the rule violations; the noisy baseline's mistakes."""

from __future__ import annotations

import numpy as np
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    IllegalMove,
    bfs_path,
    trajectory_ok,
)
from horizonbench.datasets.puzzles.hanoi import PEGS, Hanoi, HanoiParams, recursive_moves, tower

H = Hanoi()
PARAMS = HanoiParams()
RULES = {"start_peg": "A", "goal_peg": "C"}
TABLE4_MOVES = [6, 18, 42, 90, 186, 378, 762, 1530, 3066, 6138]


@pytest.mark.parametrize("n", range(1, 11))
def test_every_configuration_is_certified_with_the_textbook_solution(n: int) -> None:
    configs = H.configurations(n, PARAMS, seed=0)
    assert [c.label for c in configs] == ["A->B", "A->C", "B->A", "B->C", "C->A", "C->B"]
    total = 0
    for config in configs:
        cert = H.certify(config, PARAMS.node_limit)
        assert isinstance(cert, Certificate)
        assert trajectory_ok(H, config, cert)
        assert cert.length == 2**n - 1
        start, goal = config.rules["start_peg"], config.rules["goal_peg"]
        assert list(cert.moves) == recursive_moves(n, start, goal)
        assert config.start == tower(n, start) and config.goal == tower(n, goal)
        total += cert.length
    assert total == 6 * (2**n - 1) == TABLE4_MOVES[n - 1]


@pytest.mark.parametrize("n", range(1, 7))
def test_the_shared_distance_map_agrees_with_plain_bfs(n: int) -> None:
    for config in H.configurations(n, PARAMS, seed=0):
        cert = H.certify(config, PARAMS.node_limit)
        plain = bfs_path(config.start, config.goal, lambda s, r=config.rules: H.successors(s, r))
        assert isinstance(cert, Certificate) and isinstance(plain, Certificate)
        assert cert.length == plain.length


def test_a_node_limit_below_the_state_count_gives_up() -> None:
    config = H.configurations(4, PARAMS, seed=0)[1]
    assert H.certify(config, 80).reason == "node_limit"  # type: ignore[union-attr]
    assert isinstance(H.certify(config, 81), Certificate)


def test_certify_from_a_midway_state() -> None:
    config = H.configurations(3, PARAMS, seed=0)[1]
    cert = H.certify(config, PARAMS.node_limit)
    assert isinstance(cert, Certificate)
    mid = type(config)(3, config.rules, cert.states[3], config.goal)
    rest = H.certify(mid, PARAMS.node_limit)
    assert isinstance(rest, Certificate) and rest.moves == cert.moves[3:]


# --- random reachable states ------------------------------------------------------------


@st.composite
def reachable(draw: st.DrawFn) -> tuple[int, tuple]:
    """A state reached by a random walk of legal moves from a random tower."""
    n = draw(st.integers(1, 6))
    state = tower(n, draw(st.sampled_from(PEGS)))
    for pick in draw(st.lists(st.integers(0, 5), max_size=40)):
        options = [t for _, t in H.successors(state, RULES)]
        state = options[pick % len(options)]
    return n, state


@settings(max_examples=150, deadline=None)
@given(reachable())
def test_state_text_round_trips(case: tuple[int, tuple]) -> None:
    n, state = case
    assert H.check_state(state, n, RULES) is None
    text = H.format_state(state)
    assert H.parse_state(text) == state
    assert H.parse_state(f"  ```\n{text.replace(', ', ' ,  ')}\n```  ") == state


@settings(max_examples=150, deadline=None)
@given(reachable())
def test_move_text_round_trips(case: tuple[int, tuple]) -> None:
    _, state = case
    moves = [m for m, _ in H.successors(state, RULES)]
    text = "[" + ", ".join(H.format_move(m) for m in moves) + "]"
    assert H.parse_moves(f"My answer:\n{text}") == moves


@settings(max_examples=150, deadline=None)
@given(reachable(), st.integers(0, 2**32 - 1))
def test_illegal_move_is_always_rejected(case: tuple[int, tuple], seed: int) -> None:
    _, state = case
    move = H.illegal_move(state, RULES, np.random.default_rng(seed))
    with pytest.raises(IllegalMove) as err:
        H.apply(state, move, RULES)
    assert err.value.kind in H.violations
    assert H.parse_moves("[" + H.format_move(move) + "]") == [move]


@settings(max_examples=150, deadline=None)
@given(reachable(), st.integers(0, 2**32 - 1))
def test_wrong_successor_is_never_one_legal_move_away(case: tuple[int, tuple], seed: int) -> None:
    _, state = case
    wrong = H.wrong_successor(state, RULES, np.random.default_rng(seed))
    assert wrong != state
    assert wrong not in {t for _, t in H.successors(state, RULES)}
    assert H.parse_state(H.format_state(wrong)) == wrong


def test_the_mistakes_are_deterministic_given_the_rng() -> None:
    state = ((1,), (2, 3), ())
    a = [H.wrong_successor(state, RULES, np.random.default_rng(7)) for _ in range(3)]
    b = [H.illegal_move(state, RULES, np.random.default_rng(7)) for _ in range(3)]
    assert len(set(a)) == 1 and len(set(b)) == 1


# --- parsers ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_bad_text_on_arbitrary_text(text: str) -> None:
    for parse in (H.parse_moves, H.parse_state):
        try:
            parse(text)
        except BadText:
            pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[](),'\" ABCabc0123-_\n", max_size=60))
def test_parsers_raise_only_bad_text_on_bracket_soup(text: str) -> None:
    for parse in (H.parse_moves, H.parse_state):
        try:
            parse(text)
        except BadText:
            pass


def test_parse_moves_takes_the_last_list_of_moves() -> None:
    text = (
        'First try: [[1, "A", "B"]]. Hmm, single move [2, "A", "C"] is wrong.\n'
        "Final answer: [[1, 'A', 'C'], [2, A, B], (1, \u201cC\u201d, \u201cB\u201d),]\n"
        "which leaves the state [[], [1, 2], []]."
    )
    assert H.parse_moves(text) == [(1, "A", "C"), (2, "A", "B"), (1, "C", "B")]


def test_parse_moves_edge_cases() -> None:
    assert H.parse_moves("[]") == []
    assert H.parse_moves('[["1", "a", "c"]]') == [(1, "A", "C")]
    assert H.parse_moves("[[4, D, A]]") == [(4, "D", "A")]  # apply names the bad peg
    with pytest.raises(BadText, match="item 2"):
        H.parse_moves('[[1, "A", "C"], [2, "A"]]')
    assert H.parse_moves("[[[1, A, C]]]") == [(1, "A", "C")]  # a nested list of moves still counts
    for text in ("", "no moves here", "[1, 'A', 'C']", "[[1, 2, 3], [], []]", "[ [] ]"):
        with pytest.raises(BadText, match="no list of moves"):
            H.parse_moves(text)


def test_parse_state_rejects_non_states() -> None:
    for text in ("", "[[1, 2], [], []", "[[1, 2], [], []] and more", "[[1, A], [], []]", "[1, 2, 3]"):
        with pytest.raises(BadText):
            H.parse_state(text)
    assert H.parse_state("[[1, 2], []]") == ((1, 2), ())  # check_state judges the peg count


def test_check_state_names_the_problem() -> None:
    assert H.check_state(((1, 2, 3), (), ()), 3, RULES) is None
    assert "three pegs" in (H.check_state(((1, 2, 3), ()), 3, RULES) or "")
    assert "larger" in (H.check_state(((2, 1, 3), (), ()), 3, RULES) or "")
    assert "missing" in (H.check_state(((1, 2), (), ()), 3, RULES) or "")
    assert "more than once" in (H.check_state(((1, 2), (2,), (3,)), 3, RULES) or "")
    assert "no disk 4" in (H.check_state(((1, 2, 3), (4,), ()), 3, RULES) or "")


# --- rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("move", "kind"),
    [
        ((1, "A", "D"), "no_such_peg"),
        ((1, "X", "A"), "no_such_peg"),
        ((4, "A", "B"), "no_such_disk"),
        ((0, "A", "B"), "no_such_disk"),
        ((1, "A", "A"), "same_peg"),
        ((2, "A", "C"), "not_top_disk"),  # buried under disk 1
        ((3, "A", "C"), "not_top_disk"),  # on another peg
        ((1, "C", "A"), "not_top_disk"),  # from an empty peg
        ((2, "A", "B"), "not_top_disk"),
        ((3, "B", "A"), "larger_on_smaller"),
    ],
)
def test_apply_names_the_broken_rule(move: tuple, kind: str) -> None:
    state = ((1, 2), (3,), ())
    with pytest.raises(IllegalMove) as err:
        H.apply(state, move, RULES)
    assert err.value.kind == kind
    assert kind in H.violations


def test_apply_moves_the_top_disk() -> None:
    assert H.apply(((1, 2), (3,), ()), (1, "A", "B"), RULES) == ((2,), (1, 3), ())
    assert sorted(H.successors(((1, 2), (3,), ()), RULES)) == [
        ((1, "A", "B"), ((2,), (1, 3), ())),
        ((1, "A", "C"), ((2,), (3,), (1,))),
        ((3, "B", "C"), ((1, 2), (), (3,))),
    ]


def test_recursive_moves_is_algorithm_1() -> None:
    assert recursive_moves(2, "A", "C") == [(1, "A", "B"), (2, "A", "C"), (1, "B", "C")]
    assert recursive_moves(1, "B", "A") == [(1, "B", "A")]


# --- parameters and prompt --------------------------------------------------------------


@pytest.mark.parametrize("bad", [[0], [11], [3, 12], []])
def test_params_reject_sizes_out_of_range(bad: list[int]) -> None:
    with pytest.raises(pydantic.ValidationError, match="ns"):
        HanoiParams(ns=bad)


def test_params_defaults_and_strictness() -> None:
    assert PARAMS.ns == list(range(1, 11)) and PARAMS.node_limit == 5_000_000
    with pytest.raises(pydantic.ValidationError):
        HanoiParams.model_validate({"ns": [3], "colour": "red"})
    with pytest.raises(pydantic.ValidationError):
        PARAMS.node_limit = 3  # type: ignore[misc]


def test_describe_rules_states_both_formats() -> None:
    text = H.describe_rules({"start_peg": "B", "goal_peg": "A"}, 3)
    assert "[[1, 2, 3], [], []]" in text and '[1, "A", "C"]' in text
    assert "peg B" in text and "peg A" in text
    assert H.parse_moves(text) == [(1, "A", "B"), (2, "A", "C")]
