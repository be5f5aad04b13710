"""What every RecurrReason puzzle provides: rules, text forms, configurations, certificates.

A puzzle is pure logic over hashable states. The family adapter (``family.py``) turns
any :class:`Puzzle` into a horizonbench family (instance rows, prompts, whole-plan and
rollout scoring, offline baselines), so each puzzle module only states its rules.

Vocabulary used by every puzzle:

- a *configuration* is one (n, rules, start, goal) to certify; its ``rules`` hold the
  puzzle's own parameters (boat capacity, number of stacks, ...) that the move rules need;
- a *certificate* is a BFS-optimal trajectory (states and moves) from start to goal, or a
  proof that none exists (the search space was exhausted) or that the search gave up
  (node limit), which are different things and are reported apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Protocol

import numpy as np
from pydantic import AfterValidator, BaseModel, Field

State = Hashable
Move = Hashable

#: the largest puzzle size: the paper's difficulty range, and what the certifiers are sized for
MAX_N = 10


class IllegalMove(ValueError):
    """A move the rules forbid; ``kind`` is one of the puzzle's ``violations``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class BadText(ValueError):
    """Text that does not parse as a state or move of the puzzle (names the problem)."""


@dataclass(frozen=True, slots=True)
class Configuration:
    """One puzzle to certify. ``rules`` are the puzzle's own parameters as plain values
    (they become instance columns, e.g. ``boat_capacity``); ``label`` says which
    augmentation produced it (e.g. ``"A->C"``, ``"left, pairs 1 3"``)."""

    n: int
    rules: Mapping[str, Any]
    start: State
    goal: State
    label: str = ""


@dataclass(frozen=True, slots=True)
class Certificate:
    """An optimal trajectory: ``states[0]`` is the start, ``states[-1]`` the goal, and
    ``moves[i]`` leads from ``states[i]`` to ``states[i + 1]``."""

    states: tuple[State, ...]
    moves: tuple[Move, ...]
    #: search nodes expanded to find it (shared distance maps count once per map)
    nodes: int = 0

    @property
    def length(self) -> int:
        return len(self.moves)


@dataclass(frozen=True, slots=True)
class Unsolved:
    """No certificate: ``reason`` is ``"unsolvable"`` (the reachable space was exhausted,
    a proof) or ``"node_limit"`` (the search gave up; nothing is proved)."""

    reason: str
    nodes: int = 0


class Puzzle(Protocol):
    """The rules of one puzzle. Implementations are pure and deterministic."""

    #: family name (``hanoi``, ``checkers``, ``river_crossing``, ``blocks_world``)
    name: ClassVar[str]
    #: the verb of a move in the common ``solution`` column (e.g. ``move_disk``)
    action: ClassVar[str]
    #: kinds of illegal move :meth:`apply` can raise
    violations: ClassVar[tuple[str, ...]]
    #: generation parameters (pydantic, extra="forbid"): at least ``ns`` (sizes, each
    #: 1..10) and ``node_limit``; errors name the field
    params_model: ClassVar[type[BaseModel]]

    def configurations(self, n: int, params: BaseModel, seed: int) -> list[Configuration]:
        """Every configuration of size ``n`` to certify, in a fixed order (``seed`` only
        matters to sampled puzzles). The candidate space of the family."""
        ...

    def certify(self, config: Configuration, node_limit: int) -> Certificate | Unsolved:
        """An optimal trajectory, using a distance map from the goal where configurations
        share goals (cached per process), else a search from the start."""
        ...

    def distance_to(self, goal: State, rules: Mapping[str, Any], n: int) -> Callable[[State], int | None]:
        """A function giving the fewest legal moves from a state to ``goal`` (a look-up
        in the certificate's cached distance map where there is one), or None when the
        goal cannot be reached from it. Scoring's progress measures read it."""
        ...

    def successors(self, state: State, rules: Mapping[str, Any]) -> Iterator[tuple[Move, State]]:
        """Every legal move from ``state`` with the state it leads to."""
        ...

    def apply(self, state: State, move: Move, rules: Mapping[str, Any]) -> State:
        """The state after ``move``; raises :class:`IllegalMove` naming the broken rule."""
        ...

    def check_state(self, state: State, n: int, rules: Mapping[str, Any]) -> str | None:
        """Why ``state`` is not a well-formed state of this puzzle (wrong pieces, unsafe
        bank, ...), or None. Used on states a model writes in a rollout."""
        ...

    def format_state(self, state: State) -> str: ...

    def parse_state(self, text: str) -> State:
        """Inverse of :meth:`format_state`, tolerant of whitespace and quoting; raises
        :class:`BadText`. Never evaluates the text."""
        ...

    def format_move(self, move: Move) -> str: ...

    def parse_moves(self, text: str) -> list[Move]:
        """The move list of a whole-plan answer (the last list in the text); raises
        :class:`BadText`. Never evaluates the text."""
        ...

    def illegal_move(self, state: State, rules: Mapping[str, Any], rng: np.random.Generator) -> Move:
        """A well-formed move that :meth:`apply` rejects in ``state`` (the noisy baseline's
        mistake in whole-plan mode)."""
        ...

    def wrong_successor(self, state: State, rules: Mapping[str, Any], rng: np.random.Generator) -> State:
        """A state, printable by :meth:`format_state`, that is NOT one legal move away
        from ``state`` and differs from it (the noisy baseline's mistake in rollouts)."""
        ...

    def describe_rules(self, rules: Mapping[str, Any], n: int) -> str:
        """The rules and both text formats, in plain words, for the prompt."""
        ...


