"""Offline baseline answers: the oracle, a noisy executor, and a random walker.

The noisy baseline corrupts each gold action independently with probability eps,
and every corruption breaks the plan (an omitted action or a jump to a room that is
not adjacent), so its success rate is exactly (1 - eps)^L: a known ground truth
for the decay fit, L0 = 1 / -ln(1 - eps). Given a :class:`PlantedTruth` instead of a
number, step i (from 1) is corrupted with its ``hazard(i)`` (the ``rising`` model), and
success is ``prod (1 - hazard(i))`` exactly, for the same reason.

:func:`answer_pieces` gives the intended plan's text forms for the answer styles
(:mod:`horizonbench.core.answer_styles`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from horizonbench.core.answer_styles import PlanPieces
from horizonbench.core.hazard import PlantedTruth, step_rates
from horizonbench.core.types import Step
from horizonbench.datasets.maze.facts import World, world_from_facts
from horizonbench.datasets.maze.rules import RESCUE_TARGET, State, apply, successors
from horizonbench.datasets.maze.simulator import format_plan


def noisy_plan(
    gold: Sequence[Step], world: World, rng: np.random.Generator, eps: float | PlantedTruth
) -> list[Step]:
    """The gold plan with each action corrupted with probability eps (or ``hazard(i)``
    for action i): omitted, or a move replaced by a jump to a room not adjacent."""
    out: list[Step] = []
    hits = rng.random(len(gold)) < step_rates(eps, len(gold))
    here: int | None = None  # room of the gold walk before this step
    before: int | None = None  # and the one before it (where a skipped move leaves us)
    for step, hit in zip(gold, hits, strict=True):
        if hit and step.action == "move_to" and rng.random() < 0.5:
            banned: set[int] = set()
            for room in (here, before, world.index.get(step.arg)):
                if room is not None:
                    banned.add(room)
                    banned.update(world.adj[room])
            choices = [i for i in range(len(world.rooms)) if i not in banned]
            if choices:
                out.append(Step("move_to", world.rooms[choices[int(rng.integers(len(choices)))]]))
        elif not hit:
            out.append(step)
        # otherwise the action is omitted (a skipped key pick-up is this corruption)
        if step.action in ("start", "move_to"):
            before, here = here, world.index.get(step.arg)
    return out


def random_walk(world: World, rng: np.random.Generator, max_steps: int) -> list[Step]:
    """Wander the described maze: legal moves, keys and doors at random, rescue at the goal.

    It also tries locked doors it cannot open, as a careless solver would.
    """
    if world.start is None:
        return []
    plan = [Step("start", world.rooms[world.start])]
    state: State = (world.start, 0, 0, -1)
    for _ in range(max_steps):
        if state[0] == world.goal and state[3] < 0:
            plan.append(Step("rescue", RESCUE_TARGET))
            break
        options = [s for s, _ in successors(world, state)]
        options += [Step("move_to", world.rooms[nb]) for nb in world.adj[state[0]]]
        step = options[int(rng.integers(len(options)))]
        plan.append(step)
        state, bad = apply(world, state, step)
        if bad is not None:
            break
    return plan


def intended_plan(
    facts: Sequence[str], gold: Sequence[Step], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
) -> list[Step]:
    """The plan an offline baseline means to answer with (before any answer style)."""
    if kind == "oracle":
        return list(gold)
    world = world_from_facts(list(facts))
    if kind == "noisy":
        return noisy_plan(gold, world, rng, eps)
    if kind == "random":
        return random_walk(world, rng, max_steps=4 * len(gold))
    raise ValueError(f"unknown offline baseline {kind!r}")


def answer_pieces(plan: Sequence[Step]) -> PlanPieces:
    """The intended plan in the forms the answer styles arrange: the prompt's list, a
    draft (its first half, so it differs), JSON, and a recap of its first steps as a
    short list in a sentence and as ``action: arg`` lines."""
    head = list(plan[:3])
    draft = list(plan[: len(plan) // 2]) if len(plan) > 1 else None
    return PlanPieces(
        marker="Solution:",
        plan=format_plan(plan),
        draft=format_plan(draft) if draft else None,
        json=json.dumps({"plan": [{"action": s.action, "arg": s.arg} for s in plan]}),
        recap_list=f"In short, the plan begins with {format_plan(head)} as above." if head else None,
        recap_lines=("To recap the first steps\n" + "\n".join(f"{s.action}: {s.arg}" for s in head))
        if head
        else None,
    )


def offline_answer(
    facts: Sequence[str], gold: Sequence[Step], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
) -> str:
    """The plain answer: ``Solution:`` and the intended plan as a Python-style list."""
    return "Solution: " + format_plan(intended_plan(facts, gold, kind, rng, eps))
