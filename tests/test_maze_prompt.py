"""Tests for the maze prompt: seqBench's four components, the worked examples drawn at
the instance's noise and shuffle, determinism, and the answer format against the parser."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest

from horizonbench.core.types import Message, ParsedAnswer
from horizonbench.datasets.maze import MazeFamily, MazeParams, MazePrompt, prompt
from horizonbench.datasets.maze import facts as F
from horizonbench.datasets.maze.certificate import solve
from horizonbench.datasets.maze.facts import world_from_facts
from horizonbench.datasets.maze.family import gold_plan
from horizonbench.datasets.maze.generator import Maze, generate_maze
from horizonbench.datasets.maze.prompt import (
    GUIDANCE,
    INSTRUCTIONS,
    SELF_ASSESSMENT,
    SELF_ASSESSMENT_LINE,
    worked_examples,
)
from horizonbench.datasets.maze.rules import ACTIONS
from horizonbench.datasets.maze.simulator import format_plan, replay, score_plan

FAMILY = MazeFamily()


def first_row(params: MazeParams, seed: int) -> dict:
    """The first certified instance at or after ``seed``."""
    for s in range(seed, seed + 200):
        cand = FAMILY.generate_candidate(params, s, 0)
        if cand.row is not None:
            return cand.row
    raise AssertionError("no instance generated")


#: (grid, keys, noise, shuffle, decoys): plain, ordered; noisy and shuffled; half and
#: half (ratios that round); high noise, which needs bigger example grids
PARAMS = [
    MazeParams(grid_rows=6, grid_cols=7, num_keys=2, noise_ratio=1.0),
    MazeParams(grid_rows=3, grid_cols=3, num_keys=0, shuffle_ratio=0.0),
    MazeParams(grid_rows=8, grid_cols=8, num_keys=1, noise_ratio=0.5, shuffle_ratio=0.5),
    MazeParams(grid_rows=20, grid_cols=30, num_keys=4, noise_ratio=2.0, decoy_doors=3),
]
ROWS = [first_row(p, seed) for p, seed in zip(PARAMS, (11, 5, 3, 9), strict=True)]


def render(row: dict, shots: int = 3, guidance: bool = True, self_assessment: bool = True) -> list[Message]:
    return FAMILY.render_prompt(
        row, MazePrompt(shots=shots, guidance=guidance, self_assessment=self_assessment)
    )


def example_blocks(user: str) -> list[str]:
    return re.findall(r"Example (\d+):\nFacts:\n", user)


# --- measuring a fact listing, independently of the generator's own counts -------------


def _connection(a: str, b: str) -> set[str]:
    return {t.format(a=x, b=y) for t in (F.OPEN, F.LOCKED) for x, y in ((a, b), (b, a))}


def supporting_facts(facts: tuple[str, ...] | list[str], plan) -> set[str]:
    """The facts the gold plan relies on: where Bob and Alice are, each door it goes
    through (with the key a locked one requires) and where each key it takes lies."""
    listed = set(facts)
    need: set[str] = set()
    room = plan[0].arg
    need |= {F.BOB_AT.format(r=room)}
    for step in plan[1:]:
        if step.action == "move_to":
            need |= _connection(room, step.arg) & listed
            room = step.arg
        elif step.action == "unlock_and_open_door_to":
            need |= _connection(room, step.arg) & listed
            need |= {
                f
                for f in listed
                if f.startswith("The locked door between ") and {room, step.arg} == set(f.split(" ")[4:7:2])
            }
        elif step.action == "pick_up_key":
            need.add(F.KEY_AT.format(k=step.arg, r=room))
        elif step.action == "rescue":
            need.add(F.ALICE_AT.format(r=room))
    assert need <= listed, need - listed
    return need


def noise_of(facts, plan) -> tuple[float, int]:
    """(distracting / supporting, supporting) of a listing."""
    support = len(supporting_facts(facts, plan))
    return (len(facts) - support) / support, support


def shuffle_of(ex: Maze, noise_ratio: float) -> float:
    """Share of an example's facts away from their place in the unshuffled listing,
    which is rebuilt by finding the (size, seed) that lists the same facts in order."""
    for seed in range(prompt._SEEDS_PER_SIDE):
        ordered = generate_maze(ex.rows, ex.cols, ex.num_keys, noise_ratio, 0.0, ex.num_keys, seed)
        if sorted(ordered.facts) == sorted(ex.facts):
            return sum(a != b for a, b in zip(ex.facts, ordered.facts, strict=True)) / len(ex.facts)
    raise AssertionError("example not found")


# --- the four components ---------------------------------------------------------------


@pytest.mark.parametrize("row_i", range(len(ROWS)))
@pytest.mark.parametrize("shots", [0, 1, 2, 3])
@pytest.mark.parametrize("guidance", [True, False])
@pytest.mark.parametrize("self_assessment", [True, False])
def test_render_prompt(row_i: int, shots: int, guidance: bool, self_assessment: bool) -> None:
    row = ROWS[row_i]
    messages = render(row, shots, guidance, self_assessment)
    assert [m.role for m in messages] == ["system", "user"]
    system, user = messages[0].content, messages[1].content

    # component 1, the system message: the instructions
    assert system == INSTRUCTIONS
    for action in ACTIONS:
        assert f"('{action}'," in system
    assert "Solution:" in system

    # component 4: the user message ends with the instance's facts, then the answer cue
    assert user.endswith("Facts:\n" + "\n".join(row["facts"]) + "\n\nYOUR SOLUTION:")
    assert user.count("YOUR SOLUTION:") == 1

    # component 2: exactly `shots` worked examples, numbered, with rising length
    assert example_blocks(user) == [str(i) for i in range(1, shots + 1)]
    solutions = re.findall(r"^Solution: (\[.*\])$", user, flags=re.MULTILINE)
    assert len(solutions) == shots
    examples = worked_examples(row["noise_ratio"], row["shuffle_ratio"])[:shots]
    lengths = []
    for text, ex in zip(solutions, examples, strict=True):
        parsed = FAMILY.parse_answer("Solution: " + text)
        assert parsed.plan == ex.gold
        assert text == format_plan(ex.gold)
        lengths.append(len(parsed.plan))
        assert "Facts:\n" + "\n".join(ex.facts) + "\nSolution: " + text in user
    assert lengths == sorted(lengths) and len(set(lengths)) == len(lengths)
    assert ("END OF EXAMPLES" in user) is (shots > 0)

    # component 3: guidance and the self-assessment request, each only on request,
    # after the examples and before the facts
    assert (GUIDANCE in user) is guidance
    assert (SELF_ASSESSMENT in user) is self_assessment
    problem = user.rindex("PROBLEM\nFacts:\n")
    last_example = user.rfind("END OF EXAMPLES")
    for part, wanted in ((GUIDANCE, guidance), (SELF_ASSESSMENT, self_assessment)):
        if wanted:
            assert last_example < user.index(part) < problem
    if guidance and self_assessment:
        assert user.index(GUIDANCE) < user.index(SELF_ASSESSMENT)

    # rendering is a pure function
    assert render(row, shots, guidance, self_assessment) == messages


def _rule(system: str, number: int) -> str:
    match = re.search(rf"^{number}\. (.*?)(?=^\d\. |^\n|\Z)", system, flags=re.MULTILINE | re.DOTALL)
    assert match, f"rule {number} missing"
    return " ".join(match.group(1).split())


def test_instructions_carry_the_papers_constraints() -> None:
    system = INSTRUCTIONS
    rules = [_rule(system, i) for i in range(1, 7)]
    # a plan missing an intermediate action is invalid
    assert any(re.search(r"leaves? out any intermediate action.*invalid", r) for r in rules)
    # only the given IDs
    assert any(re.search(r"Use only the room and key names that appear in the facts", r) for r in rules)
    assert "Never invent a name" in system
    # adjacency, keys before use, the door's own key, use_key right before the unlock, optimality
    assert any("neighbouring rooms that a stated door joins" in r for r in rules)
    assert any("picked up" in r and "before it can be used" in r for r in rules)
    assert any("'use_key' comes immediately before 'unlock_and_open_door_to'" in r for r in rules)
    assert any("as short as possible" in r for r in rules)
    # what the facts describe, and how rooms and keys are named
    for topic in ("open or closed and locked", "which key each locked door needs", "Bob starts in"):
        assert topic in system
    assert "column letter and a row number" in system and "positive whole numbers" in system


def test_self_assessment_is_requested_after_the_plan() -> None:
    text = " ".join(SELF_ASSESSMENT.split())
    assert "confident" in text and "difficult" in text
    assert re.search(r"After the Solution line, add one last line", text)
    assert "from 1 (very low) to 5 (very high)" in text
    # the form the line must take is spelled out, and matches SELF_ASSESSMENT_LINE
    assert SELF_ASSESSMENT.endswith(SELF_ASSESSMENT_LINE.format(confidence="C", difficulty="D"))


@pytest.mark.parametrize("row_i", range(len(ROWS)))
@pytest.mark.parametrize("draft", [False, True])
def test_an_answer_in_the_requested_format_parses_to_its_plan(row_i: int, draft: bool) -> None:
    row = ROWS[row_i]
    gold = gold_plan(row)
    reasoning = "Bob starts in " + gold[0].arg + ". I check each door against the facts.\n"
    if draft:  # a first attempt, revised before the final line
        reasoning += "First try: " + format_plan(gold[:2]) + "\nThat misses the rest, so:\n"
    answer = (
        reasoning
        + "Solution: "
        + format_plan(gold)
        + "\n"
        + SELF_ASSESSMENT_LINE.format(confidence=4, difficulty=2)
    )
    parsed = FAMILY.parse_answer(answer)
    assert parsed.plan == gold
    assert FAMILY.score(row, parsed).exact_match
    # the self-assessment line is never a plan by itself
    for c, d in ((1, 1), (5, 5), (3, 4)):
        assert FAMILY.parse_answer(SELF_ASSESSMENT_LINE.format(confidence=c, difficulty=d)).plan is None


def test_prompt_defaults() -> None:
    p = MazePrompt()
    assert p.shots == 3 and p.guidance is True and p.self_assessment is True
    assert FAMILY.render_prompt(ROWS[0], p) == FAMILY.render_prompt(
        ROWS[0], {"shots": 3, "guidance": True, "self_assessment": True}
    )
    with pytest.raises(ValueError):
        MazePrompt(shots=4)


# --- the worked examples -----------------------------------------------------------------


@pytest.mark.parametrize("row_i", range(len(ROWS)))
def test_examples_match_the_instances_noise_and_shuffle(row_i: int) -> None:
    row = ROWS[row_i]
    # the measurement agrees with the instance's own recorded ratio
    inst_noise, inst_support = noise_of(row["facts"], gold_plan(row))
    assert inst_noise == pytest.approx(row["noise_ratio"])
    user = render(row)[1].content
    for ex in worked_examples(row["noise_ratio"], row["shuffle_ratio"]):
        assert "Facts:\n" + "\n".join(ex.facts) + "\nSolution: " in user
        noise, support = noise_of(ex.facts, ex.gold)
        # as close as whole facts allow: within half a fact of the instance's ratio
        assert abs(noise - row["noise_ratio"]) <= 0.5 / support + 1e-9
        if row["noise_ratio"] > 0:
            assert len(ex.facts) > support  # distractors shown, as in the paper's examples
        else:
            assert len(ex.facts) == support
        shuffle = shuffle_of(ex, row["noise_ratio"])
        assert abs(shuffle - row["shuffle_ratio"]) <= 0.5 / len(ex.facts) + 1e-9
    assert inst_support > 0


@pytest.mark.parametrize(("noise", "shuffle"), [(0.0, 1.0), (0.0, 0.0), (1.0, 1.0), (3.0, 0.5)])
def test_worked_examples_are_certified(noise: float, shuffle: float) -> None:
    examples = worked_examples(noise, shuffle)
    assert len(examples) == 3
    assert [ex.num_keys for ex in examples] == [0, 1, 2]
    lengths = [len(ex.gold) for ex in examples]
    assert lengths[0] < lengths[1] < lengths[2]
    for ex in examples:
        world = world_from_facts(list(ex.facts))
        sol = solve(world)
        assert sol.length == len(ex.gold)
        assert replay(world, ex.gold) is None
        sc = score_plan(list(ex.facts), ex.gold, ParsedAnswer(ex.gold))
        assert sc.success and sc.exact_match
        assert ex.distracting_count == round(noise * ex.supporting_count)
    assert len({ex.facts for ex in examples}) == 3


def test_worked_examples_are_stable() -> None:
    a = worked_examples(1.0, 1.0)
    prompt._examples.cache_clear()
    b = worked_examples(1.0, 1.0)
    assert a == b
    # a stored ratio with float noise picks the same examples
    assert worked_examples(1.0 + 1e-12, 1.0) == a


def test_same_row_same_prompt_bytes_in_a_fresh_process() -> None:
    def digest(messages) -> str:
        return hashlib.sha256(json.dumps([[m.role, m.content] for m in messages]).encode()).hexdigest()

    # the row goes over as JSON, as it would come back from the instance table
    code = (
        "import hashlib, json, sys\n"
        "from horizonbench.datasets.maze import MazeFamily, MazePrompt\n"
        "m = MazeFamily().render_prompt(json.load(sys.stdin), MazePrompt())\n"
        "print(hashlib.sha256(json.dumps([[x.role, x.content] for x in m]).encode()).hexdigest())\n"
    )
    for row in (ROWS[0], ROWS[2]):
        out = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(row), capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == digest(render(row))


def test_instances_of_one_setting_share_the_examples() -> None:
    params = MazeParams(grid_rows=6, grid_cols=6, num_keys=1, noise_ratio=1.0)
    a_row, b_row = first_row(params, 100), first_row(params, 200)
    assert a_row["noise_ratio"] == b_row["noise_ratio"] == 1.0
    a, b = render(a_row), render(b_row)
    assert a[0] == b[0] and a[1] != b[1]
    head = a[1].content[: a[1].content.rindex("PROBLEM\nFacts:\n")]
    assert b[1].content.startswith(head)
    # and a different noise ratio shows different examples
    c = render(ROWS[1])
    assert not c[1].content.startswith(head)
