"""Blocks World: rearrange n lettered blocks on K numbered stacks, one top block a move.

State: a tuple of K stacks, each a tuple of block letters from BOTTOM to TOP; stacks are
positions (stack 1, 2, ...), so ``(("A",), ("B",), ())`` and ``(("B",), ("A",), ())``
differ. Text: ``[[A, B], [C], []]``. A move ``(block, from, to)`` takes the top block of
stack ``from`` onto stack ``to`` (1-based), written ``[B, 1, 3]``; a plan is a list of
moves.

Start/goal pairs are sampled (Algorithm 6 of the paper), so no two share a goal and
each is certified by its own search: A* with a lower bound built from "every block not
yet in its final position moves at least once, some provably twice" (see :class:`_Goal`),
which visits far fewer states than BFS (n = 10 on 3 stacks has 240 million states); or,
for the paper's reading (``search: bfs``), Algorithm 5's BFS with its node limit, whose
cut is part of what Table 4 holds (:func:`bfs_algorithm5`).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Unsolved,
)
from horizonbench.datasets.puzzles.blocks_world_search import (
    SCORING_NODE_LIMIT,
    BWMove,
    BWState,
    _astar,
    _goal_distance,
    bfs_algorithm5,
)
from horizonbench.datasets.puzzles.text import last_list, short

__all__ = ["BlocksWorld", "BlocksWorldParams"]

VIOLATIONS = (
    "not_top_block",  # the block is not the top block of the stack it is taken from
    "empty_stack",  # the stack taken from is empty
    "same_stack",  # from and to are the same stack
    "no_such_stack",  # a stack number outside 1..K
    "no_such_block",  # a block that is not in the puzzle
)


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class BlocksWorldParams(BaseModel):
    """Generation parameters of Algorithm 6 (M = ``per_n``, oversampling ``alpha``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ns: list[int] = Field(default_factory=lambda: list(range(1, 11)))
    per_n: int = Field(default=100, ge=1, le=100_000)
    alpha: int = Field(default=3, ge=1, le=100)
    num_stacks: int = Field(default=3, ge=2, le=6)
    #: A* nodes (``search: astar``) or Algorithm 5's N_max, queue pops (``search: bfs``)
    node_limit: int = Field(default=1_000_000, ge=1)
    #: seed of the draws; the family adapter passes it to ``configurations`` as ``seed``
    sample_seed: int = Field(default=0, ge=0)
    #: how a start is drawn: ``uniform`` over all states, or ``blockwise`` (blocks A..n in
    #: order, each put on a uniformly drawn stack: 3^n equally likely placements)
    start_sampler: Literal["uniform", "blockwise"] = "uniform"
    #: the goal: ``independent`` (drawn like the start) or ``walk`` (``walk_moves`` moves,
    #: each uniform over the legal ones, from the start; undoing a move is allowed)
    goal: Literal["independent", "walk"] = "independent"
    walk_moves: int = Field(default=35, ge=1, le=10_000)
    #: the certificate's search: ``astar`` (exact, see :func:`_astar`) or ``bfs``, the
    #: paper's Algorithm 5 (goal test on successors, gives up after ``node_limit`` pops)
    search: Literal["astar", "bfs"] = "astar"
    #: ``before``: repeated pairs and start == goal are skipped while the candidates are
    #: drawn; ``after``: Algorithm 6 taken literally, every draw is a candidate and the
    #: first ``per_n`` solved ones (trivial and repeated ones included) fill the quota,
    #: then those are dropped (the family adapter counts them, see family.py)
    dedup: Literal["before", "after"] = "before"

    @field_validator("ns")
    @classmethod
    def _ns_ok(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("ns: give at least one size")
        for v in value:
            if not 1 <= v <= 10:
                raise ValueError(f"ns: {v} is outside 1..10")
        if len(set(value)) != len(value):
            raise ValueError(f"ns: {value} repeats a size")
        return value


# --- sampling ---------------------------------------------------------------------


def count_states(n: int, k: int) -> int:
    """Exactly: a state is a block order (n!) cut into k stacks (C(n + k - 1, k - 1))."""
    return math.factorial(n) * math.comb(n + k - 1, k - 1)


def _rng(seed: int, n: int, tag: str) -> np.random.Generator:
    """A generator that depends only on (seed, n, tag), never on process hash seeds."""
    digest = hashlib.sha256(f"blocks_world:{seed}:{n}:{tag}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def _draw_state(rng: np.random.Generator, n: int, k: int) -> BWState:
    """Uniform over states: a uniform block order and a uniform composition of n into k
    parts (bars among n + k - 1 slots); the pair determines the state and vice versa."""
    order = [_LETTERS[i] for i in rng.permutation(n)]
    bars = sorted(int(b) for b in rng.choice(n + k - 1, size=k - 1, replace=False))
    sizes, prev = [], -1
    for b in [*bars, n + k - 1]:
        sizes.append(b - prev - 1)
        prev = b
    out, pos = [], 0
    for size in sizes:
        out.append(tuple(order[pos : pos + size]))
        pos += size
    return tuple(out)


def _draw_blockwise(rng: np.random.Generator, n: int, k: int) -> BWState:
    """Blocks A..n in order, each on top of a uniformly drawn stack (the placement the
    paper's Figure 6 suggests; not uniform over states: tall stacks are ordered A-up)."""
    rows: list[list[str]] = [[] for _ in range(k)]
    for i, where in enumerate(rng.integers(k, size=n).tolist()):
        rows[where].append(_LETTERS[i])
    return tuple(tuple(r) for r in rows)


def random_walk(rng: np.random.Generator, state: BWState, moves: int) -> BWState:
    """The state after ``moves`` moves, each uniform over the legal ones (a move may undo
    the last one): a goal near the start, as Table 4's short plans at n = 8..10 need."""
    rows = [list(s) for s in state]
    k = len(rows)
    for _ in range(moves):
        legal = [(i, j) for i in range(k) if rows[i] for j in range(k) if j != i]
        if not legal:
            break
        i, j = legal[int(rng.integers(len(legal)))]
        rows[j].append(rows[i].pop())
    return tuple(tuple(r) for r in rows)


def draw_pair(rng: np.random.Generator, n: int, params: BlocksWorldParams) -> tuple[BWState, BWState]:
    """One (start, goal) candidate by the params' sampler and goal rule."""
    k = params.num_stacks
    draw = _draw_state if params.start_sampler == "uniform" else _draw_blockwise
    start = draw(rng, n, k)
    goal = draw(rng, n, k) if params.goal == "independent" else random_walk(rng, start, params.walk_moves)
    return start, goal


def all_states(n: int, k: int) -> list[BWState]:
    """Every state, in a fixed order (block orders, then cuts); only for small spaces."""
    out = []
    for order in itertools.permutations(_LETTERS[:n]):
        for bars in itertools.combinations(range(n + k - 1), k - 1):
            stacks, prev, pos = [], -1, 0
            for b in [*bars, n + k - 1]:
                size = b - prev - 1
                stacks.append(tuple(order[pos : pos + size]))
                pos, prev = pos + size, b
            out.append(tuple(stacks))
    return out


# --- text -------------------------------------------------------------------------

_BLOCK = re.compile(r"[A-Z]")
_NUMBER = re.compile(r"[0-9]{1,3}")


def _outer_list(text: str, what: str, example: str) -> list[Any]:
    return last_list(text, what=what, missing=f"no {what} list like {example} found")


def _as_move(item: Any, i: int) -> BWMove:
    if not isinstance(item, list) or len(item) != 3:
        raise BadText(f"move {i}: {short(item)} is not [block, from stack, to stack]")
    block, src, dst = item
    if isinstance(block, list) or not _BLOCK.fullmatch(block):
        raise BadText(f"move {i}: {short(block)} is not a block letter")
    for stack in (src, dst):
        if isinstance(stack, list) or not _NUMBER.fullmatch(stack):
            raise BadText(f"move {i}: {short(stack)} is not a stack number")
    return block, int(src), int(dst)


# --- the puzzle -------------------------------------------------------------------


class BlocksWorld:
    """The Blocks World rules, text forms, sampled configurations and A* certificates."""

    name: ClassVar[str] = "blocks_world"
    action: ClassVar[str] = "move_block"
    violations: ClassVar[tuple[str, ...]] = VIOLATIONS
    params_model: ClassVar[type[BaseModel]] = BlocksWorldParams
    #: distances to the goal come from a search, not a cached map: scoring reads the gold
    #: trajectory's states off the row first (family.goal_progress)
    searched_distances: ClassVar[bool] = True

    # configurations and certificates

    def configurations(self, n: int, params: BaseModel, seed: int) -> list[Configuration]:
        """Algorithm 6's candidate list, ``per_n * alpha`` (start, goal) pairs, each draw
        seeded by (seed, n, draw number).

        ``dedup: after`` (the paper's reading): every draw, in seed order, repeats and
        start == goal included (the adapter counts them toward the quota, then drops
        them). ``dedup: before``: distinct pairs with start != goal, repeats skipped;
        with the uniform sampler and independent goals, a space with no more pairs than
        wanted is listed whole in a seeded order (sampling would only repeat), and a
        space too small for the other samplers ends the list early."""
        assert isinstance(params, BlocksWorldParams)
        k, want = params.num_stacks, params.per_n * params.alpha
        rules = {"num_stacks": k}
        if params.dedup == "after":
            pairs = (draw_pair(_rng(seed, n, str(draw)), n, params) for draw in range(want))
            return [Configuration(n, rules, s, g, label=f"draw {i}") for i, (s, g) in enumerate(pairs)]
        total = count_states(n, k)
        plain = params.start_sampler == "uniform" and params.goal == "independent"
        if plain and total * (total - 1) <= want:
            states = all_states(n, k)
            every = [(s, g) for s in states for g in states if s != g]
            order = _rng(seed, n, "all").permutation(len(every))
            return [Configuration(n, rules, *every[i], label=f"pair {i}") for i in order.tolist()]
        out: list[Configuration] = []
        seen: set[tuple[BWState, BWState]] = set()
        # a walk or blockwise space may hold fewer distinct pairs than wanted: stop after
        # this many draws rather than loop (the uniform one above never gets here short)
        for draw in range(want * 50):
            if len(out) == want:
                break
            start, goal = draw_pair(_rng(seed, n, str(draw)), n, params)
            if start == goal or (start, goal) in seen:
                continue
            seen.add((start, goal))
            out.append(Configuration(n, rules, start, goal, label=f"draw {draw}"))
        return out

    def certify(
        self, config: Configuration, node_limit: int, search: str = "astar"
    ) -> Certificate | Unsolved:
        """A* from the start (goals are not shared), or the paper's BFS (Algorithm 5) with
        ``search="bfs"``. With 2 stacks only n + 1 states are reachable from each start,
        and the search proves the rest unsolvable."""
        start, goal = _stacks(config.start), _stacks(config.goal)
        if search == "bfs":
            return bfs_algorithm5(start, goal, node_limit)
        return _astar(start, goal, node_limit)

    def distance_to(self, goal: Any, rules: Mapping[str, Any], n: int) -> Callable[[Any], int | None]:
        """Moves from a state to ``goal`` by A* (as the certificates; cached per state),
        None when unreachable or past :data:`SCORING_NODE_LIMIT` nodes."""
        target = _stacks(goal)
        return lambda state: _goal_distance(_stacks(state), target)

    def closest_distance(
        self, states: Sequence[Any], goal: Any, rules: Mapping[str, Any], n: int, below: int | None = None
    ) -> int | None:
        """The least distance to ``goal`` among ``states``: one A* from all of them at
        once; None when it is at least ``below`` (or unreachable, or too far to search)."""
        if not states:
            return None
        first, *rest = (_stacks(s) for s in states)
        found = _astar(first, _stacks(goal), SCORING_NODE_LIMIT, below, rest)
        return found.length if isinstance(found, Certificate) else None

    # rules

    def successors(self, state: Any, rules: Mapping[str, Any]) -> Iterator[tuple[BWMove, BWState]]:
        """Top of stack i onto stack j, by i then j."""
        state = _stacks(state)
        for i, here in enumerate(state):
            if not here:
                continue
            for j in range(len(state)):
                if j != i:
                    yield (here[-1], i + 1, j + 1), _moved(state, i, j)

    def apply(self, state: Any, move: Any, rules: Mapping[str, Any]) -> BWState:
        """The state after ``move``; raises :class:`IllegalMove`."""
        state = _stacks(state)
        k = int(rules["num_stacks"])
        block, src, dst = move
        for stack in (src, dst):
            if not isinstance(stack, int) or not 1 <= stack <= min(k, len(state)):
                raise IllegalMove("no_such_stack", f"there is no stack {stack} (stacks are 1..{k})")
        if src == dst:
            raise IllegalMove("same_stack", f"{block} would go from stack {src} to itself")
        if not any(block in stack for stack in state):
            raise IllegalMove("no_such_block", f"there is no block {short(block)}")
        here = state[src - 1]
        if not here:
            raise IllegalMove("empty_stack", f"stack {src} is empty")
        if here[-1] != block:
            raise IllegalMove("not_top_block", f"the top of stack {src} is {here[-1]}, not {block}")
        return _moved(state, src - 1, dst - 1)

    def check_state(self, state: Any, n: int, rules: Mapping[str, Any]) -> str | None:
        """K stacks holding blocks A.. exactly once each."""
        k = int(rules["num_stacks"])
        if not isinstance(state, tuple | list) or not all(isinstance(s, tuple | list) for s in state):
            return "a state is a list of stacks"
        if len(state) != k:
            return f"{len(state)} stacks instead of {k}"
        seen = [b for stack in state for b in stack]
        for b in seen:
            if b not in _LETTERS[:n]:
                return f"{short(b)} is not one of the blocks {', '.join(_LETTERS[:n])}"
        for b in _LETTERS[:n]:
            if seen.count(b) != 1:
                return f"block {b} appears {seen.count(b)} times (must be exactly once)"
        return None

    # text

    def format_state(self, state: Any) -> str:
        return "[" + ", ".join("[" + ", ".join(stack) + "]" for stack in state) + "]"

    def parse_state(self, text: str) -> BWState:
        """The last list of stacks in the text, bottom to top, quotes optional."""
        stacks = _outer_list(text, "state", "[[A, B], [C], []]")
        out = []
        for i, stack in enumerate(stacks, start=1):
            if not isinstance(stack, list):
                raise BadText(f"stack {i}: {short(stack)} is not a list of blocks")
            for b in stack:
                if isinstance(b, list) or not _BLOCK.fullmatch(b):
                    raise BadText(f"stack {i}: {short(b)} is not a block letter")
            out.append(tuple(stack))
        return tuple(out)

    def format_move(self, move: Any) -> str:
        block, src, dst = move
        return f"[{block}, {src}, {dst}]"

    def parse_moves(self, text: str) -> list[BWMove]:
        """The last list of moves in the answer, e.g. ``[["B", 1, 3], [C, 2, 1]]``."""
        items = _outer_list(text, "move", "[[B, 1, 3], [C, 2, 1]]")
        return [_as_move(item, i) for i, item in enumerate(items, start=1)]

    # noisy-baseline mistakes

    def illegal_move(self, state: Any, rules: Mapping[str, Any], rng: np.random.Generator) -> BWMove:
        """A typical mistake: a buried block, an empty or missing stack, a move onto the
        same stack, or a block that does not exist."""
        state = _stacks(state)
        k = len(state)
        full = [i for i, s in enumerate(state) if s]
        empty = [i for i, s in enumerate(state) if not s]
        blocks = sorted(b for s in state for b in s)
        if not full:  # no blocks: every move names a missing block
            return "A", 1, 2
        i = full[int(rng.integers(len(full)))]
        other = [j for j in range(k) if j != i]
        j = other[int(rng.integers(len(other)))]
        top = state[i][-1]
        options: list[BWMove] = [(top, i + 1, i + 1), (top, i + 1, k + 1)]
        buried = [(b, x) for x, s in enumerate(state) for b in s[:-1]]
        if buried:
            b, x = buried[int(rng.integers(len(buried)))]
            y = (x + 1) % k
            options.append((b, x + 1, y + 1))
        if empty:
            e = empty[int(rng.integers(len(empty)))]
            options.append((blocks[int(rng.integers(len(blocks)))], e + 1, i + 1))
        missing = _LETTERS[len(blocks)] if len(blocks) < len(_LETTERS) else None
        if missing is not None:
            options.append((missing, i + 1, j + 1))
        return options[int(rng.integers(len(options)))]

    def wrong_successor(self, state: Any, rules: Mapping[str, Any], rng: np.random.Generator) -> BWState:
        """Two blocks swapped (stack heights unchanged, which no move does) or a buried
        block pulled out; with a single block, that block duplicated."""
        state = _stacks(state)
        spots = [(x, y) for x, s in enumerate(state) for y in range(len(s))]
        options: list[BWState] = []
        if len(spots) >= 2:
            a, b = rng.choice(len(spots), size=2, replace=False).tolist()
            options.append(_swapped(state, spots[a], spots[b]))
        buried = [(x, y) for x, y in spots if y < len(state[x]) - 1]
        if buried and len(state) >= 2:
            x, y = buried[int(rng.integers(len(buried)))]
            to = (x + 1 + int(rng.integers(len(state) - 1))) % len(state)
            rows = [list(s) for s in state]
            block = rows[x].pop(y)
            rows[to].append(block)
            options.append(tuple(tuple(r) for r in rows))
        if not options:
            rows = [list(s) for s in state]
            if spots:
                x, _ = spots[0]
                rows[(x + 1) % len(rows)].append(rows[x][-1])
            else:
                rows[0].append("A")
            options.append(tuple(tuple(r) for r in rows))
        return options[int(rng.integers(len(options)))]

    def describe_rules(self, rules: Mapping[str, Any], n: int) -> str:
        k = int(rules["num_stacks"])
        blocks = ", ".join(_LETTERS[:n])
        return (
            f"There are {n} blocks ({blocks}) on {k} stacks numbered 1 to {k}. Rearrange them "
            f"from the start arrangement into the goal arrangement.\n"
            f"Rules: one block moves at a time; only the top block of a stack can be moved; "
            f"it goes on top of a different stack, which may be empty. Stacks keep their "
            f"numbers, so the same blocks on a different stack is a different arrangement.\n"
            f"A state is written as a list of the {k} stacks in order, each listed from the "
            f"bottom block to the top block, e.g. [[A, B], [C], []] means B lies on A in "
            f"stack 1, C is alone in stack 2, and stack 3 is empty.\n"
            f"A move is written [block, from stack, to stack], e.g. [B, 1, 3] moves B from "
            f"the top of stack 1 onto stack 3; a whole solution is a list of moves, e.g. "
            f"[[B, 1, 3], [C, 2, 1]]."
        )


# --- small state helpers ----------------------------------------------------------


def _stacks(state: Any) -> BWState:
    return tuple(tuple(s) for s in state)


def _moved(state: BWState, i: int, j: int) -> BWState:
    rows = list(state)
    rows[j] = rows[j] + rows[i][-1:]
    rows[i] = rows[i][:-1]
    return tuple(rows)


def _swapped(state: BWState, a: tuple[int, int], b: tuple[int, int]) -> BWState:
    rows = [list(s) for s in state]
    rows[a[0]][a[1]], rows[b[0]][b[1]] = rows[b[0]][b[1]], rows[a[0]][a[1]]
    return tuple(tuple(r) for r in rows)
