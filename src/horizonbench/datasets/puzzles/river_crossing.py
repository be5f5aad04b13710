"""River Crossing: n actor/agent pairs cross a river in a boat of capacity k.

People are ``a1..an`` (actors) and ``A1..An`` (agents); case matters. An actor ``ai``
may never be with an agent ``Aj`` (j != i) unless its own agent ``Ai`` is there too:
in the boat, on the bank the boat leaves, and on the bank it reaches. The boat never
crosses empty and carries at most k people.

State: ``RiverState(left, right, boat)``, both banks as tuples in the canonical order
``a1 A1 a2 A2 ...`` and ``boat`` ``"L"`` or ``"R"``. Both banks are kept (not only the
left one) so that a state parsed from a model's text can be checked for people who are
missing or written twice. Text: ``left: a1 A1 a3 | right: a2 A2 A3 | boat: left``, an
empty bank written ``-``. A move is the tuple of people crossing together, canonical
order, written ``[a1, A1]``; a plan is ``[[a1, A1], [a1], ...]``.

Certificates come from a search on the quotient of the state space by renaming pairs.
Safety only asks whether an actor's own agent is present, so renaming pairs maps legal
moves to legal moves; a state is therefore characterised, up to renaming, by how many
pairs have (actor, agent) on (left, left), (left, right), (right, left), (right, right)
and the boat side: at most ``2 * C(n + 3, 3)`` = 572 states for n = 10, where the
concrete space has ``2 * 4**n`` states and ``sum_{j<=k} C(2n, j)`` loads per state. The
goal (everyone on one bank) is the only member of its class, so quotient distances to
it are concrete distances, and one backward BFS per (n, k, goal side) certifies every
start of those configurations.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Unsolved,
    bfs_distance,
    bfs_path,
    distance_map,
)
from horizonbench.datasets.puzzles.text import answer_text, last_list, short

__all__ = ["RiverCrossing", "RiverCrossingParams", "RiverState"]

VIOLATIONS = (
    "empty_boat",  # nobody in the boat
    "over_capacity",  # more people than the boat holds
    "not_on_boat_side",  # someone in the load is on the other bank
    "unsafe_boat",  # the load itself breaks the safety rule
    "unsafe_bank",  # the bank left behind or the bank reached breaks it
    "unknown_person",  # a name that is not one of the 2n people, or one listed twice
)

_NAME = re.compile(r"([aA])([1-9][0-9]{0,2})")
_SIDE_WORD = {"L": "left", "R": "right"}
_OTHER = {"L": "R", "R": "L"}


class RiverState(NamedTuple):
    """Who is on each bank and where the boat is (``"L"`` or ``"R"``)."""

    left: tuple[str, ...]
    right: tuple[str, ...]
    boat: str


Load = tuple[str, ...]
#: (ll, lr, rl, rr, boat): pairs by (actor bank, agent bank), then the boat side
QState = tuple[int, int, int, int, str]
#: (x, y, z, u, v), seen from the boat's bank ("near"):
#: x whole near pairs, y actors and z agents of near pairs, u actors whose agent is
#: already far, v agents whose actor is already far
QMove = tuple[int, int, int, int, int]


class RiverCrossingParams(BaseModel):
    """Generation parameters; the capacities a size cannot use are left out per n."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ns: list[int] = Field(default_factory=lambda: list(range(1, 11)))
    #: capacity 1 is allowed: no start is solvable with it, and the search proves so
    capacities: list[int] = Field(default_factory=lambda: [2, 3, 4])
    node_limit: int = Field(default=5_000_000, ge=1)

    @field_validator("ns")
    @classmethod
    def _ns_ok(cls, value: list[int]) -> list[int]:
        return _check_values("ns", value, 1, 10)

    @field_validator("capacities")
    @classmethod
    def _capacities_ok(cls, value: list[int]) -> list[int]:
        return _check_values("capacities", value, 1, 10)


def _check_values(field: str, values: list[int], low: int, high: int) -> list[int]:
    if not values:
        raise ValueError(f"{field}: give at least one value")
    for v in values:
        if not low <= v <= high:
            raise ValueError(f"{field}: {v} is outside {low}..{high}")
    if len(set(values)) != len(values):
        raise ValueError(f"{field}: {values} repeats a value")
    return values


# --- people and safety ------------------------------------------------------------


