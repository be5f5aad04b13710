"""StatefulPuzzle's worlds: sizes, archetypes, generation, decoys and the exact A*
solver (the rules they follow are in :mod:`horizonbench.datasets.worlds.stateful_puzzle`).

Pure: all randomness comes from the episode seed, through the layout's
:func:`derive_seed` stream.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import Action, Fact, Rng, WorldKey, room_graph
from horizonbench.schemas.worlds import N_ARCHETYPES, SC_MAX, SC_MIN

NAME = "stateful_puzzle"

# --- state cardinality -------------------------------------------------------------

_ROOM_ANCHORS = ((3, 1), (5, 2), (10, 3), (20, 5), (40, 8), (60, 11))
_CONTAINER_ANCHORS = ((3, 1), (5, 1), (10, 3), (20, 6), (40, 12), (60, 18))
_SUBGOAL_ANCHORS = ((3, 1), (5, 2), (10, 3), (20, 4), (40, 6), (60, 8))


@dataclass(frozen=True, slots=True)
class Components:
    """What ``sc`` builds: ``rooms + containers + items == sc``."""

    rooms: int
    containers: int
    items: int
    subgoals: int


def _interpolate(anchors: Sequence[tuple[int, int]], x: int) -> int:
    """Piecewise-linear through ``anchors``, rounded half up (exact arithmetic)."""
    for (x0, y0), (x1, y1) in zip(anchors, anchors[1:], strict=False):
        if x0 <= x <= x1:
            value = Fraction(y0) + Fraction(y1 - y0, x1 - x0) * (x - x0)
            return math.floor(value + Fraction(1, 2))
    raise ValueError(f"sc: must be in {SC_MIN}..{SC_MAX}, got {x}")


def components(sc: int) -> Components:
    """The world size of ``sc`` (see the module docstring for the rule)."""
    rooms = _interpolate(_ROOM_ANCHORS, sc)
    containers = _interpolate(_CONTAINER_ANCHORS, sc)
    items = sc - rooms - containers
    subgoals = min(_interpolate(_SUBGOAL_ANCHORS, sc), items)
    return Components(rooms, containers, items, subgoals)


#: every supported sc -> its components
SC_TABLE: Mapping[int, Components] = {sc: components(sc) for sc in range(SC_MIN, SC_MAX + 1)}

# --- archetypes --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Archetype:
    """A layout family: the room graph's ``shape``, the order in which precondition
    ``kinds`` are tried, whether destinations are containers or floors
    (``destinations``), how likely an item starts inside a container (``in_box``) and
    how containers spread over rooms (``spread``)."""

    index: int
    shape: str
    kinds: tuple[str, str, str, str]
    destinations: str
    in_box: float
    spread: str


ARCHETYPES: tuple[Archetype, ...] = (
    Archetype(0, "line", ("switch", "tool", "part", "lock"), "containers", 0.5, "even"),
    Archetype(1, "ring", ("tool", "switch", "lock", "part"), "alternate", 0.3, "random"),
    Archetype(2, "star", ("part", "switch", "tool", "lock"), "containers", 0.6, "even"),
    Archetype(3, "grid", ("lock", "tool", "switch", "part"), "floors_first", 0.4, "clustered"),
    Archetype(4, "tree", ("switch", "part", "lock", "tool"), "alternate", 0.5, "random"),
    Archetype(5, "ladder", ("tool", "part", "switch", "lock"), "containers", 0.2, "even"),
    Archetype(6, "hubs", ("lock", "switch", "part", "tool"), "floors_first", 0.7, "random"),
    Archetype(7, "comb", ("part", "lock", "tool", "switch"), "alternate", 0.4, "clustered"),
    Archetype(8, "dense", ("switch", "lock", "tool", "part"), "containers", 0.5, "random"),
    Archetype(9, "binary", ("tool", "lock", "part", "switch"), "floors_first", 0.3, "even"),
)
assert len(ARCHETYPES) == N_ARCHETYPES


# --- the world ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stage:
    """One subgoal's construction: target item, destination (container or room), its
    mechanisms as ``(kind, entity)`` (entity: the switch, tool, part or key), and the
    resulting precondition facts and enablers, aligned."""

    name: str
    target: str
    destination: str
    mechanisms: tuple[tuple[str, str], ...]
    preconditions: tuple[Fact, ...]
    enablers: tuple[Action, ...]
    goal: Fact


@dataclass(frozen=True, slots=True)
class World(WorldKey):
    """A generated world (without decoys, which depend on branching): static layout,
    roles and the initial placement. Shared read-only between episodes."""

    rooms: tuple[str, ...]
    containers: tuple[str, ...]
    items: tuple[str, ...]
    switches: tuple[str, ...]
    doors: tuple[tuple[str, str], ...]
    neighbors: Mapping[str, tuple[str, ...]]
    room_of: Mapping[str, str]
    keys: Mapping[str, str]
    parts: Mapping[str, str]
    stages: tuple[Stage, ...]
    stage_of: Mapping[str, int]
    start_room: str
    start_loc: Mapping[str, Fact]

    @property
    def subgoal_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)


def _pick_location(
    rng: Rng,
    arch: Archetype,
    rooms: Sequence[str],
    boxes: Sequence[str],
    ok: Any,
) -> Fact | None:
    """A start location ``("at", _, room)`` / ``("in", _, box)`` (item left blank) that
    ``ok`` accepts: random tries first, then the first acceptable one in a fixed order."""
    for _ in range(12):
        if boxes and rng.random() < arch.in_box:
            where = ("in", "", rng.pick(boxes))
        else:
            where = ("at", "", rng.pick(rooms))
        if ok(where):
            return where
    for where in [("in", "", b) for b in boxes] + [("at", "", r) for r in rooms]:
        if ok(where):
            return where
    return None


@lru_cache(maxsize=512)
def build_world(sc: int, dd: int, seed: int, archetype: int) -> World:
    """The world of ``(sc, dd, seed, archetype)``; all randomness from ``seed``."""
    comp = SC_TABLE[sc]
    arch = ARCHETYPES[archetype]
    rng = Rng(derive_seed(seed, NAME, "layout"))
    rooms = tuple(f"room{i}" for i in range(1, comp.rooms + 1))
    boxes = tuple(f"box{i}" for i in range(1, comp.containers + 1))
    items = tuple(f"item{i}" for i in range(1, comp.items + 1))
    k = comp.subgoals

    # rooms: the shape on shuffled labels, so names never reveal the structure
    labels = rng.shuffled(range(comp.rooms))
    edges = room_graph(arch.shape, comp.rooms, rng)
    pairs = sorted((min(labels[a], labels[b]), max(labels[a], labels[b])) for a, b in edges)
    doors = tuple((rooms[a], rooms[b]) for a, b in pairs)
    neighbors = {r: [] for r in rooms}
    for a, b in doors:
        neighbors[a].append(b)
        neighbors[b].append(a)
    order = {r: i for i, r in enumerate(rooms)}
    neighbors_t = {r: tuple(sorted(ns, key=order.__getitem__)) for r, ns in neighbors.items()}

    room_of: dict[str, str] = {}
    if arch.spread == "even":
        cycle = rng.shuffled(rooms)
        for i, b in enumerate(boxes):
            room_of[b] = cycle[i % len(cycle)]
    elif arch.spread == "clustered":
        chosen = rng.sample(rooms, max(1, (len(rooms) + 1) // 2))
        for b in boxes:
            room_of[b] = rng.pick(chosen)
    else:
        for b in boxes:
            room_of[b] = rng.pick(rooms)

    # targets and destinations
    shuffled = rng.shuffled(items)
    targets, spare = shuffled[:k], shuffled[k:]
    free_boxes = rng.shuffled(boxes)
    destinations: list[str] = []
    for j in range(k):
        if arch.destinations == "containers":
            want_box = True
        elif arch.destinations == "alternate":
            want_box = j % 2 == 0
        else:
            want_box = j % 2 == 1
        if comp.rooms == 1 or (want_box and free_boxes):
            if free_boxes:
                destinations.append(free_boxes.pop())
            else:  # one room and more subgoals than containers: containers are reused
                destinations.append(boxes[j % len(boxes)])
        else:
            destinations.append(rng.pick(rooms))
    dest_uses = {d: destinations.count(d) for d in destinations}

    # mechanisms: kinds in the archetype's order, items while spare ones last
    mechanisms: list[list[tuple[str, str]]] = [[] for _ in range(k)]
    switches: list[str] = []
    keys: dict[str, str] = {}
    parts: dict[str, str] = {}
    locked: set[str] = set()
    for slot in range(dd):
        for j in range(k):
            start = (slot + j) % 4
            prefs = arch.kinds[start:] + arch.kinds[:start]
            for kind in prefs:
                if kind == "switch":
                    name = f"switch{len(switches) + 1}"
                    switches.append(name)
                    room_of[name] = rng.pick(rooms)
                    mechanisms[j].append(("switch", name))
                    break
                if not spare:
                    continue
                if kind == "lock":
                    d = destinations[j]
                    if d not in room_of or d in locked or dest_uses[d] > 1:
                        continue
                    key = spare.pop(0)
                    keys[key] = d
                    locked.add(d)
                    mechanisms[j].append(("lock", key))
                    break
                item = spare.pop(0)
                if kind == "part":
                    parts[item] = targets[j]
                mechanisms[j].append((kind, item))
                break
    fillers = set(spare)

    stages: list[Stage] = []
    stage_of: dict[str, int] = {}
    for j in range(k):
        x, d = targets[j], destinations[j]
        pre: list[Fact] = []
        ena: list[Action] = []
        for kind, ent in mechanisms[j]:
            if kind == "switch":
                pre.append(("on", ent))
                ena.append(("activate", ent))
            elif kind == "tool":
                pre.append(("held", ent))
                ena.append(("take", ent))
            elif kind == "part":
                pre.append(("fitted", ent, x))
                ena.append(("combine", x, ent))
            else:
                pre.append(("unlocked", d))
                ena.append(("use", ent, d))
            stage_of[ent] = j + 1
        stage_of[x] = j + 1
        goal = ("in", x, d) if d in room_of else ("at", x, d)
        stages.append(Stage(f"sg{j + 1}", x, d, tuple(mechanisms[j]), tuple(pre), tuple(ena), goal))

    # initial placement: role items never start in a locked container; a target never
    # starts in its destination (nor, for a floor destination, in that room)
    start_loc: dict[str, Fact] = {}
    destination_of = {s.target: s.destination for s in stages}
    unlocked_boxes = [b for b in boxes if b not in locked]
    for item in items:
        d = destination_of.get(item)

        def ok(where: Fact, item: str = item, d: str | None = d) -> bool:
            if where[0] == "in" and where[2] in locked and item not in fillers:
                return False
            if d is None:
                return True
            place_room = room_of[where[2]] if where[0] == "in" else where[2]
            if d in room_of:
                return where[2] != d
            return place_room != d

        pool = list(boxes) if item in fillers else unlocked_boxes
        where = _pick_location(rng, arch, rooms, pool, ok)
        if where is None:  # pragma: no cover - a target always has a room or box to start in
            raise AssertionError(f"no start location for {item}")
        start_loc[item] = (where[0], item, where[2])

    return World(
        sc=sc, dd=dd, seed=seed, archetype=archetype,
        rooms=rooms, containers=boxes, items=items, switches=tuple(switches), doors=doors,
        neighbors=neighbors_t, room_of=room_of, keys=keys, parts=parts,
        stages=tuple(stages), stage_of=stage_of, start_room=rng.pick(rooms), start_loc=start_loc,
    )  # fmt: skip


def decoy_names(world: World, branching: int) -> dict[str, str]:
    """Decoy -> room: ``branching // 2`` decoys on every room's floor."""
    per_room = branching // 2
    out: dict[str, str] = {}
    for r in world.rooms:
        for _ in range(per_room):
            out[f"decoy{len(out) + 1}"] = r
    return out


