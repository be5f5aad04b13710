"""The scoring fast path (simulator.Judge and the parser's PairReader) gives exactly the
scores of the reference path, ``score_plan(facts, gold, parse_plan_general(text))``, on
generated instances, on cyclic worlds with several optimal plans, and on answers that
follow the gold plan, leave it legally, break it, or are not plans at all."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import ParsedAnswer, Step
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze.baselines import offline_answer
from horizonbench.datasets.maze.certificate import solve
from horizonbench.datasets.maze.facts import (
    ALICE_AT,
    BOB_AT,
    KEY_AT,
    LOCKED,
    OPEN,
    REQUIRES,
    world_from_facts,
)
from horizonbench.datasets.maze.family import gold_plan
from horizonbench.datasets.maze.rules import ACTIONS, RESCUE_TARGET, State, apply, successors
from horizonbench.datasets.maze.simulator import Judge, format_plan, score_plan
from horizonbench.datasets.plan_parser import PairReader, parse_plan, parse_plan_general

FAMILY = MazeFamily()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(facts: list[str], gold: tuple[Step, ...], text: str):
    return score_plan(facts, gold, parse_plan_general(text, task_actions=ACTIONS))


# --- answers ----------------------------------------------------------------------------------


def render(plan: list[Step], style: int) -> str:
    """An answer in one of the shapes models write (the fast path reads the first five)."""
    if style == 0:
        return "Solution: " + format_plan(plan)
    if style == 1:
        return "[" + ",".join(f'("{s.action}","{s.arg}")' for s in plan) + "]"
    if style == 2:
        return "Plan:\n[\n" + ",\n".join(f"  ('{s.action}', '{s.arg.lower()}')" for s in plan) + ",\n]\n"
    if style == 3:
        return "Solution: [" + ", ".join(f"( '{s.action}' , \"{s.arg}\" )" for s in plan) + " , ]  "
    if style == 4:
        return "Solution: " + format_plan(plan).replace("'", "\u2019")
    if style == 5:
        return "I think:\n" + "\n".join(f"{s.action}: {s.arg}" for s in plan)
    if style == 6:
        return "First [('start', 'A1')] then\nSolution: " + format_plan(plan)
    return "Solution: " + format_plan(plan) + "\nConfidence: 4, difficulty: 2"


def walk_on(world, plan: list[Step], rnd: random.Random, steps: int) -> list[Step]:
    """``plan`` (a legal prefix) continued by random legal actions, rescuing at the goal
    now and then: other optimal plans, detours and dead ends."""
    plan = list(plan)
    state: State = (world.start, 0, 0, -1)
    for s in plan[1:]:
        state, bad = apply(world, state, s)
        if bad is not None:
            return plan
    for _ in range(steps):
        if state[0] == world.goal and state[3] < 0 and rnd.random() < 0.6:
            plan.append(Step("rescue", RESCUE_TARGET))
            break
        options = successors(world, state)
        if not options:
            break
        step, state = options[rnd.randrange(len(options))]
        plan.append(step)
    return plan


def mutate(gold: tuple[Step, ...], world, rnd: random.Random) -> list[Step]:
    plan = list(gold)
    kind = rnd.randrange(9)
    if kind == 0 and len(plan) > 2:
        i = rnd.randrange(len(plan) - 1)
        plan[i], plan[i + 1] = plan[i + 1], plan[i]
    elif kind == 1:
        i = rnd.randrange(len(plan))
        plan.insert(i, plan[i])
    elif kind == 2:
        plan = plan[: rnd.randrange(len(plan) + 1)]
    elif kind == 3:
        del plan[rnd.randrange(len(plan))]
    elif kind == 4:
        plan = [Step(s.action, f"key {s.arg}") if s.action == "pick_up_key" else s for s in plan]
    elif kind == 5:
        i = rnd.randrange(len(plan))
        plan[i] = Step(plan[i].action, world.rooms[rnd.randrange(len(world.rooms))])
    elif kind == 6:
        plan = walk_on(world, plan[: rnd.randrange(1, len(plan) + 1)], rnd, rnd.randrange(1, 3 * len(gold)))
    elif kind == 7:
        plan = plan + [Step("move_to", world.rooms[rnd.randrange(len(world.rooms))])]
    else:
        plan = [Step(s.action.upper() if rnd.random() < 0.1 else s.action, s.arg) for s in plan]
    return plan


def answers_for(facts: list[str], gold: tuple[Step, ...], seed: int, count: int) -> list[str]:
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    world = world_from_facts(list(facts))
    out = ["Solution: " + format_plan(gold), "no plan", "", "Solution: [('start', 'None')]"]
    for _ in range(count):
        kind = rnd.randrange(4)
        if kind == 0:
            out.append(offline_answer(facts, gold, "noisy", rng, rnd.choice([0.02, 0.1, 0.4])))
        elif kind == 1:
            out.append(offline_answer(facts, gold, "random", rng, 0.0))
        else:
            out.append(render(mutate(gold, world, rnd), rnd.randrange(8)))
    return out


# --- instances --------------------------------------------------------------------------------


@st.composite
def maze_rows(draw: st.DrawFn) -> dict:
    rows, cols = draw(st.integers(2, 8)), draw(st.integers(2, 8))
    keys = draw(st.integers(0, 3))
    assume(rows * cols >= 2 * (keys + 1))
    params = MazeParams(
        grid_rows=rows,
        grid_cols=cols,
        num_keys=keys,
        noise_ratio=draw(st.sampled_from([0.0, 0.5, 2.0])),
        shuffle_ratio=draw(st.sampled_from([0.0, 1.0])),
        decoy_doors=draw(st.integers(0, 2)),
        num_keys_mode="at_most",
    )
    row = FAMILY.generate_candidate(params, draw(st.integers(0, 2**63 - 1)), 0).row
    assert row is not None
    return row


def shortest_plan(facts: list[str]) -> tuple[Step, ...] | None:
    """One optimal plan, by breadth-first search with parents (None: unsolvable)."""
    world = world_from_facts(facts)
    if world.start is None or world.goal is None:
        return None
    s0: State = (world.start, 0, 0, -1)
    parent: dict[State, tuple[State, Step] | None] = {s0: None}
    frontier = [s0]
    while frontier:
        for s in frontier:
            if s[0] == world.goal and s[3] < 0:
                plan = [Step("rescue", RESCUE_TARGET)]
                while parent[s] is not None:
                    s, step = parent[s]  # type: ignore[misc]
                    plan.append(step)
                plan.append(Step("start", world.rooms[world.start]))
                return tuple(reversed(plan))
        nxt = []
        for s in frontier:
            for step, t in successors(world, s):
                if t not in parent:
                    parent[t] = (s, step)
                    nxt.append(t)
        frontier = nxt
    return None


@st.composite
def cyclic_worlds(draw: st.DrawFn) -> tuple[list[str], tuple[Step, ...]]:
    """Small grids with cycles, locked doors and keys: often several optimal plans."""
    rows, cols = draw(st.integers(2, 4)), draw(st.integers(2, 4))

    def name(r: int, c: int) -> str:
        return f"{'ABCD'[c]}{r + 1}"

    edges = [((r, c), (r, c + 1)) for r in range(rows) for c in range(cols - 1)]
    edges += [((r, c), (r + 1, c)) for r in range(rows - 1) for c in range(cols)]
    facts = []
    for a, b in edges:
        kind = draw(st.sampled_from(["open", "open", "open", "locked", "none"]))
        if kind == "none":
            continue
        na, nb = name(*a), name(*b)
        if kind == "open":
            facts.append(OPEN.format(a=na, b=nb))
        else:
            facts.append(LOCKED.format(a=na, b=nb))
            key = draw(st.integers(1, 3))
            facts.append(REQUIRES.format(a=na, b=nb, k=key))
    cells = [name(r, c) for r in range(rows) for c in range(cols)]
    for key in range(1, 4):
        if draw(st.booleans()):
            facts.append(KEY_AT.format(k=key, r=draw(st.sampled_from(cells))))
    start, goal = draw(st.sampled_from(cells)), draw(st.sampled_from(cells))
    assume(start != goal)
    facts += [BOB_AT.format(r=start), ALICE_AT.format(r=goal)]
    facts = draw(st.permutations(facts))
    try:
        gold = shortest_plan(facts)
    except ValueError:  # a room named in no connection
        gold = None
    assume(gold is not None)
    return facts, gold  # type: ignore[return-value]


# --- the tests --------------------------------------------------------------------------------


@SETTINGS
@given(maze_rows(), st.integers(0, 2**32))
def test_the_judge_scores_generated_instances_as_the_reference(row: dict, seed: int) -> None:
    facts, gold = list(row["facts"]), gold_plan(row)
    unique = Judge(facts, gold, certified=True, optimal_plans=row["optimal_plan_count"])
    searching = Judge(facts, gold, certified=True)  # the count unknown: the search decides
    scorer = FAMILY.answer_scorer(row)
    for text in answers_for(facts, gold, seed, 12):
        want = reference(facts, gold, text)
        assert unique.score_text(text) == want, text
        assert searching.score_text(text) == want, text
        assert scorer(text) == want, text
        assert FAMILY.score(row, FAMILY.parse_answer(text)) == want, text


@SETTINGS
@given(cyclic_worlds(), st.integers(0, 2**32))
def test_the_judge_scores_worlds_with_several_optimal_plans_as_the_reference(world, seed: int) -> None:
    facts, gold = world
    count = solve(world_from_facts(facts)).count
    judges = [Judge(facts, gold, certified=True, optimal_plans=count), Judge(facts, gold, certified=True)]
    for text in answers_for(facts, gold, seed, 12):
        want = reference(facts, gold, text)
        for judge in judges:
            assert judge.score_text(text) == want, text


@SETTINGS
@given(cyclic_worlds(), st.integers(0, 2**32))
def test_an_uncertified_gold_plan_is_scored_by_the_reference(world, seed: int) -> None:
    """Without ``certified`` any gold plan (here: suboptimal or broken ones) is scored
    exactly as score_plan scores it."""
    facts, gold = world
    rnd = random.Random(seed)
    for g in (tuple(mutate(gold, world_from_facts(facts), rnd)), gold[:1] + gold[2:], gold[:-1], ()):
        judge = Judge(facts, g, certified=False)
        for text in answers_for(facts, g or gold, seed, 6):
            assert judge.score_text(text) == reference(facts, g, text), (g, text)


def test_a_plan_that_leaves_the_gold_plan_on_another_optimal_plan_gets_full_progress() -> None:
    facts = [
        "Bob is in room A1.",
        "Alice is in room B2.",
        "Room A1 and B1 are connected by an open door.",
        "Room A1 and A2 are connected by an open door.",
        "Room B1 and B2 are connected by an open door.",
        "Room A2 and B2 are connected by an open door.",
    ]
    gold = (Step("start", "A1"), Step("move_to", "B1"), Step("move_to", "B2"), Step("rescue", "Alice"))
    other = "Solution: [('start', 'A1'), ('move_to', 'A2'), ('move_to', 'B2'), ('move_to', 'A2')]"
    sc = Judge(facts, gold, certified=True, optimal_plans=2).score_text(other)
    assert sc == reference(facts, gold, other)
    assert sc.violation == "no_rescue" and sc.progress_ratio == 0.75


def test_a_judge_scores_parsed_answers_too() -> None:
    params = MazeParams(grid_rows=6, grid_cols=6, num_keys=2, num_keys_mode="at_most")
    row = FAMILY.generate_candidate(params, 7, 0).row
    assert row is not None
    facts, gold = list(row["facts"]), gold_plan(row)
    judge = Judge(facts, gold, certified=True, optimal_plans=row["optimal_plan_count"])
    for text in answers_for(facts, gold, 3, 40):
        parsed = parse_plan(text, task_actions=ACTIONS)
        assert judge.score(parsed) == score_plan(facts, gold, parsed)
    invalid = ParsedAnswer(None, "no plan found")
    assert judge.score(invalid) == score_plan(facts, gold, invalid)
    assert judge.score(ParsedAnswer(())) == score_plan(facts, gold, ParsedAnswer(()))


# --- the reader -------------------------------------------------------------------------------

words = st.one_of(
    st.from_regex(r"[A-Z]{1,2}[0-9]{1,2}", fullmatch=True),
    st.sampled_from(["Alice", "5", "None", "null", "NULL", "key 5", "a'b", "", "x y", "é", "7"]),
)
action_words = st.one_of(
    st.sampled_from(sorted(ACTIONS)), st.sampled_from(["none", "Move_To", "fly", "move to", "1x", ""])
)
gaps = st.sampled_from(["", " ", "  ", "\n", "\t", "\u00a0", "\u2003"])


@st.composite
def lists_of_pairs(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(st.tuples(action_words, words), min_size=0, max_size=7))
    q = draw(st.sampled_from(["'", '"', "mixed", "\u2018"]))
    items = []
    for a, b in pairs:
        qa, qb = (("'", '"') if q == "mixed" else (q, q)) if q != "\u2018" else ("\u2018", "\u2019")
        items.append(f"({draw(gaps)}{qa}{a}{qa}{draw(gaps)},{draw(gaps)}{qb}{b}{qb}{draw(gaps)})")
    seps = [draw(st.sampled_from(["), (", ", ", ",", " ,\n"])) for _ in items]
    body = ""
    for i, item in enumerate(items):
        body += item if i == 0 else (", " if seps[i] == "), (" else seps[i]) + item
    tail = draw(st.sampled_from(["", ",", " , ", "\n"]))
    before = draw(st.sampled_from(["", "Solution: ", "Plan (final):\n", "[('start', 'A1')] no:\n", "{x} "]))
    after = draw(st.sampled_from(["", "  ", "\n", " ]", "\nDone."]))
    return f"{before}[{draw(gaps)}{body}{tail}{draw(gaps)}]{after}"


def pairs_of(text: str, vocabulary) -> list[tuple[str, str]] | None:
    parsed = parse_plan_general(text, task_actions=vocabulary)
    return None if parsed.plan is None else [(s.action, s.arg) for s in parsed.plan]


READERS = {
    "maze": PairReader(lambda a, b: (a, b), ACTIONS),
    "any": PairReader(lambda a, b: (a, b)),
    "tiny_memo": PairReader(lambda a, b: (a, b), ACTIONS, memo_size=3),
}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(lists_of_pairs(), st.text(alphabet="[](){},:'\" \nabAB01_-#\u2018\u2019", max_size=80)))
def test_the_pair_reader_reads_what_the_general_reader_reads(text: str) -> None:
    for name, reader in READERS.items():
        vocabulary = None if name == "any" else ACTIONS
        got = reader.read(text)
        if got is not None:  # None: the caller asks parse_plan, which is always right
            assert got == pairs_of(text, vocabulary), (name, text)
    assert parse_plan(text, task_actions=ACTIONS) == parse_plan_general(text, task_actions=ACTIONS)
    assert parse_plan(text) == parse_plan_general(text)


@pytest.mark.parametrize(
    "text",
    [
        "Solution: [('start', 'A1'), ('move_to', 'B1'), ('rescue', 'Alice')]",
        'Solution: [("start", "A1"),("move_to", "B1"), ( "rescue" , "Alice" ),]',
        "[('start', 'A1'), \n ('move_to', 'B1')]\n",
    ],
)
def test_the_usual_forms_take_the_reader(text: str) -> None:
    """Control: the agreement above is not vacuous."""
    assert READERS["maze"].read(text) == pairs_of(text, ACTIONS)
    assert READERS["maze"].read(text) is not None


def test_the_reader_leaves_limits_and_foreign_vocabularies_to_the_parser() -> None:
    reader = PairReader(lambda a, b: (a, b), ("fly",))
    text = "Solution: [('start', 'A1'), ('move_to', 'B1')]"
    assert reader.read(text) is None
    assert READERS["maze"].read(text, max_steps=1) is None
    assert READERS["maze"].read(text, max_chars=10) is None
    assert READERS["maze"].read(None) is None  # type: ignore[arg-type]
