"""Blocks World searches: the exact A* of the certificates and of scoring, and the
paper's Algorithm 5 (breadth-first, node-limited) for the paper's reading of Table 4.

Apart from :mod:`horizonbench.datasets.puzzles.blocks_world` (the rules, text forms and
sampling) because the two searches are most of the puzzle's code. States are keyed as
strings or tuples of strings, whose hashes Python caches.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from functools import lru_cache

from horizonbench.datasets.puzzles.base import Certificate, Unsolved, walk_back

Stack = tuple[str, ...]
BWState = tuple[Stack, ...]
BWMove = tuple[str, int, int]


def _common(a: str, b: str) -> int:
    i = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        i += 1
    return i


class _Goal:
    """The goal facts the heuristic reads, computed once per search.

    A block is *in place* when its stack agrees with the goal stack from the bottom up to
    and including it. The heuristic is ``sum(bound) + penalty``:

    ``bound``: a block not in place must move (if it never moves, neither do the blocks
    under it, so it stays out of place). It must move twice (a) if it stands on its own
    goal stack: every move changes stack, so it must leave and come back; or (b) if a
    block now under it belongs under it in its goal stack: that block can only move once
    this one has left, yet must be in place before this one arrives.

    ``penalty``: the blocks of a stack that are out of place form its *junk* (everything
    above its in-place bottom part). Before any block can land in place on stack b, the
    lowest junk block of b has to move, and before that every block above it. Take two
    stacks a and b that both have junk, and order them by when their lowest junk block
    first moves, say a before b. A bound-1 block x in a's junk whose goal stack is b moves
    no later than a's lowest junk block, so before b's, so while b still holds junk: it
    cannot land in place then, and it moves again. So of the bound-1 blocks in a's
    junk bound for b and those in b's junk bound for a, at least the smaller group moves
    a second time; different pairs of stacks count different blocks, and bound-1 blocks
    were counted once above.

    Every move moves one block, so h never overestimates. It is also consistent (h drops
    by at most 1 per move), so A* never reopens a state: a move changes only the moved
    block's bound and its entry in the counts. Its bound drops by at most 1 (to 0 only by
    landing in place; a block leaving its goal stack lands elsewhere with bound 1). The
    penalty drops by at most 1, and only when the moved block had bound 1 and its goal
    stack has junk, so it cannot land in place and its bound does not drop.
    """

    def __init__(self, dst: tuple[str, ...]) -> None:
        self.stacks = dst
        self.k = k = len(dst)
        self.home = {b: j for j, stack in enumerate(dst) for b in stack}
        self.height = {b: y for stack in dst for y, b in enumerate(stack)}
        self.under = {b: frozenset(stack[:y]) for stack in dst for y, b in enumerate(stack)}
        # the counts w[a][b] live in one int, 5 bits each (at most 26 blocks)
        self.pairs = tuple(
            (a, b, _W_BITS * (a * k + b), _W_BITS * (b * k + a))
            for a, b in itertools.combinations(range(k), 2)
        )
        #: the unit of w[stack][goal stack of block], per (stack, block)
        self.unit = {(i, b): 1 << (_W_BITS * (i * k + j)) for b, j in self.home.items() for i in range(k)}

    def bound(self, block: str, stack: int, below: str) -> int:
        """Moves still needed by ``block``, out of place on ``stack`` over ``below``."""
        if self.home[block] == stack or not self.under[block].isdisjoint(below):
            return 2
        return 1

    def penalty(self, s: Sequence[str], cps: tuple[int, ...], w: int) -> int:
        """``w[a][b]`` (5 bits at ``_W_BITS * (a * k + b)``): bound-1 blocks in a's junk
        whose goal stack is b."""
        total = 0
        for a, b, ab, ba in self.pairs:
            if len(s[a]) > cps[a] and len(s[b]) > cps[b]:
                x, y = (w >> ab) & _W_MASK, (w >> ba) & _W_MASK
                total += x if x < y else y
        return total

    def measure(self, s: Sequence[str]) -> tuple[tuple[int, ...], int, int]:
        """(in-place prefix lengths, sum of bounds, the counts ``w``) of a state."""
        cps = tuple(_common(here, there) for here, there in zip(s, self.stacks, strict=True))
        total = w = 0
        for i, here in enumerate(s):
            for y in range(cps[i], len(here)):
                need = self.bound(here[y], i, here[:y])
                total += need
                if need == 1:
                    w += self.unit[i, here[y]]
        return cps, total, w

    def useful_moves(self, s: Sequence[str], cps: tuple[int, ...]) -> Sequence[tuple[int, int]]:
        """The moves an optimal plan needs to consider (0-based stacks).

        Two exchange arguments prune the rest without losing every optimal plan:
        (1) a block in place never needs to move: deleting every move of the in-place
        blocks from a plan leaves a legal plan (they act as the floor of their stacks)
        that is no longer; (2) if a block can go straight to its final place, going
        there now is optimal: put it there first and delete its later moves, and every
        other move still finds the same block on top. Applied in every state, they keep
        a shortest plan from every state, so distances (and unsolvability) are unchanged.
        """
        k = self.k
        tops = [i for i in range(k) if len(s[i]) > cps[i]]
        for i in tops:
            block = s[i][-1]
            j = self.home[block]
            if j != i and cps[j] == len(s[j]) == self.height[block]:
                return ((i, j),)
        return [(i, j) for i in tops for j in range(k) if j != i]


#: node limit of the searches scoring makes (the certificates' default is 1,000,000);
#: a state further from the goal than this can search reads as no progress
SCORING_NODE_LIMIT = 200_000


@lru_cache(maxsize=4096)
def _goal_distance(state: BWState, goal: BWState) -> int | None:
    found = _astar(state, goal, SCORING_NODE_LIMIT)
    return found.length if isinstance(found, Certificate) else None


_W_BITS, _W_MASK = 5, 31
_SEP = "|"


def _astar(
    start: BWState, goal: BWState, node_limit: int, below: int | None = None, more: Sequence[BWState] = ()
) -> Certificate | Unsolved:
    """A* with the admissible, consistent heuristic of :class:`_Goal` over the pruned
    moves of :meth:`_Goal.useful_moves`: the first time the goal leaves the queue its
    distance is optimal; an exhausted queue proves the goal unreachable.

    For scoring: ``more`` adds sources (every source at g = 0, as from one super-source),
    so the first goal popped is the distance of the CLOSEST of them; with ``below`` the
    search gives up (``Unsolved("bound")``) as soon as the least f in the queue reaches
    it (the heuristic is consistent: every distance is then at least ``below``).

    States are keyed as one string (stacks joined by ``|``): strings cache their hash,
    which matters at a few hundred thousand dictionary look-ups per search.
    """
    src = ["".join(s) for s in start]
    dst = tuple("".join(s) for s in goal)
    if sorted("".join(src)) != sorted("".join(dst)) or len(src) != len(dst):
        return Unsolved("unsolvable", 0)
    facts = _Goal(dst)
    home, height, under, unit, penalty = facts.home, facts.height, facts.under, facts.unit, facts.penalty
    goal_key = _SEP.join(dst)
    best: dict[str, int] = {}
    parent: dict[str, tuple[str, BWMove] | None] = {}
    closed: set[str] = set()
    heap = []
    for source in (src, *(["".join(s) for s in other] for other in more)):
        key0 = _SEP.join(source)
        if key0 in best:
            continue
        cps0, lb0, w0 = facts.measure(source)
        best[key0], parent[key0] = 0, None
        heap.append((lb0 + facts.penalty(source, cps0, w0), 0, len(heap), key0, cps0, lb0, w0))
    heapq.heapify(heap)
    tick, nodes = len(heap), 0
    while heap:
        f, neg_g, _, key, cps, lb, w = heapq.heappop(heap)
        if key in closed:
            continue
        if below is not None and f >= below:
            return Unsolved("bound", nodes)
        if key == goal_key:
            return _path(parent, key, nodes)
        if nodes >= node_limit:
            return Unsolved("node_limit", nodes)
        closed.add(key)
        nodes += 1
        g = 1 - neg_g
        s = key.split(_SEP)
        for i, j in facts.useful_moves(s, cps):
            here, there = s[i], s[j]
            block, rest, lj = here[-1], here[:-1], len(there)
            t = s.copy()
            t[i], t[j] = rest, there + block
            t_key = _SEP.join(t)
            if t_key in closed or best.get(t_key, g + 1) <= g:
                continue
            hb = home[block]
            before = 2 if hb == i or not under[block].isdisjoint(rest) else 1
            c = cps
            if hb == j and cps[j] == lj == height[block]:  # it lands in place
                after = 0
                c_list = list(cps)
                c_list[j] = lj + 1
                c = tuple(c_list)
            else:
                after = 2 if hb == j or not under[block].isdisjoint(there) else 1
            w2 = w
            if before == 1:
                w2 -= unit[i, block]
            if after == 1:
                w2 += unit[j, block]
            lb2 = lb - before + after
            best[t_key] = g
            parent[t_key] = (key, (block, i + 1, j + 1))
            tick += 1
            heapq.heappush(heap, (g + lb2 + penalty(t, c, w2), -g, tick, t_key, c, lb2, w2))
    return Unsolved("unsolvable", nodes)


def bfs_algorithm5(start: BWState, goal: BWState, node_limit: int) -> Certificate | Unsolved:
    """The paper's Algorithm 5: breadth-first search with a parent map; the goal test is
    made on each successor as it is generated, before the visited test; ``node_limit``
    (N_max) counts queue pops, and the search gives up once that many were popped.
    Successors go by (from stack, to stack) order, as :meth:`BlocksWorld.successors`.

    Why it exists beside A*: the node limit is part of what the paper's Table 4 holds
    (the plans it cannot find at n = 8..10 are missing there), and only this search
    cuts where Algorithm 5 does. Its plans are optimal when found (BFS). Start == goal
    is a 0-move certificate (Algorithm 5 would never test the start itself).

    Speed: states are tuples of K strings (their hashes are cached), the parent map holds
    only the parent (the move is read off two states at the end), and 3 stacks have their
    six moves written out (the general loop serves K != 3): configs/recurrreason.yaml
    has 147 searches that run to N_max at n = 8..10 (its generation log's node_limit).
    """
    src = tuple("".join(s) for s in start)
    dst = tuple("".join(s) for s in goal)
    if src == dst:
        return Certificate((start,), (), 0)
    if sorted("".join(src)) != sorted("".join(dst)) or len(src) != len(dst):
        return Unsolved("unsolvable", 0)
    parent: dict[tuple[str, ...], tuple[str, ...] | None] = {src: None}
    queue: deque[tuple[str, ...]] = deque([src])
    expand = _moves3 if len(src) == 3 else _moves_any
    pops = 0
    while queue and pops < node_limit:
        s = queue.popleft()
        pops += 1
        for t in expand(s):
            if t == dst:
                parent[t] = s
                return _bfs_path(parent, t, pops)
            if t not in parent:
                parent[t] = s
                queue.append(t)
    return Unsolved("node_limit" if queue else "unsolvable", pops)


def _moves3(s: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The successors of a 3-stack state in (from, to) order, written out."""
    a, b, c = s
    out = []
    if a:
        x, r = a[-1], a[:-1]
        out += [(r, b + x, c), (r, b, c + x)]
    if b:
        x, r = b[-1], b[:-1]
        out += [(a + x, r, c), (a, r, c + x)]
    if c:
        x, r = c[-1], c[:-1]
        out += [(a + x, b, r), (a, b + x, r)]
    return out


def _moves_any(s: tuple[str, ...]) -> list[tuple[str, ...]]:
    out = []
    for i, here in enumerate(s):
        if not here:
            continue
        for j in range(len(s)):
            if j != i:
                t = list(s)
                t[i], t[j] = here[:-1], s[j] + here[-1]
                out.append(tuple(t))
    return out


def _bfs_path(
    parent: Mapping[tuple[str, ...], tuple[str, ...] | None], end: tuple[str, ...], nodes: int
) -> Certificate:
    """The trajectory back from ``end``; each move is the one stack that shrank and the
    one that grew between two states."""
    keys = [end]
    while (up := parent[keys[-1]]) is not None:
        keys.append(up)
    keys.reverse()
    moves: list[BWMove] = []
    for before, after in itertools.pairwise(keys):
        i = next(x for x in range(len(before)) if len(after[x]) < len(before[x]))
        j = next(x for x in range(len(before)) if len(after[x]) > len(before[x]))
        moves.append((before[i][-1], i + 1, j + 1))
    return Certificate(tuple(tuple(tuple(stack) for stack in key) for key in keys), tuple(moves), nodes)


def _path(parent: Mapping[str, tuple[str, BWMove] | None], end: str, nodes: int) -> Certificate:
    keyed = walk_back(parent, end, nodes)
    states = tuple(tuple(tuple(stack) for stack in key.split(_SEP)) for key in keyed.states)
    return Certificate(states, keyed.moves, nodes)