# --- the solver --------------------------------------------------------------------


def _shortest_paths(world: World) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, str]]]:
    """Distances and the next room on a shortest path, from every room (BFS, neighbours
    in room order, so paths are deterministic)."""
    dist: dict[str, dict[str, int]] = {}
    step: dict[str, dict[str, str]] = {}
    for target in world.rooms:  # BFS from the target gives every room's next hop to it
        d = {target: 0}
        queue = deque([target])
        while queue:
            r = queue.popleft()
            for s in world.neighbors[r]:
                if s not in d:
                    d[s] = d[r] + 1
                    queue.append(s)
        for r in world.rooms:
            dist.setdefault(r, {})[target] = d[r]
            if r != target:
                step.setdefault(r, {})[target] = next(s for s in world.neighbors[r] if d[s] == d[r] - 1)
    return dist, step


class _StageTasks:
    """The actions of one stage, each once, with the ones that must come first."""

    def __init__(self, world: World, opened: set[str], unlocked: set[str]) -> None:
        self.world, self.opened, self.unlocked = world, opened, unlocked
        self.tasks: list[tuple[Action, str | None, list[int]]] = []
        self.index: dict[Action, int] = {}

    def add(self, action: Action, room: str | None, pre: list[int]) -> int:
        if action not in self.index:
            self.index[action] = len(self.tasks)
            self.tasks.append((action, room, pre))
        return self.index[action]

    def open_box(self, box: str) -> list[int]:
        """The ``open`` task a closed box needs (after its ``use`` if locked), if any."""
        if box in self.opened:
            return []
        pre: list[int] = []
        if box in self.world.keys.values() and box not in self.unlocked:
            key = next(k for k, b in self.world.keys.items() if b == box)
            pre = [self.index[("use", key, box)]]
        return [self.add(("open", box), self.world.room_of[box], pre)]

    def take(self, item: str) -> int:
        where = self.world.start_loc[item]
        if where[0] == "in":
            return self.add(("take", item), self.world.room_of[where[2]], self.open_box(where[2]))
        return self.add(("take", item), where[2], [])


