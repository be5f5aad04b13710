"""Tower of Hanoi (appendix E of the RecurrReason paper): three pegs, ``n`` disks.

A state is a tuple of three tuples, one per peg (A, B, C), each listing its disks from
the TOP down, so ``((1, 2, 3), (), ())`` is the whole tower on peg A: the same reading
as the paper's ``[[1, 2, 3], [], []]``, which is also the text form. A move is
``(disk, from_peg, to_peg)``, written ``[1, "A", "C"]``.

The six (start peg, goal peg) pairs are the configurations of each size. Moves are
reversible, so one backward search from a goal certifies both starts that share it;
the search is cached per (n, goal) and its distance map is read off by
:func:`~horizonbench.datasets.puzzles.base.descend`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Sizes,
    Unsolved,
    bfs_distance,
    descend,
    distance_map,
    pick_by_kind,
    pick_wrong_successor,
)
from horizonbench.datasets.puzzles.text import answer_text, as_int, last_move_list, read_list, strip_fences

PEGS = ("A", "B", "C")
_PEG_INDEX = {p: i for i, p in enumerate(PEGS)}
# (start, goal) in the paper's order: A->B, A->C, B->A, B->C, C->A, C->B
_PEG_PAIRS = tuple((s, g) for s in PEGS for g in PEGS if s != g)
_ORDERED_PAIRS = tuple((i, j) for i in range(3) for j in range(3) if i != j)

HanoiState = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
HanoiMove = tuple[int, str, str]
Rules = Mapping[str, Any]


# --- the puzzle -----------------------------------------------------------------------


class HanoiParams(BaseModel):
    """Generation parameters: which sizes, and the state budget of one search."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ns: Sizes
    node_limit: int = Field(default=5_000_000, ge=1)


def tower(n: int, peg: str) -> HanoiState:
    """All ``n`` disks on ``peg``."""
    pegs: list[tuple[int, ...]] = [(), (), ()]
    pegs[_PEG_INDEX[peg]] = tuple(range(1, n + 1))
    return (pegs[0], pegs[1], pegs[2])


def recursive_moves(n: int, start: str, goal: str) -> list[HanoiMove]:
    """The classical recursive solution (Algorithm 1): the independent check that the
    searched certificates are the textbook ones."""
    (aux,) = [p for p in PEGS if p not in (start, goal)]
    moves: list[HanoiMove] = []

    def solve(k: int, src: str, dst: str, via: str) -> None:
        if k == 0:
            return
        solve(k - 1, src, via, dst)
        moves.append((k, src, dst))
        solve(k - 1, via, dst, src)

    solve(n, start, goal, aux)
    return moves


def _moves(state: HanoiState) -> Iterator[tuple[HanoiMove, HanoiState]]:
    """Legal moves in a fixed order (from A, B, C; to A, B, C); the hot loop of the search."""
    for i, j in _ORDERED_PAIRS:
        src = state[i]
        if not src:
            continue
        disk = src[0]
        dst = state[j]
        if dst and dst[0] < disk:
            continue
        pegs = list(state)
        pegs[i] = src[1:]
        pegs[j] = (disk, *dst)
        yield (disk, PEGS[i], PEGS[j]), (pegs[0], pegs[1], pegs[2])


def _neighbours(state: HanoiState) -> Iterator[HanoiState]:
    # Every move can be undone, so the states that lead here are the states reached from here.
    for _, t in _moves(state):
        yield t


@lru_cache(maxsize=64)
def _goal_distances(n: int, goal_peg: str) -> Mapping[HanoiState, int]:
    """Distances to the goal tower from all 3^n states; shared by the two starts per goal."""
    return MappingProxyType(distance_map(tower(n, goal_peg), _neighbours))


