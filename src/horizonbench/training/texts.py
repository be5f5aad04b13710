"""The texts a sequence model reads and writes (pure: no torch).

A step of an exported trajectory becomes one (source, target) pair: the source names the
current state, the goal and the puzzle's rule values (the move rules depend on them, e.g.
the number of stacks), the target is the next state, or ``STOP`` on the sentinel row at
the goal (which teaches the model when a rollout ends).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STOP_TEXT = "STOP"
_STATE, _GOAL = "state: ", " goal: "


def _name(column: Any) -> str:
    """A rule column given by name or as a pyarrow field (a family's ``rule_fields``)."""
    return str(getattr(column, "name", column))


def rules_of(row: Mapping[str, Any], rule_columns: Iterable[Any]) -> dict[str, Any]:
    """The rule values of an instance or step row, by column name."""
    return {_name(c): row[_name(c)] for c in rule_columns}


def source_text(state: str, goal: str, rules: Mapping[str, Any]) -> str:
    """``state: <state> goal: <goal>`` then `` <k>: <v>`` per rule in sorted key order
    (sorted so the text does not depend on how the rules were collected)."""
    text = f"{_STATE}{state}{_GOAL}{goal}"
    for key in sorted(rules):
        text += f" {key}: {rules[key]}"
    return text


def state_of_source(source: str) -> str:
    """The current state named by a :func:`source_text` (for the copy baseline)."""
    if not source.startswith(_STATE) or _GOAL not in source:
        raise ValueError(f"not a source text: {source!r}")
    return source[len(_STATE) : source.index(_GOAL)]


def at_goal(source: str) -> bool:
    """Whether a :func:`source_text` names a state equal to its goal (a STOP row)."""
    state = state_of_source(source)
    rest = source[len(_STATE) + len(state) + len(_GOAL) :]
    return rest == state or rest.startswith(state + " ")


def copy_prediction(source: str) -> str:
    """The copy-the-state baseline's answer: ``STOP`` at the goal, else the state itself
    (what a model that learnt nothing about moves but the stopping rule would say)."""
    return STOP_TEXT if at_goal(source) else state_of_source(source)


def target_text(step: Mapping[str, Any]) -> str:
    """``STOP`` on the sentinel row, else the next state."""
    return STOP_TEXT if bool(step["is_final"]) else str(step["next_state"])


def pairs(steps: Iterable[Mapping[str, Any]], rule_columns: Sequence[Any]) -> list[tuple[str, str]]:
    """(source, target) of each export step row, in row order."""
    return [
        (
            source_text(str(s["current_state"]), str(s["goal_state"]), rules_of(s, rule_columns)),
            target_text(s),
        )
        for s in steps
    ]


def normalise(text: str) -> str:
    """Text without whitespace: how a decoded state is compared with a target (the
    tokenizer's decoder may space a state differently from the puzzle's formatter)."""
    return "".join(text.split())
