"""Checkers Jumping: the paper's Table 4 counts, the shared-goal search against plain
BFS, the forward-only classic start, the candidate set and its sample, the text forms,
the rule violations and the noisy baselines' mistakes."""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Unsolved,
    bfs_path,
    distance_map,
    trajectory_ok,
)
from horizonbench.datasets.puzzles.checkers import (
    ORIENTATIONS,
    Checkers,
    CheckersParams,
    board_of_rank,
    canonical_goal,
    canonical_start,
)

C = Checkers()
PARAMS = CheckersParams()
Case = tuple[int, dict, str]  # (n, rules, state)

#: Table 4 of the paper, Checkers Jumping: puzzles and total optimal moves per n
TABLE_4 = {1: (4, 6), 2: (12, 52), 3: (40, 336), 4: (140, 1928), 5: (504, 10260)}
FORWARD = {"red_right": {"R": 1, "B": -1}, "red_left": {"R": -1, "B": 1}}


def rules(orientation: str, forward_only: bool = False) -> dict:
    return {"orientation": orientation, "forward_only": forward_only}


def plain_bfs(config: Configuration) -> Certificate | Unsolved:
    return bfs_path(config.start, config.goal, lambda s: C.successors(s, config.rules))


def all_boards(n: int) -> list[str]:
    """Every board of size n, the gap anywhere."""
    out = []
    for gap in range(2 * n + 1):
        for reds in combinations(range(2 * n), n):
            cells = ["R" if i in reds else "B" for i in range(2 * n)]
            out.append("".join(cells[:gap]) + "_" + "".join(cells[gap:]))
    return out


# --- certificates ---------------------------------------------------------------------


@pytest.mark.parametrize("n", sorted(TABLE_4))
def test_table_4_counts_are_reproduced(n: int) -> None:
    configs = C.configurations(n, PARAMS, seed=0)
    assert len(configs) == 2 * comb(2 * n, n) == TABLE_4[n][0]
    lengths = {}
    for config in configs:
        cert = C.certify(config, PARAMS.node_limit)
        assert isinstance(cert, Certificate) and trajectory_ok(C, config, cert)
        lengths[config.label] = cert.length
    assert sum(lengths.values()) == TABLE_4[n][1]
    trivial = {label for label, length in lengths.items() if length == 0}
    assert trivial == {f"{o} {canonical_goal(n, o)}" for o in ORIENTATIONS}


@pytest.mark.parametrize("orientation", ORIENTATIONS)
@pytest.mark.parametrize("n", range(1, 9))
def test_the_classic_start_moves_forward_only_in_n_plus_one_squared_minus_one(
    n: int, orientation: str
) -> None:
    (config,) = [
        c
        for c in C.configurations(n, PARAMS, seed=0)
        if c.rules["forward_only"] and c.label.startswith(orientation)
    ]
    assert config.start == canonical_start(n, orientation) and config.goal == config.start[::-1]
    assert config.rules == rules(orientation, True)
    cert = C.certify(config, PARAMS.node_limit)
    assert isinstance(cert, Certificate) and trajectory_ok(C, config, cert)
    assert cert.length == (n + 1) ** 2 - 1
    assert all((dst - src) * FORWARD[orientation][colour] > 0 for colour, src, dst in cert.moves)


@pytest.mark.parametrize("n", range(1, 5))
def test_the_shared_goal_search_agrees_with_per_instance_bfs(n: int) -> None:
    for config in C.configurations(n, PARAMS, seed=0):
        cert = C.certify(config, PARAMS.node_limit)
        plain = plain_bfs(config)
        if isinstance(plain, Unsolved):  # pragma: no cover - every centre-gap start is solvable
            assert cert == Unsolved("unsolvable", cert.nodes)
            continue
        assert isinstance(cert, Certificate) and trajectory_ok(C, config, cert)
        assert cert.length == plain.length, config.label


@pytest.mark.parametrize("n", range(1, 6))
def test_the_vectorised_goal_search_equals_a_bfs_over_board_strings(n: int) -> None:
    """From every board (gap anywhere), the certified length is the string-BFS distance;
    the map covers all (2n + 1) * C(2n, n) boards, so no free start is unsolvable."""
    boards = all_boards(n)
    for orientation in ORIENTATIONS:
        free = rules(orientation)
        goal = canonical_goal(n, orientation)
        expected = distance_map(goal, lambda s, r=free: (t for _, t in C.successors(s, r)))
        assert len(expected) == len(boards) == (2 * n + 1) * comb(2 * n, n)
        for board in boards:
            cert = C.certify(Configuration(n, free, board, goal), PARAMS.node_limit)
            assert isinstance(cert, Certificate) and cert.length == expected[board]
            assert cert.nodes == len(boards)


