"""Prompts for the puzzles: one for a whole plan, one per rollout step.

Both open with the puzzle's own description of its rules and text formats, so a model
sees the same grammar it is scored against. A rollout step shows only the current
state and the goal (the paper's s_{t+1} = f(s_t, g)): the cost of an episode grows
linearly with its length, and a step's prompt names the step number, so two visits of
one state are two different calls in the attempt store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from horizonbench.core.types import Message

PLAN_SYSTEM = """\
You solve a state puzzle. You are told its rules, a start state and a goal state.
Work out the shortest sequence of legal moves that turns the start into the goal.
Every move is checked against the rules in order; the first illegal move ends the
attempt, and a plan longer than necessary counts as suboptimal.

End your answer with the complete move list as a single list on the last line,
after the word "Moves:", for example:
Moves: [MOVE, MOVE, ...]
Write an empty list, Moves: [], if the start already is the goal."""

STEP_SYSTEM = """\
You solve a state puzzle one move at a time. Each turn you are told the rules, the
goal state and the current state. Make exactly one legal move towards the goal and
write the state that results.

End your answer with the new state alone on the last line, after the words
"Next state:". If the current state already equals the goal, write STOP on the last
line instead. Writing STOP anywhere else ends the attempt unsolved."""


def _example_block(example: Mapping[str, Any] | None) -> str:
    if not example:
        return ""
    return (
        "Worked example (a smaller puzzle of the same kind):\n"
        f"Start: {example['initial_state']}\n"
        f"Goal: {example['goal_state']}\n"
        f"Moves: [{', '.join(example['moves'])}]\n\n"
    )


def plan_messages(rules_text: str, start: str, goal: str, example: Mapping[str, Any] | None) -> list[Message]:
    user = (
        f"{rules_text}\n\n{_example_block(example)}"
        f"Start: {start}\nGoal: {goal}\n\nGive the shortest move list."
    )
    return [Message("system", PLAN_SYSTEM), Message("user", user)]


def step_messages(
    rules_text: str,
    goal: str,
    current: str,
    step: int,
    max_steps: int,
    example: Sequence[str] | None = None,
) -> list[Message]:
    """``step`` is 1-based; ``example`` is an optional (state, next state) pair."""
    shown = ""
    if example:
        shown = f"Worked example of one turn:\nCurrent state: {example[0]}\nNext state: {example[1]}\n\n"
    user = (
        f"{rules_text}\n\n{shown}"
        f"Goal: {goal}\n"
        f"Step {step} of at most {max_steps}.\n"
        f"Current state: {current}\n\n"
        "Write the next state."
    )
    return [Message("system", STEP_SYSTEM), Message("user", user)]