class Hanoi:
    """Tower of Hanoi rules, text forms and certificates."""

    name: ClassVar[str] = "hanoi"
    action: ClassVar[str] = "move_disk"
    #: ``no_such_peg``: a peg other than A, B, C; ``no_such_disk``: a disk number outside
    #: 1..n; ``same_peg``: from and to are the same peg; ``not_top_disk``: the disk is not
    #: the top disk of the from-peg (it is lower down, elsewhere, or the peg is empty);
    #: ``larger_on_smaller``: the to-peg's top disk is smaller than the moved one.
    violations: ClassVar[tuple[str, ...]] = (
        "no_such_peg",
        "no_such_disk",
        "same_peg",
        "not_top_disk",
        "larger_on_smaller",
    )
    params_model: ClassVar[type[BaseModel]] = HanoiParams

    # --- configurations and certificates ----------------------------------------------

    def configurations(self, n: int, params: BaseModel, seed: int) -> list[Configuration]:
        """The six start/goal peg pairs; nothing is sampled, so ``seed`` is unused."""
        return [
            Configuration(
                n=n,
                rules={"start_peg": s, "goal_peg": g},
                start=tower(n, s),
                goal=tower(n, g),
                label=f"{s}->{g}",
            )
            for s, g in _PEG_PAIRS
        ]

    def certify(self, config: Configuration, node_limit: int) -> Certificate | Unsolved:
        """Descend the cached distance map of the goal peg. The map covers all 3^n states,
        so a limit below that gives up before searching rather than mid-way."""
        if 3**config.n > node_limit:
            return Unsolved("node_limit", 0)
        dist = _goal_distances(config.n, str(config.rules["goal_peg"]))
        return descend(config.start, dist, _moves)

    def distance_to(self, goal: HanoiState, rules: Rules, n: int) -> Callable[[HanoiState], int | None]:
        """Moves from a state to ``goal``: a look-up in the goal tower's cached map of all
        3^n states (the certificates' own), else a BFS; None if unreachable."""
        for peg in PEGS:
            if goal == tower(n, peg):
                return _goal_distances(n, peg).get
        return lambda state: bfs_distance(state, goal, _moves)

    # --- rules ------------------------------------------------------------------------

    def successors(self, state: HanoiState, rules: Rules) -> Iterator[tuple[HanoiMove, HanoiState]]:
        return _moves(state)

    def apply(self, state: HanoiState, move: HanoiMove, rules: Rules) -> HanoiState:
        disk, src, dst = move
        for peg in (src, dst):
            if peg not in _PEG_INDEX:
                raise IllegalMove("no_such_peg", f"there is no peg {peg!r}; the pegs are A, B and C")
        n = sum(len(p) for p in state)
        if not 1 <= disk <= n:
            raise IllegalMove("no_such_disk", f"there is no disk {disk}; the disks are 1..{n}")
        if src == dst:
            raise IllegalMove("same_peg", f"disk {disk} would move from peg {src} onto itself")
        i, j = _PEG_INDEX[src], _PEG_INDEX[dst]
        if not state[i] or state[i][0] != disk:
            where = f"the top of peg {src} is disk {state[i][0]}" if state[i] else f"peg {src} is empty"
            raise IllegalMove("not_top_disk", f"disk {disk} is not on top of peg {src}: {where}")
        if state[j] and state[j][0] < disk:
            raise IllegalMove(
                "larger_on_smaller", f"disk {disk} cannot go onto the smaller disk {state[j][0]} on peg {dst}"
            )
        pegs = list(state)
        pegs[i] = state[i][1:]
        pegs[j] = (disk, *state[j])
        return (pegs[0], pegs[1], pegs[2])

    def check_state(self, state: Any, n: int, rules: Rules) -> str | None:
        if not isinstance(state, tuple) or len(state) != 3:
            return "a state has exactly three pegs (A, B, C)"
        disks: list[int] = []
        for peg, stack in zip(PEGS, state, strict=True):
            if not isinstance(stack, tuple) or not all(isinstance(d, int) for d in stack):
                return f"peg {peg} is not a list of disk numbers"
            if any(a >= b for a, b in zip(stack, stack[1:], strict=False)):
                return f"peg {peg} has a larger disk on a smaller one (disks are listed top to bottom)"
            disks.extend(stack)
        return _disk_set_problem(sorted(disks), n)

    # --- text -------------------------------------------------------------------------

    def format_state(self, state: HanoiState) -> str:
        return "[" + ", ".join("[" + ", ".join(str(d) for d in peg) + "]" for peg in state) + "]"

    def parse_state(self, text: str) -> HanoiState:
        expected = "not a Hanoi state: expected a list of pegs like [[1, 2, 3], [], []]"
        try:
            value = read_list(strip_fences(answer_text(text, "state")))
        except BadText as err:
            raise BadText(expected) from err
        if not all(isinstance(peg, list) for peg in value):
            raise BadText(expected)
        pegs: list[tuple[int, ...]] = []
        for k, peg in enumerate(value):
            disks = tuple(d for d in map(as_int, peg) if d is not None)
            if len(disks) != len(peg):
                raise BadText(f"peg {k + 1} of the state holds something other than disk numbers")
            pegs.append(disks)
        return tuple(pegs)  # type: ignore[return-value]  # check_state judges the peg count

    def format_move(self, move: HanoiMove) -> str:
        disk, src, dst = move
        return f'[{disk}, "{src}", "{dst}"]'

    def parse_moves(self, text: str) -> list[HanoiMove]:
        return last_move_list(text, _as_move, '[1, "A", "C"]')

    # --- mistakes for the noisy baselines ---------------------------------------------

    def illegal_move(self, state: HanoiState, rules: Rules, rng: np.random.Generator) -> HanoiMove:
        """A plausible slip: a buried disk, a larger disk onto a smaller, a disk from an
        empty peg, or a move onto the same peg (the last is always available)."""
        return pick_by_kind(_illegal_candidates(state), rng)

    def wrong_successor(self, state: HanoiState, rules: Rules, rng: np.random.Generator) -> HanoiState:
        """Two disks moved at once, a buried disk moved, a larger disk put on a smaller, or
        (always possible) a disk lost."""
        return pick_wrong_successor(state, _moves(state), _wrong_candidates(state), rng)

    def describe_rules(self, rules: Rules, n: int) -> str:
        start = rules.get("start_peg", "A")
        goal = rules.get("goal_peg", "C")
        plural = "disk" if n == 1 else f"{n} disks"
        return (
            f"Tower of Hanoi with three pegs named A, B and C and {plural} numbered by size, "
            f"1 being the smallest and {n} the largest. At the start every disk is on peg "
            f"{start}; the goal is to have every disk on peg {goal}.\n"
            "Rules: move one disk at a time; only the top disk of a peg may be moved; it goes "
            "on top of another peg, which must be empty or have a larger disk on top. A larger "
            "disk may never rest on a smaller one.\n"
            "State format: a list of three lists, one per peg in the order A, B, C, each giving "
            "that peg's disks from the top down. For example [[1, 2, 3], [], []] means disks 1, "
            "2 and 3 are all on peg A, with disk 1 on top.\n"
            'Move format: [disk, "from peg", "to peg"]; for example [1, "A", "C"] moves disk 1 '
            "from peg A to peg C. A whole solution is a list of moves, for example "
            '[[1, "A", "B"], [2, "A", "C"]].'
        )