def test_every_sampled_certificate_replays_for_n_6_to_10() -> None:
    for n in range(6, 11):
        configs = C.configurations(n, PARAMS, seed=0)
        for config in configs:
            cert = C.certify(config, PARAMS.node_limit)
            assert isinstance(cert, Certificate) and cert.length > 0
            assert trajectory_ok(C, config, cert)


def test_a_start_with_no_way_forward_is_proved_unsolvable() -> None:
    # from the blues-left, reds-right board no checker can move forward
    config = Configuration(2, rules("red_right", True), "BB_RR", "RR_BB")
    assert C.certify(config, PARAMS.node_limit) == Unsolved("unsolvable", 1)


def test_another_goal_gets_its_own_search() -> None:
    config = Configuration(2, rules("red_right"), "RB_RB", "BR_BR")
    cert = C.certify(config, PARAMS.node_limit)
    plain = plain_bfs(config)
    assert isinstance(cert, Certificate) and isinstance(plain, Certificate)
    assert trajectory_ok(C, config, cert) and cert.length == plain.length


def test_the_node_limit_is_reported_apart() -> None:
    classic = Configuration(
        4, rules("red_right", True), canonical_start(4, "red_right"), canonical_goal(4, "red_right")
    )
    verdict = C.certify(classic, 5)
    assert isinstance(verdict, Unsolved) and verdict.reason == "node_limit"
    free = Configuration(4, rules("red_right"), "RBRB_RBRB", canonical_goal(4, "red_right"))
    assert C.certify(free, 9 * comb(8, 4) - 1) == Unsolved("node_limit", 0)
    assert isinstance(C.certify(free, 9 * comb(8, 4)), Certificate)


# --- the candidate set ------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 6))
def test_small_sizes_enumerate_every_centre_gap_board_in_both_orientations(n: int) -> None:
    configs = C.configurations(n, PARAMS, seed=0)
    per = comb(2 * n, n)
    assert [board_of_rank(n, r) for r in range(per)] == sorted(c.start for c in configs[:per])
    for half, orientation in enumerate(ORIENTATIONS):
        part = configs[half * per : (half + 1) * per]
        boards = [c.start for c in part]
        assert boards == sorted(set(boards))
        assert all(b[n] == "_" and b.count("R") == n for b in boards)
        assert all(c.goal == canonical_goal(n, orientation) for c in part)
        assert all(c.label == f"{orientation} {c.start}" for c in part)
        assert [c.start for c in part if c.rules["forward_only"]] == [canonical_start(n, orientation)]
        assert all(c.rules == rules(orientation, c.start == canonical_start(n, orientation)) for c in part)


@pytest.mark.parametrize("n", range(6, 11))
def test_large_sizes_are_a_sample_of_exactly_the_cap_of_puzzles(n: int) -> None:
    configs = C.configurations(n, PARAMS, seed=0)
    assert len(configs) == PARAMS.max_configurations_per_n == 1000
    assert all(c.start != c.goal for c in configs)
    assert [c.label for c in configs if c.rules["forward_only"]] == [
        f"{o} {canonical_start(n, o)}" for o in ORIENTATIONS
    ]
    order = [(ORIENTATIONS.index(c.rules["orientation"]), c.start) for c in configs]
    assert order == sorted(set(order))


def test_the_sample_follows_sample_seed_only() -> None:
    labels = [c.label for c in C.configurations(6, PARAMS, seed=0)]
    assert [c.label for c in C.configurations(6, PARAMS, seed=0)] == labels
    assert [c.label for c in C.configurations(6, PARAMS, seed=7)] == labels
    other = [c.label for c in C.configurations(6, CheckersParams(sample_seed=1), seed=0)]
    assert other != labels and len(other) == 1000


def test_small_caps() -> None:
    two = C.configurations(5, CheckersParams(max_configurations_per_n=2), seed=3)
    assert [c.label for c in two] == ["red_right RRRRR_BBBBB", "red_left BBBBB_RRRRR"]
    one = C.configurations(5, CheckersParams(max_configurations_per_n=1), seed=3)
    assert [c.label for c in one] == ["red_right RRRRR_BBBBB"]
    # one short of all twelve: the ten boards that are not their own goal
    eleven = C.configurations(2, CheckersParams(max_configurations_per_n=11), seed=0)
    assert len(eleven) == 10 and all(c.start != c.goal for c in eleven)


# --- random reachable states ------------------------------------------------------------


@st.composite
def reachable(draw: st.DrawFn) -> Case:
    """A state reached by a random walk of legal moves from a random centre-gap board,
    with or without the direction rule."""
    n = draw(st.integers(1, 6))
    case_rules = rules(draw(st.sampled_from(ORIENTATIONS)), draw(st.booleans()))
    reds = draw(st.permutations(range(2 * n)))[:n]
    cells = ["R" if i in reds else "B" for i in range(2 * n)]
    state = "".join(cells[:n]) + "_" + "".join(cells[n:])
    for pick in draw(st.lists(st.integers(0, 3), max_size=30)):
        options = [t for _, t in C.successors(state, case_rules)]
        if not options:
            break
        state = options[pick % len(options)]
    return n, case_rules, state