def check_sizes(ns: list[int]) -> list[int]:
    """A params ``ns`` validator: at least one size, each in 1..``MAX_N``."""
    if not ns:
        raise ValueError("ns: give at least one size")
    for n in ns:
        if not 1 <= n <= MAX_N:
            raise ValueError(f"ns: size {n} is outside 1..{MAX_N}")
    return ns


#: a params ``ns`` field checked by :func:`check_sizes`, every size by default: declared
#: once here so the puzzles that take the whole range cannot drift apart on it
Sizes = Annotated[
    list[int], Field(default_factory=lambda: list(range(1, MAX_N + 1))), AfterValidator(check_sizes)
]


def bfs_path(
    start: State,
    goal: State,
    successors: Any,
    node_limit: int = 10_000_000,
) -> Certificate | Unsolved:
    """Plain BFS with parent pointers from ``start`` (Algorithms 2, 3, 5 of the paper):
    the per-instance baseline every shared-goal search is checked against."""
    if start == goal:
        return Certificate((start,), (), 1)
    parent: dict[State, tuple[State, Move] | None] = {start: None}
    queue: deque[State] = deque([start])
    nodes = 0
    while queue:
        if nodes >= node_limit:
            return Unsolved("node_limit", nodes)
        s = queue.popleft()
        nodes += 1
        for move, t in successors(s):
            if t in parent:
                continue
            parent[t] = (s, move)
            if t == goal:
                return walk_back(parent, t, nodes)
            queue.append(t)
    return Unsolved("unsolvable", nodes)


def bfs_distance(start: State, goal: State, successors: Any, node_limit: int = 200_000) -> int | None:
    """The number of moves from ``start`` to ``goal`` by plain BFS, or None when the goal
    is unreachable or the search gives up at ``node_limit`` (scoring's fallback for
    goals no shared distance map covers)."""
    found = bfs_path(start, goal, successors, node_limit)
    return found.length if isinstance(found, Certificate) else None


def walk_back(parent: Mapping[State, tuple[State, Move] | None], end: State, nodes: int) -> Certificate:
    """The trajectory to ``end`` read back through a search's ``parent`` links (the
    start's link is None); searches that key states by another value convert after."""
    states = [end]
    moves: list[Move] = []
    link = parent[end]
    while link is not None:
        prev, move = link
        states.append(prev)
        moves.append(move)
        link = parent[prev]
    return Certificate(tuple(reversed(states)), tuple(reversed(moves)), nodes)


def pick_by_kind(kinds: Iterable[Sequence[Any]], rng: np.random.Generator) -> Any:
    """One mistake for a noisy baseline: a kind drawn uniformly among those with any
    candidate, then a candidate within it, so a kind with few candidates (a rare slip)
    is drawn as often as one with many."""
    present = [kind for kind in kinds if kind]
    options = present[int(rng.integers(len(present)))]
    return options[int(rng.integers(len(options)))]


def pick_wrong_successor(
    state: State,
    successors: Iterable[tuple[Move, State]],
    kinds: Iterable[Iterable[State]],
    rng: np.random.Generator,
) -> State:
    """A noisy baseline's wrong successor: candidate states grouped by kind of slip, less
    ``state`` itself and every state one legal move away (``successors``), drawn by
    :func:`pick_by_kind`; the puzzles whose slips can land on a legal state share this."""
    legal = {t for _, t in successors}
    return pick_by_kind(([s for s in c if s != state and s not in legal] for c in kinds), rng)


def distance_map(goal: State, predecessors: Any) -> dict[State, int]:
    """Distances to ``goal`` of every state that can reach it: one backward BFS that
    certifies every start sharing this goal at once."""
    dist = {goal: 0}
    queue: deque[State] = deque([goal])
    while queue:
        s = queue.popleft()
        d = dist[s] + 1
        for p in predecessors(s):
            if p not in dist:
                dist[p] = d
                queue.append(p)
    return dist


def descend(
    start: State,
    dist: Mapping[State, int],
    successors: Any,
) -> Certificate | Unsolved:
    """An optimal trajectory read off a distance map: from each state, the first legal
    move (in the puzzle's fixed move order) to a state one step closer to the goal."""
    if start not in dist:
        return Unsolved("unsolvable", len(dist))
    states = [start]
    moves: list[Move] = []
    s = start
    while dist[s] > 0:
        want = dist[s] - 1
        for move, t in successors(s):
            if dist.get(t) == want:
                states.append(t)
                moves.append(move)
                s = t
                break
        else:  # pragma: no cover - a distance map always has a next step
            raise AssertionError("distance map has no descending move")
    return Certificate(tuple(states), tuple(moves), len(dist))


def replay(puzzle: Puzzle, start: State, moves: Iterable[Move], rules: Mapping[str, Any]) -> list[State]:
    """Every state a move list visits; raises :class:`IllegalMove` at the first bad move."""
    states = [start]
    for m in moves:
        states.append(puzzle.apply(states[-1], m, rules))
    return states


def trajectory_ok(puzzle: Puzzle, config: Configuration, cert: Certificate) -> bool:
    """The certificate replays legally from start to goal (checked on every instance)."""
    states = replay(puzzle, config.start, cert.moves, config.rules)
    return tuple(states) == cert.states and states[-1] == config.goal


__all__: Sequence[str] = [
    "BadText",
    "Certificate",
    "Configuration",
    "MAX_N",
    "IllegalMove",
    "Puzzle",
    "Sizes",
    "Unsolved",
    "bfs_path",
    "check_sizes",
    "descend",
    "pick_wrong_successor",
    "bfs_distance",
    "distance_map",
    "replay",
    "trajectory_ok",
]