@lru_cache(maxsize=4096)
def _person(name: str) -> tuple[int, int] | None:
    """(pair index, 0 for the actor / 1 for the agent), the canonical sort key."""
    m = _NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        return None
    return int(m.group(2)), 0 if m.group(1) == "a" else 1


def _sort_key(name: str) -> tuple[int, int]:
    key = _person(name)
    return key if key is not None else (1 << 30, 0)


def _canon(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(names, key=_sort_key))


def _actor(i: int) -> str:
    return f"a{i}"


def _agent(i: int) -> str:
    return f"A{i}"


@lru_cache(maxsize=64)
def _pairs(n: int) -> tuple[tuple[str, str], ...]:
    return tuple((_actor(i), _agent(i)) for i in range(1, n + 1))


@lru_cache(maxsize=64)
def _people(n: int) -> tuple[str, ...]:
    return tuple(name for pair in _pairs(n) for name in pair)


def _danger(group: Iterable[str]) -> str | None:
    """Why ``group`` breaks the safety rule, or None. An actor without its own agent is
    at risk exactly when any agent is present (that agent is then someone else's)."""
    actors: set[int] = set()
    agents: set[int] = set()
    for name in group:
        i, kind = _sort_key(name)
        if kind:
            agents.add(i)
        else:
            actors.add(i)
    if agents and not actors <= agents:
        i, j = min(actors - agents), min(agents)
        return f"a{i} is with A{j} without A{i}"
    return None


# --- the quotient search ----------------------------------------------------------


def _frame(q: QState) -> tuple[int, int, int, int]:
    """(near-near, actor-near/agent-far, actor-far/agent-near, far-far) from the boat."""
    ll, lr, rl, rr, boat = q
    return (ll, lr, rl, rr) if boat == "L" else (rr, rl, lr, ll)


def _unframe(nn: int, nf: int, fn: int, ff: int, near: str) -> QState:
    """Back to absolute counts once the boat has crossed from ``near``."""
    if near == "L":
        return (nn, nf, fn, ff, "R")
    return (ff, fn, nf, nn, "L")


@lru_cache(maxsize=16)
def _qmoves(k: int) -> tuple[QMove, ...]:
    """Every load shape of 1..k people whose boat is safe, in a fixed order."""
    out = []
    for x, y, z, u, v in itertools.product(range(k + 1), repeat=5):
        size = 2 * x + y + z + u + v
        lonely, agents = y + u, x + z + v
        if 1 <= size <= k and (lonely == 0 or agents == 0):
            out.append((x, y, z, u, v))
    return tuple(out)


def _qsuccessors(q: QState, k: int) -> Iterator[tuple[QMove, QState]]:
    nn, nf, fn, ff = _frame(q)
    for mv in _qmoves(k):
        x, y, z, u, v = mv
        if x + y + z > nn or u > nf or v > fn:
            continue
        nn2, nf2, fn2, ff2 = nn - x - y - z, nf - u + z, fn - v + y, ff + x + u + v
        # near bank: lonely actors nf2, agents nn2 + fn2; far bank: lonely fn2, agents nf2 + ff2
        if nf2 and (nn2 or fn2):
            continue
        if fn2 and (nf2 or ff2):
            continue
        yield mv, _unframe(nn2, nf2, fn2, ff2, q[4])


def _all_on(n: int, side: str) -> QState:
    return (n, 0, 0, 0, "L") if side == "L" else (0, 0, 0, n, "R")


class _Plan(NamedTuple):
    dist: dict[QState, int]
    #: the first move, in ``_qmoves`` order, to a state one step closer to the goal
    step: dict[QState, tuple[QMove, QState]]


@lru_cache(maxsize=256)
def _plan(n: int, k: int, goal_side: str) -> _Plan:
    """One backward BFS for every start of (n, k) that ends on ``goal_side``.

    Moves are reversible among safe states (the reverse trip carries the same load and
    restores the banks the forward trip started from), so a state's successors are its
    predecessors too.
    """
    dist = distance_map(_all_on(n, goal_side), lambda q: (t for _, t in _qsuccessors(q, k)))
    step: dict[QState, tuple[QMove, QState]] = {}
    for q, d in dist.items():
        if d:
            step[q] = next((mv, t) for mv, t in _qsuccessors(q, k) if dist.get(t) == d - 1)
    return _Plan(dist, step)


