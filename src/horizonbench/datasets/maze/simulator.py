"""Replays a plan on the world its facts describe and scores it.

Success is judged by simulation (valid and of optimal length), not by comparison with
one gold plan, because a maze can have several optimal plans; exact match with the
gold plan is reported beside it for comparability with seqBench's Pass@1.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from horizonbench.core.types import ParsedAnswer, Plan, Score, Step
from horizonbench.datasets.maze.certificate import Solution, solve
from horizonbench.datasets.maze.facts import World, world_from_facts
from horizonbench.datasets.maze.rules import ACTIONS, RESCUE_TARGET, State, apply, door_bits, normalize_step
from horizonbench.datasets.plan_parser import PairReader, parse_plan


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
    return _replayed(
        valid, success, exact, progress, n, len(plan), precision, recall, positional, violation, first_bad
    )


def _replayed(
    valid: bool,
    success: bool,
    exact: bool,
    progress: int,
    n: int,
    plan_length: int,
    precision: float,
    recall: float,
    positional: float,
    violation: str | None,
    first_bad: int | None,
) -> Score:
    """The Score of a replayed plan, for both scorers (:func:`score_plan` and
    :meth:`Judge.score_pairs`): a legal plan that is no success is "suboptimal" from the
    step where it leaves every optimal plan."""
    if valid and not success:
        violation, first_bad = "suboptimal", progress
    return Score(
        success=success,
        valid=valid,
        exact_match=exact,
        progress_ratio=min(progress, n) / n if n else 0.0,
        precision=precision,
        recall=recall,
        plan_length=plan_length,
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


__all__ = [
    "RESCUE_TARGET",
    "Judge",
    "format_plan",
    "precision_positional",
    "precision_recall",
    "replay",
    "score_plan",
]


# ---------------------------------------------------------------------------------------------
# Scoring many answers to one instance
# ---------------------------------------------------------------------------------------------

Pair = tuple[str, str]


def _normal_pair(action: str, arg: str) -> Pair:
    s = normalize_step(Step(action, arg))
    return (s.action, s.arg)


#: normalised pairs by raw pair, for gold plans (bounded: cleared when full)
_NORMAL: dict[Pair, Pair] = {}


def _normal_pairs(pairs: Sequence[Pair]) -> list[Pair]:
    if len(_NORMAL) > 1 << 16:
        _NORMAL.clear()
    out = list(map(_NORMAL.get, pairs))  # looked up in C; the few misses below
    if None in out:
        for i, q in enumerate(out):
            if q is None:
                p = pairs[i]
                q = out[i] = _NORMAL[p] = _normal_pair(*p)
    return out


#: the parser's fast path, each pair's text read and normalised once
_READER: PairReader[Pair] = PairReader(_normal_pair, ACTIONS)


class Judge:
    """Scores answers to one instance, as :func:`score_plan` does, only faster: the world
    and the gold plan's multiset are prepared once, answers of the usual form are read by
    the parser's memoised fast path into normalised pairs (no :class:`Step` per action),
    the leading actions equal to the gold plan are not replayed, and the full search for
    the progress ratio runs only when the instance has several optimal plans and the
    answer leaves the gold plan by a legal action.

    ``certified``: the gold plan is legal and of optimal length (an instance row: the
    generator proves both); ``optimal_plans``: the number of optimal plans, if known (the
    row's ``optimal_plan_count``). With one, the gold plan's states are the only states
    on an optimal plan. Without ``certified`` every answer goes through
    :func:`score_plan`. tests/test_maze_scoring_fast.py checks that both paths give
    equal scores. ``gold``: steps, or (action, argument) pairs.
    """

    def __init__(
        self,
        facts: Sequence[str],
        gold: Sequence[Step] | Sequence[Pair],
        *,
        certified: bool,
        optimal_plans: int | None = None,
    ) -> None:
        self.facts = tuple(facts)
        raw: list[Pair] = (
            [(s.action, s.arg) for s in gold]  # type: ignore[union-attr]
            if gold and isinstance(gold[0], Step)
            else [(str(a), str(b)) for a, b in gold]  # type: ignore[misc]
        )
        self.raw_gold = raw
        self.gold = tuple(_normal_pairs(raw))
        self._world: World | None = None
        self.certified = certified
        self.unique = certified and optimal_plans == 1
        #: the state after each gold action, as far as an answer has followed it
        self.states: list[State] = []
        counts = Counter(self.gold)
        #: gold actions that occur once, and those repeated (a walk back past a key)
        self.gold_once = frozenset(s for s, c in counts.items() if c == 1)
        self.gold_repeated = [(s, c) for s, c in counts.items() if c > 1]
        self._sol: Solution | None = None

    @property
    def world(self) -> World:
        """The world of the facts, read when an answer first needs it (an exact answer,
        or one with no plan, does not)."""
        if self._world is None:
            self._world = _world(self.facts)
        return self._world

    def _gold_states(self, k: int) -> list[State]:
        """The states after the first ``k`` gold actions (at least), which a certified gold
        plan takes legally: its actions' effects alone, without checking them."""
        world, gold, after = self.world, self.gold, self.states
        if len(after) >= k:
            return after
        index, bits = world.index, door_bits(world)
        if not after:
            after.append((world.start, 0, 0, -1))  # type: ignore[arg-type]
        room, held, unlocked, pending = after[-1]
        for i in range(len(after), k):
            action, arg = gold[i]
            if action == "move_to":
                room = index[arg]
            elif action == "pick_up_key":
                held |= 1 << int(arg)
            elif action == "use_key":
                pending = int(arg)
                after.append((room, held, unlocked, pending))
                continue
            elif action == "unlock_and_open_door_to":
                nb = index[arg]
                unlocked |= bits[(room, nb) if room < nb else (nb, room)]
            pending = -1
            after.append((room, held, unlocked, pending))
        return after

    def score_text(self, text: str) -> Score:
        """Parse and score one answer: ``score_plan(facts, gold, parse_plan(text, ...))``."""
        pairs = _READER.read(text)
        if pairs is None:
            return self.score(parse_plan(text, task_actions=ACTIONS))
        return self.score_pairs(pairs)

    def score(self, parsed: ParsedAnswer) -> Score:
        if parsed.plan is None:
            return _invalid(parsed.error)
        return self.score_pairs(_normal_pairs([(s.action, s.arg) for s in parsed.plan]))

    def score_pairs(self, plan: Sequence[Pair]) -> Score:
        """Score a plan of normalised (action, argument) pairs."""
        gold = self.gold
        n, size = len(gold), len(plan)
        # position by position, plan against gold (as far as the shorter goes), compared
        # in C: the leading actions equal to the gold plan's and the positional hits
        same = list(map(operator.eq, plan, gold))
        k0 = same.index(False) if False in same else len(same)
        if not self.certified:
            gold_steps = tuple(Step(a, b) for a, b in self.raw_gold)
            return score_plan(self.facts, gold_steps, ParsedAnswer(tuple(Step(a, b) for a, b in plan)))
        exact = k0 == size == n
        if not size or not n:
            precision = recall = 0.0
        else:
            # the multiset overlap: each gold action met once counts once, a repeated
            # one as often as both plans have it
            matched = len(self.gold_once.intersection(plan))
            if self.gold_repeated:
                pc = Counter(plan)
                for s, c in self.gold_repeated:
                    matched += min(c, pc[s])
            precision, recall = matched / size, matched / n
        if size:
            positional = sum(same) / size
        else:
            positional = 0.0

        violation: str | None = None
        first_bad: int | None = None
        if exact and n:  # a certified gold plan: legal, rescues at its end, of optimal length
            valid = success = True
            progress = n
        else:
            valid, success, progress, violation, first_bad = self._replay(plan, k0)
        return _replayed(
            valid, success, exact, progress, n, size, precision, recall, positional, violation, first_bad
        )

    def _replay(self, plan: Sequence[Pair], k0: int) -> tuple[bool, bool, int, str | None, int | None]:
        """score_plan's two passes for a plan that is not the gold plan: (valid, success,
        progress, violation, first violation step)."""
        gold, world = self.gold, self.world
        n, size = len(gold), len(plan)
        states = self._gold_states(k0)
        # pass 1, from where the plan leaves the gold plan (its states are known)
        violation: str | None = None
        first_bad: int | None = None
        after = states[:k0]
        rescued = k0 > 1 and gold[k0 - 1][0] == "rescue"
        for i in range(k0, size):
            action, arg = plan[i]
            if i == 0:
                start_name = world.rooms[world.start] if world.start is not None else None
                if action != "start" or arg != start_name:
                    violation, first_bad = "bad_start", 0
                    break
                after.append((world.start, 0, 0, -1))  # type: ignore[arg-type]
                continue
            if rescued:
                violation, first_bad = "after_rescue", i
                break
            new_state, bad = apply(world, after[-1], Step(action, arg))
            if bad is not None:
                violation, first_bad = bad, i
                break
            rescued = action == "rescue"
            after.append(new_state)
        if violation is None and not rescued:
            violation, first_bad = "no_rescue", size
        valid = violation is None
        success = valid and size == n

        # pass 2: the gold plan's states lie on an optimal plan at their depth; only a
        # plan that goes on legally past them needs the search
        if success:
            progress = n
        elif len(after) <= k0 or self.unique:
            progress = k0
        else:
            progress = _progress_pairs(plan, after, self._search())
        return valid, success, progress, violation, first_bad

    def _search(self) -> Solution:
        if self._sol is None:
            self._sol = _search(self.facts)
        return self._sol


def _progress_pairs(plan: Sequence[Pair], after: list[State], sol: Solution) -> int:
    """:func:`_progress` over pairs."""
    progress = 0
    for i, state in enumerate(after):
        depth = i - 1 if plan[i][0] == "rescue" else i
        if state not in sol.on_optimal or sol.dist.get(state) != depth:
            break
        progress += 1
    return progress
