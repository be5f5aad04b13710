"""The world-environment contract: text forms, stress specs, regimes, seeds, helpers."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import (
    MUTATION_RATES,
    OBSERVATION_MODES,
    REGIMES,
    BadText,
    Environment,
    FactStore,
    Observation,
    Rng,
    StressSpec,
    Task,
    canonical,
    episode_seed,
    format_action,
    format_fact,
    format_facts,
    parse_action,
    parse_facts,
)
from horizonbench.datasets.worlds.stateful_puzzle import VERBS, StatefulPuzzle

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
FACTS = st.tuples(NAMES, NAMES).map(tuple) | st.tuples(NAMES, NAMES, NAMES).map(tuple)
ACTIONS = st.lists(NAMES, min_size=1, max_size=4).map(tuple)


# --- text forms --------------------------------------------------------------------


def test_canonical_is_the_sorted_distinct_facts() -> None:
    state = frozenset({("open", "box1"), ("at", "agent", "room2"), ("in", "item3", "box1")})
    assert canonical(state) == (("at", "agent", "room2"), ("in", "item3", "box1"), ("open", "box1"))
    assert canonical([("a", "b"), ("a", "b")]) == (("a", "b"),)
    assert hash(canonical(state)) == hash(canonical(set(state)))


def test_text_forms() -> None:
    assert format_fact(("at", "agent", "room2")) == "at(agent, room2)"
    assert format_action(("put", "item3", "box1")) == "put(item3, box1)"
    assert format_action(("noop",)) == "noop"
    assert format_facts([("open", "box1"), ("on", "switch2")]) == "open(box1)\non(switch2)"


@given(ACTIONS)
def test_actions_read_back(action: tuple[str, ...]) -> None:
    assert parse_action(format_action(action)) == action
    assert parse_action(f"  `{format_action(action).upper()}`. ") == action


@settings(max_examples=50)
@given(st.lists(FACTS, max_size=20))
def test_fact_listings_read_back(facts: list[tuple[str, ...]]) -> None:
    assert parse_facts(format_facts(facts)) == facts
    assert parse_facts(", ".join(format_fact(f) for f in facts)) == facts
    assert parse_facts("\n".join(f"- {format_fact(f)}" for f in facts)) == facts


def test_parse_action_is_strict() -> None:
    assert parse_action("noop()") == ("noop",)
    assert parse_action("go( room2 )") == ("go", "room2")
    assert parse_action("go(room2)", VERBS) == ("go", "room2")
    for bad in (
        "go room2",
        "__import__('os').system('ls')",
        "go(room2); take(item1)",
        "I will go(room2)",
        "go(room2",
        "",
        "go(" + "a" * 100 + ")",
        "x" * 400,
    ):
        with pytest.raises(BadText):
            parse_action(bad)
    with pytest.raises(BadText, match="unknown verb"):
        parse_action("fly(room2)", VERBS)
    with pytest.raises(BadText, match="takes 2 argument"):
        parse_action("put(item1)", VERBS)
    with pytest.raises(BadText):
        parse_action(None)  # type: ignore[arg-type]


def test_parse_facts_rejects_what_is_not_a_fact() -> None:
    assert parse_facts("") == []
    assert parse_facts("[at(agent, room1), open(box1)]") == [("at", "agent", "room1"), ("open", "box1")]
    assert parse_facts("1. at(agent, room1)\n2) open(box1);\n\n* on(switch1).") == [
        ("at", "agent", "room1"),
        ("open", "box1"),
        ("on", "switch1"),
    ]
    for bad in ("at(agent, room1) and more", "the agent is in room1", "at(agent room1)", "open()"):
        with pytest.raises(BadText):
            parse_facts(bad)
    with pytest.raises(BadText, match="longer"):
        parse_facts("a(b)\n" * 50_000)


# --- stress specs and regimes ------------------------------------------------------


def test_stress_spec_defaults_and_errors_name_the_field() -> None:
    spec = StressSpec(sc=10, dd=2)
    assert (spec.horizon, spec.branching, spec.observation, spec.mutation) == (40, 4, "clean", "static")
    assert spec.mutation_rate == 0.0
    for field, value in (
        ("sc", 2),
        ("sc", 61),
        ("sc", True),
        ("sc", 10.0),
        ("dd", 0),
        ("horizon", 0),
        ("branching", 0),
        ("observation", "noisy"),
        ("mutation", "extreme"),
    ):
        with pytest.raises(ValueError, match=f"^{field}:"):
            StressSpec(**{"sc": 10, "dd": 2, field: value})
    with pytest.raises(ValueError, match="^dd:"):
        spec.replace(dd=-1)
    assert spec.replace(branching=8).branching == 8
    for sc in range(3, 61):
        StressSpec(sc=sc, dd=1)


def test_stress_spec_from_mapping() -> None:
    spec = StressSpec.from_mapping({"sc": 20, "dd": 4, "T": 80, "observation": "partial"})
    assert (spec.horizon, spec.observation) == (80, "partial")
    with pytest.raises(ValueError, match="^colour:"):
        StressSpec.from_mapping({"sc": 20, "dd": 4, "colour": "red"})
    with pytest.raises(ValueError, match="^dd: required"):
        StressSpec.from_mapping({"sc": 20})
    with pytest.raises(ValueError, match="^horizon: given twice"):
        StressSpec.from_mapping({"sc": 20, "dd": 1, "T": 5, "horizon": 6})


def test_regimes_are_table_11() -> None:
    rows = {
        name: (r.sc, r.dd, r.horizon, r.branching, r.observation, r.mutation) for name, r in REGIMES.items()
    }
    assert rows == {
        "I": (5, 1, 40, 4, "clean", "static"),
        "II": (10, 2, 40, 4, "clean", "static"),
        "III": (None, None, 40, 4, "clean", "static"),
        "IV": (20, 4, 40, 4, "partial", "low"),
        "V": (40, 6, 80, 8, "conflict", "medium"),
    }
    assert REGIMES["III"].spec(sc=20, dd=6) == StressSpec(20, 6)
    assert REGIMES["V"].spec() == StressSpec(40, 6, 80, 8, "conflict", "medium")
    with pytest.raises(ValueError, match="^sc: regime III leaves"):
        REGIMES["III"].spec(dd=1)
    with pytest.raises(ValueError, match="^sc: regime I fixes sc=5"):
        REGIMES["I"].spec(sc=10)
    ablation = REGIMES["III"].spec(sc=10, dd=6).replace(observation="partial")
    assert ablation.observation == "partial" and ablation.sc == 10
    assert set(OBSERVATION_MODES) == {"clean", "partial", "distractor", "conflict"}
    assert list(MUTATION_RATES.values()) == sorted(MUTATION_RATES.values())


# --- seeds -------------------------------------------------------------------------


def test_episode_seed_is_derive_seed_of_the_coordinates() -> None:
    spec = StressSpec(sc=10, dd=2)
    seed = episode_seed(7, spec, 3, 4)
    expected = derive_seed(
        7,
        "world-episode",
        "sc=10",
        "dd=2",
        "horizon=40",
        "branching=4",
        "observation=clean",
        "mutation=static",
        "archetype=3",
        "variant=4",
    )
    assert seed == expected == episode_seed(7, spec, 3, 4)
    assert 0 <= seed < 2**63
    others = {
        episode_seed(8, spec, 3, 4),
        episode_seed(7, spec.replace(sc=11), 3, 4),
        episode_seed(7, spec.replace(observation="partial"), 3, 4),
        episode_seed(7, spec, 2, 4),
        episode_seed(7, spec, 3, 5),
        episode_seed(7, ("sc=10", "dd=2"), 3, 4),
    }
    assert seed not in others and len(others) == 6
    assert episode_seed(7, ("sc=10", "dd=2"), 3, 4) == episode_seed(7, ["sc=10", "dd=2"], 3, 4)
    with pytest.raises(ValueError, match="^archetype:"):
        episode_seed(7, spec, -1, 0)


def test_no_seed_collisions_over_the_study_grid_and_the_fine_scan() -> None:
    regime = REGIMES["III"]
    grid = [
        episode_seed(0, regime.spec(sc=sc, dd=dd), a, v)
        for sc, dd, a, v in itertools.product((5, 10, 20, 40), (1, 2, 4, 6), range(10), range(10))
    ]
    assert len(grid) == 1600 and len(set(grid)) == 1600
    cells = itertools.product(range(3, 61), range(10), range(10))
    fine = [episode_seed(0, regime.spec(sc=sc, dd=1), a, v) for sc, a, v in cells]
    assert len(set(grid + fine)) == len(set(grid)) + len(set(fine)) - len(set(grid) & set(fine))
    # the fine scan's sc=5/10/20/40 cells at dd=1 are grid cells: the same seeds
    assert len(set(grid) & set(fine)) == 4 * 100
    assert len(set(fine)) == 58 * 100


# --- building blocks ---------------------------------------------------------------


@settings(max_examples=50)
@given(st.lists(st.tuples(st.booleans(), FACTS), max_size=60))
def test_fact_store_stays_canonical(ops: list[tuple[bool, tuple[str, ...]]]) -> None:
    store = FactStore([("at", "agent", "room1")])
    model = {("at", "agent", "room1")}
    for add, fact in ops:
        if add:
            store.add(fact)
            model.add(fact)
        else:
            store.discard(fact)
            model.discard(fact)
        assert store.canonical() == canonical(model)
    assert store.frozen() == frozenset(model) and len(store) == len(model)
    store.replace(("at", "agent", "room1"), ("at", "agent", "room2"))
    assert ("at", "agent", "room2") in store and ("at", "agent", "room1") not in store


def test_rng_is_reproducible_and_in_range() -> None:
    a, b = Rng(42), Rng(42)
    assert [a.random() for _ in range(5)] == [b.random() for _ in range(5)]
    # the one guaranteed-stable primitive is random.Random(int).random()
    assert Rng(7).random() == random.Random(7).random()
    r = Rng(1)
    assert all(0 <= r.below(3) < 3 for _ in range(200))
    assert sorted(r.shuffled(range(10))) == list(range(10))
    sample = r.sample(range(10), 4)
    assert len(set(sample)) == 4
    state = r.getstate()
    first = r.random()
    r.setstate(state)
    assert r.random() == first
    assert not r.chance(0.0)


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=2**40))
def test_rng_sample_is_a_prefix_of_a_permutation(seed: int) -> None:
    r = Rng(seed)
    sample = r.sample(list("abcdefgh"), 8)
    assert sorted(sample) == list("abcdefgh")


def test_observation_and_task_helpers() -> None:
    obs = Observation(3, (("at", "agent", "room1"), ("open", "box1")), (), "go(room1): ok")
    assert obs.text == "step 3: go(room1): ok\nat(agent, room1)\nopen(box1)"
    spec = StressSpec(sc=5, dd=1, horizon=10)
    task = Task("x", spec, 1, 0, "", (), (), (), {}, optimal_length=12, horizon=10)
    assert task.horizon_short and task.horizon_ratio == pytest.approx(10 / 12)
    assert not Task("x", spec, 1, 0, "", (), (), (), {}, optimal_length=10, horizon=10).horizon_short


def test_stateful_puzzle_keeps_the_contract() -> None:
    env = StatefulPuzzle(StressSpec(sc=5, dd=1))
    assert isinstance(env, Environment)
    assert env.name == "stateful_puzzle"
    assert set(env.error_labels) >= {"precondition_violation", "object_location_error", "stale_room_state"}