def _quotient(state: RiverState, n: int) -> QState:
    left = set(state.left)
    counts = [0, 0, 0, 0]
    for actor, agent in _pairs(n):
        counts[(0 if actor in left else 2) + (0 if agent in left else 1)] += 1
    return (counts[0], counts[1], counts[2], counts[3], state.boat)


def _realise(near: Sequence[str], n: int, mv: QMove) -> Load:
    """The concrete load of shape ``mv`` from the boat's bank ``near``: the
    lowest-numbered people of each kind."""
    here = set(near)
    both: list[tuple[str, str]] = []
    actor_only: list[str] = []
    agent_only: list[str] = []
    for actor, agent in _pairs(n):
        if actor in here and agent in here:
            both.append((actor, agent))
        elif actor in here:
            actor_only.append(actor)
        elif agent in here:
            agent_only.append(agent)
    x, y, z, u, v = mv
    load = [p for pair in both[:x] for p in pair]
    load += [actor for actor, _ in both[x : x + y]] + [agent for _, agent in both[x + y : x + y + z]]
    load += actor_only[:u] + agent_only[:v]
    return _canon(load)


# --- text -------------------------------------------------------------------------

_SECTION = re.compile(r"""["']?\b(left|right|boat)\b(?:\s+(?:bank|side))?["']?\s*[:=]""", re.IGNORECASE)
_SEPARATORS = re.compile(r"""[\s\[\]{}()'",;|.]+""")
_EMPTY_WORDS = {"-", "empty", "none", "nobody"}
_BOAT_WORDS = {"left": "L", "l": "L", "right": "R", "r": "R"}


def _names_from(atoms: Sequence[Any], where: str) -> Load:
    names = []
    for atom in atoms:
        if not isinstance(atom, str) or _person(atom) is None:
            raise BadText(f"{where}: {short(atom)} is not a person (a1, A1, a2, ...)")
        names.append(atom)
    if len(set(names)) != len(names):
        raise BadText(f"{where}: someone is listed twice")
    return _canon(names)


def _bank_from(text: str, where: str) -> tuple[str, ...]:
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if not tokens or (len(tokens) == 1 and tokens[0].lower() in _EMPTY_WORDS):
        return ()
    for t in tokens:
        if _person(t) is None:
            raise BadText(f"{where} bank: {short(t)} is not a person (a1, A1, a2, ...)")
    return _canon(tokens)  # duplicates are kept so check_state can report them


def _boat_from(text: str) -> str:
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if len(tokens) != 1 or tokens[0].lower() not in _BOAT_WORDS:
        raise BadText(f"boat: expected left or right, got {text.strip()[:40]!r}")
    return _BOAT_WORDS[tokens[0].lower()]


# --- the puzzle -------------------------------------------------------------------


