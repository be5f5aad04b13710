"""Maze generation: Kruskal tree, rewind construction of keys and doors, facts, noise, shuffle.

The construction follows seqBench's Algorithm 1 ("rewind construction"): start from a
random goal and work backwards, each round picking a key cell reachable from the
current cell without crossing a locked door, locking a random edge on the unique
path between them, and moving the current cell to the key cell. The agent starts in
the last key cell. With no doors (B = 0) the construction would start on the goal,
so a random start reachable from the goal is drawn instead.

As in the paper, the construction stops early when the current cell is walled in by
the doors already locked (no other cell is reachable from it), so a maze may have
fewer keys than asked; ``Maze.num_keys`` is the number placed. Whether such a maze is
used is the family's choice (``MazeParams.num_keys_mode``): by default it is rejected.

Three random streams are derived from the candidate seed, so the maze does not
change with the noise or shuffle setting: stream 0 builds the maze, stream 1 orders
the distractor pool (a higher noise ratio shows a superset of the distractors of a
lower one), stream 2 shuffles the listing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from horizonbench.core.types import Step
from horizonbench.datasets.maze import facts as F
from horizonbench.datasets.maze.certificate import render_items
from horizonbench.datasets.maze.grid import (
    CuttableTree,
    _kruskal_padded,
    _slot_layout,
    grid_edges,
    path_from_predecessors,
    room_names,
)
from horizonbench.datasets.maze.rules import RESCUE_TARGET

Edge = tuple[int, int]


@dataclass(frozen=True)
class Maze:
    """One generated maze with its gold plan and the fact listing shown to the model."""

    rows: int
    cols: int
    start: str
    goal: str
    #: doors on the gold path as placed: at most the target, fewer if the rewind stopped early
    num_keys: int
    gold: tuple[Step, ...]
    facts: tuple[str, ...]
    supporting_count: int
    distracting_count: int
    displaced_count: int
    #: ``facts`` as (kind, slots) items, in the same order: the structure the
    #: certificate searches (after proving that it renders to ``facts``)
    items: tuple[F.FactItem, ...] = field(default=(), repr=False)


_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
#: PCG64's multiplier (numpy's ``PCG_DEFAULT_MULTIPLIER_128``)
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645


class _Stream:
    """The rest of a numpy ``Generator``'s PCG64 stream, drawn in Python: the same
    numbers ``integers`` and ``choice(replace=False)`` give, for the few draws that
    follow the tree.

    After the tree's 3,120 weights, stream 0 makes about a dozen single draws (the
    rewind's cells, the decoys, the key numbers), and each numpy call costs 2-10 us of
    argument handling around a few nanoseconds of work: here each is a 128-bit step in
    Python integers. It reads the generator's state once and never writes it back
    (nothing draws from the generator afterwards). Written after numpy 2's
    ``_generator.pyx`` and ``distributions.c``; ``tests/test_maze_generation_fast.py``
    holds it to numpy's own draws, and the identity digests pin the rows.
    """

    __slots__ = ("_generator", "_has32", "_inc", "_state", "_u32")

    def __init__(self, generator: np.random.Generator) -> None:
        self._generator = generator
        self._load()

    def _load(self) -> None:
        state = self._generator.bit_generator.state
        if state["bit_generator"] != "PCG64":
            raise ValueError("_Stream follows PCG64 only")
        self._state, self._inc = state["state"]["state"], state["state"]["inc"]
        self._has32, self._u32 = state["has_uint32"], state["uinteger"]

    def _numpy(self) -> np.random.Generator:
        """The generator with this stream's state written back (for the cases drawn by numpy)."""
        self._generator.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": self._state, "inc": self._inc},
            "has_uint32": self._has32,
            "uinteger": self._u32,
        }
        return self._generator

    def _next32(self) -> int:
        # PCG64's next_uint32: half of a 64-bit output (XSL RR), the high half kept for the next call
        if self._has32:
            self._has32 = 0
            return self._u32  # type: ignore[no-any-return]
        s = self._state = (self._state * _PCG_MULT + self._inc) & _M128
        x = ((s >> 64) ^ s) & _M64
        rot = s >> 122
        out = ((x >> rot) | (x << (64 - rot))) & _M64
        self._has32, self._u32 = 1, out >> 32
        return out & 0xFFFFFFFF

    def _bounded(self, top: int) -> int:
        """A draw in [0, top] (numpy's ``random_bounded_uint64``, Lemire's method on 32 bits)."""
        if top == 0:
            return 0
        span = top + 1
        m = self._next32() * span
        if m & 0xFFFFFFFF < span:
            threshold = (0xFFFFFFFF - top) % span
            while m & 0xFFFFFFFF < threshold:
                m = self._next32() * span
        return m >> 32

    def integers(self, high: int) -> int:
        """``int(generator.integers(high))``."""
        if not 0 < high <= 1 << 32:
            value = int(self._numpy().integers(high))
            self._load()
            return value
        return self._bounded(high - 1)

    def sample(self, population: int, size: int) -> list[int]:
        """``generator.choice(population, size=size, replace=False).tolist()``: Floyd's
        algorithm, then a Fisher-Yates shuffle of the sample."""
        if population > 10_000 and size > population // 50 or population > 1 << 32 or size > population:
            picked: list[int] = self._numpy().choice(population, size=size, replace=False).tolist()
            self._load()
            return picked
        chosen: set[int] = set()
        out: list[int] = []
        for j in range(population - size, population):
            value = self._bounded(j)
            if value in chosen:
                value = j
            chosen.add(value)
            out.append(value)
        for i in range(size - 1, 0, -1):
            j = self._bounded(i)
            out[i], out[j] = out[j], out[i]
        return out


