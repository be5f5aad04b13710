"""River Crossing: rules, text forms, the quotient search and the paper's Table 4 counts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Unsolved,
    trajectory_ok,
)
from horizonbench.datasets.puzzles.river_crossing import RiverCrossing, RiverCrossingParams, RiverState

RC = RiverCrossing()
DEFAULT = RiverCrossingParams()

# Table 4 of the paper, River Crossing columns, n = 1..10
TABLE4_PUZZLES = [6, 18, 42, 60, 124, 126, 254, 510, 1022, 2046]
TABLE4_MOVES = [6, 30, 110, 156, 456, 414, 1058, 2598, 6186, 14382]


def _people(n: int) -> tuple[str, ...]:
    return tuple(p for i in range(1, n + 1) for p in (f"a{i}", f"A{i}"))


def _full_crossing(n: int, k: int) -> Configuration:
    return Configuration(
        n,
        {"boat_capacity": k, "start_bank": "left"},
        RiverState(_people(n), (), "L"),
        RiverState((), _people(n), "R"),
    )


# --- certificates and Table 4 ------------------------------------------------------


def test_table4_counts_and_every_certificate_replays() -> None:
    puzzles, moves = [], []
    for n in range(1, 11):
        kept = total = 0
        for config in RC.configurations(n, DEFAULT, seed=0):
            result = RC.certify(config, DEFAULT.node_limit)
            if isinstance(result, Certificate):
                assert trajectory_ok(RC, config, result), config.label
                assert RC.check_state(result.states[-1], n, config.rules) is None
                kept += 1
                total += result.length
            else:
                assert result.reason in ("unsolvable", "capacity_too_small")
        puzzles.append(kept)
        moves.append(total)
    assert puzzles == TABLE4_PUZZLES
    assert moves == TABLE4_MOVES


def test_configurations_follow_algorithm_4() -> None:
    configs = RC.configurations(3, DEFAULT, seed=0)
    assert len(configs) == 3 * 2 * 7
    assert [c.label for c in configs[:8]] == [
        "k=2 left across=none",
        "k=2 left across=1",
        "k=2 left across=2",
        "k=2 left across=3",
        "k=2 left across=1,2",
        "k=2 left across=1,3",
        "k=2 left across=2,3",
        "k=2 right across=none",
    ]
    first, right = configs[5], configs[7]
    assert first.start == RiverState(("a2", "A2"), ("a1", "A1", "a3", "A3"), "L")
    assert first.goal == RiverState((), _people(3), "R")
    assert first.rules == {"boat_capacity": 2, "start_bank": "left"}
    assert right.start == RiverState((), _people(3), "R") and right.goal == RiverState(_people(3), (), "L")
    assert RC.configurations(3, DEFAULT, seed=0) == RC.configurations(3, DEFAULT, seed=99)


def test_quotient_agrees_with_concrete_bfs_for_small_n() -> None:
    params = RiverCrossingParams(capacities=[1, 2, 3, 4, 5])
    verdicts = set()
    full_by: dict[tuple[int, int], Certificate | Unsolved] = {}
    for n in (1, 2, 3, 4):
        for config in RC.configurations(n, params, seed=0):
            k = config.rules["boat_capacity"]
            if n == 4 and k not in (2, 3):
                continue
            concrete = RC.certify_by_bfs(config, 10**6)
            result = RC.certify(config, 10**6)
            if (n, k) not in full_by:
                full_by[n, k] = RC.certify_by_bfs(_full_crossing(n, k), 10**6)
            full = full_by[n, k]
            if isinstance(concrete, Unsolved):
                assert concrete.reason == "unsolvable"
                assert RC.distance(config) is None
                assert result == Unsolved("unsolvable", result.nodes)
            else:
                assert RC.distance(config) == concrete.length
                if isinstance(full, Unsolved):
                    assert result == Unsolved("capacity_too_small", result.nodes)
                else:
                    assert isinstance(result, Certificate) and result.length == concrete.length
                    assert trajectory_ok(RC, config, result)
            verdicts.add(type(result).__name__ + getattr(result, "reason", ""))
    assert verdicts == {"Certificate", "Unsolvedunsolvable", "Unsolvedcapacity_too_small"}


@pytest.mark.parametrize(
    ("k", "solvable", "unsolvable"),
    [(2, range(1, 4), range(4, 11)), (3, range(1, 6), range(6, 11)), (4, range(1, 11), range(0))],
)
def test_solvability_claims(k: int, solvable: range, unsolvable: range) -> None:
    for n in solvable:
        assert RC.distance(_full_crossing(n, k)) is not None, (n, k)
    for n in unsolvable:
        assert RC.distance(_full_crossing(n, k)) is None, (n, k)


@pytest.mark.parametrize(("n", "k"), [(4, 2), (5, 2), (6, 2), (6, 3), (7, 3), (6, 4)])
def test_solvability_claims_by_concrete_bfs(n: int, k: int) -> None:
    concrete = RC.certify_by_bfs(_full_crossing(n, k), 10**6)
    distance = RC.distance(_full_crossing(n, k))
    if distance is None:
        assert concrete == Unsolved("unsolvable", concrete.nodes)
    else:
        assert isinstance(concrete, Certificate) and concrete.length == distance


def test_capacity_one_is_never_solvable() -> None:
    params = RiverCrossingParams(capacities=[1])
    for n in (1, 2, 5):
        for config in RC.configurations(n, params, seed=0):
            result = RC.certify(config, 10**6)
            assert isinstance(result, Unsolved) and result.reason == "unsolvable"


def test_node_limit_is_reported_not_hidden() -> None:
    config = RC.configurations(10, DEFAULT, seed=0)[-1]
    assert RC.certify(config, 3).reason == "node_limit"


def test_other_goals_fall_back_to_concrete_bfs() -> None:
    start = RiverState(_people(2), (), "L")
    goal = RiverState(("a2", "A2"), ("a1", "A1"), "R")
    config = Configuration(2, {"boat_capacity": 2, "start_bank": "left"}, start, goal)
    result = RC.certify(config, 10**5)
    assert isinstance(result, Certificate) and result.length == 1 and trajectory_ok(RC, config, result)


# --- rules ----------------------------------------------------------------------

RULES2 = {"boat_capacity": 2, "start_bank": "left"}
START3 = RiverState(_people(3), (), "L")


@pytest.mark.parametrize(
    ("state", "move", "kind"),
    [
        (START3, (), "empty_boat"),
        (START3, ("a1", "A1", "a2"), "over_capacity"),
        (START3, ("a4",), "unknown_person"),
        (START3, ("x",), "unknown_person"),
        (START3, ("a1", "a1"), "unknown_person"),
        (RiverState(("a1", "A1", "a2", "A2"), ("a3", "A3"), "L"), ("a3",), "not_on_boat_side"),
        (START3, ("a1", "A2"), "unsafe_boat"),
        (START3, ("A1",), "unsafe_bank"),  # a1 stays with A2 and A3
    ],
)
def test_apply_names_the_broken_rule(state: RiverState, move: tuple[str, ...], kind: str) -> None:
    with pytest.raises(IllegalMove) as err:
        RC.apply(state, move, RULES2)
    assert err.value.kind == kind
    assert kind in RC.violations


def test_arrival_bank_is_checked() -> None:
    # a1 arrives where a2 and A2 wait, without A1
    state = RiverState(("a1", "A1"), ("a2", "A2"), "L")
    with pytest.raises(IllegalMove) as err:
        RC.apply(state, ("a1",), RULES2)
    assert err.value.kind == "unsafe_bank" and "after arrival" in err.value.detail


def test_successors_are_exactly_the_legal_moves() -> None:
    state = RiverState(("a1", "A1", "a2", "A2"), ("a3", "A3"), "L")
    rules = {"boat_capacity": 3, "start_bank": "left"}
    legal = dict(RC.successors(state, rules))
    near = state.left
    for size in range(0, 5):
        for load in itertools.combinations(near, size):
            try:
                after = RC.apply(state, load, rules)
            except IllegalMove:
                assert load not in legal
            else:
                assert legal[load] == after
    assert next(iter(legal)) == ("a1", "A1")  # alone, a1 or A1 would leave someone unsafe


def test_check_state() -> None:
    rules = RULES2
    assert RC.check_state(START3, 3, rules) is None
    assert "a3" in RC.check_state(RiverState(("a1", "A1", "A3"), ("a2", "A2"), "L"), 3, rules)
    assert "2 times" in RC.check_state(RiverState(_people(3), ("a1",), "L"), 3, rules)
    assert "a4" in RC.check_state(RiverState(_people(3) + ("a4",), (), "L"), 3, rules)
    assert "unsafe" in RC.check_state(RiverState(("a1", "A2"), ("A1", "a2", "a3", "A3"), "R"), 3, rules)
    assert "boat" in RC.check_state(RiverState(_people(3), (), "X"), 3, rules)
    assert RC.check_state(("only", "two"), 3, rules) is not None


# --- text -----------------------------------------------------------------------


def test_text_forms() -> None:
    state = RiverState(("a1", "A1", "a3"), ("a2", "A2", "A3"), "L")
    assert RC.format_state(state) == "left: a1 A1 a3 | right: a2 A2 A3 | boat: left"
    assert RC.format_state(RiverState((), _people(1), "R")) == "left: - | right: a1 A1 | boat: right"
    assert RC.format_move(("a1", "A1")) == "[a1, A1]"
    variants = [
        "left: a1 A1 a3 | right: a2 A2 A3 | boat: left",
        "LEFT: [a3, 'a1', A1]; Right: ['A3', \"a2\", A2], Boat: L",
        "  boat = Left  right: a2,A2,A3   left: a1, A1, a3 ",
        '{"left": ["a1", "A1", "a3"], "right": ["a2", "A2", "A3"], "boat": "left"}',
        "left bank: a1 A1 a3 | right bank: a2 A2 A3 | boat side: left.",
    ]
    for text in variants:
        assert RC.parse_state(text) == state, text
    assert RC.parse_state("left: - | right: a1 A1 | boat: right") == RiverState((), ("a1", "A1"), "R")
    assert RC.parse_state("left: [] | right: [a1, A1] | boat: R") == RiverState((), ("a1", "A1"), "R")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "sections"),
        ("left: a1 | right: A1", "boat"),
        ("left: a1 | left: A1 | right: - | boat: left", "twice"),
        ("left: a1 B1 | right: A1 | boat: left", "B1"),
        ("left: a1 | right: A1 | boat: middle", "boat"),
        ("so left: a1 | right: A1 | boat: left", "before"),
    ],
)
def test_parse_state_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(BadText, match=problem):
        RC.parse_state(text)


def test_parse_moves_takes_the_last_list() -> None:
    answer = (
        "First try: [[a1, A1], [a2]]. Hmm, no. Note [1] says A1 matters.\n"
        'Final answer: [["a1", "A1"], ["a1"], (a1, a2), [A2 a2]] (done)'
    )
    assert RC.parse_moves(answer) == [("a1", "A1"), ("a1",), ("a1", "a2"), ("a2", "A2")]
    assert RC.parse_moves("[]") == []
    assert RC.parse_moves("moves: [[a1, A1], []]") == [("a1", "A1"), ()]
    for bad, problem in [
        ("no list here", "no list"),
        ("[a1, A1]", "no list"),
        ("[[a1, B1]]", "B1"),
        ("[[a1, a1]]", "twice"),
        ("[a1, [A1]]", "move 1"),
        ("[[[a1]]]", "deeper"),
    ]:
        with pytest.raises(BadText, match=problem):
            RC.parse_moves(bad)


@st.composite
def reachable(draw: st.DrawFn) -> tuple[RiverState, dict, int]:
    """A state reached by a random walk of legal moves from an Algorithm 4 start."""
    n = draw(st.integers(1, 5))
    k = draw(st.integers(1, 4))
    params = RiverCrossingParams(capacities=[k])
    config = draw(st.sampled_from(RC.configurations(n, params, seed=0)))
    state = config.start
    for choice in draw(st.lists(st.integers(0, 10**6), max_size=6)):
        options = list(RC.successors(state, config.rules))
        if not options:
            break
        state = options[choice % len(options)][1]
    return state, dict(config.rules), n


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reachable(), st.integers(0, 2**32 - 1))
def test_reachable_states_round_trip_and_noise_is_wrong(
    case: tuple[RiverState, dict, int], seed: int
) -> None:
    state, rules, n = case
    assert RC.check_state(state, n, rules) is None
    assert RC.parse_state(RC.format_state(state)) == state
    legal = dict(RC.successors(state, rules))
    for move in legal:
        assert RC.parse_moves("[" + RC.format_move(move) + "]") == [move]
    rng = np.random.default_rng(seed)
    bad = RC.illegal_move(state, rules, rng)
    with pytest.raises(IllegalMove):
        RC.apply(state, bad, rules)
    assert RC.parse_moves("[" + RC.format_move(bad) + "]") == [tuple(bad)]
    wrong = RC.wrong_successor(state, rules, rng)
    assert wrong != state and wrong not in legal.values()
    assert RC.parse_state(RC.format_state(wrong)) == wrong


_TEXTY = st.text(alphabet="aA123 ,;:|[](){}'\"-leftrighboatLRB\n.=", max_size=80)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), _TEXTY))
def test_parsers_raise_only_bad_text(text: str) -> None:
    for parse in (RC.parse_state, RC.parse_moves):
        try:
            parse(text)
        except BadText:
            pass


def test_hostile_input_is_linear() -> None:
    for text in ("[" * 200_000, "[a1, " * 50_000, "left: " + "a1 " * 100_000):
        for parse in (RC.parse_state, RC.parse_moves):
            try:
                parse(text)
            except BadText:
                pass


# --- params and prompt --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field", "value"),
    [
        ({"ns": [0]}, "ns", "0"),
        ({"ns": [11]}, "ns", "11"),
        ({"capacities": [0]}, "capacities", "0"),
        ({"capacities": [11]}, "capacities", "11"),
        ({"capacities": []}, "capacities", ""),
        ({"capacities": [2, 2]}, "capacities", "2"),
    ],
)
def test_params_errors_name_the_field(kwargs: dict, field: str, value: str) -> None:
    with pytest.raises(ValidationError) as err:
        RiverCrossingParams(**kwargs)
    assert field in str(err.value) and value in str(err.value)


def test_params_defaults_and_extra_forbidden() -> None:
    assert DEFAULT.ns == list(range(1, 11)) and DEFAULT.capacities == [2, 3, 4]
    assert DEFAULT.node_limit == 5_000_000
    with pytest.raises(ValidationError, match="boat"):
        RiverCrossingParams(boat=3)


def test_describe_rules_states_the_rules_and_formats() -> None:
    text = RC.describe_rules({"boat_capacity": 3, "start_bank": "right"}, 2)
    for needle in ("a1, a2", "A1, A2", "at most 3", "left bank", "[a1, A1]", "boat: left", "'-'"):
        assert needle in text