@settings(max_examples=150, deadline=None)
@given(reachable())
def test_apply_accepts_exactly_the_successor_moves(case: Case) -> None:
    _, case_rules, state = case
    legal = dict(C.successors(state, case_rules))
    size = len(state)
    for colour in ("R", "B"):
        for src in range(-1, size + 1):
            for dst in range(-1, size + 1):
                move = (colour, src, dst)
                try:
                    after = C.apply(state, move, case_rules)
                except IllegalMove as err:
                    assert move not in legal
                    assert err.kind in C.violations
                    assert case_rules["forward_only"] or err.kind != "wrong_direction"
                else:
                    assert legal.get(move) == after


@settings(max_examples=150, deadline=None)
@given(reachable())
def test_state_and_move_text_round_trip(case: Case) -> None:
    n, case_rules, state = case
    assert C.check_state(state, n, case_rules) is None
    assert C.parse_state(C.format_state(state)) == state
    assert C.parse_state(" `" + " ".join(state.lower()) + "` ") == state
    moves = [m for m, _ in C.successors(state, case_rules)]
    text = "[" + ", ".join(C.format_move(m) for m in moves) + "]"
    if moves:
        assert C.parse_moves(f"So the plan is\n{text}\nDone.") == moves


@settings(max_examples=150, deadline=None)
@given(reachable(), st.integers(0, 2**32 - 1))
def test_illegal_move_is_always_rejected(case: Case, seed: int) -> None:
    _, case_rules, state = case
    move = C.illegal_move(state, case_rules, np.random.default_rng(seed))
    with pytest.raises(IllegalMove) as err:
        C.apply(state, move, case_rules)
    assert err.value.kind in C.violations
    assert C.parse_moves("[" + C.format_move(move) + "]") == [move]


@settings(max_examples=150, deadline=None)
@given(reachable(), st.integers(0, 2**32 - 1))
def test_wrong_successor_is_never_one_legal_move_away(case: Case, seed: int) -> None:
    n, case_rules, state = case
    wrong = C.wrong_successor(state, case_rules, np.random.default_rng(seed))
    assert wrong != state
    assert wrong not in {t for _, t in C.successors(state, case_rules)}
    assert C.parse_state(C.format_state(wrong)) == wrong
    assert len(wrong) == 2 * n + 1


def test_illegal_moves_include_backward_steps_only_under_the_direction_rule() -> None:
    state = "RB_BR"
    kinds = {"forward": set(), "free": set()}
    for seed in range(300):
        for key, forward_only in (("forward", True), ("free", False)):
            move = C.illegal_move(state, rules("red_right", forward_only), np.random.default_rng(seed))
            with pytest.raises(IllegalMove) as err:
                C.apply(state, move, rules("red_right", forward_only))
            kinds[key].add(err.value.kind)
    assert "wrong_direction" in kinds["forward"]
    assert "wrong_direction" not in kinds["free"]


# --- parsers ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_bad_text_on_arbitrary_text(text: str) -> None:
    for parse in (C.parse_moves, C.parse_state):
        try:
            parse(text)
        except BadText:
            pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[](),'\" RBrb_0123-\n`", max_size=60))
def test_parsers_raise_only_bad_text_on_bracket_soup(text: str) -> None:
    for parse in (C.parse_moves, C.parse_state):
        try:
            parse(text)
        except BadText:
            pass


def test_parse_moves_takes_the_last_list_of_moves() -> None:
    text = 'Draft: [["R", 1, 2]]. Better:\n[[r, 1, 2], ("blue", "3", 1), [\'RED\', 0, 1]]\nBoard after: [RRB]'
    assert C.parse_moves(text) == [("R", 1, 2), ("B", 3, 1), ("R", 0, 1)]
    assert C.parse_moves("Nothing to do: []") == []
    with pytest.raises(BadText, match="item 2"):
        C.parse_moves('[["R", 1, 2], ["B", 3]]')
    with pytest.raises(BadText, match="no list of moves"):
        C.parse_moves('["R", 1, 2]')


def test_parse_state_tolerance_and_errors() -> None:
    assert C.parse_state('"R B _ r b"') == "RB_RB"
    assert C.parse_state("```\nrr_bb\n```") == "RR_BB"
    for text in ("", "  ``  ", "RR-BB", "[R, _, B]"):
        with pytest.raises(BadText):
            C.parse_state(text)