class RiverCrossing:
    """The River Crossing rules, text forms, configurations and certificates."""

    name: ClassVar[str] = "river_crossing"
    action: ClassVar[str] = "cross"
    violations: ClassVar[tuple[str, ...]] = VIOLATIONS
    params_model: ClassVar[type[BaseModel]] = RiverCrossingParams

    # configurations and certificates

    def configurations(self, n: int, params: BaseModel, seed: int) -> list[Configuration]:
        """Algorithm 4 for each capacity and start bank: every proper subset of pairs
        already across (so something is left to do), by subset size. No sampling, so
        ``seed`` is unused."""
        assert isinstance(params, RiverCrossingParams)
        out = []
        everyone = _people(n)
        for k in params.capacities:
            for bank, near in (("left", "L"), ("right", "R")):
                rules = {"boat_capacity": k, "start_bank": bank}
                goal = _state_with(everyone, (), _OTHER[near])
                for size in range(n):
                    for across in itertools.combinations(range(1, n + 1), size):
                        far = _canon(p for i in across for p in (_actor(i), _agent(i)))
                        stay = tuple(p for p in everyone if p not in far)
                        start = _state_with(stay, far, near)
                        label = f"k={k} {bank} across={','.join(map(str, across)) or 'none'}"
                        out.append(Configuration(n, rules, start, goal, label))
        return out

    def certify(self, config: Configuration, node_limit: int) -> Certificate | Unsolved:
        """Read an optimal trajectory off the shared quotient distance map.

        ``capacity_too_small`` marks a start that is solvable when the full crossing of
        all n pairs with this boat is not: the paper leaves such capacities out for that
        n, so their partial starts are left out too. Goals that are not "everyone on one
        bank" fall back to a concrete BFS (the quotient only preserves those distances).
        """
        n, k = config.n, int(config.rules["boat_capacity"])
        start, goal = RiverState(*config.start), RiverState(*config.goal)
        if _canon(start.left + start.right) != _people(n) or start.boat not in _OTHER:
            raise ValueError(f"bad start state for n={n}: {start}")
        goal_side = _everyone_on(goal, n)
        if goal_side is None:
            return self.certify_by_bfs(config, node_limit)
        plan = _plan(n, k, goal_side)
        nodes = len(plan.dist)
        if nodes > node_limit:
            return Unsolved("node_limit", node_limit)
        q = _quotient(start, n)
        if q not in plan.dist:
            return Unsolved("unsolvable", nodes)
        if _all_on(n, _OTHER[goal_side]) not in plan.dist:
            return Unsolved("capacity_too_small", nodes)
        states, moves = [start], []
        while plan.dist[q]:
            mv, q = plan.step[q]
            # legal by construction (renaming preserves legality); tests replay every one
            near, far = _near_far(states[-1])
            load = _realise(near, n, mv)
            gone = set(load)
            states.append(_after(states[-1], tuple(p for p in near if p not in gone), _canon(far + load)))
            moves.append(load)
        return Certificate(tuple(states), tuple(moves), nodes)

    def distance(self, config: Configuration) -> int | None:
        """Optimal number of crossings from the start to everyone-on-the-goal-bank by the
        quotient map (None when impossible), before any capacity filter."""
        n, k = config.n, int(config.rules["boat_capacity"])
        side = _everyone_on(RiverState(*config.goal), n)
        if side is None:
            raise ValueError("the quotient map only knows goals with everyone on one bank")
        return _plan(n, k, side).dist.get(_quotient(RiverState(*config.start), n))

    def distance_to(self, goal: Any, rules: Mapping[str, Any], n: int) -> Callable[[Any], int | None]:
        """Crossings from a state to ``goal``: a look-up in the shared quotient map (the
        certificates' own) when the goal is everyone on one bank, else a BFS; None if
        unreachable."""
        target = RiverState(*goal)
        side = _everyone_on(target, n)
        if side is None:
            return lambda state: bfs_distance(RiverState(*state), target, lambda s: self.successors(s, rules))
        dist = _plan(n, int(rules["boat_capacity"]), side).dist
        return lambda state: dist.get(_quotient(RiverState(*state), n))

    def certify_by_bfs(self, config: Configuration, node_limit: int) -> Certificate | Unsolved:
        """Plain concrete BFS from the start (Algorithm 3): the baseline and the check of
        the quotient search; it applies no capacity filter."""
        return bfs_path(
            RiverState(*config.start),
            RiverState(*config.goal),
            lambda s: self.successors(s, config.rules),
            node_limit,
        )

    # rules

    def successors(self, state: Any, rules: Mapping[str, Any]) -> Iterator[tuple[Load, RiverState]]:
        """Loads of 1..k people from the boat's bank, by size then canonical order."""
        state = RiverState(*state)
        k = int(rules["boat_capacity"])
        near, far = _near_far(state)
        for size in range(1, k + 1):
            for load in itertools.combinations(near, size):
                if _danger(load) is not None:
                    continue
                stay = tuple(p for p in near if p not in load)
                arrive = _canon(far + load)
                if _danger(stay) is None and _danger(arrive) is None:
                    yield load, _after(state, stay, arrive)

    def apply(self, state: Any, move: Any, rules: Mapping[str, Any]) -> RiverState:
        """The state after ``move`` crosses; raises :class:`IllegalMove`."""
        state = RiverState(*state)
        k = int(rules["boat_capacity"])
        load = tuple(move)
        if not load:
            raise IllegalMove("empty_boat", "the boat cannot cross with nobody in it")
        everyone = set(state.left) | set(state.right)
        for p in load:
            if p not in everyone:
                raise IllegalMove("unknown_person", f"{short(p)} is not one of the people")
        if len(set(load)) != len(load):
            raise IllegalMove("unknown_person", "someone is listed twice in the boat")
        if len(load) > k:
            raise IllegalMove("over_capacity", f"{len(load)} people in a boat for {k}")
        near, far = _near_far(state)
        side = _SIDE_WORD[state.boat]
        for p in load:
            if p not in near:
                raise IllegalMove("not_on_boat_side", f"{p} is not on the {side} bank with the boat")
        if (why := _danger(load)) is not None:
            raise IllegalMove("unsafe_boat", f"in the boat, {why}")
        stay = tuple(p for p in near if p not in load)
        arrive = _canon(far + load)
        if (why := _danger(stay)) is not None:
            raise IllegalMove("unsafe_bank", f"on the {side} bank left behind, {why}")
        if (why := _danger(arrive)) is not None:
            other = _SIDE_WORD[_OTHER[state.boat]]
            raise IllegalMove("unsafe_bank", f"on the {other} bank after arrival, {why}")
        return _after(state, stay, arrive)

    def check_state(self, state: Any, n: int, rules: Mapping[str, Any]) -> str | None:
        """Everyone exactly once, only the n pairs, a boat side, both banks safe."""
        try:
            state = RiverState(*state)
        except TypeError:
            return "a state is (left bank, right bank, boat side)"
        if state.boat not in _OTHER:
            return f"boat side {state.boat!r} is neither left nor right"
        seen = list(state.left) + list(state.right)
        valid = set(_people(n))
        for p in seen:
            if p not in valid:
                return f"{short(p)} is not one of a1..a{n}, A1..A{n}"
        for p in _people(n):
            if seen.count(p) != 1:
                return f"{p} appears {seen.count(p)} times (must be exactly once)"
        for bank, people in (("left", state.left), ("right", state.right)):
            if (why := _danger(people)) is not None:
                return f"unsafe {bank} bank: {why}"
        return None

    # text

    def format_state(self, state: Any) -> str:
        state = RiverState(*state)
        left = " ".join(state.left) or "-"
        right = " ".join(state.right) or "-"
        return f"left: {left} | right: {right} | boat: {_SIDE_WORD[state.boat]}"

    def parse_state(self, text: str) -> RiverState:
        """Sections ``left:``, ``right:``, ``boat:`` in any order, any case, with any
        commas, quotes, brackets or bars between names; names keep their case."""
        text = answer_text(text, "state")
        found = list(_SECTION.finditer(text))
        if not found:
            raise BadText("no 'left:', 'right:' and 'boat:' sections")
        lead = text[: found[0].start()]
        if _SEPARATORS.sub("", lead):
            raise BadText(f"unexpected text before the first section: {lead.strip()[:40]!r}")
        parts: dict[str, str] = {}
        for m, nxt in zip(found, found[1:] + [None], strict=True):
            word = m.group(1).lower()
            if word in parts:
                raise BadText(f"'{word}:' given twice")
            parts[word] = text[m.end() : nxt.start() if nxt else len(text)]
        for word in ("left", "right", "boat"):
            if word not in parts:
                raise BadText(f"missing '{word}:' section")
        return RiverState(
            _bank_from(parts["left"], "left"), _bank_from(parts["right"], "right"), _boat_from(parts["boat"])
        )

    def format_move(self, move: Any) -> str:
        return "[" + ", ".join(move) + "]"

    def parse_moves(self, text: str) -> list[Load]:
        """The last top-level list of loads, e.g. ``[["a1", "A1"], [a1]]``."""
        items = last_list(text, missing="no list of moves like [[a1, A1], [a1]] found")
        moves = []
        for i, item in enumerate(items, start=1):
            if not isinstance(item, list):
                raise BadText(f"move {i}: {short(item)} is not a list of people like [a1, A1]")
            moves.append(_names_from(item, f"move {i}"))
        return moves

    # noisy-baseline mistakes

    def illegal_move(self, state: Any, rules: Mapping[str, Any], rng: np.random.Generator) -> Load:
        """A typical mistake: someone from the wrong bank, too many people, an unsafe
        boat or an unsafe bank left behind; an empty boat when none of those exist."""
        state = RiverState(*state)
        k = int(rules["boat_capacity"])
        near, far = _near_far(state)
        options: list[Load] = []
        if far:
            options.append((far[int(rng.integers(len(far)))],))
        if len(near) > k:
            picked = sorted(rng.choice(len(near), size=k + 1, replace=False).tolist())
            options.append(tuple(near[i] for i in picked))
        if k >= 2:
            options += [pair for pair in itertools.combinations(near, 2) if _danger(pair) is not None][:8]
        options += [
            load
            for load in itertools.combinations(near, 1)
            if _danger(tuple(p for p in near if p not in load)) or _danger(_canon(far + load))
        ][:8]
        if not options:
            return ()
        return options[int(rng.integers(len(options)))]

    def wrong_successor(self, state: Any, rules: Mapping[str, Any], rng: np.random.Generator) -> RiverState:
        """The boat crossing alone, someone swimming without the boat, or someone coming
        back towards the boat's bank: no legal trip does any of these."""
        state = RiverState(*state)
        near, far = _near_far(state)
        options = [_after(state, near, far)]  # the empty boat crossed
        everyone = list(near + far)
        p = everyone[int(rng.integers(len(everyone)))] if everyone else None
        if p is not None:  # p changes bank, the boat stays
            if p in near:
                moved = (tuple(q for q in near if q != p), _canon(far + (p,)))
            else:
                moved = (_canon(near + (p,)), tuple(q for q in far if q != p))
            options.append(_with_banks(state, *moved, state.boat))
        if far:  # someone from the far bank joins the boat's bank while the boat leaves
            q = far[int(rng.integers(len(far)))]
            stay, gone = _canon(near + (q,)), tuple(x for x in far if x != q)
            options.append(_after(state, stay, gone))
        return options[int(rng.integers(len(options)))]

    def describe_rules(self, rules: Mapping[str, Any], n: int) -> str:
        k = int(rules["boat_capacity"])
        start = str(rules.get("start_bank", "left"))
        goal = "right" if start == "left" else "left"
        actors = ", ".join(_actor(i) for i in range(1, n + 1))
        agents = ", ".join(_agent(i) for i in range(1, n + 1))
        return (
            f"There are {n} actors ({actors}) and their {n} agents ({agents}); lowercase a is "
            f"an actor, uppercase A an agent, and the number says which actor belongs to which "
            f"agent. They start on the {start} bank of a river (pairs already moved may be on "
            f"the {goal} bank) and everyone must end up on the {goal} bank, with the boat "
            f"there too.\n"
            f"Rules: the boat carries at least 1 and at most {k} people; only people on the "
            f"bank where the boat is may board it; each crossing takes the boat to the other "
            f"bank. An actor may never be in the same place as another actor's agent unless "
            f"the actor's own agent is there as well. This holds in the boat, on the bank the "
            f"boat leaves and on the bank it arrives at (after everyone gets off).\n"
            f"A state is written 'left: a1 A1 a2 | right: A2 | boat: left': the people on each "
            f"bank in the order a1 A1 a2 A2 ..., '-' for an empty bank, and the bank where the "
            f"boat is.\n"
            f"A move is the list of people crossing together, e.g. [a1, A1]; a whole solution "
            f"is a list of moves, e.g. [[a1, A1], [a1], [a1, a2]]."
        )