def _stage_tasks(world: World) -> list[list[tuple[Action, str | None, int]]]:
    """Per stage, every action an optimal plan does in it: ``(action, room or None for
    anywhere, bitmask of the tasks that must come first)``. Containers opened and
    unlocked in earlier stages stay so (an optimal plan never closes one)."""
    opened: set[str] = set()
    unlocked: set[str] = set()
    out: list[list[tuple[Action, str | None, int]]] = []
    for stage in world.stages:
        st = _StageTasks(world, opened, unlocked)
        x, d = stage.target, stage.destination
        take_x = st.take(x)
        combines: list[int] = []
        for kind, ent in stage.mechanisms:
            if kind == "switch":
                st.add(("activate", ent), world.room_of[ent], [])
            elif kind == "tool":
                st.take(ent)
            elif kind == "part":
                combines.append(st.add(("combine", x, ent), None, [take_x, st.take(ent)]))
            else:
                st.add(("use", ent, d), world.room_of[d], [st.take(ent)])
        if d in world.room_of:
            st.add(("put", x, d), world.room_of[d], [take_x, *combines, *st.open_box(d)])
        else:
            st.add(("put", x, d), d, [take_x, *combines])
        st.add(("finish_subgoal", stage.name), None, list(range(len(st.tasks))))
        for action, _, _ in st.tasks:
            if action[0] == "open":
                opened.add(action[1])
            elif action[0] == "use":
                unlocked.add(action[2])
        out.append([(a, room, sum(1 << p for p in pre)) for a, room, pre in st.tasks])
    return out