def test_check_state_names_the_problem() -> None:
    free = rules("red_right")
    assert C.check_state("RB_BR", 2, free) is None
    assert "cells" in (C.check_state("RB_B", 2, free) or "")
    assert "'R'" in (C.check_state("RB_BB", 2, free) or "")
    assert "'_'" in (C.check_state("RBxBR", 2, free) or "")
    assert C.check_state(("R", "_", "B"), 1, free) is not None


# --- rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "orientation", "forward_only", "move", "kind"),
    [
        ("RB_BR", "red_right", True, ("R", 1, 2), "no_checker"),  # cell 1 is blue
        ("RB_BR", "red_right", False, ("R", 2, 3), "no_checker"),  # the gap
        ("RB_BR", "red_right", False, ("R", 9, 10), "no_checker"),  # off the board
        ("RB_BR", "red_left", False, ("G", 0, 1), "no_checker"),  # not a colour
        ("RB_BR", "red_right", True, ("R", 4, 2), "wrong_direction"),
        ("RB_BR", "red_left", True, ("R", 0, 2), "wrong_direction"),
        ("RB_BR", "red_right", True, ("B", 1, 2), "wrong_direction"),
        ("R_BBR", "red_right", True, ("R", 0, 3), "bad_jump"),  # three cells
        ("RBB_R", "red_left", False, ("R", 0, 3), "bad_jump"),
        ("RB_BR", "red_right", False, ("B", 3, 3), "bad_jump"),  # no distance
        ("RR_BB", "red_right", True, ("R", 0, 2), "bad_jump"),  # over its own colour
        ("BB_RR", "red_right", False, ("R", 4, 2), "bad_jump"),
        ("_RRBB", "red_left", True, ("R", 2, 0), "bad_jump"),
        ("RB_BR", "red_right", True, ("R", 0, 1), "no_gap_target"),  # occupied
        ("RB_BR", "red_left", False, ("B", 1, 0), "no_gap_target"),
        ("RBRB_", "red_right", False, ("B", 3, 5), "no_gap_target"),  # off the board
    ],
)
def test_apply_names_the_broken_rule(
    state: str, orientation: str, forward_only: bool, move: tuple, kind: str
) -> None:
    with pytest.raises(IllegalMove) as err:
        C.apply(state, move, rules(orientation, forward_only))
    assert err.value.kind == kind
    assert kind in C.violations


def test_without_the_direction_rule_checkers_move_both_ways() -> None:
    free, forward = rules("red_right"), rules("red_right", True)
    assert C.apply("RB_BR", ("R", 4, 2), free) == "RBRB_"  # a red jump to the left
    assert C.apply("RB_BR", ("B", 1, 2), free) == "R_BBR"  # a blue slide to the right
    assert C.apply("R_B", ("R", 0, 1), forward) == "_RB"
    assert C.apply("_RB", ("B", 2, 0), forward) == "BR_"
    assert list(C.successors("RB_RB", forward)) == [(("R", 0, 2), "_BRRB"), (("B", 4, 2), "RBBR_")]
    assert list(C.successors("RB_RB", free)) == [
        (("R", 0, 2), "_BRRB"),
        (("B", 1, 2), "R_BRB"),
        (("R", 3, 2), "RBR_B"),
        (("B", 4, 2), "RBBR_"),
    ]


@pytest.mark.parametrize("bad", [{"orientation": "up", "forward_only": False}, {"orientation": "red_left"}])
def test_rules_must_name_orientation_and_direction_rule(bad: dict) -> None:
    with pytest.raises(ValueError):
        list(C.successors("R_B", bad))


# --- parameters and prompt --------------------------------------------------------------


@pytest.mark.parametrize("bad", [[0], [11], [2, 99]])
def test_params_reject_sizes_out_of_range(bad: list[int]) -> None:
    with pytest.raises(pydantic.ValidationError, match="ns"):
        CheckersParams(ns=bad)


def test_params_defaults_and_strictness() -> None:
    assert PARAMS.ns == list(range(1, 11))
    assert PARAMS.max_configurations_per_n == 1000 and PARAMS.sample_seed == 0
    assert PARAMS.node_limit == 5_000_000
    for bad in ({"max_configurations_per_n": 0}, {"sample_seed": -1}, {"node_limit": 0}, {"gap": 2}):
        with pytest.raises(pydantic.ValidationError):
            CheckersParams.model_validate(bad)


@pytest.mark.parametrize("forward_only", [True, False])
@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_describe_rules_states_the_direction_rule_and_legal_examples(
    orientation: str, forward_only: bool
) -> None:
    case_rules = rules(orientation, forward_only)
    text = C.describe_rules(case_rules, 3)
    assert canonical_start(3, orientation) in text and canonical_goal(3, orientation) in text
    assert ("only ever move" in text) is forward_only
    assert ("any checker may move left or right" in text) is not forward_only
    state = canonical_start(3, orientation)
    for move in C.parse_moves(text):
        state = C.apply(state, move, case_rules)
