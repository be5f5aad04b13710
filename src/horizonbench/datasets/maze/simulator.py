"""Replays a plan on the world its facts describe and scores it.

Success is judged by simulation (valid and of optimal length), not by comparison with
one gold plan, because a maze can have several optimal plans; exact match with the
gold plan is reported beside it for comparability with seqBench's Pass@1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from horizonbench.core.types import ParsedAnswer, Plan, Score, Step
from horizonbench.datasets.maze.certificate import Solution, solve
from horizonbench.datasets.maze.facts import World, world_from_facts
from horizonbench.datasets.maze.rules import RESCUE_TARGET, State, apply, normalize_step


def _invalid(error: str | None) -> Score:
    return Score(
        success=False,
        valid=False,
        exact_match=False,
        progress_ratio=0.0,
        precision=0.0,
        recall=0.0,
        plan_length=0,
        violation="invalid_output",
        first_violation_step=None,
        extra={"parse_error": error, "precision_multiset": 0.0, "precision_positional": 0.0},
    )


@lru_cache(maxsize=16)
def _world(facts: tuple[str, ...]) -> World:
    return world_from_facts(list(facts))


@lru_cache(maxsize=16)
def _search(facts: tuple[str, ...]) -> Solution:
    """The full search of a fact listing, shared by every failed attempt at it.

    Only failed attempts need it (for the progress ratio), and scoring visits the
    attempts of one instance together, so a small cache makes it one search per
    instance at most.
    """
    return solve(_world(facts), track=True)


def precision_recall(plan: Sequence[Step], gold: Sequence[Step]) -> tuple[float, float]:
    """Multiset precision and recall: overlap of the two plans as multisets of
    (action, argument), over the predicted and over the gold length.

    Order plays no part, so a plan that leaves out a key pickup but keeps every other
    gold action has precision 1.0. :func:`precision_positional` is the order-aware one.
    """
    if not plan or not gold:
        return 0.0, 0.0
    pc, gc = Counter(plan), Counter(gold)
    matched = sum(min(n, gc[s]) for s, n in pc.items())
    return matched / len(plan), matched / len(gold)


def precision_positional(plan: Sequence[Step], gold: Sequence[Step]) -> float:
    """seqBench's precision, read position by position: the share of predicted steps
    that equal the gold step at the same index.

    ``|{i < min(len(plan), len(gold)) : plan[i] == gold[i]}| / len(plan)``, 0.0 for an
    empty plan. The paper defines precision as "the proportion of predicted actions that
    are correct" and judges Pass@1 by identity with the gold plan; reading "correct"
    as "the gold action at that position" keeps both definitions on the same footing:
    positional precision 1.0 with the gold length is exactly an exact match. A step is
    therefore credited only where it stands: leaving out one action shifts every later
    one off its gold position, so a plan that skips a key pickup loses the credit for
    everything after the gap. Like exact match, it compares with the one gold plan, so
    a different optimal plan scores below 1.0 while ``success`` is true.
    """
    if not plan:
        return 0.0
    hits = sum(1 for p, g in zip(plan, gold, strict=False) if p == g)
    return hits / len(plan)


def score_plan(facts: Sequence[str], gold: Plan, parsed: ParsedAnswer) -> Score:
    """Score a parsed answer against the world of ``facts`` and the gold plan.

    progress ratio k/n: k counts the leading actions that stay on some optimal plan
    (the state after each is one step further along a shortest path); with a single
    optimal plan this is seqBench's "gold actions executed correctly before the first
    error". The first violation is the first illegal action; a legal plan that ends
    without rescuing, or rescues late, is ``no_rescue`` or ``suboptimal``.
    """
    if parsed.plan is None:
        return _invalid(parsed.error)
    plan = tuple(normalize_step(s) for s in parsed.plan)
    gold_n = tuple(normalize_step(s) for s in gold)
    n = len(gold_n)
    key = tuple(facts)
    world = _world(key)
    precision, recall = precision_recall(plan, gold_n)
    positional = precision_positional(plan, gold_n)
    exact = plan == gold_n

    # pass 1: legality, keeping the state after each legal action
    violation: str | None = None
    first_bad: int | None = None
    rescued = False
    after: list[State] = []
    for i, step in enumerate(plan):
        if i == 0:
            start_name = world.rooms[world.start] if world.start is not None else None
            if step.action != "start" or step.arg != start_name:
                violation, first_bad = "bad_start", 0
                break
            after.append((world.start, 0, 0, -1))  # type: ignore[arg-type]
            continue
        if rescued:
            violation, first_bad = "after_rescue", i
            break
        new_state, bad = apply(world, after[-1], step)
        if bad is not None:
            violation, first_bad = bad, i
            break
        rescued = step.action == "rescue"
        after.append(new_state)
    if violation is None and not rescued:
        violation, first_bad = "no_rescue", len(plan)
    valid = violation is None
    success = valid and len(plan) == n

    # pass 2: how far the plan stays on some optimal plan (a success goes all the way)
    progress = n if success else _progress(plan, after, _search(key))
    if valid and not success:
        violation, first_bad = "suboptimal", progress
    return Score(
        success=success,
        valid=valid,
        exact_match=exact,
        progress_ratio=min(progress, n) / n if n else 0.0,
        precision=precision,
        recall=recall,
        plan_length=len(plan),
        violation=violation,
        first_violation_step=first_bad,
        extra={"parse_error": None, "precision_multiset": precision, "precision_positional": positional},
    )


def _progress(plan: Sequence[Step], after: list[State], sol: Solution) -> int:
    """Leading actions whose resulting state is one step further along a shortest plan.

    A rescue leaves the state unchanged, so it counts when the state it rescues from is
    a goal state at optimal depth.
    """
    progress = 0
    for i, state in enumerate(after):
        depth = i - 1 if plan[i].action == "rescue" else i
        if state not in sol.on_optimal or sol.dist.get(state) != depth:
            break
        progress += 1
    return progress


def replay(world: World, plan: Sequence[Step]) -> str | None:
    """The first violation of a plan that must be legal from start to rescue, or None.

    Used to check gold plans at generation time, where the optimal length is already
    known from the certificate and only legality is left to prove.
    """
    if not plan or plan[0].action != "start" or world.start is None:
        return "bad_start"
    if plan[0].arg != world.rooms[world.start]:
        return "bad_start"
    state: State = (world.start, 0, 0, -1)
    for step in plan[1:-1]:
        state, bad = apply(world, state, step)
        if bad is not None:
            return bad
    if plan[-1].action != "rescue" or state[0] != world.goal:
        return "no_rescue"
    return None


def format_plan(plan: Sequence[Step]) -> str:
    """The answer format the prompt asks for: a Python-style list of tuples."""
    return "[" + ", ".join(f"('{s.action}', '{s.arg}')" for s in plan) + "]"


__all__ = ["RESCUE_TARGET", "format_plan", "precision_positional", "precision_recall", "replay", "score_plan"]