@lru_cache(maxsize=512)
def solve(sc: int, dd: int, seed: int, archetype: int) -> tuple[Action, ...]:
    """An optimal plan for the world of ``build_world(sc, dd, seed, archetype)`` from
    its reset state without mutations (decoys change nothing): A* as described in the
    module docstring."""
    world = build_world(sc, dd, seed, archetype)
    dist, hop = _shortest_paths(world)
    stages = _stage_tasks(world)
    n_stages = len(stages)
    full = [(1 << len(t)) - 1 for t in stages]
    tail = [sum(len(t) for t in stages[j + 1 :]) for j in range(n_stages)] + [0]

    def closure(j: int, mask: int, room: str) -> tuple[int, int, list[Action]]:
        done: list[Action] = []
        while j < n_stages:
            tasks = stages[j]
            progress = True
            while progress:
                progress = False
                for i, (action, where, pre) in enumerate(tasks):
                    bit = 1 << i
                    if not mask & bit and pre & mask == pre and (where is None or where == room):
                        mask |= bit
                        done.append(action)
                        progress = True
            if mask != full[j]:
                break
            j, mask = j + 1, 0
        return j, mask, done

    def heuristic(j: int, mask: int, room: str) -> int:
        if j >= n_stages:
            return 0
        far = 0
        remaining = 0
        for i, (_, where, _) in enumerate(stages[j]):
            if not mask >> i & 1:
                remaining += 1
                if where is not None:
                    far = max(far, dist[room][where])
        return remaining + far + tail[j]

    def walk(a: str, b: str) -> list[Action]:
        moves = []
        while a != b:
            a = hop[a][b]
            moves.append(("go", a))
        return moves

    j0, m0, first = closure(0, 0, world.start_room)
    start = (j0, m0, world.start_room)
    best = {start: len(first)}
    Key = tuple[int, int, str]
    parent: dict[Key, tuple[Key | None, list[Action]]] = {start: (None, first)}
    heap = [(len(first) + heuristic(*start), len(first), 0, start)]
    counter = 1
    while heap:
        _, g, _, key = heapq.heappop(heap)
        if g > best[key]:
            continue
        j, mask, room = key
        if j >= n_stages:
            plan: list[Action] = []
            node: Key | None = key
            while node is not None:
                prev, segment = parent[node]
                plan[:0] = segment
                node = prev
            return tuple(plan)
        for i, (action, where, pre) in enumerate(stages[j]):
            if mask >> i & 1 or pre & mask != pre or where is None:
                continue
            nj, nmask, extra = closure(j, mask | 1 << i, where)
            cost = g + dist[room][where] + 1 + len(extra)
            nkey = (nj, nmask, where)
            if cost < best.get(nkey, 1 << 30):
                best[nkey] = cost
                parent[nkey] = (key, [*walk(room, where), action, *extra])
                heapq.heappush(heap, (cost + heuristic(*nkey), cost, counter, nkey))
                counter += 1
    raise AssertionError("the world has no solution")  # pragma: no cover - worlds are built solvable


__all__: Sequence[str] = [
    "ARCHETYPES",
    "Archetype",
    "Components",
    "NAME",
    "SC_TABLE",
    "Stage",
    "World",
    "build_world",
    "components",
    "decoy_names",
    "solve",
]
