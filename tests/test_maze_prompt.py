"""Tests for the maze prompt: instructions, worked examples, guidance and the facts block."""

from __future__ import annotations

import re

import pytest

from horizonbench.core.types import Message, ParsedAnswer
from horizonbench.datasets.maze import MazeFamily, MazeParams, MazePrompt
from horizonbench.datasets.maze.certificate import solve
from horizonbench.datasets.maze.facts import world_from_facts
from horizonbench.datasets.maze.prompt import GUIDANCE, INSTRUCTIONS, worked_examples
from horizonbench.datasets.maze.rules import ACTIONS
from horizonbench.datasets.maze.simulator import format_plan, replay, score_plan

FAMILY = MazeFamily()

ROWS = [
    FAMILY.generate_candidate(MazeParams(grid_rows=6, grid_cols=7, num_keys=2, noise_ratio=1.0), 11, 0).row,
    FAMILY.generate_candidate(MazeParams(grid_rows=3, grid_cols=3, num_keys=0, shuffle_ratio=0.0), 5, 1).row,
    FAMILY.generate_candidate(
        MazeParams(grid_rows=20, grid_cols=30, num_keys=4, noise_ratio=2.0, decoy_doors=3), 9, 2
    ).row,
]


def test_rows_were_generated() -> None:
    assert all(row is not None for row in ROWS)


def render(row: dict, shots: int, guidance: bool) -> list[Message]:
    return FAMILY.render_prompt(row, MazePrompt(shots=shots, guidance=guidance))


def example_blocks(user: str) -> list[str]:
    return re.findall(r"Example (\d+):\nFacts:\n", user)


@pytest.mark.parametrize("row_i", range(len(ROWS)))
@pytest.mark.parametrize("shots", [0, 1, 2, 3])
@pytest.mark.parametrize("guidance", [True, False])
def test_render_prompt(row_i: int, shots: int, guidance: bool) -> None:
    row = ROWS[row_i]
    messages = render(row, shots, guidance)
    assert [m.role for m in messages] == ["system", "user"]
    system, user = messages[0].content, messages[1].content

    # the system message holds the action schema
    assert system == INSTRUCTIONS
    for action in ACTIONS:
        assert f"('{action}'," in system
    assert len(ACTIONS) == 6
    assert "Solution:" in system

    # the user message ends with the instance's facts, then the answer cue
    assert user.endswith("YOUR SOLUTION:")
    assert user.endswith("Facts:\n" + "\n".join(row["facts"]) + "\n\nYOUR SOLUTION:")
    for fact in row["facts"]:
        assert fact in user
    assert user.count("YOUR SOLUTION:") == 1

    # worked examples: exactly `shots` of them, numbered, with rising solution length
    assert example_blocks(user) == [str(i) for i in range(1, shots + 1)]
    solutions = re.findall(r"^Solution: (\[.*\])$", user, flags=re.MULTILINE)
    assert len(solutions) == shots
    lengths = []
    for text, ex in zip(solutions, worked_examples()[:shots], strict=True):
        parsed = FAMILY.parse_answer("Solution: " + text)
        assert parsed.plan == ex.gold
        assert text == format_plan(ex.gold)
        lengths.append(len(parsed.plan))
        assert "Facts:\n" + "\n".join(ex.facts) + "\nSolution: " + text in user
    assert lengths == sorted(lengths) and len(set(lengths)) == len(lengths)

    # guidance paragraph only on request, after the examples and before the facts
    assert (GUIDANCE in user) is guidance
    if guidance:
        at = user.index(GUIDANCE)
        assert at > user.rfind("Example ") and at < user.rindex("Facts:\n")

    # rendering is a pure function
    assert render(row, shots, guidance) == messages


def test_prompt_defaults() -> None:
    p = MazePrompt()
    assert p.shots == 3 and p.guidance is True
    assert FAMILY.render_prompt(ROWS[0], p) == FAMILY.render_prompt(ROWS[0], {"shots": 3, "guidance": True})
    with pytest.raises(ValueError):
        MazePrompt(shots=4)


def test_worked_examples_are_certified() -> None:
    examples = worked_examples()
    assert len(examples) == 3
    assert [ex.num_keys for ex in examples] == [0, 1, 2]
    lengths = [len(ex.gold) for ex in examples]
    assert lengths[0] < lengths[1] < lengths[2]
    for ex in examples:
        world = world_from_facts(list(ex.facts))
        sol = solve(world)
        assert sol.length == len(ex.gold)
        assert sol.count >= 1
        assert replay(world, ex.gold) is None
        sc = score_plan(list(ex.facts), ex.gold, ParsedAnswer(ex.gold))
        assert sc.success and sc.exact_match
        assert ex.distracting_count == 0
        # shown shuffled, as the instances are by default
        assert ex.displaced_count == len(ex.facts)
    # examples never coincide with one another
    assert len({ex.facts for ex in examples}) == 3


def test_worked_examples_are_stable() -> None:
    a = worked_examples()
    worked_examples.cache_clear()
    b = worked_examples()
    assert a == b


def test_prompt_differs_between_instances() -> None:
    a = render(ROWS[0], 2, True)
    b = render(ROWS[1], 2, True)
    assert a[0] == b[0]
    assert a[1] != b[1]
    # the shared part (examples and guidance) is identical
    head = a[1].content[: a[1].content.rindex("Facts:\n")]
    assert b[1].content.startswith(head)