def _rng(seed: int, stream: int) -> np.random.Generator:
    """``np.random.default_rng([seed, stream])``, the same generator, about 2 us cheaper.

    numpy turns each int of a list into 32-bit words in Python before hashing them
    (``SeedSequence``); an array of those very words (low word first, as many as the
    int needs, one for 0) takes its fast path to the same state. Three or four a candidate.
    """
    if seed < 0 or stream < 0 or seed >> 64 or stream >> 32:
        return np.random.default_rng([seed, stream])
    words = [seed & 0xFFFFFFFF, seed >> 32, stream] if seed >> 32 else [seed, stream]
    return np.random.default_rng(np.array(words, dtype=np.uint32))


def _edge(a: int, b: int) -> Edge:
    return (a, b) if a < b else (b, a)


def _rewind(
    n: int, tree: CuttableTree, target_keys: int, rng: _Stream
) -> tuple[int, int, list[tuple[int, Edge, list[int]]]]:
    """Algorithm 1. Returns (start, goal, segments in forward order).

    A segment is (key cell, locked door, cell path from the key cell to the cell the
    previous round started from). Fewer than ``target_keys`` segments when a round
    finds the current cell walled in (Algorithm 1's "Break").
    """
    goal = rng.integers(n)
    x = goal
    segments: list[tuple[int, Edge, list[int]]] = []
    for _ in range(target_keys):
        # the breadth-first order of the tree minus the locked doors is exactly the
        # set of cells reachable from x without crossing one
        order, pred = tree.bfs(x)
        if order.shape[0] < 2:
            break
        c_key = int(order[1 + rng.integers(order.shape[0] - 1)])
        path = path_from_predecessors(pred, x, c_key)  # x ... c_key
        j = rng.integers(len(path) - 1)
        door = _edge(path[j], path[j + 1])
        tree.cut(*door)
        segments.append((c_key, door, path[::-1]))  # forward: c_key ... x
        x = c_key
    if not segments:
        order, pred = tree.bfs(goal)  # nothing was cut: no round placed a door
        start = int(order[1 + rng.integers(order.shape[0] - 1)])
        return start, goal, [(-1, (-1, -1), path_from_predecessors(pred, goal, start)[::-1])]
    segments.reverse()
    return x, goal, segments