# --- small state helpers ----------------------------------------------------------


def _state_with(near: Sequence[str], far: Sequence[str], boat: str) -> RiverState:
    near_c, far_c = _canon(near), _canon(far)
    return RiverState(near_c, far_c, boat) if boat == "L" else RiverState(far_c, near_c, boat)


def _near_far(state: RiverState) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (state.left, state.right) if state.boat == "L" else (state.right, state.left)


def _with_banks(state: RiverState, near: Sequence[str], far: Sequence[str], boat: str) -> RiverState:
    """A state from banks named as seen from ``state``'s boat (``near`` is the bank the
    boat is on in ``state``), with the boat now on ``boat``."""
    if state.boat == "L":
        return RiverState(tuple(near), tuple(far), boat)
    return RiverState(tuple(far), tuple(near), boat)


def _after(state: RiverState, stay: Sequence[str], arrive: Sequence[str]) -> RiverState:
    return _with_banks(state, stay, arrive, _OTHER[state.boat])


def _everyone_on(state: RiverState, n: int) -> str | None:
    """The bank holding all 2n people and the boat, if there is one."""
    everyone = _people(n)
    if state.boat == "L" and state.left == everyone and not state.right:
        return "L"
    if state.boat == "R" and state.right == everyone and not state.left:
        return "R"
    return None