def _disk_set_problem(disks: list[int], n: int) -> str | None:
    """Why the sorted disk numbers are not exactly 1..n, or None."""
    want = list(range(1, n + 1))
    if disks == want:
        return None
    dupes = sorted(d for d, k in Counter(disks).items() if k > 1)
    if dupes:
        return f"disk {dupes[0]} appears more than once"
    extra = [d for d in disks if not 1 <= d <= n]
    if extra:
        return f"there is no disk {extra[0]}; the disks are 1..{n}"
    present = set(disks)
    missing = [d for d in want if d not in present]
    return f"disk {missing[0]} is missing"


def _as_move(item: list[Any]) -> HanoiMove | None:
    """``[disk, from, to]`` with any quoting; None if the item is not shaped like a move.
    Unknown peg names are kept (apply reports them as ``no_such_peg``)."""
    if len(item) != 3:
        return None
    disk, src, dst = as_int(item[0]), item[1], item[2]
    if disk is None:
        return None
    if not all(isinstance(p, str) and not p.lstrip("+-").isdigit() for p in (src, dst)):
        return None
    return (disk, src.upper(), dst.upper())


def _illegal_candidates(state: HanoiState) -> list[list[HanoiMove]]:
    """Illegal moves grouped by mistake; the last group is never empty."""
    buried, onto_smaller, from_empty, same = [], [], [], []
    for i, j in _ORDERED_PAIRS:
        src, dst = state[i], state[j]
        buried.extend((d, PEGS[i], PEGS[j]) for d in src[1:])
        if src and dst and dst[0] < src[0]:
            onto_smaller.append((src[0], PEGS[i], PEGS[j]))
        if not src:
            donors = [p for p in state if p]
            from_empty.append((donors[0][0], PEGS[i], PEGS[j]))
    for i, peg in enumerate(state):
        if peg:
            same.append((peg[0], PEGS[i], PEGS[i]))
    return [buried, onto_smaller, from_empty, same]


def _wrong_candidates(state: HanoiState) -> list[list[HanoiState]]:
    """Wrong next states grouped by mistake; the last group (a lost disk) is never empty."""
    two_moves = [u for m, t in _moves(state) for m2, u in _moves(t) if m2[0] != m[0]]
    buried: list[HanoiState] = []
    onto_smaller: list[HanoiState] = []
    for i, j in _ORDERED_PAIRS:
        src, dst = state[i], state[j]
        for k in range(1, len(src)):
            buried.append(_relocate(state, i, k, j))
        if src and dst and dst[0] < src[0]:
            onto_smaller.append(_relocate(state, i, 0, j))
    lost = [_replace(state, i, peg[1:]) for i, peg in enumerate(state) if peg]
    return [two_moves, buried, onto_smaller, lost]


def _relocate(state: HanoiState, i: int, k: int, j: int) -> HanoiState:
    """The disk at depth ``k`` of peg ``i`` put on top of peg ``j``, rules ignored."""
    disk = state[i][k]
    pegs = list(state)
    pegs[i] = state[i][:k] + state[i][k + 1 :]
    pegs[j] = (disk, *state[j])
    return (pegs[0], pegs[1], pegs[2])


def _replace(state: HanoiState, i: int, peg: tuple[int, ...]) -> HanoiState:
    pegs = list(state)
    pegs[i] = peg
    return (pegs[0], pegs[1], pegs[2])


__all__ = ["Hanoi", "HanoiParams", "recursive_moves", "tower"]