@lru_cache(maxsize=64)
def _step_walls(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`_path_walls` looks up: per cell, the walls of its four sides and the
    sentinel wall m (``_slot_layout`` plus a fifth column), flattened; and the side a step
    from cell a to cell b goes through, indexed by ``b - a + cols`` (4, the sentinel, for
    b == a)."""
    slot_edge, _ = _slot_layout(rows, cols)
    m = grid_edges(rows, cols)[0].shape[0]
    walls = np.concatenate([slot_edge, np.full((rows * cols, 1), m, dtype=slot_edge.dtype)], axis=1).ravel()
    side = np.full(2 * cols + 1, 4, dtype=np.intp)
    # right before down and left before up: with one column, +1 and -1 are down and up
    side[cols + 1], side[2 * cols], side[cols - 1], side[0] = 0, 1, 3, 2
    side[cols] = 4
    for a in (walls, side):
        a.setflags(write=False)
    return walls, side


def _path_walls(rows: int, cols: int, segments: list[tuple[int, Edge, list[int]]]) -> np.ndarray:
    """The walls (``grid_edges`` ids) the gold path goes through, with the sentinel m
    where two segments meet (each starts where the one before it ends)."""
    walls, side = _step_walls(rows, cols)
    flat: list[int] = []
    for _c, _door, path in segments:
        flat += path
    cells = np.array(flat, dtype=np.intp)
    a, b = cells[:-1], cells[1:]
    return walls[a * 5 + side[b - a + cols]]


@lru_cache(maxsize=64)
def _room_steps(rows: int, cols: int) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
    """Per cell, its ``move_to`` and ``unlock_and_open_door_to`` steps: a plan is mostly
    moves, and a :class:`Step` (frozen) is immutable, so plans share them."""
    names = room_names(rows, cols)
    return tuple(Step("move_to", r) for r in names), tuple(Step("unlock_and_open_door_to", r) for r in names)


_KEY_STEPS: dict[int, tuple[Step, Step]] = {}


def _key_steps(k: int) -> tuple[Step, Step]:
    steps = _KEY_STEPS.get(k)
    if steps is None:
        steps = _KEY_STEPS[k] = (Step("pick_up_key", str(k)), Step("use_key", str(k)))
    return steps


def _gold_plan(
    rows: int,
    cols: int,
    start: int,
    segments: list[tuple[int, Edge, list[int]]],
    key_of_door: dict[Edge, int],
) -> tuple[list[Step], list[F.FactItem]]:
    """Walk the segments forward. Also returns the supporting facts in path order, as
    items with their connections written in walking order (flipped later)."""
    names = room_names(rows, cols)
    move_to, unlock_to = _room_steps(rows, cols)
    plan = [Step("start", names[start])]
    support: list[F.FactItem] = [("bob", (names[start],))]
    # walls as codes low * n + high: an int is cheaper to make and hash than a pair,
    # and the walk below looks up every wall of the path
    n = rows * cols
    key_of_code = {a * n + b: k for (a, b), k in key_of_door.items()}
    unlocked: set[int] = set()
    listed: set[int] = set()
    append, add_listed = support.append, listed.add
    for c_key, _door, path in segments:
        if c_key >= 0:
            k = key_of_door[_door]
            plan.append(_key_steps(k)[0])
            append(("key", (str(k), names[c_key])))
        a = path[0]
        for b in path[1:]:
            e = a * n + b if a < b else b * n + a
            if e in key_of_code and e not in unlocked:
                k = key_of_code[e]
                plan.append(_key_steps(k)[1])
                plan.append(unlock_to[b])
                unlocked.add(e)
                if e not in listed:
                    append(("locked", (names[a], names[b])))
                    append(("requires", (names[a], names[b], str(k))))
                    add_listed(e)
            elif e not in listed:
                append(("open", (names[a], names[b])))
                add_listed(e)
            plan.append(move_to[b])
            a = b
    plan.append(Step("rescue", RESCUE_TARGET))
    return plan, support


#: the kinds whose first two slots are the two rooms of a connection
_CONNECTIONS = frozenset({"open", "locked", "requires"})


def _sattolo_positions(n: int, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """A permutation of range(n) that moves exactly round(ratio * n) items (0 if < 2).

    The chosen positions are permuted by a uniformly random single cycle (walking a
    random order of them and sending each to the next), so every chosen fact leaves
    its place and every other fact keeps it.
    """
    perm = np.arange(n)
    k = int(round(ratio * n))
    if k < 2:
        return perm
    walk = rng.choice(n, size=k, replace=False)
    perm[walk] = np.concatenate((walk[1:], walk[:1]))  # np.roll(walk, -1), without its overhead
    return perm


def generate_maze(
    rows: int,
    cols: int,
    target_keys: int,
    noise_ratio: float,
    shuffle_ratio: float,
    decoy_doors: int,
    seed: int,
) -> Maze:
    """Build one maze. Pure function of its arguments."""
    n = rows * cols
    names = room_names(rows, cols)
    rng = _rng(seed, 0)
    in_tree = _kruskal_padded(rows, cols, rng)  # a mask over grid_edges, and the sentinel wall
    grid_u, grid_v = grid_edges(rows, cols)
    stream = _Stream(rng)  # stream 0 after the tree's weights: single draws, in Python
    start, goal, segments = _rewind(n, CuttableTree._from_padded(in_tree, rows, cols), target_keys, stream)
    path_doors = [door for c, door, _ in segments if c >= 0]

    # decoy locked doors off the gold path, with their keys anywhere in the maze; the
    # off-path tree edges are listed in grid_edges order
    off_tree = in_tree.copy()
    off_tree[_path_walls(rows, cols, segments)] = False
    off_idx = np.flatnonzero(off_tree)  # grid edge ids (the sentinel is never set)
    n_off = int(off_idx.shape[0])
    n_decoys = min(decoy_doors, n_off)
    decoy_pick = stream.sample(n_off, n_decoys) if n_decoys else []
    decoys = [(int(grid_u[off_idx[i]]), int(grid_v[off_idx[i]])) for i in decoy_pick]
    decoy_cells = [stream.integers(n) for _ in range(n_decoys)]

    total_keys = len(path_doors) + n_decoys
    key_ids = [k + 1 for k in stream.sample(max(10, 4 * total_keys), total_keys)]
    key_of_door = dict(zip(path_doors + decoys, key_ids, strict=True))
    gold, support = _gold_plan(rows, cols, start, segments, key_of_door)
    support.append(("alice", (names[goal],)))

    # The distractor pool is every true fact the gold plan does not need: one
    # connection fact per off-path tree edge, then per decoy door its "requires" fact
    # and its key's location. Pool items are built only for the distractors shown.
    def pool_item(i: int) -> F.FactItem:
        if i < n_off:
            e = (int(grid_u[off_idx[i]]), int(grid_v[off_idx[i]]))
            a, b = names[e[0]], names[e[1]]
            return ("locked", (a, b)) if e in key_of_door else ("open", (a, b))
        j = i - n_off
        if j < n_decoys:
            e = decoys[j]
            return ("requires", (names[e[0]], names[e[1]], str(key_of_door[e])))
        e = decoys[j - n_decoys]
        return ("key", (str(key_of_door[e]), names[decoy_cells[j - n_decoys]]))

    pool_size = n_off + 2 * n_decoys
    n_support = len(support)
    n_noise = min(int(round(noise_ratio * n_support)), pool_size)
    # stream 1 is only read when distractors are shown (making a generator draws nothing)
    order = _rng(seed, 1).permutation(pool_size)[:n_noise].tolist() if n_noise else []
    listing = support + [pool_item(i) for i in order]

    # which way round each connection is written: drawn per fact, independent of noise
    orient_rng = _rng(seed, 3)
    # one draw per fact of support + pool in that order; only the draws up to the last
    # fact shown are made (the first k doubles of a stream do not depend on how many follow)
    flips = orient_rng.random(len(support) + (max(order) + 1 if order else 0)) < 0.5
    flip_of = flips[: len(support)].tolist() + [bool(flips[len(support) + i]) for i in order]

    shuffle_rng = _rng(seed, 2)
    perm = _sattolo_positions(len(listing), shuffle_ratio, shuffle_rng).tolist()
    # a single cycle through k >= 2 positions moves every one of them, and nothing else
    k = int(round(shuffle_ratio * len(listing)))
    displaced = k if k >= 2 else 0
    # oriented and shuffled in one pass: the fact at position p is item perm[p], with
    # the two rooms of a connection swapped when flipped (written out: a function call
    # per fact would cost more than the swap)
    shown: list[F.FactItem] = []
    show = shown.append
    for i in perm:
        item = listing[i]
        if flip_of[i] and item[0] in _CONNECTIONS:
            slots = item[1]
            item = (item[0], (slots[1], slots[0], *slots[2:]))
        show(item)
    shown_items = tuple(shown)
    return Maze(
        rows=rows,
        cols=cols,
        start=names[start],
        goal=names[goal],
        num_keys=len(path_doors),
        gold=tuple(gold),
        facts=tuple(render_items(shown_items)),
        items=shown_items,
        supporting_count=n_support,
        distracting_count=n_noise,
        displaced_count=displaced,
    )
